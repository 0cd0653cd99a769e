"""Where PostgreSQL runs what is not the approved plan: a sandbox that cannot reach the target.

The desired schema (an artifact's SQL), the rebuild of the live schema and the dry run
never run on the target server or with the target's credential. They run in one of:

* **a private server** (the default): ``postgres`` from the locally installed binaries of
  the target's major version (``/usr/lib/postgresql/<major>/bin``, or ``SESHAT_PG_BINDIR``),
  on a copy of a cached, initialized data directory with the target's encoding and
  collation (C if this machine lacks them), listening on a Unix socket only, with ``fsync``
  off, inside an OS jail (:mod:`runner.engines.servers`, :mod:`runner.engines.jail`).
  Every statement of the artifact runs as ``seshat_sandbox``, a role with no superuser,
  ``CREATEDB`` or ``CREATEROLE`` that owns nothing a later step trusts: the scratch
  databases belong to the administrator (the role may connect and create schemas there,
  never change a database's settings or drop one), so ``COPY ... PROGRAM``,
  ``pg_read_file``, untrusted languages, ``ALTER SYSTEM``, ``dblink``, role changes and
  database settings fail there. Every scratch database is new: one in which artifact SQL
  ran is never reused;
* **an explicit sandbox** (``--dev-url``, ``spec.dev.url``) for versions this machine has
  no binaries for: refused if it is the target server itself (the same
  ``system_identifier``), if that cannot be checked (``pg_control_system()`` refused on
  either side), or if its database is not empty.

Nothing derived from artifact text runs with more rights than the sandbox role. The roles
and extensions a load or a dry run needs are read from its statements before any of them
runs (:mod:`.statements`) and made by the administrator from those parsed names, quoted by
the runner: roles ``NOLOGIN`` and granted to the sandbox role only when the sandbox made
them (a role that exists, ``pg_read_server_files`` say, is never granted), extensions only
those on :data:`EXTENSIONS` (never ``dblink``, ``postgres_fdw``, ``file_fdw``, ``adminpack``
or an untrusted language), without ``CASCADE``, before any statement of the artifact has
run. No statement of the artifact is ever run by the administrator; a ``COMMENT ON
EXTENSION`` is rebuilt from its parsed name and text. Every sandbox session starts with the
settings that decide how text is read fixed (:data:`SESSION_OPTIONS`), and every statement
is cancelled by the runner after :data:`STATEMENT_SECONDS` (:mod:`runner.engines.watchdog`),
whatever the session's own settings say. With neither a private server nor an explicit
sandbox the plan is refused, ``sandbox_unavailable``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psycopg

from runner.engines.postgresql.connection import connection
from runner.engines.postgresql.quoting import ident, literal
from runner.engines.postgresql.statements import (
    ExtensionStatement,
    extension_statement,
    leading_words,
    roles_named,
    schema_created,
)
from runner.engines.servers import Place, SandboxRefusal, SandboxUnavailable, template
from runner.errors import CanNotRunError
from runner.url import DatabaseURL

__all__ = [
    "ADMIN",
    "EXTENSIONS",
    "ROLE",
    "SESSION_OPTIONS",
    "PrepareFailed",
    "Sandbox",
    "ServerFacts",
    "dev_sandbox",
    "pinned",
    "private_sandbox",
    "server_facts",
]

ADMIN: Final = "seshat_admin"
READY: Final = ("seshat_d1", "seshat_d2")
"""Empty databases a private server's template holds, handed out by :meth:`Sandbox.fresh`:
a plan uses two (the desired schema loaded, the dry run), a drift one. A third (a dry run
over the whole live schema after a partial one was refused) is created when asked for.
Every server extracts the whole template, so each database it holds costs every plan about
6.3 MB of copying."""
TEMPLATE: Final = 6
"""How templates are built; part of their cache key (bumped when the build changes)."""
ROLE: Final = "seshat_sandbox"
MAX_ROLES: Final = 256
SESSION_OPTIONS: Final = (
    "-c standard_conforming_strings=on -c client_encoding=UTF8 -c backslash_quote=off "
    "-c escape_string_warning=off"
)
"""Fixed for every sandbox session at connection start, where no database or role setting
can override them: how the server reads string literals is how the runner's splitter and
quoting read them."""

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

_MAY_NAME_ROLES = re.compile(r"grant|revoke|owner|authorization|policy", re.IGNORECASE)


def pinned(url: DatabaseURL) -> DatabaseURL:
    """``url`` with :data:`SESSION_OPTIONS` added to its startup options."""
    params = [(k, v) for k, v in url.params if k != "options"]
    options = " ".join(filter(None, (url.param("options"), SESSION_OPTIONS)))
    return dataclasses.replace(url, params=(*params, ("options", options)))


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


class PrepareFailed(Exception):
    """The administrator could not make what the statements need (``where``: which one)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where, self.message = where, message


