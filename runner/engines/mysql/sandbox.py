"""Where MariaDB runs what is not the approved plan: a sandbox that cannot reach the target.

The desired schema (an artifact's SQL), the rebuild of the live schema and the dry run never
run on the target server. They run in one of:

* **a private server** (MariaDB targets, the default): ``mariadbd`` started by the runner
  from the locally installed binaries of the target's release series (``10.11`` for a
  10.11 target), on a copy of a cached, initialized data directory with the target's
  ``lower_case_table_names``; ``--skip-networking``, a Unix socket in a ``0700`` directory,
  run as an unprivileged system user (:mod:`runner.engines.servers`), the target's
  ``sql_mode`` and each scratch schema with the target database's character set and
  collation. Statements run as ``seshat_sandbox``, a user whose grants cover only the
  scratch schemas (no ``FILE``, no ``SUPER``, no other schema; it may read the private
  server's grant tables and grant on its scratch schemas); ``DEFINER`` clauses are
  rewritten to that user inside the sandbox (the model's definers come from the desired
  SQL's text and the live schema, never from the sandbox; see :mod:`.definers`);
* **an explicit sandbox** (``--dev-url``, ``spec.dev.url``; MySQL targets need one):
  refused if it is the target server itself (``@@server_uuid``, or on MariaDB, which has
  none, the host name, data directory and port) or its database is not empty.

With neither, the plan is refused ``sandbox_unavailable``.

Grants to managed accounts and roles (``--managed-role``) run in the sandbox to *stand-ins*,
locked accounts and roles made there (:meth:`Sandbox.stand_ins`) and read back as the
grantees they stand for:
the sandbox server never grants anything to an account that exists for real. An explicit
sandbox's credential must be able to create users and read the grant tables for that.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pymysql

from runner.engines.mysql.acl import GRANT_TABLES, ROLE_TABLE
from runner.engines.mysql.connection import connection, rows
from runner.engines.mysql.grants import is_role
from runner.engines.mysql.quoting import ident
from runner.engines.servers import (
    Place,
    SandboxRefusal,
    SandboxUnavailable,
    cache_folder,
    template,
)
from runner.errors import CanNotRunError
from runner.url import DatabaseURL

__all__ = [
    "ROLE",
    "Sandbox",
    "ServerFacts",
    "dev_sandbox",
    "private_sandbox",
    "rewrite_definers",
    "server_facts",
]

ROLE: Final = "seshat_sandbox"
TEMPLATE: Final = 4
"""How templates are built; part of their cache key (bumped when the build changes)."""
_DEFINER = re.compile(
    r"\bDEFINER\s*=\s*(?:CURRENT_USER(?:\s*\(\s*\))?|"
    r"(?:`(?:[^`]|``)*`|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[\w.$-]+)\s*@\s*"
    r"(?:`(?:[^`]|``)*`|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[\w.%$-]+))",
    re.IGNORECASE,
)


def rewrite_definers(sql: str) -> str:
    """``sql`` with every ``DEFINER = ...`` made ``DEFINER = CURRENT_USER``: inside the
    sandbox, objects belong to the sandbox user (who may not name another)."""
    return _DEFINER.sub("DEFINER = CURRENT_USER", sql)


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """What a sandbox must match of the target."""

    flavor: str  # "mariadb" | "mysql"
    version: str  # "10.11.19-MariaDB-..."
    sql_mode: str
    lower_case_table_names: int
    charset: str
    collation: str
    identity: str  # server_uuid, or host name | data directory | port
    account: str = ""  # CURRENT_USER() on the target: who plans, and so who applies

    @property
    def series(self) -> str:
        """``10.11`` of ``10.11.19-MariaDB``: what a private server must run."""
        return ".".join(self.version.split("-", 1)[0].split(".")[:2])


def _identity(conn: Any) -> str:
    try:
        found = rows(conn, "SELECT @@server_uuid")
        if found and found[0][0]:
            return f"uuid:{found[0][0]}"
    except pymysql.MySQLError:
        pass
    host, datadir, port = rows(conn, "SELECT @@hostname, @@datadir, @@port")[0]
    return f"{host}|{datadir}|{port}"


def server_facts(conn: Any, database: str) -> ServerFacts:
    version = str(rows(conn, "SELECT VERSION()")[0][0])
    mode, lower = rows(conn, "SELECT @@GLOBAL.sql_mode, @@lower_case_table_names")[0]
    found = rows(
        conn,
        "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME"
        " FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s",
        (database,),
    )
    charset, collation = (str(found[0][0]), str(found[0][1])) if found else ("utf8mb4", "")
    account = str(rows(conn, "SELECT CURRENT_USER()")[0][0])
    return ServerFacts(
        "mariadb" if "mariadb" in version.lower() else "mysql",
        version,
        str(mode),
        int(lower),
        charset,
        collation,
        _identity(conn),
        account,
    )


class Sandbox:
    """Fresh schemas to work in, on a sandbox server."""

    def __init__(self, server: DatabaseURL, admin: DatabaseURL | None, facts: ServerFacts):
        self.server = server  # who statements run as (database: any schema of its own)
        self.admin = admin  # None: an explicit sandbox's own credential does all
        self.facts = facts
        self.names: list[str] = []  # schemas made (redacted by the caller)
        self.accounts: dict[str, str] = {}  # managed account -> its stand-in (user@host)
        self._lent = False

    def stand_ins(self, grantees: Iterable[str]) -> dict[str, str]:
        """A stand-in on the sandbox server for each managed grantee, made on first use: for
        an account (``user@host``) a locked account (it cannot log in), for a role or
        ``PUBLIC`` a role the sandbox user administers (``name@``, see
        :func:`~.grants.server_name`), each holding nothing but what desired SQL or a dry run
        grants it. The real grantees are never named on the sandbox server, so nothing is
        granted to anyone who could use it; an explicit sandbox drops its stand-ins when it
        closes."""
        missing = sorted(set(grantees) - self.accounts.keys())
        if missing:
            url = self.admin if self.admin is not None else self.server
            admin = f" WITH ADMIN '{ROLE}'@'localhost'" if self.admin is not None else ""
            with connection(url, env_password=False) as conn, conn.cursor() as cur:
                for name in missing:
                    user = f"seshat_{secrets.token_hex(6)}"
                    if is_role(name):
                        cur.execute(f"CREATE ROLE '{user}'{admin}")
                        self.accounts[name] = f"{user}@"
                    else:
                        cur.execute(f"CREATE USER '{user}'@'localhost' ACCOUNT LOCK")
                        self.accounts[name] = f"{user}@localhost"
        return {a: self.accounts[a] for a in sorted(set(grantees))}

    def drop_stand_ins(self, conn: Any) -> None:
        with conn.cursor() as cur:
            for stand_in in sorted(self.accounts.values()):
                user, _, host = stand_in.rpartition("@")
                if host:
                    cur.execute(f"DROP USER IF EXISTS '{user}'@'{host}'")
                else:
                    cur.execute(f"DROP ROLE IF EXISTS '{user}'")
        self.accounts.clear()

    def canceller(self, session: Any) -> Callable[[], None]:
        """How the runner cancels the statement running on ``session`` (a watchdog's
        ``KILL QUERY`` from another session: the sandbox's administrator, or an explicit
        sandbox's own credential, which may end its own statements)."""
        thread = int(session.thread_id())

        def cancel() -> None:
            url = self.admin if self.admin is not None else self.server
            with connection(url, env_password=False) as conn, conn.cursor() as cur:
                cur.execute(f"KILL QUERY {thread}")

        return cancel

    def fresh(self) -> tuple[Any, str]:
        """A session on a new, empty schema (with the target's character set and
        collation), as the sandbox user; the caller closes it."""
        name = f"seshat_{secrets.token_hex(6)}"
        facts = self.facts
        collate = f" COLLATE {facts.collation}" if facts.collation else ""
        create = f"CREATE DATABASE {ident(name)} CHARACTER SET {facts.charset}{collate}"
        if self.admin is not None:
            with connection(self.admin, "mysql", env_password=False) as conn, conn.cursor() as cur:
                cur.execute(create)
                cur.execute(
                    f"GRANT ALL PRIVILEGES ON {ident(name)}.* TO '{ROLE}'@'localhost'"
                    " WITH GRANT OPTION"  # to stand-in accounts (see stand_ins)
                )
                for table in (*GRANT_TABLES, ROLE_TABLE):  # its own: what stand-ins hold
                    cur.execute(f"GRANT SELECT ON {table} TO '{ROLE}'@'localhost'")
            self.names.append(name)
        else:
            try:
                with connection(self.server, env_password=False) as conn, conn.cursor() as cur:
                    cur.execute(create)
                self.names.append(name)
            except pymysql.MySQLError:
                # The explicit sandbox's credential may not create schemas: its own database
                # is lent, emptied before each later use.
                name = self.server.database
                if self._lent:
                    with connection(self.server, env_password=False) as conn:
                        empty(conn, name)
                self._lent = True
        session = _session(self.server, name)
        return session, name


def _session(url: DatabaseURL, database: str) -> Any:
    conn = connection_for(url, database)
    with conn.cursor() as cur:
        cur.execute("SET SESSION foreign_key_checks = 1")
    return conn


def connection_for(url: DatabaseURL, database: str) -> Any:
    """A session on the sandbox (never with the target's ``MYSQL_PWD``)."""
    from runner.engines.mysql.connection import connect

    return connect(url, database, env_password=False)


def empty(conn: Any, database: str) -> None:
    """Drop every view, table, event and routine of ``database``."""
    with contextlib.suppress(pymysql.MySQLError), conn.cursor() as cur:
        cur.execute("SET SESSION foreign_key_checks = 0")
        for name, kind in rows(
            conn,
            "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = %s ORDER BY TABLE_TYPE DESC, TABLE_NAME",
            (database,),
        ):
            word = "VIEW" if kind == "VIEW" else "TABLE"
            cur.execute(f"DROP {word} IF EXISTS {ident(database)}.{ident(str(name))}")
        for (name,) in rows(
            conn,
            "SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = %s",
            (database,),
        ):
            cur.execute(f"DROP EVENT IF EXISTS {ident(database)}.{ident(str(name))}")
        for name, kind in rows(
            conn,
            "SELECT ROUTINE_NAME, ROUTINE_TYPE FROM information_schema.ROUTINES"
            " WHERE ROUTINE_SCHEMA = %s",
            (database,),
        ):
            cur.execute(f"DROP {kind} IF EXISTS {ident(database)}.{ident(str(name))}")
        cur.execute("SET SESSION foreign_key_checks = 1")


def objects(conn: Any, database: str) -> int:
    found = rows(
        conn,
        "SELECT (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s)"
        " + (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s)"
        " + (SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = %s)",
        (database, database, database),
    )
    return int(found[0][0]) if found else 0


# -- the private server -----------------------------------------------------------------


def _binaries() -> tuple[Path, Path]:
    configured = os.environ.get("SESHAT_MARIADB_BINDIR")
    if configured:
        return Path(configured) / "mariadbd", Path(configured) / "mariadb-install-db"
    server = shutil.which("mariadbd", path="/usr/sbin:/usr/bin:/usr/local/sbin") or ""
    install = shutil.which("mariadb-install-db", path="/usr/bin:/usr/local/bin") or ""
    return Path(server), Path(install)


def _local_version(server: Path) -> str:
    """The series (``10.11``) of this machine's ``mariadbd``, "" if it does not say.

    Asking it (``--version``) costs about 20 ms of CPU, a tenth of a plan's sandbox, so the
    answer is remembered in the runner's cache under the binary's identity (path, inode,
    size, modification time), which an upgrade of the package changes."""
    info = server.stat()
    identity = f"{server.resolve()}|{info.st_ino}|{info.st_size}|{info.st_mtime_ns}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:16]
    remembered = cache_folder("sandbox") / f"mariadbd-{key}"
    with contextlib.suppress(OSError):
        return remembered.read_text(encoding="ascii")
    done = subprocess.run(
        [str(server), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    match = re.search(r"Ver\s+(\d+\.\d+)\.\d+", done.stdout)
    series = match.group(1) if match else ""
    if series:
        partial = remembered.with_name(f".{remembered.name}.{secrets.token_hex(4)}")
        with contextlib.suppress(OSError):
            partial.write_text(series, encoding="ascii")
            partial.rename(remembered)
    return series


def _unavailable(facts: ServerFacts, detail: str) -> SandboxUnavailable:
    return SandboxUnavailable(
        f"{detail}: planning needs a sandbox server of the target's kind and series "
        f"({facts.flavor} {facts.series}): install mariadb-server {facts.series} where the "
        "runner runs, or give an explicit sandbox: an empty database on another server of "
        "that version (--dev-url, or spec.dev.url)"
    )


def _server(server: Path, facts: ServerFacts) -> Any:
    def argv(path: str) -> list[str]:
        args = [
            str(server),
            "--no-defaults",
            f"--datadir={path}/data",
            f"--socket={path}/mysqld.sock",
            f"--pid-file={path}/mysqld.pid",
            "--skip-networking",
            "--skip-name-resolve",
            "--skip-log-bin",
            "--skip-symbolic-links",  # DATA/INDEX DIRECTORY cannot point out of the data
            "--event-scheduler=OFF",  # nothing the desired SQL schedules runs
            f"--lower-case-table-names={facts.lower_case_table_names}",
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
            "--innodb-buffer-pool-size=32M",
            "--innodb-log-file-size=8M",
            # InnoDB's temporary tablespace starts small and grows: its default (12 MB,
            # written out at every start) would be most of what a server writes.
            "--innodb-temp-data-file-path=ibtmp1:5M:autoextend",
            f"--tmpdir={path}/tmp",  # its own: a server removes leftover #sql files in it
            "--max-connections=20",
            f"--secure-file-priv={path}/files",  # an empty folder (and no FILE grant anyway)
            "--local-infile=0",
        ]
        if facts.sql_mode:
            args.append(f"--sql-mode={facts.sql_mode}")
        return args

    return argv


def _ready(folder: Path) -> bool:
    socket = folder / "mysqld.sock"
    if not socket.exists():
        return False
    try:
        pymysql.connect(
            unix_socket=str(socket), user="root", connect_timeout=2, ssl_disabled=True
        ).close()  # a private socket: no TLS, and no TLS context built for every poll
    except pymysql.MySQLError:
        return False
    return True


_TEMPLATE_SQL: Final = f"""FLUSH PRIVILEGES;
CREATE USER '{ROLE}'@'localhost';
"""


def _build(place: Place, server: Path, install: Path, facts: ServerFacts) -> Any:
    def build(folder: Path) -> None:
        place.run(
            lambda path: [
                str(install),
                "--no-defaults",
                f"--datadir={path}/data",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
                f"--lower-case-table-names={facts.lower_case_table_names}",
                "--innodb-log-file-size=8M",
                f"--tmpdir={path}",
            ],
            folder,
            what="mariadb-install-db",
        )
        place.run(
            lambda path: [
                str(server),
                "--no-defaults",
                "--bootstrap",
                f"--datadir={path}/data",
                f"--lower-case-table-names={facts.lower_case_table_names}",
                "--innodb-log-file-size=8M",
                f"--tmpdir={path}",
                "--skip-networking",
            ],
            folder,
            stdin=_TEMPLATE_SQL,
            what="mariadbd --bootstrap",
        )

    return build


@contextlib.contextmanager
def private_sandbox(
    facts: ServerFacts, *, cache: bool = True, isolation: str = "jail"
) -> Iterator[Sandbox]:
    """A private ``mariadbd`` matching ``facts`` (see the module docstring)."""
    if facts.flavor != "mariadb":
        raise _unavailable(facts, "the runner starts only MariaDB sandboxes")
    server, install = _binaries()
    if not server.is_file() or not install.is_file():
        raise _unavailable(facts, "no mariadbd and mariadb-install-db on this machine")
    series = _local_version(server)
    if series != facts.series:
        raise _unavailable(facts, f"this machine's mariadbd is {series or 'of unknown version'}")
    place = Place(isolation)
    settings = f"{TEMPLATE}|{series}|{facts.lower_case_table_names}|{server}"
    with (
        template(
            f"mariadb-{series}", settings, _build(place, server, install, facts), cache=cache
        ) as data,
        place.serve(
            _server(server, facts), data, _ready, what="mariadbd", folders=("tmp", "files")
        ) as folder,
    ):
        params = (("unix_socket", str(folder / "mysqld.sock")),)
        as_role = DatabaseURL(
            "mariadb", "mysql", user=ROLE, host="localhost", database="mysql", params=params
        )
        as_root = DatabaseURL(
            "mariadb", "mysql", user="root", host="localhost", database="mysql", params=params
        )
        yield Sandbox(as_role, as_root, facts)


# -- an explicit sandbox -----------------------------------------------------------------


@contextlib.contextmanager
def dev_sandbox(dev_url: DatabaseURL, target: ServerFacts) -> Iterator[Sandbox]:
    """The explicit sandbox ``dev_url``: not the target server, and empty."""
    from runner.engines.mysql.connection import database_name

    database = database_name(dev_url)
    with connection(dev_url, env_password=False) as conn:
        facts = server_facts(conn, database)
        if facts.identity == target.identity:
            raise SandboxRefusal(
                "the dev database is on the target server itself; a sandbox must be another server"
            )
        if objects(conn, database):
            raise SandboxRefusal(
                "the dev database is not empty; give an empty database Seshat may use"
            )
    sandbox = Sandbox(dev_url, None, target)
    try:
        yield sandbox
    finally:
        with (
            contextlib.suppress(pymysql.MySQLError, CanNotRunError),
            connection(dev_url, env_password=False) as conn,
        ):
            with conn.cursor() as cur:
                for name in sandbox.names:
                    cur.execute(f"DROP DATABASE IF EXISTS {ident(name)}")
            sandbox.drop_stand_ins(conn)
            if sandbox._lent:
                empty(conn, database)
