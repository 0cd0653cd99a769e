"""Shared pytest fixtures: real services from the test harness in ``tests/harness``.

Servers are session-scoped (starting PostgreSQL or MariaDB per test would be
far too slow) and are started lazily, only when a test asks for them; with
pytest-xdist each worker process is a session of its own, with its own servers
(nothing mutable is shared between workers; docs/testing.md).  Per-test
isolation comes from the function-scoped fixtures: a fresh database, a fresh
Git remote, fresh SSH keys.  Every fixture stops what it started in teardown,
also when the test fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
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
from harness.seshat_cli import SeshatRunner, seshat_runner, stop_fork_servers
from harness.sigstore_root import PrivateSigstore
from harness.sshkeys import SSHKeyFactory

if TYPE_CHECKING:
    from harness.reconcile_world import SignedLayouts, World

# SIGTERM as Ctrl-C, the harness folder and the secret scan at the end (across xdist workers).
pytest_plugins = ["harness.session"]


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


@pytest.fixture(scope="session", autouse=True)
def seshat_fork_servers() -> Iterator[None]:
    """The worker's ``seshat`` fork servers (harness/forkserver.py) end with its session."""
    try:
        yield
    finally:
        stop_fork_servers()


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


@pytest.fixture(scope="session")
def signed_layouts(tmp_path_factory: pytest.TempPathFactory) -> SignedLayouts:
    """The session's CI key and the signed OCI layouts built with it, one per content."""
    from harness.reconcile_world import SignedLayouts

    folder = tmp_path_factory.mktemp("signed-layouts")
    return SignedLayouts(folder, seshat_runner(folder))


@pytest.fixture
def world(
    tmp_path: Path,
    git_remote: GitRemote,
    seshat: SeshatRunner,
    ssh_key_factory: SSHKeyFactory,
    monkeypatch: pytest.MonkeyPatch,
    signed_layouts: SignedLayouts,
) -> World:
    """A reconciler world: Git remote, signed artifacts, SQLite databases, an approver."""
    from harness.reconcile_world import World

    return World(tmp_path, git_remote, seshat, ssh_key_factory, monkeypatch, signed_layouts)
