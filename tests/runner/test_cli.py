"""``seshat-runner --help`` describes the runner; planned commands are listed, not offered."""

from __future__ import annotations

import subprocess
import sys

RUNNER = [sys.executable, "-c", "from runner.cli import main; main()"]


def test_help_lists_the_schema_commands_and_what_is_planned() -> None:
    result = subprocess.run([*RUNNER, "--help"], capture_output=True, text=True, check=True)
    assert "one database operation per process" in result.stdout
    assert "schema  Declarative schemas" in result.stdout
    assert "Planned commands (not available yet):" in result.stdout
    assert "op --input FILE" in result.stdout
    schema = subprocess.run(
        [*RUNNER, "schema", "--help"], capture_output=True, text=True, check=True
    )
    for command in ("plan", "apply", "drift", "inspect"):
        assert f"  {command} " in schema.stdout


def test_a_planned_command_is_refused_as_unknown() -> None:
    result = subprocess.run([*RUNNER, "op", "--input", "x"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "No such command 'op'" in result.stderr
