"""``seshat-runner --help`` describes the runner and every command it offers."""

from __future__ import annotations

import subprocess
import sys

RUNNER = [sys.executable, "-c", "from runner.cli import main; main()"]


def help_of(*args: str) -> str:
    return subprocess.run(
        [*RUNNER, *args, "--help"], capture_output=True, text=True, check=True
    ).stdout


def test_help_lists_the_commands() -> None:
    text = help_of()
    assert "one database operation per process" in text
    assert "op          Run one operation" in text
    assert "schema      Declarative schemas" in text
    assert "migrations  Versioned migrations" in text
    assert "Planned commands" not in text  # everything listed is available
    schema = help_of("schema")
    for command in ("plan", "apply", "drift", "inspect"):
        assert f"  {command} " in schema
    migrations = help_of("migrations")
    for command in ("status", "up", "baseline", "mark"):
        assert f"  {command} " in migrations
    assert "docs/migrations.md" in migrations
    baseline = help_of("migrations", "baseline")
    assert "--shadow-url" in baseline and "Only if they match" in baseline


def test_baseline_without_a_shadow_says_what_is_missing() -> None:
    result = subprocess.run(
        [*RUNNER, "migrations", "baseline", "--url", "sqlite:///nowhere.db", "--dir", "."],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "give the shadow database with --shadow-url" in result.stderr
