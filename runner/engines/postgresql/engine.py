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
from runner.engines.postgresql.quoting import ident, literal
from runner.engines.postgresql.render import render
from runner.engines.postgresql.scratch import scratch_database
from runner.engines.report import ApplyReport
from runner.engines.scope import apply_exclude
from runner.errors import CanNotRunError
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
    conn: psycopg.Connection[Any], files: list[tuple[str, str]], schemas: Sequence[str] = ()
) -> None:
    """Run the desired schema; statements that fail are retried until nothing progresses.

    Files may create objects before what they use (a foreign key before its table); a loader
    that retries failed statements while any statement succeeds accepts every order.
    """
    with conn.cursor() as cur:
        cur.execute("SET check_function_bodies = off")
    pending: list[tuple[str, int, str]] = []
    for name, text in files:
        pending += [(name, piece.line, piece.sql) for piece in split_postgresql(text)]
    first_pass = True
    while pending:
        failed: list[tuple[str, int, str, psycopg.Error]] = []
        # The first pass sends statements in batches (one round trip and one commit each);
        # a batch that fails is rolled back whole and its statements run one by one.
        size = _BATCH if first_pass else 1
        first_pass = False
        for start in range(0, len(pending), size):
            chunk = pending[start : start + size]
            if len(chunk) > 1:
                try:
                    with conn.cursor() as cur:
                        cur.execute(";\n".join(sql for _, _, sql in chunk).encode("utf-8"))
                    continue
                except psycopg.Error:
                    pass
            for name, line, sql in chunk:
                try:
                    with conn.cursor() as cur:
                        cur.execute(sql.encode("utf-8"))
                except psycopg.Error as error:
                    failed.append((name, line, sql, error))
        if not failed:
            return
        if len(failed) == len(pending) and schemas:
            with conn.cursor() as cur:
                for schema in schemas:
                    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {ident(schema)}".encode())
            schemas = ()
        elif len(failed) == len(pending):
            first_name, first_line, _, first_error = failed[0]
            raise DesiredSchemaError(f"{first_name}:{first_line}: {_error_text(first_error)}")
        pending = [(n, line, sql) for n, line, sql, _ in failed]


class PostgresEngine:
    """One PostgreSQL target (and optionally a dev server for scratch databases)."""

    dialect = "postgresql"
    transactional_ddl = True

    def __init__(self, url: DatabaseURL, dev_url: DatabaseURL | None = None) -> None:
        self.url = url
        self.dev_url = dev_url
        self.scratch_names: list[str] = []  # never printed: the caller redacts them

    # -- reading ---------------------------------------------------------------------------

    def inspect(self, exclude: Sequence[str] = ()) -> Database:
        with connection(self.url) as conn:
            return apply_exclude(introspect(conn), exclude)

    @contextlib.contextmanager
    def _scratch(self) -> Iterator[DatabaseURL]:
        """A database to work in: the dev database if one was given, else a scratch one.

        A dev database must be empty when Seshat starts (so a real database given by mistake
        is refused, not wiped) and is emptied again afterwards.
        """
        if self.dev_url is None:
            with scratch_database(self.url) as (url, name):
                self.scratch_names.append(name)
                yield url
            return
        with connection(self.dev_url) as conn:
            if not _is_empty(conn):
                raise CanNotRunError(
                    "the dev database is not empty; give an empty database Seshat may use"
                )
        try:
            yield self.dev_url
        finally:
            with connection(self.dev_url) as conn:
                _reset(conn)

    def desired(self, path: Path, live: Database, exclude: Sequence[str] = ()) -> Database:
        """The desired schema, normalized in a scratch database and introspected."""
        with self._scratch() as url, connection(url) as conn:
            return self._normalize(conn, path, live, exclude)

    def _normalize(
        self, conn: psycopg.Connection[Any], path: Path, live: Database, exclude: Sequence[str]
    ) -> Database:
        # Schemas are never dropped, so the desired schema may use one only the live
        # database creates; those are created when nothing else lets loading progress.
        schemas = [d.definition for d in live.definitions.values() if d.kind == "schema"]
        _load(conn, desired_files(path), schemas)
        return apply_exclude(introspect(conn), exclude)

    # -- planning --------------------------------------------------------------------------

    def plan(self, desired_path: Path, options: PlanOptions) -> PlanDocument:
        """A verified plan from the live schema to ``desired_path``.

        The plan is dry-run on a copy of the live schema before it is returned; a plan that
        fails there, or does not reach the desired schema, is refused. One scratch database
        serves both steps: it is emptied after the desired schema has been read.
        """
        live = self.inspect(options.exclude)
        with self._scratch() as url, connection(url) as conn:
            desired = self._normalize(conn, desired_path, live, options.exclude)
            planned = plan_changes(live, desired, options, render)
            if not _reset(conn):
                with self._scratch() as fresh_url, connection(fresh_url) as fresh:
                    expected = self._dry_run(fresh, live, desired, planned.statements, options)
            else:
                expected = self._dry_run(conn, live, desired, planned.statements, options)
        return planned.document(live, desired, expected, options)

    def _dry_run(
        self,
        conn: psycopg.Connection[Any],
        live: Database,
        desired: Database,
        statements: Sequence[Any],
        options: PlanOptions,
    ) -> str:
        """Apply ``statements`` to a copy of ``live`` built in the empty database ``conn``."""
        baseline = introspect(conn)
        copy = plan_changes(baseline, live, PlanOptions(allow_destructive=True), render)
        try:
            # Committed in batches: one transaction over a large schema would exhaust the
            # server's lock table, and the copy needs no atomicity.
            _execute(conn, [(s.sql, s.transactional) for s in copy.statements], batch=_BATCH)
        except _StatementFailed as failure:
            raise PlanRefused(
                "dry_run_failed",
                f"could not rebuild the live schema for the dry run: {failure.error}",
            ) from None
        try:
            _execute(conn, [(s.sql, s.transactional) for s in statements])
        except _StatementFailed as failure:
            raise PlanRefused(
                "dry_run_failed",
                f"statement {failure.index + 1} failed in the dry run: {failure.error}",
            ) from None
        result = apply_exclude(introspect(conn), options.exclude)
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
        live = self.inspect(exclude)
        desired = self.desired(desired_path, live, exclude)
        return drift_report(diff(live, desired), live.dialect)


