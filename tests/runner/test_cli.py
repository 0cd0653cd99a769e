"""``seshat-runner --help`` describes the runner and lists what is planned, honestly."""

from __future__ import annotations

import subprocess
import sys

RUNNER = [sys.executable, "-c", "from runner.cli import main; main()"]


def test_help_lists_planned_commands_as_not_available() -> None:
    result = subprocess.run([*RUNNER, "--help"], capture_output=True, text=True, check=True)
    assert "one database operation per process" in result.stdout
    assert "Planned commands (not available yet):" in result.stdout
    for command in ("op --input FILE", "schema plan|apply|drift|inspect", "migrations"):
        assert command in result.stdout
    assert "Commands:" not in result.stdout  # no command is registered that would pretend


def test_a_planned_command_is_refused_as_unknown() -> None:
    result = subprocess.run([*RUNNER, "op", "--input", "x"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "No such command 'op'" in result.stderr
