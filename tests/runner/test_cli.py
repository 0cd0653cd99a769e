"""``seshat-runner --help`` describes the runner and every command it offers, and every
command line is taken or refused as click would, ``op`` too (which runs without it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

RUNNER = [sys.executable, "-c", "from runner.cli import main; main()"]


def help_of(*args: str) -> str:
    return subprocess.run(
        [*RUNNER, *args, "--help"], capture_output=True, text=True, check=True
    ).stdout


def test_help_lists_the_commands() -> None:
    text = help_of()
    assert "Seshat's runner: one database operation" in " ".join(text.split())
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


def test_op_command_lines_click_refuses_are_refused_without_a_frame(tmp_path: Path) -> None:
    """``op --input FILE`` runs without click only when click would take it as it is; what
    click refuses is still its usage error (exit status 2, no frame)."""
    request = tmp_path / "op.json"
    request.write_text("{}", encoding="utf-8")
    cases = [
        (["op", "--input", str(tmp_path / "missing.json")], {}, "does not exist"),
        (["op", f"--input={tmp_path}"], {}, "is a directory"),
        (["op", "--input", str(request)], {"SESHAT_CACHE_DIR": str(request)}, "is a file"),
    ]
    for args, env, message in cases:
        done = subprocess.run(
            [*RUNNER, *args], capture_output=True, text=True, env={**os.environ, **env}
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert "SESHAT-RESULT" not in done.stdout
    # As click takes it, the same file is an operation: one frame (an invalid input here).
    done = subprocess.run([*RUNNER, "op", f"--input={request}"], capture_output=True, text=True)
    assert done.returncode == 2 and '"code":"invalid_input"' in done.stdout
