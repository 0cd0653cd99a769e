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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psycopg
from corpus_cases import Case, version_satisfied
from corpus_pgdump import Dump, compare, normalize, subset_problems, survival_problems
from corpus_result import CaseResult
from corpus_runner import ROOT, PlanOutcome, Runner
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
        # The key's presence counts: `managed_roles: []` manages no role's privileges at all.
        if case.managed_roles is not None:
            return f"{UNSUPPORTED}: managed_roles"
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

    def dump(self, name: str) -> Dump:
        result = subprocess.run(
            [self.pg_dump, "--schema-only", "--no-owner", "--restrict-key=fixed",
             "--dbname", self.server.url(name)],
            capture_output=True, text=True, env=self.runner.base_env, timeout=120, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"pg_dump {name} failed: {result.stderr.strip()}")
        return normalize(result.stdout, name)

    # -- scoring -------------------------------------------------------------------------

    def run_case(self, case: Case) -> CaseResult:
        """Score one case (README, "How to score an engine", steps 1-7)."""
        started = time.monotonic()
        result = CaseResult(case.id, case.file, case.name, renamed_hints=case.renamed_hints)
        result.kind = "error" if case.error else ("nodrop" if not case.enable_drop else "normal")
        names = self._names(case)
        folder = Path(tempfile.mkdtemp(prefix="case-", dir=self.work))
        try:
            self._score(case, result, names, folder)
        except Exception as error:  # the scorer's own trouble, not the engine's
            result.fail("scorer_error", f"{type(error).__name__}: {error}")
        finally:
            self._drop([names.a, names.a2, names.b])
            shutil.rmtree(folder, ignore_errors=True)
        if result.category is None:
            result.status = "pass"
        result.seconds = round(time.monotonic() - started, 2)
        return result

    def _score(self, case: Case, result: CaseResult, names: _Databases, folder: Path) -> None:
        user = case.user is not None
        # 1. Load: A (and A2) from `current` verbatim, B from `desired` with retries.
        for name in (names.a, names.a2):
            self._create(name, user)
            try:
                self.load_verbatim(name, case.current, user)
            except LoadError as error:
                result.fail("load_error", f"current: {error}")
                return
        self._create(names.b, user)
        try:
            self.load_retrying(names.b, case.desired, user, self.schemas(names.a))
            result.oracle = True
        except LoadError as error:
            result.oracle = False
            result.fail("no_oracle", f"desired: {error}")
        desired = folder / "desired.sql"
        desired.write_text(case.desired, encoding="utf-8")
        before = self.dump(names.a)
        oracle = self.dump(names.b) if result.oracle else None

        url_a, url_a2 = self.url(names.a, user), self.url(names.a2, user)
        env = self.runner_env(user)
        allow = case.enable_drop
        plan1 = self.runner.plan(url_a, desired, folder / "plan1.json", allow_destructive=allow,
                                 seed=1, env=env)  # fmt: skip
        result.details["plan"] = plan1.summary
        result.details["plan_seconds"] = round(plan1.seconds, 2)

        # 3. Refusal: an `error` case must be refused, with nothing applied.
        if case.error:
            result.refused = plan1.rc in (1, 2)
            unchanged = self.dump(names.a).text == before.text
            if not result.refused:
                result.fail("not_refused", f"planned {len(plan1.statements)} statements; "
                            f"sqldef says: {case.error}")  # fmt: skip
            elif not unchanged:
                result.fail("not_refused", "refused, but the database changed")
            return

        # 6. Determinism: a second fresh copy of A, another hash seed. (A plan that could not
        # run at all, exit 2, is not compared: its message may name the database.)
        if plan1.rc == 2:
            result.planned = False
            result.fail("plan_error", plan1.error_text)
            return
        plan2 = self.runner.plan(url_a2, desired, folder / "plan2.json", allow_destructive=allow,
                                 seed=2, env=env)  # fmt: skip
        result.deterministic = plan1.same_as(plan2)
        if result.deterministic is False:
            result.details["plan2"] = plan2.summary

        if plan1.rc == 1 and not allow and plan1.refusal_code == "destructive_disallowed":
            # 7. enable_drop: false, refused as destructive: A must be untouched.
            result.planned, result.refused = False, True
            result.drops_held = self.dump(names.a).text == before.text
            if not result.drops_held:
                result.fail("drop_not_held", "refused, but the database changed")
            self._check_determinism(result, plan1, plan2)
            return
        if plan1.rc == 1:
            result.planned = False
            result.fail("plan_refused", f"{plan1.refusal_code}: {plan1.refusal_message}")
            self._check_determinism(result, plan1, plan2)
            return
        result.planned = True
        result.statements = len(plan1.statements)
        result.destructive = any(_is_destructive(s) for s in plan1.statements)
        result.details["statements_sql"] = [str(s.get("sql", ""))[:300] for s in plan1.statements]
        if not allow and result.destructive:
            first = next(s for s in plan1.statements if _is_destructive(s))
            result.drops_held = False
            result.fail("drop_not_held", f"destructive statement planned: {first.get('sql')}")
            self._check_determinism(result, plan1, plan2)
            return

        # 4. Apply and compare.
        if plan1.statements:
            applied = self.runner.apply(url_a, folder / "plan1.json", env=env)
            result.details["apply_seconds"] = round(applied.seconds, 2)
            result.applied = applied.rc == 0
            if applied.rc != 0:
                result.fail("apply_error", _apply_message(applied.rc, applied.stdout,
                                                          applied.error_text))  # fmt: skip
                self._check_determinism(result, plan1, plan2)
                return
        else:
            result.applied = True
        after = self.dump(names.a)
        if oracle is not None and allow:
            summary, diff = compare(after, oracle, before=before)
            result.converged = not summary
            if summary:
                result.diff = diff
                result.fail("not_converged", summary)
        elif oracle is not None:
            problems = subset_problems(after, oracle)
            result.converged = not problems
            if problems:
                result.fail("not_converged", "not everything desired is there: " + problems[0])
        if not allow:
            lost = []
            if oracle is not None:
                lost = survival_problems(before, after, oracle)
            result.drops_held = not lost
            if lost:
                result.fail("drop_not_held", "objects only in current were lost: " + lost[0])

        # 5. Idempotence: plan again; empty (or, without drops, only the withheld drops).
        if not plan1.statements:  # nothing was applied: plan 1 was already the second plan
            result.idempotent = True
            self._check_determinism(result, plan1, plan2)
            return
        plan3 = self.runner.plan(url_a, desired, folder / "plan3.json", allow_destructive=True,
                                 seed=3, env=env)  # fmt: skip
        if plan3.rc != 0:
            result.idempotent = False
            result.fail("not_idempotent", f"second plan {plan3.summary}")
        else:
            left = [s for s in plan3.statements if allow or not _is_destructive(s)]
            result.idempotent = not left
            if left:
                result.details["second_plan"] = [str(s.get("sql", ""))[:300] for s in left]
                result.fail("not_idempotent", f"second plan has {len(left)} statements, first: "
                            f"{left[0].get('op')} {left[0].get('key')}")  # fmt: skip
        self._check_determinism(result, plan1, plan2)

    @staticmethod
    def _check_determinism(result: CaseResult, plan1: PlanOutcome, plan2: PlanOutcome) -> None:
        if result.deterministic is False:
            result.fail("not_deterministic", f"plan 1: {plan1.summary}; plan 2: {plan2.summary}"
                        + _first_difference(plan1, plan2))  # fmt: skip


def _first_difference(plan1: PlanOutcome, plan2: PlanOutcome) -> str:
    if plan1.rc != 0 or plan2.rc != 0:
        return ""
    for index, (s1, s2) in enumerate(zip(plan1.statements, plan2.statements, strict=False)):
        if s1 != s2:
            return f"; statement {index + 1}: {s1.get('sql')!r} vs {s2.get('sql')!r}"
    if len(plan1.statements) == len(plan2.statements):
        one, two = plan1.document or {}, plan2.document or {}
        return f"; differing fields: {', '.join(k for k in one if one.get(k) != two.get(k))}"
    return ""


def _apply_message(rc: int, stdout: str, error: str) -> str:
    import json

    try:
        report = json.loads(stdout)
    except ValueError:
        return f"exit {rc}: {error}"
    if isinstance(report, dict) and "refusal" in report:
        refusal = report["refusal"]
        return f"refused {refusal.get('code')}: {refusal.get('message')}"
    if isinstance(report, dict):
        if report.get("failed") is not None:
            return f"statement {int(report['failed']) + 1} failed: {report.get('error')}"
        if not report.get("converged"):
            return "applied, but the runner reports it did not converge"
    return f"exit {rc}: {error}"


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
