"""Planning with impact checks through ``seshat-runner schema plan``, as a user would: the
plan and its figures (``--impact-output``), for the dialects' impact tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from .runner_cli import RunnerCLI, write

__all__ = ["by_check", "plan_with_impact"]


def plan_with_impact(
    runner: RunnerCLI,
    target: list[str],
    folder: Path,
    desired: str,
    *extra: str,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``schema plan`` of ``desired`` (destructive changes allowed) against ``target`` (the
    URL options), writing ``folder/plan.json``; the result and the figures ({} if none)."""
    impact, schema = folder / "impact.json", write(folder / "schema.sql", desired)
    impact.unlink(missing_ok=True)
    args = ["schema", "plan", *target, "--desired", str(schema), "--allow-destructive"]
    args += ["--output", str(folder / "plan.json"), "--impact-output", str(impact), *extra]
    result = runner(*args, env=env)
    return result, json.loads(impact.read_text()) if impact.exists() else {}


def by_check(figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The figures by check (one of each in these tests)."""
    return {figure["check"]: figure for figure in figures["figures"]}
