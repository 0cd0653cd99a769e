"""Where PostgreSQL runs what is not the approved plan: a sandbox that cannot reach the target.

The desired schema (an artifact's SQL), the rebuild of the live schema and the dry run
never run on the target server or with the target's credential. They run in one of:

* **a private server** (the default): started by the runner from the locally installed
  binaries of the target's major version (``/usr/lib/postgresql/<major>/bin``, or
  ``SESHAT_PG_BINDIR``), on a copy of a cached, initialized data directory with the
  target's encoding and collation (C if this machine lacks them), listening on a Unix socket
  in a ``0700`` directory only, with ``fsync`` off (:mod:`runner.engines.servers`). Everything
  runs as ``seshat_sandbox``, a role with no superuser, ``CREATEDB`` or ``CREATEROLE``
  that owns each scratch database and has a statement timeout: ``COPY ... PROGRAM``,
  ``pg_read_file``, untrusted languages, ``ALTER SYSTEM``, ``dblink`` and role changes fail
  there. Every scratch database is new: one in which artifact SQL ran is never reused;
* **an explicit sandbox** (``--dev-url``, ``spec.dev.url``) for versions this machine has
  no binaries for: refused if it is the target server itself (the same
  ``system_identifier``) or its database is not empty.

``CREATE EXTENSION`` is not run as written: the runner itself creates, as the sandbox's
administrator, extensions on :data:`EXTENSIONS` (never ``dblink``, ``postgres_fdw``,
``file_fdw``, ``adminpack`` or an untrusted language), without ``CASCADE``. A role the
desired schema names (``GRANT ... TO r``, ``OWNER TO r``) is created ``NOLOGIN`` there on
first use. With neither a private server nor an explicit sandbox the plan is refused,
``sandbox_unavailable``.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psycopg

from runner.engines.postgresql.connection import connection
from runner.engines.postgresql.quoting import ident, literal
from runner.engines.servers import Owner, SandboxRefusal, SandboxUnavailable, private_data, run_as
from runner.errors import CanNotRunError
from runner.url import DatabaseURL

__all__ = [
    "ADMIN",
    "EXTENSIONS",
    "ROLE",
    "Sandbox",
    "ServerFacts",
    "dev_sandbox",
    "private_sandbox",
    "server_facts",
]

ADMIN: Final = "seshat_admin"
READY: Final = ("seshat_d1", "seshat_d2", "seshat_d3")
"""Empty databases a private server's template holds, handed out by :meth:`Sandbox.fresh`."""
TEMPLATE: Final = 2
"""How templates are built; part of their cache key (bumped when the build changes)."""
ROLE: Final = "seshat_sandbox"
STATEMENT_TIMEOUT: Final = "120s"
MAX_ROLES: Final = 256

EXTENSIONS: Final = frozenset(
    {
        "btree_gin",
        "btree_gist",
        "citext",
        "cube",
        "dict_int",
        "earthdistance",
        "fuzzystrmatch",
        "hstore",
        "intarray",
        "isn",
        "lo",
        "ltree",
        "pg_trgm",
        "pgcrypto",
        "plpgsql",
        "seg",
        "tablefunc",
        "tcn",
        "tsm_system_rows",
        "tsm_system_time",
        "unaccent",
        "uuid-ossp",
        "bloom",
        "postgis",
        "postgis_topology",
        "vector",
    }
)
"""Extensions the runner creates in a sandbox; any other ``CREATE EXTENSION`` is refused."""