def _is_empty(conn: psycopg.Connection[Any]) -> bool:
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


def _drop_relations(conn: psycopg.Connection[Any]) -> None:
    """Drop user relations one by one, so a later DROP SCHEMA CASCADE needs few locks."""
    rows = conn.execute(
        "SELECT c.oid::regclass::text, c.relkind FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname !~ '^pg_'"
        " AND n.nspname <> 'information_schema' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
        " AND NOT c.relispartition ORDER BY c.relkind DESC"
    ).fetchall()
    words = {
        "r": "TABLE",
        "p": "TABLE",
        "v": "VIEW",
        "m": "MATERIALIZED VIEW",
        "f": "FOREIGN TABLE",
    }
    for name, kind in rows:
        with contextlib.suppress(psycopg.Error):
            conn.execute(f"DROP {words[kind]} IF EXISTS {name} CASCADE".encode())


def _reset(conn: psycopg.Connection[Any]) -> bool:
    """Empty a scratch database for reuse: every schema and extension goes, ``public`` is
    recreated with the owner, privileges and comment it had. False if that failed, and the
    caller takes a fresh scratch database instead.
    """
    _drop_relations(conn)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT obj_description(n.oid, 'pg_namespace'), pg_get_userbyid(n.nspowner),"
                " n.nspacl::text[] FROM pg_namespace n WHERE n.nspname = 'public'"
            )
            row = cur.fetchone()
            for (name,) in cur.execute(
                "SELECT extname FROM pg_extension WHERE extname <> 'plpgsql'"
            ).fetchall():
                cur.execute(f"DROP EXTENSION IF EXISTS {ident(name)} CASCADE".encode())
            schemas = cur.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname !~ '^pg_'"
                " AND nspname <> 'information_schema' ORDER BY 1"
            ).fetchall()
            for (name,) in schemas:
                cur.execute(f"DROP SCHEMA {ident(name)} CASCADE".encode())
            if row is not None:
                comment, owner, acl = row
                cur.execute(f"CREATE SCHEMA public AUTHORIZATION {ident(owner)}".encode())
                cur.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
                for item in acl or []:
                    grantee, _, rights = item.partition("=")
                    privileges = [
                        p for c, p in (("U", "USAGE"), ("C", "CREATE")) if c in rights.split("/")[0]
                    ]
                    if privileges and grantee != owner:
                        who = "PUBLIC" if grantee == "" else ident(grantee)
                        cur.execute(
                            f"GRANT {', '.join(privileges)} ON SCHEMA public TO {who}".encode()
                        )
                if comment is not None:
                    cur.execute(f"COMMENT ON SCHEMA public IS {literal(comment)}".encode())
        return True
    except psycopg.Error:
        return False


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
) -> None:
    """Run statements: consecutive transactional ones in one transaction, others alone.

    With ``batch``, a run of transactional statements is committed every ``batch``
    statements instead of once (for rebuilding a copy, where atomicity is not needed).
    """
    prepare_session(conn)
    index = 0
    while index < len(statements):
        sql, transactional = statements[index]
        if not transactional:
            try:
                conn.execute(sql.encode("utf-8"))
            except psycopg.Error as error:
                raise _StatementFailed(index, _error_text(error)) from None
            if report is not None:
                report.ran.append(index)
            index += 1
            continue
        group: list[int] = []
        while index < len(statements) and statements[index][1]:
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
