"""Scoring the engine on the PostgreSQL cases of the sqldef corpus.

The environment is a private PostgreSQL cluster started with the test harness
(``tests/harness/postgres.py``), with the cluster-wide roles the corpus names. Each case
gets its own databases (``corpus_<pid>_<n>_<role>``), dropped afterwards:

* ``a``  ``current`` executed verbatim, statement by statement: the database the engine
  plans against and applies to;
* ``a2`` a second fresh copy of ``current``, planned once more for the determinism check;
* ``b``  ``desired`` loaded with a retrying loader after creating the schemas that
  ``current`` created and ``desired`` does not: the oracle.

The engine is only ever called through ``seshat-runner`` (see :mod:`corpus_runner`).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psycopg
from corpus_cases import Case, version_satisfied
from corpus_pgdump import Dump, compare, normalize, subset_problems, survival_problems
from corpus_result import CaseResult
from corpus_runner import ROOT, Runner
from corpus_score import run_case
from corpus_sql import split_postgresql
from psycopg import sql

__all__ = ["ROLES", "USER_ROLE", "PostgresEnvironment", "running_environment"]

ROLES: tuple[str, ...] = (
    "readonly_user", "app_user", "admin_role", "user-with-dash", "user.with.dot",
    "user with spaces", "CamelCaseUser", "UPPERCASE_USER", "user1", "user2", "user3", "user4",
    "My User", "reader", "writer", "admin", "reader1", "reader2", "writer1", "writer2",
    "role1", "role2", "power_user", "user@domain.com",
)  # fmt: skip
"""Cluster-wide roles the corpus grants to (README, "What the environment must provide")."""

SHM = Path("/dev/shm")
USER_ROLE = "psqldef_user"
USER_SCHEMA = "foo"
VALID_OFFLINE = frozenset({"TimestamptzIdempotency", "TimetzIdempotency"})
UNSUPPORTED = "unsupported option"
_SYSTEM_SCHEMAS = "nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'public')"
_CREATE_SCHEMA = re.compile(
    r'^\s*CREATE\s+SCHEMA\s+(?:IF\s+NOT\s+EXISTS\s+)?("(?:[^"]|"")+"|[^\s;(]+)', re.IGNORECASE
)
_DESTRUCTIVE_SQL = re.compile(
    r"^\s*(DROP|REVOKE|TRUNCATE)\b"
    r"|^\s*ALTER\s+TABLE\b.*?(\s|,)DROP\s+(?!DEFAULT\b|NOT\s+NULL\b|IDENTITY\b|EXPRESSION\b)"
    r"|\bDISABLE\s+ROW\s+LEVEL\s+SECURITY\b",
    re.IGNORECASE | re.DOTALL,
)
"""What README step 7 forbids without --allow-destructive: DROP, REVOKE and the like.

Matched on the statement with its string literals, quoted identifiers and dollar-quoted
bodies blanked out, so ``CHECK (note <> 'DROP TABLE')`` is not a drop.
"""
_LITERALS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$(\w*)\$.*?\$\1\$", re.DOTALL)


class HarnessServer(Protocol):
    """What the scorer uses of ``harness.postgres.PostgresServer``."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    def url(self, dbname: str = "postgres") -> str: ...


class LoadError(Exception):
    """A script did not load; the message names the statement's line and the server error."""


def _harness(module: str) -> Any:
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    return importlib.import_module(f"harness.{module}")


def _error_text(error: psycopg.Error) -> str:
    primary = error.diag.message_primary if error.diag else None
    return primary or (str(error).strip().splitlines() or [type(error).__name__])[0]


def _fold(identifier: str) -> str:
    if identifier.startswith('"'):
        return identifier[1:-1].replace('""', '"')
    return identifier.lower()


def _is_destructive(statement: dict[str, Any]) -> bool:
    hazards = statement.get("hazards") or []
    if any(h.get("kind") == "destructive" for h in hazards):
        return True
    return destructive_sql(str(statement.get("sql", "")))


def destructive_sql(text: str) -> bool:
    """Whether a statement is a DROP, REVOKE, TRUNCATE, column/constraint drop or RLS off."""
    return bool(_DESTRUCTIVE_SQL.search(_LITERALS.sub("_", text)))


@dataclass(frozen=True)
class _Databases:
    a: str
    a2: str
    b: str