_NAME = r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$-]*)'
_CREATE_EXTENSION = re.compile(
    rf"^\s*CREATE\s+EXTENSION\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>{_NAME})"
    rf"(?:\s+WITH)?(?:\s+SCHEMA\s+(?P<schema>{_NAME}))?"
    rf"(?:\s+VERSION\s+(?P<version>{_NAME}|'[^']*'))?(?P<cascade>\s+CASCADE)?\s*;?\s*$",
    re.IGNORECASE,
)
_LOOKS_LIKE_EXTENSION = re.compile(
    r"^\s*(?:CREATE|ALTER|DROP|COMMENT\s+ON)\s+EXTENSION\b", re.IGNORECASE
)
_OTHER_EXTENSION_STATEMENTS = (
    re.compile(
        rf"^\s*COMMENT\s+ON\s+EXTENSION\s+(?P<name>{_NAME})\s+IS\s+(?:E?'(?:[^']|'')*'|NULL)"
        r"\s*;?\s*$",
        re.IGNORECASE,
    ),
    re.compile(
        rf"^\s*ALTER\s+EXTENSION\s+(?P<name>{_NAME})\s+(?:SET\s+SCHEMA\s+{_NAME}|UPDATE"
        rf"(?:\s+TO\s+(?:{_NAME}|'[^']*'))?)\s*;?\s*$",
        re.IGNORECASE,
    ),
    re.compile(
        rf"^\s*DROP\s+EXTENSION\s+(?:IF\s+EXISTS\s+)?(?P<name>{_NAME})"
        r"(?:\s+(?:CASCADE|RESTRICT))?\s*;?\s*$",
        re.IGNORECASE,
    ),
)
# PostgreSQL prints the name as it is, a ``"`` inside it not doubled (``role "a"b" does not
# exist``): everything between the fixed words is the name, whatever it holds.
_MISSING_ROLE = re.compile(r'^role "(.+)" does not exist$', re.DOTALL)