class Sandbox:
    """Fresh databases to work in, and the one door for what needs more than the sandbox
    role may do (roles, extensions): :meth:`prepare` before statements run, :meth:`instead`
    while they do."""

    def __init__(self, server_url: DatabaseURL, admin_url: DatabaseURL | None) -> None:
        self.server_url = pinned(server_url)  # the role statements run as, on its server
        self.admin_url = pinned(admin_url) if admin_url else None  # None: the explicit
        # sandbox's own credential does all
        self.names: list[str] = []  # scratch databases made (redacted by the caller)
        self._roles: set[str] = set()  # roles this sandbox made
        self._schemas: dict[str, set[str]] = {}  # per database: schemas made for extensions
        self._lent = False  # an explicit sandbox's own database is in use
        self.public: PublicSchema | None = None  # how emptying it recreates ``public``
        self.ready: list[str] = []  # empty databases the template already holds
        self.search_path: tuple[str, ...] = ()  # the target's (:attr:`ServerFacts.search_path`)

    def fresh(self) -> DatabaseURL:
        """A new, empty database the sandbox role may work in (never one reused): the
        administrator's, on a private server. An explicit sandbox whose credential may not
        create databases lends its own database instead, emptied again before each later
        use."""
        if self.ready:
            return self.server_url.with_database(self.ready.pop(0))
        name = f"seshat_{secrets.token_hex(6)}"
        with connection(self.admin_url or self.server_url) as conn:
            try:
                conn.execute(f"CREATE DATABASE {ident(name)}".encode())
                if self.admin_url is not None:
                    grant = f"GRANT CONNECT, TEMPORARY, CREATE ON DATABASE {ident(name)} TO {ROLE}"
                    conn.execute(grant.encode())
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

    # -- before statements run ------------------------------------------------------------

    def prepare(
        self, database: DatabaseURL, statements: Sequence[tuple[str, str]], *, desired: bool
    ) -> None:
        """Make what ``statements`` ((where, sql) pairs) need before any of them runs in
        ``database``: the roles they name that do not exist, and the extensions they create
        (see the module docstring). :class:`SandboxRefusal` for an extension that is not
        allowed or a statement about one the runner cannot read exactly; ``desired``: the
        statements are an artifact's, which may only create and comment on extensions."""
        roles: set[str] = set()
        extensions: list[tuple[str, ExtensionStatement]] = []
        for where, sql in statements:
            words = leading_words(sql, 3)
            if "EXTENSION" in words[1:3]:
                found = extension_statement(sql)
                if found is None:
                    raise SandboxRefusal(
                        f"{where}: an extension statement Seshat cannot read exactly"
                    )
                if found.action == "create":
                    _allowed(where, found.name)
                    extensions.append((where, found))
                elif desired and found.action != "comment":
                    raise SandboxRefusal(
                        f"{where}: a desired schema creates and comments on extensions; "
                        "it does not alter or drop them"
                    )
            if _MAY_NAME_ROLES.search(sql):
                roles |= roles_named(sql)
        if self.admin_url is not None:
            self._make_roles(roles)
        if extensions:
            self._make_extensions(database, extensions)

    def _admin(self, database: DatabaseURL) -> DatabaseURL:
        if self.admin_url is None:
            return database
        return self.admin_url.with_database(database.database)

    def _make_roles(self, named: set[str]) -> None:
        wanted = sorted(r for r in named - self._roles if not r.startswith("pg_"))
        if not wanted:
            return
        assert self.admin_url is not None
        with connection(self.admin_url) as conn:
            existing = {
                str(row[0])
                for row in conn.execute(
                    "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (wanted,)
                ).fetchall()
            }
            missing = [r for r in wanted if r not in existing]
            if len(self._roles) + len(missing) > MAX_ROLES:
                raise SandboxRefusal(f"more than {MAX_ROLES} roles named: Seshat stops there")
            for role in missing:  # only roles the sandbox makes are ever granted to its role
                conn.execute(
                    f"CREATE ROLE {ident(role)} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                    "NOREPLICATION NOBYPASSRLS".encode()
                )
                conn.execute(f"GRANT {ident(role)} TO {ROLE}".encode())
                self._roles.add(role)

    def _make_extensions(
        self, database: DatabaseURL, extensions: list[tuple[str, ExtensionStatement]]
    ) -> None:
        made = self._schemas.setdefault(database.database, set())
        with connection(self._admin(database)) as conn:
            if self.search_path:
                path = ", ".join(ident(s) for s in self.search_path)
                conn.execute(f"SET search_path = {path}".encode())
            for where, extension in extensions:
                try:
                    if extension.schema is not None and self._make_schema(conn, extension.schema):
                        made.add(extension.schema)
                    statement = f"CREATE EXTENSION IF NOT EXISTS {ident(extension.name)}"
                    if extension.schema is not None:
                        statement += f" WITH SCHEMA {ident(extension.schema)}"
                    if extension.version is not None:
                        statement += f" VERSION {literal(extension.version)}"
                    conn.execute(statement.encode())
                except psycopg.Error as error:
                    raise PrepareFailed(where, _text(error)) from None

    def _make_schema(self, conn: psycopg.Connection[Any], schema: str) -> bool:
        """Make ``schema`` (the sandbox role's) for an extension unless it exists; whether
        it was made."""
        if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
            return False
        owner = ROLE if self.admin_url is not None else "CURRENT_USER"
        conn.execute(f"CREATE SCHEMA {ident(schema)} AUTHORIZATION {owner}".encode())
        return True

    # -- while statements run ---------------------------------------------------------------

    def intercepts(self, sql: str) -> bool:
        """Whether :meth:`instead` may do something in place of ``sql`` (cheap, no effect)."""
        words = leading_words(sql, 3)
        return "EXTENSION" in words[1:3] or (
            words[:2] == ("CREATE", "SCHEMA") and any(self._schemas.values())
        )

    def instead(self, database: DatabaseURL, sql: str) -> list[str] | None:
        """What runs in place of ``sql`` on the sandbox role's session: None for ``sql``
        itself. An extension statement is done here (made by :meth:`prepare`, or rebuilt
        and run by the administrator), and a ``CREATE SCHEMA`` of a schema :meth:`prepare`
        made for an extension becomes its ``ALTER SCHEMA ... OWNER TO``, or nothing."""
        words = leading_words(sql, 3)
        if words[:1] == ("CREATE",) and words[1:2] == ("SCHEMA",):
            created = schema_created(sql)
            if created is None or created[0] not in self._schemas.get(database.database, ()):
                return None
            name, owner = created
            return [] if owner is None else [f"ALTER SCHEMA {ident(name)} OWNER TO {ident(owner)}"]
        if "EXTENSION" not in words[1:3]:
            return None
        found = extension_statement(sql)
        if found is None:
            raise SandboxRefusal("an extension statement Seshat cannot read exactly")
        if found.action == "create":
            _allowed("", found.name)
            return []  # made before anything ran (prepare)
        name = ident(found.name)
        if found.action == "comment":
            text = "NULL" if found.comment is None else literal(found.comment)
            statement = f"COMMENT ON EXTENSION {name} IS {text}"
        elif found.action == "set_schema":
            statement = f"ALTER EXTENSION {name} SET SCHEMA {ident(found.schema or '')}"
        else:
            statement = f"DROP EXTENSION IF EXISTS {name}"
        with connection(self._admin(database)) as conn:
            conn.execute(statement.encode())
        return []