class PostgresEnvironment:
    """A running cluster prepared for the corpus, and the per-case scoring procedure."""

    dialect = "postgresql"

    def __init__(self, server: HarnessServer, bin_dir: Path, runner: Runner, work: Path) -> None:
        self.server = server
        self.pg_dump = str(bin_dir / "pg_dump")
        self.runner = runner
        self.work = work
        self.user_password = secrets.token_urlsafe(24)
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        with self._admin() as conn:
            row = conn.execute("SHOW server_version").fetchone()
            self.server_version = str(row[0]).split()[0] if row else "0"
            row = conn.execute(
                "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
            self.has_vector = bool(row and row[0])
        self._create_roles()
        self._tune()

    # -- environment ---------------------------------------------------------------------

    def _admin(self, dbname: str = "postgres") -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(self.server.url(dbname), autocommit=True, connect_timeout=10)

    def _as_user(self, dbname: str) -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(
            host=self.server.host,
            port=self.server.port,
            user=USER_ROLE,
            password=self.user_password,
            dbname=dbname,
            autocommit=True,
            connect_timeout=10,
        )

    def _create_roles(self) -> None:
        """The corpus's roles (NOLOGIN) and ``psqldef_user`` (LOGIN, CREATEDB for scratch)."""
        with self._admin() as conn:
            for role in ROLES:
                conn.execute(
                    sql.SQL(
                        "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {}) "
                        "THEN CREATE ROLE {}; END IF; END$$"
                    ).format(sql.Literal(role), sql.Identifier(role))
                )
            conn.execute(
                sql.SQL(
                    "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {}) "
                    "THEN CREATE ROLE {} LOGIN CREATEDB; END IF; END$$"
                ).format(sql.Literal(USER_ROLE), sql.Identifier(USER_ROLE))
            )
            conn.execute(
                sql.SQL("ALTER ROLE {} LOGIN CREATEDB PASSWORD {}").format(
                    sql.Identifier(USER_ROLE), sql.Literal(self.user_password)
                )
            )
            conn.execute(
                sql.SQL("ALTER ROLE {} SET search_path = {}, public").format(
                    sql.Identifier(USER_ROLE), sql.Identifier(USER_SCHEMA)
                )
            )

    def _tune(self) -> None:
        """Server settings for thousands of short-lived databases (schema only, no data)."""
        with self._admin() as conn:
            conn.execute("ALTER SYSTEM SET autovacuum = off")
            conn.execute("ALTER SYSTEM SET max_wal_size = '4GB'")
            conn.execute("SELECT pg_reload_conf()")

    def skip_reason(self, case: Case) -> str | None:
        """Why ``case`` is not run here, or ``None`` (README, "Which cases run")."""
        if not version_satisfied(self.server_version, case.min_version, case.max_version):
            bound = f"min_version {case.min_version}" if case.min_version else ""
            if case.max_version:
                bound = f"max_version {case.max_version}"
            return f"{bound} (server {self.server_version.split('.')[0]})"
        if case.flavor:
            wanted = case.flavor.lstrip("!")
            negated = case.flavor.startswith("!")
            available = wanted == "pgvector" and self.has_vector
            if available == negated:
                return f"flavor {case.flavor}" + (
                    " (vector extension not installed)" if wanted == "pgvector" else ""
                )
        if case.offline and case.name not in VALID_OFFLINE:
            return "offline (text-only case)"
        if case.manage is not None:
            return f"{UNSUPPORTED}: manage"
        if case.config is not None:
            return f"{UNSUPPORTED}: config"
        return None

    # -- databases -----------------------------------------------------------------------

    def _names(self, case: Case) -> _Databases:
        with self._lock:
            number = next(self._counter)
        stem = f"corpus_{os.getpid()}_{number}"
        return _Databases(f"{stem}_a", f"{stem}_a2", f"{stem}_b")

    def _create(self, name: str, user: bool) -> None:
        with self._admin() as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name))
            )
            if user:
                conn.execute(
                    sql.SQL("GRANT ALL ON DATABASE {} TO {}").format(
                        sql.Identifier(name), sql.Identifier(USER_ROLE)
                    )
                )
        if user:
            with self._as_user(name) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(USER_SCHEMA)))

    def _drop(self, names: list[str]) -> None:
        with self._admin() as conn:
            for name in names:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(name)
                        )
                    )

    def _connect(self, name: str, user: bool) -> psycopg.Connection[tuple[Any, ...]]:
        return self._as_user(name) if user else self._admin(name)

    def url(self, name: str, user: bool) -> str:
        if not user:
            return self.server.url(name)
        databases = _harness("databases")
        url: str = databases.database_url(
            "postgresql", self.server.host, self.server.port, USER_ROLE, name
        )
        return url

    def runner_env(self, user: bool) -> dict[str, str]:
        return {"PGPASSWORD": self.user_password} if user else {}

    # -- loading -------------------------------------------------------------------------

    def load_verbatim(self, name: str, script: str, user: bool) -> None:
        """Run ``script`` in order, one statement at a time; the first failure is fatal."""
        with self._connect(name, user) as conn:
            for statement in split_postgresql(script):
                try:
                    conn.execute(statement.sql.encode("utf-8"))
                except psycopg.Error as error:
                    raise LoadError(f"line {statement.line}: {_error_text(error)}") from None

    def schemas(self, name: str) -> list[str]:
        """The non-system schemas of a database (what ``current`` created)."""
        with self._admin(name) as conn:
            rows = conn.execute(
                f"SELECT nspname FROM pg_namespace WHERE {_SYSTEM_SCHEMAS} ORDER BY 1"
            ).fetchall()
        return [str(r[0]) for r in rows]

    def load_retrying(self, name: str, script: str, user: bool, schemas: list[str]) -> None:
        """The oracle loader: pre-create ``schemas``, then retry failures until no progress."""
        pending = split_postgresql(script)
        own = {_fold(m.group(1)) for s in pending if (m := _CREATE_SCHEMA.match(s.sql))}
        with self._connect(name, user) as conn:
            for schema in schemas:
                if schema not in own:
                    conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                    )
            while pending:
                failed: list[tuple[Any, str]] = []
                for statement in pending:
                    try:
                        conn.execute(statement.sql.encode("utf-8"))
                    except psycopg.Error as error:
                        failed.append((statement, _error_text(error)))
                if len(failed) == len(pending):
                    first, message = failed[0]
                    raise LoadError(f"line {first.line}: {message}")
                pending = [s for s, _ in failed]

    def dump(self, name: str, roles: frozenset[str] | None = None) -> Dump:
        result = subprocess.run(
            [self.pg_dump, "--schema-only", "--no-owner", "--restrict-key=fixed",
             "--dbname", self.server.url(name)],
            capture_output=True, text=True, env=self.runner.base_env, timeout=120, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"pg_dump {name} failed: {result.stderr.strip()}")
        return normalize(result.stdout, name, roles)

    # -- scoring -------------------------------------------------------------------------

    def run_case(self, case: Case) -> CaseResult:
        """Score one case (README, "How to score an engine", steps 1-7)."""
        return run_case(case, self.runner, self.work, lambda _: self._databases(case))

    @contextlib.contextmanager
    def _databases(self, case: Case) -> Iterator[_PostgresCase]:
        names = self._names(case)
        try:
            yield _PostgresCase(self, names, case.user is not None, case.managed_roles)
        finally:
            self._drop([names.a, names.a2, names.b])


