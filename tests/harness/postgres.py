"""A throw-away PostgreSQL server for the test session, plus per-test databases.

Why a private server instead of the system one on 5432: tests create and drop
databases and roles freely, and must neither depend on nor disturb whatever the
machine runs.  The cluster lives under the session base directory, listens only
on 127.0.0.1 on a port picked at run time, and trades durability for speed
(fsync, synchronous_commit and full_page_writes off; initdb --no-sync).

Authentication (our own pg_hba.conf): the ``postgres`` superuser is trusted
over the Unix socket and TCP from 127.0.0.1, so admin helpers need no secret;
every other role must use a SCRAM password over TCP.  That gives tests a real
credential to exercise: the ``seshat_app`` role with a random password.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from . import secret_scan, watchdog
from .databases import database_url, unique_database_name
from .pids import pid_alive, terminate_pid
from .ports import LOOPBACK
from .processes import (
    HarnessError,
    as_service_user,
    clean_environment,
    cleanup_guard,
    fail_unless_port_conflict,
    give_to_service_user,
    log_size,
    run_logged,
    start_on_free_port,
)

PACKAGE = "postgresql"
SUPERUSER = "postgres"
APP_USER = "seshat_app"
_OS_USER = "postgres"

PG_HBA = f"""\
# Written by the Seshat test harness.
# TYPE  DATABASE  USER        ADDRESS        METHOD
local   all       all                        trust
host    all       {SUPERUSER:<10}  127.0.0.1/32   trust
host    all       all         127.0.0.1/32   scram-sha-256
"""


def postgres_bin_dir() -> Path:
    """The bin directory of the newest PostgreSQL under /usr/lib/postgresql (Debian layout)."""
    candidates: list[tuple[int, Path]] = []
    for path in Path("/usr/lib/postgresql").glob("*/bin"):
        if path.parent.name.isdigit() and (path / "initdb").exists():
            candidates.append((int(path.parent.name), path))
    if not candidates:
        raise HarnessError(
            "PostgreSQL server binaries (initdb, pg_ctl) were not found under "
            f"/usr/lib/postgresql/*/bin; install the Debian package {PACKAGE!r} "
            f"(apt-get install {PACKAGE})"
        )
    return max(candidates)[1]


@dataclass(frozen=True)
class PostgresServer:
    """Where the session's PostgreSQL server listens and how to reach it."""

    host: str
    port: int
    user: str
    app_user: str
    app_password: str
    data_dir: Path
    socket_dir: Path
    log_path: Path
    pid: int

    def url(self, dbname: str = "postgres") -> str:
        """Superuser URL, no password (trusted from 127.0.0.1): ``postgresql://postgres@…``."""
        return database_url("postgresql", self.host, self.port, self.user, dbname)

    def url_with_password(self, dbname: str = "postgres") -> str:
        """URL for the password-protected app role, password included."""
        return database_url(
            "postgresql", self.host, self.port, self.app_user, dbname, self.app_password
        )

    def connect(
        self, dbname: str = "postgres", *, autocommit: bool = True
    ) -> psycopg.Connection[tuple[Any, ...]]:
        """Superuser connection over TCP; close it (use ``with``)."""
        return psycopg.connect(self.url(dbname), autocommit=autocommit, connect_timeout=10)

    def connect_as_app(
        self, dbname: str = "postgres", *, autocommit: bool = True
    ) -> psycopg.Connection[tuple[Any, ...]]:
        """Connection as the app role, authenticating with its password."""
        return psycopg.connect(
            self.url_with_password(dbname), autocommit=autocommit, connect_timeout=10
        )


@dataclass(frozen=True)
class PostgresDatabase:
    """A database that exists for one test, owned by the app role."""

    server: PostgresServer
    name: str
    url: str
    url_with_password: str

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[tuple[Any, ...]]:
        """Superuser connection to this database; close it (use ``with``)."""
        return self.server.connect(self.name, autocommit=autocommit)

    def connect_as_app(self, *, autocommit: bool = True) -> psycopg.Connection[tuple[Any, ...]]:
        """App-role connection to this database (password auth)."""
        return self.server.connect_as_app(self.name, autocommit=autocommit)


def _read_postmaster_pid(data_dir: Path) -> int | None:
    """The postmaster's PID from DATA/postmaster.pid, or None if it is not running."""
    try:
        first = (data_dir / "postmaster.pid").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return int(first) if first.strip().isdigit() else None