class ExtensionNotAllowed(SandboxRefusal):
    """An extension outside :data:`EXTENSIONS`: named by a statement at ``where`` (a desired
    file's line, or a statement rebuilding the live schema)."""

    def __init__(self, where: str, name: str) -> None:
        prefix = f"{where}: " if where else ""
        super().__init__(
            f"{prefix}extension {name!r} is not created in a sandbox (allowed: "
            f"{', '.join(sorted(EXTENSIONS))})"
        )
        self.where, self.name = where, name


def _allowed(where: str, name: str) -> None:
    if name not in EXTENSIONS:
        raise ExtensionNotAllowed(where, name)


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


_TEMPLATE_SQL: Final = "\n".join(
    [
        f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS",
        "REVOKE ALL ON DATABASE postgres FROM PUBLIC",
        # Every database is made from template1: its public schema is the sandbox role's,
        # the database itself the administrator's.
        f"ALTER SCHEMA public OWNER TO {ROLE}",
        *(f"CREATE DATABASE {name} STRATEGY FILE_COPY" for name in READY),
        *(f"GRANT CONNECT, TEMPORARY, CREATE ON DATABASE {name} TO {ROLE}" for name in READY),
        # template0 is only ever copied by CREATE DATABASE ... TEMPLATE template0, which the
        # sandbox role may not run and the runner does not: a fifth of what every server
        # would extract.
        "ALTER DATABASE template0 IS_TEMPLATE false",
        "DROP DATABASE template0",
    ]
)