class _PostgresCase:
    """One case's databases in the environment's cluster (as the case's user, if it has one)."""

    def __init__(
        self,
        environment: PostgresEnvironment,
        names: _Databases,
        user: bool,
        managed_roles: tuple[str, ...] | None = None,
    ) -> None:
        self.environment, self.names, self.user = environment, names, user
        # With managed_roles (even []), other roles' privileges are not the engine's: the
        # dumps leave them out. PUBLIC is managed when the case names it.
        self.roles = None if managed_roles is None else frozenset(managed_roles)
        self.url_a, self.url_a2 = environment.url(names.a, user), environment.url(names.a2, user)
        self.env = environment.runner_env(user)

    def load(self, case: Case, result: CaseResult) -> bool:
        environment, names, user = self.environment, self.names, self.user
        for name in (names.a, names.a2):
            environment._create(name, user)
            try:
                environment.load_verbatim(name, case.current, user)
            except LoadError as error:
                result.fail("load_error", f"current: {error}")
                return False
        environment._create(names.b, user)
        try:
            schemas = environment.schemas(names.a)
            environment.load_retrying(names.b, case.desired, user, schemas)
            result.oracle = True
        except LoadError as error:
            result.oracle = False
            result.fail("no_oracle", f"desired: {error}")
        return True

    def desired_for_a2(self, text: str) -> str:
        return text

    def dump_a(self) -> Dump:
        return self.environment.dump(self.names.a, self.roles)

    def dump_b(self) -> Dump:
        return self.environment.dump(self.names.b, self.roles)

    def same(self, one: Dump, other: Dump) -> bool:
        return one.text == other.text

    def converged(self, after: Dump, oracle: Dump, before: Dump) -> tuple[str, str]:
        return compare(after, oracle, before=before)

    def missing(self, after: Dump, oracle: Dump) -> list[str]:
        return subset_problems(after, oracle)

    def lost(self, before: Dump, after: Dump, oracle: Dump | None) -> list[str]:
        return survival_problems(before, after, oracle) if oracle is not None else []

    def destructive(self, statement: dict[str, Any]) -> bool:
        return _is_destructive(statement)


@contextlib.contextmanager
def running_environment(
    runner: Runner, base_dir: Path | None = None
) -> Iterator[PostgresEnvironment]:
    """Start a throw-away cluster with the harness, prepare it, stop it afterwards.

    The cluster lives in ``base_dir`` (default: ``/dev/shm`` when it exists, else the temp
    folder): every runner call creates and drops two scratch databases, so a memory-backed
    data directory saves real time.
    """
    postgres = _harness("postgres")
    if base_dir is None and SHM.is_dir() and os.access(SHM, os.W_OK):
        base_dir = SHM
    base = Path(tempfile.mkdtemp(prefix="seshat-corpus-", dir=base_dir))
    base.chmod(0o755)
    try:
        with postgres.running_postgres(base) as server:
            work = base / "cases"
            work.mkdir()
            yield PostgresEnvironment(server, postgres.postgres_bin_dir(), runner, work)
    finally:
        if os.environ.get("SESHAT_KEEP_HARNESS_DIR"):
            print(f"corpus: keeping {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
