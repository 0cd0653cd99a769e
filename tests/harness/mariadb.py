"""A throw-away MariaDB server for the test session, plus per-test databases.

Why a private server instead of the system one on 3306: tests create and drop
databases and users freely and must not depend on or disturb the machine's
server.  The data directory lives under the session base directory; the server
listens only on 127.0.0.1 on a port picked at run time, with ``--no-defaults``
so no /etc/mysql configuration leaks in, and with InnoDB log flushing relaxed
for speed.  Because ``--no-defaults`` would leave the compiled-in latin1
default, the server character set is set to utf8mb4 explicitly.

Accounts: ``root`` has an empty password (install-db's "normal" method) and is
reachable over TCP as root@127.0.0.1; ``seshat_app``@127.0.0.1 has a random
password and is granted each per-test database.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pymysql.connections

from . import secret_scan
from .databases import database_url, unique_database_name
from .ports import LOOPBACK
from .processes import (
    ManagedProcess,
    clean_environment,
    give_to_service_user,
    log_size,
    require_binary,
    run_logged,
    serving_on_free_port,
    wait_for_start,
)

PACKAGE = "mariadb-server"
ROOT_USER = "root"
APP_USER = "seshat_app"
_OS_USER = "mysql"
_START_TIMEOUT = 30.0
_PING_INTERVAL = 0.1


def _quote_ident(name: str) -> str:
    """Backtick-quote a MariaDB identifier."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class MariaDBServer:
    """Where the session's MariaDB server listens and how to reach it."""

    host: str
    port: int
    user: str
    password: str
    app_user: str
    app_password: str
    data_dir: Path
    socket_path: Path
    log_path: Path
    pid: int

    def url(self, dbname: str = "") -> str:
        """Root URL, empty password: ``mysql://root@127.0.0.1:PORT/dbname``."""
        return database_url("mysql", self.host, self.port, self.user, dbname)

    def url_with_password(self, dbname: str = "") -> str:
        """URL for the password-protected app user, password included."""
        return database_url("mysql", self.host, self.port, self.app_user, dbname, self.app_password)

    def connect(
        self,
        database: str | None = None,
        *,
        user: str | None = None,
        password: str | None = None,
        autocommit: bool = True,
    ) -> pymysql.connections.Connection:
        """pymysql connection over TCP (root by default); close it (use ``with``)."""
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user if user is None else user,
            password=self.password if password is None else password,
            database=database,
            autocommit=autocommit,
            charset="utf8mb4",
            connect_timeout=10,
            # The test server has no TLS; without this PyMySQL builds a TLS context with the
            # system's CA store for every connection (about 25 ms of CPU) to find that out.
            ssl_disabled=True,
        )

    def connect_as_app(
        self, database: str | None = None, *, autocommit: bool = True
    ) -> pymysql.connections.Connection:
        """pymysql connection as the app user, authenticating with its password."""
        return self.connect(
            database, user=self.app_user, password=self.app_password, autocommit=autocommit
        )


@dataclass(frozen=True)
class MariaDBDatabase:
    """A database that exists for one test; the app user has all privileges on it."""

    server: MariaDBServer
    name: str
    url: str
    url_with_password: str

    def connect(self, *, autocommit: bool = True) -> pymysql.connections.Connection:
        """Root connection to this database."""
        return self.server.connect(self.name, autocommit=autocommit)

    def connect_as_app(self, *, autocommit: bool = True) -> pymysql.connections.Connection:
        """App-user connection to this database (password auth)."""
        return self.server.connect_as_app(self.name, autocommit=autocommit)


class _Installation:
    """The programs, files and environment of the private server: what every start needs.

    Why a class: the install step, each start attempt and the server
    description all need the same paths; deriving them from *root* in one
    place keeps them from drifting apart.
    """

    def __init__(self, *, mariadbd: str, admin: str, root: Path, env: dict[str, str]) -> None:
        self.mariadbd = mariadbd
        self.admin = admin
        self.root = root
        self.env = env
        self.data_dir = root / "data"
        self.tmp_dir = root / "tmp"
        self.socket_path = root / "mariadb.sock"
        self.pid_file = root / "mariadb.pid"
        self.error_log = root / "error.log"
        self.tool_log = root / "tools.log"


def _start_mariadbd(install: _Installation, port: int) -> ManagedProcess:
    """Launch mariadbd in the foreground as our child (so we hold its PID)."""
    return ManagedProcess(
        [
            install.mariadbd,
            "--no-defaults",
            f"--user={_OS_USER}",
            f"--datadir={install.data_dir}",
            f"--tmpdir={install.tmp_dir}",
            f"--socket={install.socket_path}",
            f"--pid-file={install.pid_file}",
            f"--port={port}",
            f"--bind-address={LOOPBACK}",
            "--skip-name-resolve",
            "--innodb-flush-log-at-trx-commit=0",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            f"--log-error={install.error_log}",
        ],
        log_path=install.tool_log,
        cwd=install.root,
        env=install.env,
    )


