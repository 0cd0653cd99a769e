"""The PostgreSQL engine: plan, dry-run, apply, drift and inspect against real servers."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg

from runner.engines.desired import DesiredSchemaError, desired_files
from runner.engines.diff import diff
from runner.engines.drift import drift_report
from runner.engines.model import Database
from runner.engines.plan import PlanDocument, plan_digest
from runner.engines.planner import PlanOptions, PlanRefused, converged, fingerprint, plan_changes
from runner.engines.postgresql.connection import connection
from runner.engines.postgresql.introspect import introspect, prepare_session
from runner.engines.postgresql.quoting import ident
from runner.engines.postgresql.render import render
from runner.engines.postgresql.sandbox import (
    Sandbox,
    SandboxRefusal,
    ServerFacts,
    dev_sandbox,
    private_sandbox,
    server_facts,
)
from runner.engines.report import ApplyReport
from runner.engines.scope import apply_exclude
from runner.sql.split import split_postgresql
from runner.url import DatabaseURL

__all__ = ["ADVISORY_LOCK_KEY", "PostgresEngine"]

ADVISORY_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"seshat-schema-apply").digest()[:8], "big", signed=True
)
"""The ``pg_advisory_lock`` key every schema apply holds on its target database."""


def _error_text(error: psycopg.Error) -> str:
    primary = error.diag.message_primary or str(error).strip().splitlines()[0]
    return primary


def _load(
    conn: psycopg.Connection[Any],
    files: list[tuple[str, str]],
    sandbox: Sandbox,
    database: DatabaseURL,
    schemas: Sequence[str] = (),
) -> None:
    """Run the desired schema in the sandbox database ``conn``; statements that fail are
    retried until nothing progresses.

    Files may create objects before what they use (a foreign key before its table); a loader
    that retries failed statements while any statement succeeds accepts every order. A
    ``CREATE EXTENSION`` goes through the sandbox (:meth:`Sandbox.run`), never as written.
    """
    with conn.cursor() as cur:
        cur.execute("SET check_function_bodies = off")
    pending: list[tuple[str, int, str]] = []
    for name, text in files:
        pending += [(name, piece.line, piece.sql) for piece in split_postgresql(text)]
    first_pass = True
    while pending:
        failed: list[tuple[str, int, str, psycopg.Error]] = []
        made_role = False
        # The first pass sends statements in batches (one round trip and one commit each);
        # a batch that fails is rolled back whole and its statements run one by one.
        size = _BATCH if first_pass else 1
        first_pass = False
        for start in range(0, len(pending), size):
            chunk = pending[start : start + size]
            if len(chunk) > 1 and not any(sandbox.intercepts(sql) for _, _, sql in chunk):
                try:
                    with conn.cursor() as cur:
                        cur.execute(";\n".join(sql for _, _, sql in chunk).encode("utf-8"))
                    continue
                except psycopg.Error:
                    pass
            for name, line, sql in chunk:
                try:
                    _run_one(conn, sandbox, database, sql)
                except SandboxRefusal as refusal:
                    raise DesiredSchemaError(f"{name}:{line}: {refusal}") from None
                except psycopg.Error as error:
                    # A role the statement names is made in the sandbox; it runs again.
                    made_role = sandbox.missing_role(error) or made_role
                    failed.append((name, line, sql, error))
        if not failed:
            return
        if len(failed) == len(pending) and not made_role:
            if not schemas:
                first_name, first_line, _, first_error = failed[0]
                raise DesiredSchemaError(f"{first_name}:{first_line}: {_error_text(first_error)}")
            try:
                with conn.cursor() as cur:
                    cur.execute("RESET ROLE")  # whatever role the desired SQL set
                    for schema in schemas:
                        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {ident(schema)}".encode())
            except psycopg.Error as error:
                raise DesiredSchemaError(
                    f"the desired schema left the sandbox unusable: {_error_text(error)}"
                ) from None
            schemas = ()
        pending = [(n, line, sql) for n, line, sql, _ in failed]


def _run_one(
    conn: psycopg.Connection[Any], sandbox: Sandbox, database: DatabaseURL, sql: str
) -> None:
    """One statement in the sandbox: an extension through the sandbox's door, the rest as
    the sandbox role."""
    if sandbox.intercepts(sql):
        sandbox.run(database, sql)
        return
    with conn.cursor() as cur:
        cur.execute(sql.encode("utf-8"))


class PostgresEngine:
    """One PostgreSQL target, read only while planning; everything else runs in a sandbox
    (:mod:`.sandbox`): a private server, or the explicit one ``dev_url`` names."""

    dialect = "postgresql"
    transactional_ddl = True

    def __init__(
        self, url: DatabaseURL, dev_url: DatabaseURL | None = None, *, cache: bool = True
    ) -> None:
        self.url = url
        self.dev_url = dev_url
        self.cache = cache
        self.scratch_names: list[str] = []  # never printed: the caller redacts them

    # -- reading ---------------------------------------------------------------------------

    def _observe(self, exclude: Sequence[str]) -> tuple[Database, ServerFacts]:
        """The live schema and the server's facts, in one read-only snapshot."""
        with connection(self.url, read_only=True) as conn:
            live = apply_exclude(introspect(conn), exclude)
            return live, server_facts(conn)

    def inspect(self, exclude: Sequence[str] = ()) -> Database:
        return self._observe(exclude)[0]

    @contextlib.contextmanager
    def _sandbox(self, facts: ServerFacts) -> Iterator[Sandbox]:
        try:
            if self.dev_url is not None:
                with dev_sandbox(self.dev_url, facts) as sandbox:
                    yield sandbox
                    self.scratch_names += sandbox.names
            else:
                with private_sandbox(facts, cache=self.cache) as sandbox:
                    yield sandbox
                    self.scratch_names += sandbox.names
        except SandboxRefusal as refusal:
            raise PlanRefused("sandbox_refused", str(refusal)) from None

    def _normalize(
        self, sandbox: Sandbox, path: Path, live: Database, exclude: Sequence[str]
    ) -> Database:
        """Load the desired schema into a fresh sandbox database and read it back."""
        database = sandbox.fresh()
        # Schemas are never dropped, so the desired schema may use one only the live
        # database creates; those are created when nothing else lets loading progress.
        schemas = [d.definition for d in live.definitions.values() if d.kind == "schema"]
        with connection(database) as conn:
            _load(conn, desired_files(path), sandbox, database, schemas)
        # Read back in a new session: nothing the desired SQL set on its own carries over.
        try:
            with connection(database) as conn:
                return apply_exclude(introspect(conn), exclude)
        except psycopg.Error as error:
            raise DesiredSchemaError(
                f"the desired schema cannot be read back in the sandbox: {_error_text(error)}"
            ) from None

    def desired(self, path: Path, live: Database, exclude: Sequence[str] = ()) -> Database:
        """The desired schema, normalized in a sandbox and introspected."""
        _, facts = self._observe(exclude)
        with self._sandbox(facts) as sandbox:
            return self._normalize(sandbox, path, live, exclude)

    # -- planning --------------------------------------------------------------------------

    def plan(self, desired_path: Path, options: PlanOptions) -> PlanDocument:
        """A verified plan from the live schema to ``desired_path``.

        The target is only read. The desired schema is normalized in one fresh sandbox
        database; the live schema is rebuilt in another and the plan's exact statements run
        there; a plan that fails, or does not reach the desired schema, is refused.
        """
        live, facts = self._observe(options.exclude)
        with self._sandbox(facts) as sandbox:
            desired = self._normalize(sandbox, desired_path, live, options.exclude)
            planned = plan_changes(live, desired, options, render)
            expected = self._dry_run(sandbox, live, desired, planned.statements, options)
        return planned.document(live, desired, expected, options)

    def _dry_run(
        self,
        sandbox: Sandbox,
        live: Database,
        desired: Database,
        statements: Sequence[Any],
        options: PlanOptions,
    ) -> str:
        """Rebuild ``live`` in a fresh sandbox database, run ``statements`` there, compare."""
        database = sandbox.fresh()
        with connection(database) as conn:
            baseline = introspect(conn)
            copy = plan_changes(baseline, live, PlanOptions(allow_destructive=True), render)
            try:
                # Committed in batches: one transaction over a large schema would exhaust
                # the server's lock table, and the copy needs no atomicity.
                _execute(
                    conn,
                    [(s.sql, s.transactional) for s in copy.statements],
                    batch=_BATCH,
                    sandbox=(sandbox, database),
                )
            except _StatementFailed as failure:
                raise PlanRefused(
                    "dry_run_failed",
                    f"could not rebuild the live schema for the dry run: {failure.error}",
                ) from None
            try:
                _execute(
                    conn,
                    [(s.sql, s.transactional) for s in statements],
                    sandbox=(sandbox, database),
                )
            except _StatementFailed as failure:
                raise PlanRefused(
                    "dry_run_failed",
                    f"statement {failure.index + 1} failed in the dry run: {failure.error}",
                ) from None
        try:
            with connection(database) as conn:
                result = apply_exclude(introspect(conn), options.exclude)
        except psycopg.Error as error:
            raise PlanRefused(
                "dry_run_failed", f"the dry run's result cannot be read: {_error_text(error)}"
            ) from None
        return converged(result, desired, diff)

    # -- applying --------------------------------------------------------------------------

    def apply(self, document: PlanDocument, *, lock_timeout_ms: int = 30_000) -> ApplyReport:
        """Run ``document`` against the live database under the advisory lock."""
        report = ApplyReport(plan_digest(document))
        exclude = document.exclude
        with connection(self.url) as conn:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT set_config('lock_timeout', %s, false)", (f"{lock_timeout_ms}ms",)
                )
                try:
                    cur.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
                except psycopg.errors.LockNotAvailable:
                    raise PlanRefused(
                        "locked", "another apply holds this database's lock"
                    ) from None
            live = apply_exclude(introspect(conn), exclude)
            if fingerprint(live) != document.observed:
                raise PlanRefused("stale_plan", "the live schema changed since the plan was made")
            try:
                _execute(conn, [(s.sql, s.transactional) for s in document.statements], report)
            except _StatementFailed as failure:
                report.failed = failure.index
                report.error = failure.error
                return report
            after = apply_exclude(introspect(conn), exclude)
            report.converged = fingerprint(after) == document.expected
        return report

    def drift(self, desired_path: Path, exclude: Sequence[str] = ()) -> dict[str, object]:
        """A bounded drift report: the live schema against the desired one."""
        live, facts = self._observe(exclude)
        with self._sandbox(facts) as sandbox:
            desired = self._normalize(sandbox, desired_path, live, exclude)
        return drift_report(diff(live, desired), live.dialect)


