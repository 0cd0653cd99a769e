"""Which MariaDB series this machine's ``mariadbd`` is: asked once per binary, remembered in
the runner's cache, asked again when the binary changes (a package upgrade)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.engines.mysql.sandbox import _local_version


def _program(folder: Path, version: str) -> tuple[Path, Path]:
    """A stand-in ``mariadbd`` that says ``version`` and counts how often it was asked."""
    asked = folder / "asked"
    program = folder / "mariadbd"
    program.write_text(
        f"#!/bin/sh\necho x >> {asked}\necho 'mariadbd  Ver {version}-MariaDB-0+deb12u1 for"
        " debian-linux-gnu on x86_64 (Debian 12)'\n"
    )
    program.chmod(0o755)
    return program, asked


def test_the_series_is_asked_once_per_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESHAT_CACHE_DIR", str(tmp_path / "cache"))
    program, asked = _program(tmp_path, "10.11.6")
    assert [_local_version(program) for _ in range(3)] == ["10.11"] * 3
    assert asked.read_text().count("x") == 1
    program.write_text(program.read_text().replace("10.11.6", "11.4.2"))  # upgraded
    os.utime(program, ns=(1, 1))
    assert _local_version(program) == "11.4"
    assert asked.read_text().count("x") == 2


def test_a_binary_that_does_not_say_its_version_is_asked_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESHAT_CACHE_DIR", str(tmp_path / "cache"))
    program, asked = _program(tmp_path, "unknown")
    assert [_local_version(program) for _ in range(2)] == ["", ""]
    assert asked.read_text().count("x") == 2
