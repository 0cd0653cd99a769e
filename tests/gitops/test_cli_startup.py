"""`seshat` imports what its command needs, and every command is still there.

Each `seshat` process used to import every command's module (the reconciler, the preview,
Sigstore) before it looked at its arguments: about 0.8 s of CPU at every start, a large
share of what the suite and a CI job calling `seshat validate` spend. These tests run the
real console script in a fresh interpreter and read which modules it imported
(`python -X importtime` prints one line per module).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from gitops.cli import _LAZY_COMMANDS, cli

SESHAT = [sys.executable, "-X", "importtime", "-c", "from gitops.cli import main; main()"]


def _imported(*args: str, cwd: Path) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    completed = subprocess.run(
        [*SESHAT, *args], capture_output=True, text=True, cwd=cwd, timeout=60, check=False
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in completed.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return modules, completed


def test_validate_imports_neither_sigstore_nor_the_reconciler(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2] / "examples" / "repo"
    modules, completed = _imported("validate", str(repo), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "gitops.repo.loader" in modules  # it did validate
    assert not {m for m in modules if m == "sigstore" or m.startswith("sigstore.")}
    assert "gitops.reconcile.passes" not in modules
    assert "gitops.preview.cli" not in modules


@pytest.mark.parametrize("command", ["reconcile", "approve", "artifact"])
def test_commands_that_verify_nothing_yet_do_not_import_sigstore(
    command: str, tmp_path: Path
) -> None:
    modules, completed = _imported(command, "--help", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert f" {command} [OPTIONS]" in completed.stdout
    assert "sigstore" not in modules


def test_every_lazy_command_loads_under_its_own_name() -> None:
    context = click.Context(cli)
    for name in sorted(_LAZY_COMMANDS):
        command = cli.get_command(context, name)
        assert command is not None and command.name == name
    assert set(_LAZY_COMMANDS) <= set(cli.list_commands(context))


def test_help_lists_every_command(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", "from gitops.cli import main; main()", "--help"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 0
    listed = {
        line.split()[0]
        for line in completed.stdout.split("Commands:")[1].splitlines()
        if line.strip()
    }
    assert listed == {"demo", "render", "validate", *_LAZY_COMMANDS}