class _StatementFailed(Exception):
    def __init__(self, index: int, error: str) -> None:
        super().__init__(error)
        self.index = index
        self.error = error


_BATCH = 200


def _execute(
    conn: psycopg.Connection[Any],
    statements: Sequence[tuple[str, bool]],
    report: ApplyReport | None = None,
    batch: int | None = None,
    sandbox: tuple[Sandbox, DatabaseURL] | None = None,
) -> None:
    """Run statements: consecutive transactional ones in one transaction, others alone.

    With ``batch``, a run of transactional statements is committed every ``batch``
    statements instead of once (for rebuilding a copy, where atomicity is not needed). In a
    ``sandbox``, the statements it intercepts (extensions) run through it, each on its own.
    """
    prepare_session(conn)

    def alone(sql: str) -> bool:
        return sandbox is not None and sandbox[0].intercepts(sql)

    index = 0
    while index < len(statements):
        sql, transactional = statements[index]
        if not transactional or alone(sql):
            try:
                if sandbox is not None and alone(sql):
                    sandbox[0].run(sandbox[1], sql)
                else:
                    conn.execute(sql.encode("utf-8"))
            except psycopg.Error as error:
                raise _StatementFailed(index, _error_text(error)) from None
            except SandboxRefusal as refusal:
                raise _StatementFailed(index, str(refusal)) from None
            if report is not None:
                report.ran.append(index)
            index += 1
            continue
        group: list[int] = []
        while index < len(statements) and statements[index][1] and not alone(statements[index][0]):
            group.append(index)
            index += 1
            if batch is not None and len(group) >= batch:
                break
        current = group[0]
        try:
            with conn.transaction():
                for current in group:
                    conn.execute(statements[current][0].encode("utf-8"))
        except psycopg.Error as error:
            if report is not None:
                report.rolled_back = [i for i in group if i < current]
            raise _StatementFailed(current, _error_text(error)) from None
        if report is not None:
            report.ran.extend(group)
