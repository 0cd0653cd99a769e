"""``seshat-runner --help`` describes the runner; planned commands are listed, not offered."""

from __future__ import annotations

import subprocess
import sys

RUNNER = [sys.executable, "-c", "from runner.cli import main; main()"]


def help_of(*args: str) -> str:
    return subprocess.run(
        [*RUNNER, *args, "--help"], capture_output=True, text=True, check=True
    ).stdout


def test_help_lists_the_commands_and_what_is_planned() -> None:
    text = help_of()
    assert "one database operation per process" in text
    assert "op          Run one operation" in text
    assert "schema      Declarative schemas" in text
    assert "migrations  Versioned migrations" in text
    assert "Planned commands (not available yet):" in text
    assert "migrations baseline" in text
    schema = help_of("schema")
    for command in ("plan", "apply", "drift", "inspect"):
        assert f"  {command} " in schema
    migrations = help_of("migrations")
    for command in ("status", "up"):
        assert f"  {command} " in migrations


def test_a_planned_command_is_refused_as_unknown() -> None:
    result = subprocess.run(
        [*RUNNER, "migrations", "baseline"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert "No such command 'baseline'" in result.stderr
