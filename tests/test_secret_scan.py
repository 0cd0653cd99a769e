"""The end-of-session secret scan (``harness/secret_scan.py``, wired in ``harness/session.py``)
finds what each pytest-xdist worker wrote, and fails the run on a hit.

A small suite runs in a pytest of its own with two workers (``--dist each``: every worker runs
every test; once more without xdist), loading the same session plugin as this suite. Each test
records a credential named after its worker, as the harness records a server's password, and,
when told to, writes it where only the scan at the end can see it: a file in its temporary
folder, a piece of it (between URL delimiters) inside a binary file, and a Git object
(compressed, so only read back through Git). Told to, the run must
fail naming both workers' hits in both places; not told to, it must pass with no hit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

SUITE = """\
import os
import secrets
import subprocess

from harness import secret_scan


def _credential(how):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return secret_scan.remember(f"{worker}-{how}-" + secrets.token_urlsafe(12))


def test_writes_a_file(tmp_path):
    credential = _credential("file")
    if os.environ.get("LEAK"):
        (tmp_path / "output.log").write_text(f"connected with {credential}\\n")


def test_writes_a_piece_into_a_binary_file(tmp_path):
    piece = secrets.token_urlsafe(12)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    secret_scan.remember(f"{worker}-binary-{secrets.token_urlsafe(6)}@{piece}")
    if os.environ.get("LEAK"):
        (tmp_path / "cache.bin").write_bytes(b"\\x00\\xff\\x00" + piece.encode() + b"\\x00\\xfe")


def test_writes_a_git_object(tmp_path):
    credential = _credential("git")
    subprocess.run(["git", "init", "--quiet", str(tmp_path / "repo")], check=True)
    if os.environ.get("LEAK"):
        subprocess.run(
            ["git", "-C", str(tmp_path / "repo"), "hash-object", "-w", "--stdin"],
            input=credential.encode(),
            capture_output=True,
            check=True,
        )
"""


def _run(tmp_path: Path, *, leak: bool, workers: int) -> subprocess.CompletedProcess[str]:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text('pytest_plugins = ["harness.session"]\n')
    (suite / "test_leaks.py").write_text(SUITE)
    (suite / "pytest.ini").write_text("[pytest]\n")
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)]),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    # Nothing of the pytest running this test: under xdist it is a worker itself, and its
    # PYTEST_XDIST_WORKER would name the inner run's credentials.
    for name in [*environment]:
        if name.startswith("PYTEST_") or name == "LEAK":
            del environment[name]
    if leak:
        environment["LEAK"] = "1"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    command += ["-n", str(workers), "--dist", "each"] if workers else ["-p", "no:xdist"]
    command += ["-c", str(suite / "pytest.ini"), "--basetemp", str(tmp_path / "basetemp")]
    return subprocess.run(
        [*command, str(suite)],
        cwd=suite,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("leak", [True, False], ids=["leaked", "clean"])
def test_the_scan_reads_what_every_worker_wrote_and_fails_the_run(
    tmp_path: Path, leak: bool
) -> None:
    done = _run(tmp_path, leak=leak, workers=2)
    output = done.stdout + done.stderr
    if not leak:
        assert done.returncode == 0, output
        assert "secret scan: 6 credentials looked for by 2 workers" in output, output
        assert "; 0 hits" in output, output
        return
    assert done.returncode == 1, output
    assert "credentials found in what the suite wrote" in output, output
    assert "; 6 hits" in output, output
    for worker in ("gw0", "gw1"):
        hits = [line.strip() for line in output.splitlines() if line.strip().startswith(worker)]
        assert any("output.log: credential" in hit for hit in hits), output
        assert any("Git objects of" in hit for hit in hits), output
        assert any("cache.bin: credential" in hit for hit in hits), output


def test_without_xdist_the_scan_still_fails_the_run(tmp_path: Path) -> None:
    done = _run(tmp_path, leak=True, workers=0)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "credentials found in what the suite wrote" in output, output
    assert "secret scan: 3 credentials looked for in" in output, output
    assert "; 3 hits" in output, output
    assert "output.log: credential #1 (mai" in output, output
    assert "Git objects of" in output, output