def _unquote(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') else name.lower()


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """What a sandbox must match of the target: version, encoding and collation."""

    version_num: int
    encoding: str
    collate: str
    ctype: str
    system_identifier: int | None
    search_path: tuple[str, ...] = ()
    """The schemas an unqualified name resolves to in the target's session
    (``current_schemas(false)``, ``$user`` expanded): the desired schema is loaded with the
    same path, so ``CREATE TABLE users`` means the table the target would create."""

    @property
    def major(self) -> int:
        return self.version_num // 10000


def server_facts(conn: psycopg.Connection[Any]) -> ServerFacts:
    """Read from the target, within the caller's (read-only) transaction."""
    row = conn.execute(
        "SELECT current_setting('server_version_num')::int, pg_encoding_to_char(d.encoding),"
        " d.datcollate, d.datctype, current_schemas(false)::text[]"
        " FROM pg_database d WHERE d.datname = current_database()"
    ).fetchone()
    assert row is not None
    return ServerFacts(
        int(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        _system_id(conn),
        tuple(str(s) for s in row[4]),
    )


def _system_id(conn: psycopg.Connection[Any]) -> int | None:
    try:
        with conn.transaction():
            row = conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()
    except psycopg.Error:
        return None
    return int(row[0]) if row else None


class Sandbox:
    """Fresh databases to work in, and the one door for statements that need more than the
    sandbox role may do (extensions, roles)."""

    def __init__(self, server_url: DatabaseURL, admin_url: DatabaseURL | None) -> None:
        self.server_url = server_url  # the role statements run as, on its server
        self.admin_url = admin_url  # None: the explicit sandbox's own credential does all
        self.names: list[str] = []  # scratch databases made (redacted by the caller)
        self._roles: set[str] = set()
        self._lent = False  # an explicit sandbox's own database is in use
        self.public: PublicSchema | None = None  # how emptying it recreates ``public``
        self.ready: list[str] = []  # empty databases the template already holds
        self.search_path: tuple[str, ...] = ()  # the target's (:attr:`ServerFacts.search_path`)

    def fresh(self) -> DatabaseURL:
        """A new, empty database owned by the sandbox role (never one reused). An explicit
        sandbox whose credential may not create databases lends its own database instead,
        emptied again before each later use."""
        if self.ready:
            return self.server_url.with_database(self.ready.pop(0))
        name = f"seshat_{secrets.token_hex(6)}"
        owner = self.server_url.user or ROLE
        with connection(self.admin_url or self.server_url) as conn:
            try:
                conn.execute(f"CREATE DATABASE {ident(name)} OWNER {ident(owner)}".encode())
            except psycopg.errors.InsufficientPrivilege:
                if self.admin_url is not None:
                    raise
                if self._lent:
                    _empty(conn, self.public)
                self._lent = True
                return self.server_url
            except psycopg.Error as error:
                raise CanNotRunError(
                    f"cannot create a scratch database in the sandbox: {_text(error)}"
                ) from None
        self.names.append(name)
        return self.server_url.with_database(name)

    def intercepts(self, sql: str) -> bool:
        """Whether ``sql`` is a statement the sandbox runs itself (see :meth:`run`)."""
        return bool(_LOOKS_LIKE_EXTENSION.match(sql))

    def run(self, database: DatabaseURL, sql: str) -> None:
        """Run an intercepted extension statement as the sandbox's administrator: a
        ``CREATE EXTENSION`` rebuilt as the module docstring says, a ``COMMENT ON``,
        ``ALTER`` or ``DROP EXTENSION`` only when it reads exactly; or raise
        ``psycopg.Error`` (so a loader can retry it) / :class:`SandboxRefusal`."""
        match = _CREATE_EXTENSION.match(sql)
        if match is None:
            if any(pattern.match(sql) for pattern in _OTHER_EXTENSION_STATEMENTS):
                self._as_admin(database, sql)
                return
            raise SandboxRefusal("an extension statement Seshat cannot read exactly")
        name = _unquote(match.group("name"))
        if name not in EXTENSIONS:
            raise SandboxRefusal(
                f"extension {name!r} is not created in a sandbox (allowed: "
                f"{', '.join(sorted(EXTENSIONS))})"
            )
        statement = f"CREATE EXTENSION IF NOT EXISTS {ident(name)}"
        if match.group("schema"):
            statement += f" WITH SCHEMA {ident(_unquote(match.group('schema')))}"
        if match.group("version"):
            version = match.group("version")
            version = version[1:-1] if version.startswith("'") else _unquote(version)
            statement += f" VERSION {literal(version)}"
        self._as_admin(database, statement)

    def _as_admin(self, database: DatabaseURL, statement: str) -> None:
        admin = (
            database if self.admin_url is None else self.admin_url.with_database(database.database)
        )
        with connection(admin) as conn:
            conn.execute(statement.encode())

    def missing_role(self, error: psycopg.Error) -> bool:
        """If ``error`` says a role does not exist, create it (``NOLOGIN``, granted to the
        sandbox role) and say so, so the statement can be retried."""
        if self.admin_url is None or len(self._roles) >= MAX_ROLES:
            return False
        found = _MISSING_ROLE.match(_text(error))
        if found is None:
            return False
        role = found.group(1)
        if role in self._roles:
            return False  # made already: the statement fails for another reason
        with connection(self.admin_url) as conn:
            with contextlib.suppress(psycopg.errors.DuplicateObject):
                conn.execute(f"CREATE ROLE {ident(role)} NOLOGIN".encode())
            conn.execute(f"GRANT {ident(role)} TO {ident(ROLE)}".encode())
        self._roles.add(role)
        return True


def _text(error: psycopg.Error) -> str:
    return error.diag.message_primary or str(error).strip().splitlines()[0]


# -- the private server -----------------------------------------------------------------


def _bindir(major: int) -> Path:
    configured = os.environ.get("SESHAT_PG_BINDIR")
    return Path(configured) if configured else Path(f"/usr/lib/postgresql/{major}/bin")


def _locale_options(facts: ServerFacts, fallback: bool) -> list[str]:
    if fallback or (facts.collate in ("C", "POSIX") and facts.ctype in ("C", "POSIX")):
        return ["--locale=C"]
    return [f"--lc-collate={facts.collate}", f"--lc-ctype={facts.ctype}", "--lc-messages=C"]


def _build(bindir: Path, owner: Owner, facts: ServerFacts) -> Any:
    def build(data: Path) -> None:
        base = [str(bindir / "initdb"), "-D", str(data), "-U", ADMIN, "--auth=trust"]
        base += ["-E", facts.encoding, "--no-sync", "--no-instructions", "--wal-segsize=1"]
        try:
            run_as(owner, [*base, *_locale_options(facts, False)], what="initdb")
        except SandboxUnavailable:  # this machine lacks the target's locale: C sorts alike
            shutil.rmtree(data, ignore_errors=True)
            run_as(owner, [*base, *_locale_options(facts, True)], what="initdb")
        # The sandbox role is made once, in the template.
        with _running(bindir, owner, data, keep=True) as socket_dir:
            admin = DatabaseURL("postgresql", "postgresql", user=ADMIN, host=str(socket_dir))
            with connection(admin.with_database("postgres")) as conn:
                conn.execute(
                    f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                    "NOREPLICATION NOBYPASSRLS".encode()
                )
                timeout = literal(STATEMENT_TIMEOUT)
                conn.execute(f"ALTER ROLE {ROLE} SET statement_timeout = {timeout}".encode())
                conn.execute("REVOKE ALL ON DATABASE postgres FROM PUBLIC")
                for name in READY:  # made once here, so a plan need not wait for them
                    conn.execute(f"CREATE DATABASE {name} OWNER {ROLE} STRATEGY FILE_COPY".encode())

    return build


@contextlib.contextmanager
def _running(bindir: Path, owner: Owner, data: Path, *, keep: bool = False) -> Iterator[Path]:
    """``postgres`` on ``data``, listening on a Unix socket beside it only; stopped after,
    at once (``immediate``), or cleanly when the data directory is kept (a template)."""
    socket_dir = data.parent
    options = (
        f"-c listen_addresses='' -c unix_socket_directories='{socket_dir}' -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=20 "
        "-c shared_buffers=32MB -c log_min_messages=warning -c max_wal_size=1GB "
        "-c dynamic_shared_memory_type=mmap"
    )
    log = socket_dir / "server.log"
    run_as(
        owner,
        [
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-w",
            "-s",
            "-l",
            str(log),
            "-o",
            options,
            "start",
        ],
        what="pg_ctl start",
        timeout=60,
    )
    try:
        yield socket_dir
    finally:
        with contextlib.suppress(SandboxUnavailable):
            run_as(
                owner,
                [
                    str(bindir / "pg_ctl"),
                    *("-D", str(data), "-w", "-s", "-m", "fast" if keep else "immediate"),
                    "stop",
                ],
                what="pg_ctl stop",
                timeout=60,
            )


@contextlib.contextmanager
def private_sandbox(facts: ServerFacts, *, cache: bool = True) -> Iterator[Sandbox]:
    """A private server matching ``facts`` (see the module docstring); removed after."""
    bindir = _bindir(facts.major)
    if not (bindir / "postgres").is_file() or not (bindir / "initdb").is_file():
        raise SandboxUnavailable(
            f"no PostgreSQL {facts.major} server binaries at {bindir} to start a sandbox: "
            f"install postgresql-{facts.major} where the runner runs (Debian: apt-get install "
            f"postgresql-{facts.major}), or give an explicit sandbox: an empty database on "
            "another server (--dev-url, or spec.dev.url)"
        )
    settings = f"{TEMPLATE}|{facts.major}|{facts.encoding}|{facts.collate}|{facts.ctype}|{bindir}"
    with (
        private_data(
            f"postgresql-{facts.major}",
            settings,
            "postgres",
            lambda owner: _build(bindir, owner, facts),
            prefix="seshat-pg-",
            cache=cache,
        ) as (owner, data),
        _running(bindir, owner, data) as socket_dir,
    ):
        server = DatabaseURL("postgresql", "postgresql", user=ROLE, host=str(socket_dir))
        admin = DatabaseURL("postgresql", "postgresql", user=ADMIN, host=str(socket_dir))
        sandbox = Sandbox(server.with_database("postgres"), admin.with_database("postgres"))
        sandbox.ready = list(READY)
        sandbox.search_path = facts.search_path
        yield sandbox


# -- an explicit sandbox -----------------------------------------------------------------


@contextlib.contextmanager
def dev_sandbox(dev_url: DatabaseURL, target: ServerFacts) -> Iterator[Sandbox]:
    """The explicit sandbox ``dev_url``: not the target server, and empty."""
    with connection(dev_url) as conn:
        facts = server_facts(conn)
        if target.system_identifier is not None and (
            facts.system_identifier == target.system_identifier
        ):
            raise SandboxRefusal(
                "the dev database is on the target server itself; a sandbox must be another "
                "server (or leave it out: the runner starts a private one)"
            )
        if not is_empty(conn):
            raise SandboxRefusal(
                "the dev database is not empty; give an empty database Seshat may use"
            )
        public = PublicSchema.read(conn)
    sandbox = Sandbox(dev_url, None)
    sandbox.public = public
    sandbox.search_path = target.search_path
    try:
        yield sandbox
    finally:
        with contextlib.suppress(psycopg.Error, CanNotRunError), connection(dev_url) as conn:
            for name in sandbox.names:
                conn.execute(f"DROP DATABASE IF EXISTS {ident(name)} WITH (FORCE)".encode())
            if sandbox._lent:
                _empty(conn, public)


@dataclass(frozen=True, slots=True)
class PublicSchema:
    """The ``public`` schema of an explicit sandbox before Seshat used it (its owner and
    comment, which the model reads): emptying the sandbox recreates it so, and every use,
    in this process or the next, starts from the same database."""

    owner: str
    comment: str | None

    @classmethod
    def read(cls, conn: psycopg.Connection[Any]) -> PublicSchema | None:
        row = conn.execute(
            "SELECT pg_get_userbyid(nspowner), obj_description(oid, 'pg_namespace')"
            " FROM pg_namespace WHERE nspname = 'public'"
        ).fetchone()
        return cls(row[0], row[1]) if row is not None else None


def _empty(conn: psycopg.Connection[Any], public: PublicSchema | None) -> None:
    """Drop every schema and extension of the database ``conn`` is on; then ``public`` as it
    was (``public``: how it was before the first use; None: there was none)."""
    for (name,) in conn.execute(
        "SELECT extname FROM pg_extension WHERE extname <> 'plpgsql'"
    ).fetchall():
        conn.execute(f"DROP EXTENSION IF EXISTS {ident(name)} CASCADE".encode())
    for (name,) in conn.execute(
        "SELECT nspname FROM pg_namespace WHERE nspname !~ '^pg_'"
        " AND nspname <> 'information_schema' ORDER BY 1"
    ).fetchall():
        conn.execute(f"DROP SCHEMA {ident(name)} CASCADE".encode())
    if public is None:
        return
    conn.execute("CREATE SCHEMA public")
    if public.owner != conn.info.user:
        # pg_database_owner (PostgreSQL 15 and later) or whoever owned it; a role that may
        # not give it away leaves it its own, which the model does not read.
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"ALTER SCHEMA public OWNER TO {ident(public.owner)}".encode())
    if public.comment is not None:
        conn.execute(f"COMMENT ON SCHEMA public IS {literal(public.comment)}".encode())


def is_empty(conn: psycopg.Connection[Any]) -> bool:
    """No extensions and no user objects beyond an empty ``public`` schema."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM pg_extension WHERE extname <> 'plpgsql')"
        " + (SELECT count(*) FROM pg_namespace WHERE nspname !~ '^pg_'"
        "    AND nspname NOT IN ('information_schema', 'public'))"
        " + (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "    WHERE n.nspname = 'public')"
        " + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        "    WHERE n.nspname = 'public')"
        " + (SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
        "    WHERE n.nspname = 'public')"
    ).fetchone()
    return row is not None and row[0] == 0