def _build(place: Place, bindir: Path, facts: ServerFacts) -> Any:
    def build(folder: Path) -> None:
        def initdb(fallback: bool) -> Any:
            def argv(path: str) -> list[str]:
                return [
                    str(bindir / "initdb"),
                    *("-D", f"{path}/data", "-U", ADMIN, "--auth=trust", "-E", facts.encoding),
                    *("--no-sync", "--no-instructions", "--wal-segsize=1"),
                    *_locale_options(facts, fallback),
                ]

            return argv

        try:
            place.run(initdb(False), folder, what="initdb")
        except SandboxUnavailable:  # this machine lacks the target's locale: C sorts alike
            shutil.rmtree(folder / "data", ignore_errors=True)
            place.run(initdb(True), folder, what="initdb")
        # The roles and the ready databases, made once here by a single-user backend.
        place.run(
            lambda path: [
                str(bindir / "postgres"),
                *("--single", "-D", f"{path}/data", "-c", "fsync=off", "template1"),
            ],
            folder,
            stdin=_TEMPLATE_SQL + "\n",
            what="postgres --single",
        )
        # The cluster was shut down cleanly: its WAL (initdb's, six 1 MB segments) holds
        # nothing a server needs. Reset to one empty segment, it is no longer extracted by
        # every server of the template.
        place.run(
            lambda path: [str(bindir / "pg_resetwal"), "-D", f"{path}/data"],
            folder,
            what="pg_resetwal",
        )
        # Free space maps and visibility maps are hints a server makes again when it needs
        # them (a missing one reads as "nothing known"): 6 of the template's 39 MB, which
        # every server would otherwise extract.
        for pattern in ("*/*_fsm", "*/*_vm"):
            for hint in (folder / "data" / "base").glob(pattern):
                hint.unlink()

    return build


def _server(bindir: Path) -> Any:
    def argv(path: str) -> list[str]:
        return [
            str(bindir / "postgres"),
            *("-D", f"{path}/data", "-c", "listen_addresses=", "-c"),
            f"unix_socket_directories={path}",
            *("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"),
            *("-c", "max_connections=20", "-c", "shared_buffers=32MB", "-c", "max_wal_size=1GB"),
            *("-c", "log_min_messages=warning", "-c", "dynamic_shared_memory_type=mmap"),
            *("-c", "autovacuum=off", "-c", "max_logical_replication_workers=0"),
        ]

    return argv


def _ready(folder: Path) -> bool:
    """Whether the server accepts connections (its ``postmaster.pid`` says ``ready``)."""
    try:
        lines = (folder / "data" / "postmaster.pid").read_text().splitlines()
    except OSError:
        return False
    return len(lines) > 7 and lines[7].strip() == "ready"


@contextlib.contextmanager
def private_sandbox(
    facts: ServerFacts, *, cache: bool = True, isolation: str = "jail"
) -> Iterator[Sandbox]:
    """A private server matching ``facts`` (see the module docstring); removed after."""
    bindir = _bindir(facts.major)
    if not (bindir / "postgres").is_file() or not (bindir / "initdb").is_file():
        raise SandboxUnavailable(
            f"no PostgreSQL {facts.major} server binaries at {bindir} to start a sandbox: "
            f"install postgresql-{facts.major} where the runner runs (Debian: apt-get install "
            f"postgresql-{facts.major}), or give an explicit sandbox: an empty database on "
            "another server (--dev-url, or spec.dev.url)"
        )
    place = Place(isolation)
    settings = f"{TEMPLATE}|{facts.major}|{facts.encoding}|{facts.collate}|{facts.ctype}|{bindir}"
    with (
        template(
            f"postgresql-{facts.major}", settings, _build(place, bindir, facts), cache=cache
        ) as data,
        place.serve(_server(bindir), data, _ready, what="postgres") as socket_dir,
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
    with connection(pinned(dev_url)) as conn:
        facts = server_facts(conn)
        if target.system_identifier is None or facts.system_identifier is None:
            side = "target" if target.system_identifier is None else "dev database"
            raise SandboxRefusal(
                f"cannot check that the dev database is on another server than the target: "
                f"pg_control_system() is refused on the {side}'s server (grant EXECUTE on it "
                "to the runner's role there, or leave the dev URL out: the runner starts a "
                "private sandbox)"
            )
        if facts.system_identifier == target.system_identifier:
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
        with (
            contextlib.suppress(psycopg.Error, CanNotRunError),
            connection(pinned(dev_url)) as conn,
        ):
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
