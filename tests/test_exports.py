"""Each package's ``__all__`` names only things that exist (HTTPX's exported-members test)."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "runner",
        "runner.digests",
        "runner.errors",
        "runner.protocol.frame",
        "runner.protocol.messages",
        "runner.protocol.results",
        "runner.redact",
        "gitops",
        "gitops.resources",
        "gitops.repo",
    ],
)
def test_all_names_exist(module: str) -> None:
    loaded = importlib.import_module(module)
    missing = [name for name in loaded.__all__ if not hasattr(loaded, name)]
    assert missing == []