class _Postmaster:
    """Start/stop bookkeeping for one cluster; remembers the postmaster PID it saw."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.data_dir = root / "data"
        self.socket_dir = root / "sock"
        self.log_path = root / "postgres.log"
        self.tool_log = root / "tools.log"
        self.env = clean_environment(drop_prefixes=("PG",))
        self.pid: int | None = None

    def _run(self, tool: str, args: Sequence[str], *, what: str, check: bool = True) -> int:
        """Run initdb/pg_ctl from our bin dir as the postgres user, output in the tool log."""
        return run_logged(
            as_service_user(_OS_USER, [str(self.bin_dir / tool), *args]),
            log_path=self.tool_log,
            what=what,
            cwd=self.root,
            env=self.env,
            check=check,
        )

    def initdb(self) -> None:
        """Create the cluster and install our pg_hba.conf."""
        self._run(
            "initdb",
            [
                "-D",
                str(self.data_dir),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
            what="initdb",
        )
        # Overwriting keeps the file's owner (postgres) and mode.
        (self.data_dir / "pg_hba.conf").write_text(PG_HBA)

    def start(self, port: int) -> int | None:
        """pg_ctl start on *port*; the postmaster PID, or None if the port was taken.

        Other failures raise HarnessError quoting the server and tool logs.
        """
        options = " ".join(
            [
                f"-c listen_addresses={LOOPBACK}",
                f"-p {port}",
                f"-k {shlex.quote(str(self.socket_dir))}",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_prepared_transactions=4",  # a killed session's leftovers (issue 33)
            ]
        )
        before = log_size(self.log_path)
        code = self._run(
            "pg_ctl",
            [
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_path),
                "-w",
                "-t",
                "30",
                "-o",
                options,
                "start",
            ],
            what="pg_ctl start",
            check=False,
        )
        self.pid = _read_postmaster_pid(self.data_dir) or self.pid
        if self.pid is not None:
            # SIGQUIT is PostgreSQL's "immediate shutdown".
            watchdog.watch(self.pid, str(self.data_dir), signal.SIGQUIT)
        if code == 0:
            if self.pid is None:
                raise HarnessError(
                    f"pg_ctl started PostgreSQL but {self.data_dir}/postmaster.pid is missing"
                )
            return self.pid
        self.stop()  # in case pg_ctl gave up waiting on a postmaster that still runs
        fail_unless_port_conflict(
            f"pg_ctl start failed with exit code {code}",
            log_name="server log",
            log_path=self.log_path,
            log_offset=before,
            tool_log=self.tool_log,
        )
        return None

    def stop(self) -> None:
        """pg_ctl -m fast stop; if the postmaster survives, signal the recorded PID."""
        pid = self.pid or _read_postmaster_pid(self.data_dir)
        if pid is None:
            return
        if pid_alive(pid):
            self._run(
                "pg_ctl",
                ["-D", str(self.data_dir), "-m", "fast", "-w", "-t", "30", "stop"],
                what="pg_ctl stop",
                check=False,
            )
            # SIGQUIT is PostgreSQL's "immediate shutdown"; terminate_pid escalates to SIGKILL.
            terminate_pid(pid, expect_in_cmdline=str(self.data_dir), sig=signal.SIGQUIT)
        watchdog.forget(pid)
        self.pid = None


@contextlib.contextmanager
def running_postgres(base_dir: Path, *, attempts: int = 3) -> Iterator[PostgresServer]:
    """Initialise and start a private cluster under *base_dir*; stop it when the block ends."""
    bin_dir = postgres_bin_dir()
    root = base_dir / "postgres"
    root.mkdir()
    give_to_service_user(root, _OS_USER, PACKAGE)
    postmaster = _Postmaster(bin_dir, root)
    postmaster.socket_dir.mkdir()
    give_to_service_user(postmaster.socket_dir, _OS_USER, PACKAGE)
    with cleanup_guard(postmaster.stop):
        postmaster.initdb()
        pid, port = start_on_free_port(postmaster.start, attempts=attempts, what="PostgreSQL")
        server = PostgresServer(
            host=LOOPBACK,
            port=port,
            user=SUPERUSER,
            app_user=APP_USER,
            app_password=secret_scan.new_password(),
            data_dir=postmaster.data_dir,
            socket_dir=postmaster.socket_dir,
            log_path=postmaster.log_path,
            pid=pid,
        )
        with server.connect() as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(server.app_user), sql.Literal(server.app_password)
                )
            )
        yield server


@contextlib.contextmanager
def temporary_postgres_database(
    server: PostgresServer, prefix: str = "seshat_t"
) -> Iterator[PostgresDatabase]:
    """CREATE a uniquely named database owned by the app role; DROP … WITH (FORCE) afterwards.

    Why owned by the app role: in PostgreSQL 15 only the database owner may
    create objects in ``public``, and tests want the app credential to be able
    to apply migrations.  FORCE ends connections a failing test left open.
    """
    name = unique_database_name(prefix)
    with server.connect() as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(server.app_user)
            )
        )
    try:
        yield PostgresDatabase(
            server=server,
            name=name,
            url=server.url(name),
            url_with_password=server.url_with_password(name),
        )
    finally:
        with server.connect() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@contextlib.contextmanager
def login_role(database: PostgresDatabase, prefix: str = "role") -> Iterator[tuple[str, str]]:
    """A role that logs in with a new password and holds nothing else (what every role may
    do: connect, read the catalog); its URL to ``database`` and its password. Dropped, with
    what it owns, afterwards."""
    server = database.server
    role, password = f"{prefix}_{unique_database_name('r')[-8:]}", secret_scan.new_password()
    name = sql.Identifier(role)
    with server.connect() as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(name, sql.Literal(password))
        )
    try:
        url = database_url("postgresql", server.host, server.port, role, database.name, password)
        yield url, password
    finally:
        with server.connect(database.name) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(name))
            admin.execute(sql.SQL("DROP ROLE {}").format(name))
