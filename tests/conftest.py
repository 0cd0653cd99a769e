"""Shared pytest fixtures: real services from the test harness in ``tests/harness``.

Servers are session-scoped (starting PostgreSQL or MariaDB per test would be
far too slow) and are started lazily, only when a test asks for them.  Per-test
isolation comes from the function-scoped fixtures: a fresh database, a fresh
Git remote, fresh SSH keys.  Every fixture stops what it started in teardown,
also when the test fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import pytest
from harness import secret_scan
from harness.gitrepo import GitRemote, git_remote_with_clone
from harness.mariadb import (
    MariaDBDatabase,
    MariaDBServer,
    running_mariadb,
    temporary_mariadb_database,
)
from harness.postgres import (
    PostgresDatabase,
    PostgresServer,
    running_postgres,
    temporary_postgres_database,
)
from harness.registry import (
    AuthRegistryServer,
    RegistryServer,
    running_auth_registry,
    running_registry,
)
from harness.seshat_cli import SeshatRunner, seshat_runner
from harness.sigstore_root import PrivateSigstore
from harness.sshkeys import SSHKeyFactory

if TYPE_CHECKING:
    from harness.reconcile_world import World

KEEP_ENV = "SESHAT_KEEP_HARNESS_DIR"


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"pytest received signal {signum}")


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if secret_scan.summary:
        terminalreporter.write_line(secret_scan.summary)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """What pytest captured from a test (its output, its log records) is scanned too."""
    for title, content in report.sections:
        secret_scan.scan_bytes(content, f"{report.nodeid} ({title})")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Restore the default SIGTERM action if we installed ours."""
    if signal.getsignal(signal.SIGTERM) is _sigterm_as_interrupt:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(scope="session")
def harness_base_dir() -> Iterator[Path]:
    """Session temp directory for server data and logs (0755 so postgres/mysql can traverse).

    Removed at the end of the session unless SESHAT_KEEP_HARNESS_DIR is set
    (then its path is printed, for reading the server logs).
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
    yield
    roots = [tmp_path_factory.getbasetemp(), harness_base_dir]
    scanned = secret_scan.scan_tree(roots)
    secret_scan.summary = (
        f"secret scan: {len(secret_scan.credentials())} credentials looked for in "
        f"{scanned / 2**20:.0f} MiB of files and Git objects and in every process's output; "
        f"{len(secret_scan.hits)} hits"
    )
    if secret_scan.hits:
        listed = "\n".join(sorted(set(secret_scan.hits))[:50])
        pytest.fail(f"credentials found in what the suite wrote:\n{listed}", pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def runner_cache(harness_base_dir: Path) -> Iterator[Path]:
    """One runner cache for the session (sandbox templates, planning cache), never the
    machine's own: tests see what a fresh machine sees, and later runs start cold too."""
    cache = harness_base_dir / "runner-cache"
    previous = os.environ.get("SESHAT_CACHE_DIR")
    os.environ["SESHAT_CACHE_DIR"] = str(cache)
    try:
        yield cache
    finally:
        if previous is None:
            os.environ.pop("SESHAT_CACHE_DIR", None)
        else:
            os.environ["SESHAT_CACHE_DIR"] = previous


@pytest.fixture(scope="session")
def postgres_server(harness_base_dir: Path) -> Iterator[PostgresServer]:
    """A private PostgreSQL cluster on 127.0.0.1:<free port> for the whole session."""
    with running_postgres(harness_base_dir) as server:
        yield server


@pytest.fixture(scope="session")
def second_postgres_server(harness_base_dir: Path) -> Iterator[PostgresServer]:
    """Another PostgreSQL cluster: an explicit sandbox (a dev URL) must not be the target's."""
    base = harness_base_dir / "second"
    base.mkdir()
    base.chmod(0o755)
    with running_postgres(base) as server:
        yield server


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[PostgresDatabase]:
    """A fresh database (owned by the app role) for one test, dropped afterwards."""
    with temporary_postgres_database(postgres_server) as database:
        yield database


@pytest.fixture(scope="session")
def mariadb_server(harness_base_dir: Path) -> Iterator[MariaDBServer]:
    """A private MariaDB server on 127.0.0.1:<free port> for the whole session."""
    with running_mariadb(harness_base_dir) as server:
        yield server


@pytest.fixture
def mariadb_database(mariadb_server: MariaDBServer) -> Iterator[MariaDBDatabase]:
    """A fresh database (granted to the app user) for one test, dropped afterwards."""
    with temporary_mariadb_database(mariadb_server) as database:
        yield database


@pytest.fixture(scope="session")
def oci_registry(harness_base_dir: Path) -> Iterator[RegistryServer]:
    """An open OCI registry over plain HTTP for the whole session."""
    with running_registry(harness_base_dir) as registry:
        yield registry


@pytest.fixture(scope="session")
def oci_registry_auth(harness_base_dir: Path) -> Iterator[AuthRegistryServer]:
    """An OCI registry with htpasswd basic auth and self-signed TLS, for the whole session."""
    with running_auth_registry(harness_base_dir) as registry:
        yield registry


@pytest.fixture
def git_remote(tmp_path: Path) -> Iterator[GitRemote]:
    """A bare remote on ``main`` and a working clone with a test identity, per test."""
    with git_remote_with_clone(tmp_path / "git") as remote:
        yield remote


@pytest.fixture
def ssh_key_factory(tmp_path: Path) -> SSHKeyFactory:
    """Call it with an e-mail address to get a new ed25519 identity (as many as needed)."""
    directory = tmp_path / "ssh-keys"
    directory.mkdir()
    return SSHKeyFactory(directory)


@pytest.fixture
def seshat(tmp_path: Path) -> SeshatRunner:
    """The ``seshat`` CLI in a subprocess, with a private cache and a fixed creation time."""
    return seshat_runner(tmp_path)


@pytest.fixture
def schema_folder(tmp_path: Path) -> Path:
    """A desired-schema folder: two .sql files (one in a subfolder) and a README."""
    folder = tmp_path / "schema"
    (folder / "tables").mkdir(parents=True)
    (folder / "tables" / "orders.sql").write_text("CREATE TABLE orders (id bigint);\n")
    (folder / "types.sql").write_text("CREATE TYPE status AS ENUM ('new');\n")
    (folder / "README.md").write_text("not packaged\n")
    return folder


@pytest.fixture(scope="session")
def sigstore_instance() -> PrivateSigstore:
    """A private Sigstore deployment (CA, CT log, tlog) built offline; trust its root file."""
    return PrivateSigstore("seshat-test")


@pytest.fixture(scope="session")
def untrusted_sigstore() -> PrivateSigstore:
    """Another private Sigstore deployment, with its own keys, that no test root names."""
    return PrivateSigstore("elsewhere")


@pytest.fixture
def world(
    tmp_path: Path,
    git_remote: GitRemote,
    seshat: SeshatRunner,
    ssh_key_factory: SSHKeyFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> World:
    """A reconciler world: Git remote, signed artifacts, SQLite databases, an approver."""
    from harness.reconcile_world import World

    return World(tmp_path, git_remote, seshat, ssh_key_factory, monkeypatch)