def _start_once(install: _Installation, port: int) -> ManagedProcess | None:
    """Start mariadbd on *port* and wait for it; None if the port turned out to be taken."""
    log_offset = log_size(install.error_log)
    return wait_for_start(
        _start_mariadbd(install, port),
        ready=lambda: _ping(install.admin, install.socket_path),
        what="mariadbd",
        not_ready="MariaDB did not answer ping",
        timeout=_START_TIMEOUT,
        interval=_PING_INTERVAL,
        log_name="error log",
        log_path=install.error_log,
        log_offset=log_offset,
        tool_log=install.tool_log,
    )


def _ping(admin: str, socket_path: Path) -> bool:
    """mariadb-admin ping over the socket; True once the server answers."""
    completed = subprocess.run(
        [
            admin,
            "--no-defaults",
            f"--socket={socket_path}",
            "-uroot",
            "--connect-timeout=2",
            "ping",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=10,
        check=False,
    )
    return completed.returncode == 0


@contextlib.contextmanager
def running_mariadb(base_dir: Path, *, attempts: int = 3) -> Iterator[MariaDBServer]:
    """Install and start a private MariaDB under *base_dir*; stop it when the block ends."""
    mariadbd = require_binary("/usr/sbin/mariadbd", PACKAGE)
    install_db = require_binary("mariadb-install-db", PACKAGE)
    admin = require_binary("mariadb-admin", "mariadb-client")
    root = base_dir / "mariadb"
    install = _Installation(
        mariadbd=mariadbd,
        admin=admin,
        root=root,
        env=clean_environment(drop_prefixes=("MYSQL", "MARIADB")),
    )
    root.mkdir()
    give_to_service_user(root, _OS_USER, PACKAGE)
    # A tmpdir of its own: servers sharing /tmp (two xdist workers, two test runs on one
    # machine) lose each other's '#sql-temptable-*' files ("Could not remove temporary
    # table ... error: 2"), and mariadb-install-db then fails with "Unknown table
    # 'mysql.tmp_user_...'": 2 runs in 24 with three at once, none with a tmpdir each.
    install.tmp_dir.mkdir()
    give_to_service_user(install.tmp_dir, _OS_USER, PACKAGE)

    run_logged(
        [
            install_db,
            "--no-defaults",
            f"--user={_OS_USER}",
            f"--datadir={install.data_dir}",
            f"--tmpdir={install.tmp_dir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
        ],
        log_path=install.tool_log,
        what="mariadb-install-db",
        cwd=root,
        env=install.env,
    )

    with serving_on_free_port(
        lambda port: _start_once(install, port),
        attempts=attempts,
        what="MariaDB",
        stop_timeout=30.0,
    ) as (process, port):
        server = MariaDBServer(
            host=LOOPBACK,
            port=port,
            user=ROOT_USER,
            password="",
            app_user=APP_USER,
            app_password=secret_scan.new_password(),
            data_dir=install.data_dir,
            socket_path=install.socket_path,
            log_path=install.error_log,
            pid=process.pid,
        )
        _create_accounts(server)
        yield server


def _create_accounts(server: MariaDBServer) -> None:
    """Make sure root works over TCP and create the app user (over the admin socket)."""
    with (
        pymysql.connect(
            unix_socket=str(server.socket_path),
            user=ROOT_USER,
            password="",
            autocommit=True,
            ssl_disabled=True,
        ) as conn,
        conn.cursor() as cur,
    ):
        cur.execute(f"CREATE USER IF NOT EXISTS '{ROOT_USER}'@'{LOOPBACK}'")
        cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{ROOT_USER}'@'{LOOPBACK}' WITH GRANT OPTION")
        cur.execute(
            f"CREATE USER '{server.app_user}'@'{LOOPBACK}' IDENTIFIED BY %s",
            (server.app_password,),
        )


@contextlib.contextmanager
def temporary_mariadb_database(
    server: MariaDBServer, prefix: str = "seshat_t"
) -> Iterator[MariaDBDatabase]:
    """CREATE a uniquely named utf8mb4 database, grant it to the app user; DROP it afterwards."""
    name = unique_database_name(prefix)
    grantee = f"'{server.app_user}'@'{LOOPBACK}'"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE DATABASE {_quote_ident(name)} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
        )
        cur.execute(f"GRANT ALL PRIVILEGES ON {_quote_ident(name)}.* TO {grantee}")
    try:
        yield MariaDBDatabase(
            server=server,
            name=name,
            url=server.url(name),
            url_with_password=server.url_with_password(name),
        )
    finally:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {_quote_ident(name)}")
            cur.execute(f"REVOKE ALL PRIVILEGES ON {_quote_ident(name)}.* FROM {grantee}")
