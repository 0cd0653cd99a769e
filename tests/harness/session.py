"""The suite's session-wide pieces: SIGTERM as Ctrl-C, the harness folder, and the secret scan
at the end, also when pytest-xdist runs the suite in several worker processes.

Why a plugin module and not ``tests/conftest.py``: a test of the scan itself
(``tests/test_secret_scan.py``) runs a small suite in a pytest of its own, with workers, and
loads exactly these hooks and fixtures (``pytest_plugins = ["harness.session"]``), so what it
proves is what the real suite does.

With xdist, each worker is a pytest session of its own: it starts its own servers, records the
credentials it creates, and scans everything it wrote (its part of the pytest temporary
folder, its harness folder, every process's output, every test's captured output) with the
credentials it knows at its end, before its folders are removed. A hit fails the worker's last
test (an error at its teardown), so it fails the run. The worker sends what it found
(``workeroutput``) to the controller, which prints one summary for all of them and fails the
run too if any worker found something (even one whose last test's report was lost).
No credential crosses workers: each worker's servers, registries and keys are its own.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from . import secret_scan

__all__ = [
    "harness_base_dir",
    "pytest_configure",
    "pytest_runtest_logreport",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
    "pytest_testnodedown",
    "pytest_unconfigure",
    "secret_scan_at_the_end",
]

KEEP_ENV = "SESHAT_KEEP_HARNESS_DIR"
_OUTPUT_KEY = "seshat_secret_scan"

# What the workers reported (controller side): worker id -> their scan's numbers and hits.
_from_workers: dict[str, dict[str, Any]] = {}
_scanned_bytes: int | None = None  # this process's own scan, once it has run


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"pytest received signal {signum}")


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (the product, the harness, every test module) lives as long
    as the worker: kept out of the cyclic collector's scans from here on, and young objects
    collected less often (a worker's collector took 8% of its CPU in a probe of the
    reconciler tests), as the runner does for its one operation (``runner.cli.main``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def pytest_configure(config: pytest.Config) -> None:
    """Treat SIGTERM like Ctrl-C so fixture teardown stops the servers.

    Why: Python's default SIGTERM action exits without running finally blocks
    or atexit, and SIGTERM is what CI runners send on cancel/timeout.  Only
    installed when nobody else handles SIGTERM.
    """
    in_main_thread = threading.current_thread() is threading.main_thread()
    if in_main_thread and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    secret_scan.watch_processes()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Restore the default SIGTERM action if we installed ours."""
    if signal.getsignal(signal.SIGTERM) is _sigterm_as_interrupt:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """What pytest captured from a test (its output, its log records) is scanned too (by the
    worker that ran it: the controller knows no credential)."""
    for title, content in report.sections:
        secret_scan.scan_bytes(content, f"{report.nodeid} ({title})")


@pytest.fixture(scope="session")
def harness_base_dir() -> Iterator[Path]:
    """Session temp directory for server data and logs (0755 so postgres/mysql can traverse).

    One per xdist worker. Removed at the end of the session unless SESHAT_KEEP_HARNESS_DIR is
    set (then its path is printed, for reading the server logs).
    """
    base = Path(tempfile.mkdtemp(prefix="seshat-harness-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        if os.environ.get(KEEP_ENV):
            print(f"\nseshat harness: keeping {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def secret_scan_at_the_end(
    harness_base_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Fails the session if a credential the harness created is in anything the suite
    wrote (see ``harness/secret_scan.py``); set up first, so it runs after every test."""
    global _scanned_bytes
    yield
    roots = [tmp_path_factory.getbasetemp(), harness_base_dir]
    _scanned_bytes = secret_scan.scan_tree(roots)
    if secret_scan.hits:
        listed = "\n".join(sorted(set(secret_scan.hits))[:50])
        pytest.fail(f"credentials found in what the suite wrote:\n{listed}", pytrace=False)


def _own_scan() -> dict[str, Any]:
    return {
        "credentials": len(secret_scan.credentials()),
        "bytes": _scanned_bytes or 0,
        "hits": sorted(set(secret_scan.hits)),
    }


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A worker hands its scan to the controller; the controller fails the run on any hit."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_OUTPUT_KEY] = _own_scan()
        return
    if any(report["hits"] for report in _from_workers.values()) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """(xdist, controller) a worker finished: keep what its scan found."""
    output = getattr(node, "workeroutput", None) or {}
    if _OUTPUT_KEY in output:
        _from_workers[str(output.get("workerid", node.gateway.id))] = output[_OUTPUT_KEY]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line for the whole run (every worker's scan added up), and the hits."""
    if not _from_workers and _scanned_bytes is None:
        return  # no scan ran (nothing was collected, say)
    reports = dict(_from_workers) if _from_workers else {"": _own_scan()}
    credentials = sum(r["credentials"] for r in reports.values())
    scanned = sum(r["bytes"] for r in reports.values())
    hits = [
        f"{worker}: {hit}" if worker else hit for worker, r in reports.items() for hit in r["hits"]
    ]
    where = f" by {len(reports)} workers" if _from_workers else ""
    terminalreporter.write_line(
        f"secret scan: {credentials} credentials looked for{where} in "
        f"{scanned / 2**20:.0f} MiB of files and Git objects and in every process's output; "
        f"{len(hits)} hits"
    )
    for hit in sorted(hits)[:50]:
        terminalreporter.write_line(f"  {hit}", red=True)
