"""The PostgreSQL engine: the hooks of :class:`~runner.engines.core.Engine` for real servers.

The target is read in one read-only snapshot; the desired SQL, the live rebuild and the dry
run execute in a sandbox (:mod:`.sandbox`); ``apply`` runs the approved statements under
the database's advisory lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from runner.engines.core import Engine, LoadPiece, load_retrying
from runner.engines.desired import DesiredSchemaError
from runner.engines.model import Database
from runner.engines.plan import PlanDocument, PlanStatement, plan_digest
from runner.engines.planner import (
    PlanOptions,
    PlanRefused,
    Renderer,
    document_privileges,
    fingerprint,
    plan_changes,
)
from runner.engines.postgresql.connection import connection
from runner.engines.postgresql.introspect import introspect, prepare_session
from runner.engines.postgresql.leftovers import leftovers as find_leftovers
from runner.engines.postgresql.quoting import ident, literal
from runner.engines.postgresql.render import render
from runner.engines.postgresql.sandbox import (
    ExtensionNotAllowed,
    PrepareFailed,
    Sandbox,
    ServerFacts,
    dev_sandbox,
    private_sandbox,
    server_facts,
)
from runner.engines.privileges import role_uses
from runner.engines.renamed import Spelling
from runner.engines.renames import Naming
from runner.engines.report import ApplyOptions, ApplyReport, StatementFailed
from runner.engines.scope import Scope, apply_scope
from runner.engines.servers import SandboxRefusal
from runner.engines.watchdog import Watchdog, watching
from runner.errors import CanNotRunError
from runner.sql.classify import SUPERUSER_REASON, leakproof_function
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


class _Session:
    """Statements on one sandbox session, as the sandbox role: each exactly one statement
    (the extended protocol refuses a text that holds two, so what ran is what was read),
    each cancelled by the runner after the sandbox's statement limit, and those the
    sandbox does for itself (:meth:`Sandbox.instead`) in their place."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        sandbox: Sandbox,
        database: DatabaseURL,
        watch: Watchdog,
    ) -> None:
        self.conn, self.sandbox, self.database, self.watch = conn, sandbox, database, watch

    def one(self, sql: str) -> None:
        """``sql`` (or what the sandbox runs instead) on its own."""
        replaced = self.sandbox.instead(self.database, sql)
        for text in [sql] if replaced is None else replaced:
            with self.watch.statement():
                self.conn.execute(text.encode("utf-8"), binary=True)

    def together(self, texts: Sequence[str]) -> None:
        """``texts`` in one transaction and one round trip; all or nothing."""
        with self.watch.statement(), self.conn.transaction(), self.conn.pipeline():
            for text in texts:
                self.conn.execute(text.encode("utf-8"), binary=True)

    def error(self, error: psycopg.Error) -> str:
        return self.watch.explain(_error_text(error))


def _load(
    session: _Session,
    pieces: Sequence[LoadPiece],
    schemas: Callable[[], Sequence[str]] = list,
) -> None:
    """Run the desired schema's classified ``pieces`` (:meth:`Engine.declared
    <runner.engines.core.Engine.declared>`) in the sandbox database of ``session``
    (:func:`~runner.engines.core.load_retrying`), each as exactly one statement.

    What the statements need from the administrator (roles, extensions) is made first,
    from the statements read (:meth:`Sandbox.prepare`). The first pass sends statements in
    batches (one round trip and one transaction each); what a failing batch held runs one
    by one after it. Schemas only the live database has are created when nothing else lets
    the load progress (schemas are never dropped, so a desired schema may use one).
    """
    conn, sandbox = session.conn, session.sandbox
    with conn.cursor() as cur:
        cur.execute("SET check_function_bodies = off")
    _follow_search_path(conn, sandbox.search_path)
    try:
        sandbox.prepare(
            session.database, [(f"{p.file}:{p.line}", p.sql) for p in pieces], desired=True
        )
    except ExtensionNotAllowed as refusal:  # a refusal of the artifact, not an error
        raise PlanRefused("sandbox_refused", str(refusal)) from None
    except (SandboxRefusal, PrepareFailed) as refusal:
        raise DesiredSchemaError(str(refusal)) from None
    left: list[LoadPiece] = []
    for start in range(0, len(pieces), _BATCH):
        chunk = pieces[start : start + _BATCH]
        if len(chunk) > 1 and not any(sandbox.intercepts(p.sql) for p in chunk):
            try:
                session.together([p.sql for p in chunk])
                continue
            except psycopg.Error:
                pass
        left += chunk
    missing_schemas: list[str] | None = None  # asked of the live model only when stuck

    def run(piece: LoadPiece) -> str | None:
        try:
            session.one(piece.sql)
        except SandboxRefusal as refusal:
            raise DesiredSchemaError(f"{piece.file}:{piece.line}: {refusal}") from None
        except psycopg.Error as error:
            lent = _lent_create(piece.sql, error)
            if lent is None:
                return session.error(error)
            try:
                session.together(lent)
            except psycopg.Error as again:
                return session.error(again)
        return None

    def when_stuck() -> bool:
        nonlocal missing_schemas
        if missing_schemas is not None:
            return False
        missing_schemas = list(schemas())
        if not missing_schemas:
            return False
        try:
            with conn.cursor() as cur:
                for schema in missing_schemas:
                    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {ident(schema)}".encode())
        except psycopg.Error as error:
            raise DesiredSchemaError(
                f"the desired schema left the sandbox unusable: {_error_text(error)}"
            ) from None
        return True

    load_retrying(left, run, when_stuck=when_stuck)


def _follow_search_path(conn: psycopg.Connection[Any], schemas: Sequence[str]) -> None:
    """Resolve unqualified names as the target's session does: its search path's schemas
    are made in the sandbox database (those missing) and set as the session's path."""
    if not schemas:
        return
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT nspname FROM pg_namespace")
            present = {str(row[0]) for row in cur.fetchall()}
            for schema in schemas:
                if schema not in present:
                    cur.execute(f"CREATE SCHEMA {ident(schema)}".encode())
            cur.execute(f"SET search_path = {', '.join(ident(s) for s in schemas)}".encode())
    except psycopg.Error as error:
        raise CanNotRunError(
            f"cannot follow the target's search path in the sandbox: {_error_text(error)}"
        ) from None


_CASCADING_REVOKE = re.compile(r"^\s*REVOKE\b.*\b(CASCADE|RESTRICT)\s*;?\s*$", re.I | re.S)


def _refuse_cascading_revokes(files: list[tuple[str, str]]) -> None:
    """A desired schema whose privileges are managed states grants; ``REVOKE ... CASCADE``
    (or ``RESTRICT``) is about grants other roles made from them, which it cannot state."""
    for name, text in files:
        for piece in split_postgresql(text):
            if _CASCADING_REVOKE.match(piece.sql):
                raise DesiredSchemaError(
                    f"{name}:{piece.line}: REVOKE ... CASCADE/RESTRICT is not supported in a "
                    "desired schema whose privileges are managed: state the grants wanted"
                )


def _refuse_superuser_only(statements: Sequence[PlanStatement]) -> None:
    """Refuse (``superuser_required``) a live schema the dry run cannot rebuild because it
    holds a ``LEAKPROOF`` function, which only a superuser may define and the sandbox role
    never is (the desired files' are refused by the classifier, with their file and line)."""
    for statement in statements:
        kind = leakproof_function(statement.sql)
        if kind is not None:
            raise PlanRefused(
                SUPERUSER_REASON,
                f"the live schema's {statement.key} is LEAKPROOF ({SUPERUSER_REASON}): only "
                "a superuser may define a LEAKPROOF function, and the sandbox that rebuilds the "
                "live schema for the dry run never runs as one, so no plan can be checked; "
                "see docs/engine.md",
            )


_OWNER_TO = re.compile(
    r'^\s*ALTER\s.*\sOWNER\s+TO\s+("(?:[^"]|"")+"|[^\s;]+)\s*;?\s*$', re.I | re.S
)
_NO_CREATE = re.compile(r"^permission denied for schema (.+)$")


def _lent_create(sql: str, error: psycopg.Error) -> list[str] | None:
    """In a sandbox, ``ALTER ... OWNER TO r`` that failed because ``r`` may not create in
    the object's schema (which PostgreSQL demands of a new owner), as statements that lend
    ``r`` that privilege for the change only, run like it as the sandbox role (which can
    lend only what it holds). The sandbox invents roles and rebuilds only the privileges of
    managed ones, so it cannot know what the target grants ``r``; the target itself is asked
    when the plan is applied."""
    owner = _OWNER_TO.match(sql)
    schema = _NO_CREATE.match(error.diag.message_primary or "")
    if owner is None or schema is None:
        return None
    role, name = owner.group(1), ident(schema.group(1))
    return [
        f"GRANT CREATE ON SCHEMA {name} TO {role}",
        sql.rstrip().rstrip(";"),
        f"REVOKE CREATE ON SCHEMA {name} FROM {role}",
    ]


class PostgresEngine(Engine[ServerFacts, Sandbox]):
    """One PostgreSQL target, read only while planning; everything else runs in a sandbox
    (:mod:`.sandbox`): a private server, or the explicit one ``dev_url`` names."""

    dialect = "postgresql"
    transactional_ddl = True
    has_schemas = True
    manages_privileges = True
    naming = Naming(default_schema="public", fold_unquoted=True)
    spelling = Spelling(quote=ident, literal=literal)

    # -- reading ---------------------------------------------------------------------------

    def facts(self) -> ServerFacts:
        with connection(self.url, read_only=True) as conn:
            return server_facts(conn)

    def leftovers(self) -> list[str]:
        """Prepared transactions of this database (:mod:`.leftovers`)."""
        with connection(self.url, read_only=True) as conn:
            return find_leftovers(conn)

    def observe(self, scope: Scope) -> Database:
        """The live schema, in one read-only snapshot."""
        with connection(self.url, read_only=True) as conn:
            return apply_scope(introspect(conn, self.privileges), scope)

    def server_key(self, facts: ServerFacts) -> dict[str, object]:
        return {
            "versionNum": facts.version_num,
            "encoding": facts.encoding,
            "collate": facts.collate,
            "ctype": facts.ctype,
            "searchPath": list(facts.search_path),
        }

    def sandbox(self, facts: ServerFacts) -> contextlib.AbstractContextManager[Sandbox]:
        return self.server_sandbox(facts, dev_sandbox, private_sandbox)

    def normalize(self, sandbox: Sandbox, files: list[tuple[str, str]], scope: Scope) -> Database:
        """Load the desired schema into a fresh sandbox database and read it back."""
        if self.privileges.active:
            _refuse_cascading_revokes(files)
        database = sandbox.fresh()

        def schemas() -> list[str]:
            live = self.live_model().definitions.values()
            return [d.definition for d in live if d.kind == "schema"]

        with connection(database) as conn, watching(conn.cancel_safe) as watch:
            _load(_Session(conn, sandbox, database, watch), self.declared(files), schemas)
        # Read back in a new session: nothing the desired SQL set on its own carries over.
        try:
            with connection(database) as conn:
                return apply_scope(introspect(conn, self.privileges), scope)
        except psycopg.Error as error:
            raise DesiredSchemaError(
                f"the desired schema cannot be read back in the sandbox: {_error_text(error)}"
            ) from None

    # -- planning --------------------------------------------------------------------------

    def renderer(self, desired: Database, live: Database) -> Renderer:
        return render

    def check_desired(self, desired: Database, options: PlanOptions) -> None:
        if options.privileges.active:
            self._roles_exist(desired)

    def split(self, text: str) -> list[tuple[int, str]]:
        return [(piece.line, piece.sql) for piece in split_postgresql(text)]

    def _roles_exist(self, desired: Database) -> None:
        """Refuse (``unknown_role``) a desired grant or owner naming a role the target lacks:
        Seshat does not create roles (the sandbox makes them up, so only the target knows)."""
        named = role_uses(desired)
        if not named:
            return
        with connection(self.url, read_only=True) as conn, conn.cursor() as cur:
            cur.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (sorted(named),))
            present = {str(row[0]) for row in cur.fetchall()}
        missing = sorted(set(named) - present)
        if missing:
            role = missing[0]
            raise PlanRefused(
                "unknown_role",
                f'role "{role}" does not exist on the target server (named by '
                f"{named[role]}); Seshat does not create roles: create it first",
            )

    def dry_run(
        self, sandbox: Sandbox, baseline: Database, statements: Sequence[PlanStatement]
    ) -> tuple[list[PlanStatement], Database]:
        """Rebuild ``baseline`` in a fresh sandbox database, run ``statements`` there."""
        database = sandbox.fresh()
        with connection(database) as conn, watching(conn.cancel_safe) as watch:
            session = _Session(conn, sandbox, database, watch)

            def run(steps: Sequence[PlanStatement], failed: str, batch: int | None = None) -> None:
                """``steps`` in the sandbox database; a failure refuses the plan, ``failed``
                (a template naming the statement's ``number`` and the ``error``) says how."""
                try:
                    _sandbox_execute(session, [(s.sql, s.transactional) for s in steps], batch)
                except StatementFailed as failure:
                    why = failed.format(number=failure.index + 1, error=failure.error)
                    raise PlanRefused("dry_run_failed", why) from None

            empty = introspect(conn, self.privileges)
            copy = plan_changes(empty, baseline, PlanOptions(allow_destructive=True), render)
            _refuse_superuser_only(copy.statements)
            try:
                sandbox.prepare(
                    database,
                    [(f"rebuild statement {i + 1}", s.sql) for i, s in enumerate(copy.statements)]
                    + [(f"statement {i + 1}", s.sql) for i, s in enumerate(statements)],
                    desired=False,
                )
            except ExtensionNotAllowed as refusal:
                raise PlanRefused(
                    "sandbox_refused",
                    f"the target has extension {refusal.name!r}, which the dry run cannot "
                    f"rebuild: {refusal}",
                ) from None
            except (SandboxRefusal, PrepareFailed) as refusal:
                why = f"the dry run cannot start: {refusal}"
                raise PlanRefused("dry_run_failed", why) from None
            # Committed in batches: one transaction over a large schema would exhaust the
            # server's lock table, and the copy needs no atomicity.
            run(
                copy.statements,
                "could not rebuild the live schema for the dry run: {error}",
                _BATCH,
            )
            run(statements, "statement {number} failed in the dry run: {error}")
        try:
            with connection(database) as conn:
                result = introspect(conn, self.privileges)
        except psycopg.Error as error:
            raise PlanRefused(
                "dry_run_failed", f"the dry run's result cannot be read: {_error_text(error)}"
            ) from None
        return list(statements), result

    def impact_reader(self, timeout_ms: int) -> contextlib.AbstractContextManager[Any]:
        from runner.engines.postgresql.impact import reader

        return reader(self.url, timeout_ms)

    # -- applying --------------------------------------------------------------------------

    def apply(self, document: PlanDocument, options: ApplyOptions) -> ApplyReport:
        """Run ``document`` against the live database under the advisory lock: consecutive
        transactional statements in one transaction (``auto``, ``all``: a plan that can be
        one is), or each statement on its own (``none``)."""
        report = ApplyReport(plan_id=plan_digest(document))
        scope = document.scope
        self.manage(document_privileges(document))
        with connection(self.url) as conn:
            with conn.cursor() as cur:
                timeout = f"{options.lock_timeout_ms}ms"
                cur.execute("SELECT set_config('lock_timeout', %s, false)", (timeout,))
                try:
                    cur.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
                except psycopg.errors.LockNotAvailable:
                    raise PlanRefused(
                        "locked", "another apply holds this database's lock"
                    ) from None
            live = apply_scope(introspect(conn, self.privileges), scope)
            if fingerprint(live) != document.observed:
                raise PlanRefused("stale_plan", "the live schema changed since the plan was made")
            try:
                together = options.transaction_mode != "none"
                statements = [(s.sql, s.transactional and together) for s in document.statements]
                _execute(conn, statements, report)
            except StatementFailed as failure:
                report.failed = failure.index
                report.error = failure.error
                return report
            after = apply_scope(introspect(conn, self.privileges), scope)
            report.settle(fingerprint(after) == document.expected)
        return report


_BATCH = 200


def _execute(
    conn: psycopg.Connection[Any],
    statements: Sequence[tuple[str, bool]],
    report: ApplyReport,
) -> None:
    """Run the approved statements on the target: consecutive transactional ones in one
    transaction, others alone."""
    prepare_session(conn)
    index = 0
    while index < len(statements):
        sql, transactional = statements[index]
        if not transactional:
            try:
                conn.execute(sql.encode("utf-8"))
            except psycopg.Error as error:
                raise StatementFailed(index, _error_text(error)) from None
            report.ran.append(index)
            index += 1
            continue
        group: list[int] = []
        while index < len(statements) and statements[index][1]:
            group.append(index)
            index += 1
        current = group[0]
        try:
            with conn.transaction():
                for current in group:
                    conn.execute(statements[current][0].encode("utf-8"))
        except psycopg.Error as error:
            report.rolled_back = [i for i in group if i < current]
            raise StatementFailed(current, _error_text(error)) from None
        report.ran.extend(group)


def _sandbox_execute(
    session: _Session, statements: Sequence[tuple[str, bool]], batch: int | None
) -> None:
    """Run statements in a sandbox as :func:`_execute` runs them on a target, each exactly
    one statement (:class:`_Session`); with ``batch``, a run of transactional statements is
    committed every ``batch`` statements instead of once (for rebuilding a copy, where
    atomicity is not needed)."""
    prepare_session(session.conn)
    sandbox = session.sandbox
    index = 0
    while index < len(statements):
        sql, transactional = statements[index]
        if not transactional or sandbox.intercepts(sql):
            try:
                session.one(sql)
            except psycopg.Error as error:
                raise StatementFailed(index, session.error(error)) from None
            except SandboxRefusal as refusal:
                raise StatementFailed(index, str(refusal)) from None
            index += 1
            continue
        group: list[int] = []
        while (
            index < len(statements)
            and statements[index][1]
            and not sandbox.intercepts(statements[index][0])
        ):
            group.append(index)
            index += 1
            if batch is not None and len(group) >= batch:
                break
        texts = [[statements[i][0]] for i in group]
        if len(group) > 1:
            try:
                session.together([statements[i][0] for i in group])
                continue
            except psycopg.Error:
                pass  # once more one by one below (it was rolled back whole): which failed?
        while True:
            current = 0
            try:
                with session.conn.transaction():
                    for current in range(len(group)):
                        for text in texts[current]:
                            with session.watch.statement():
                                session.conn.execute(text.encode("utf-8"), binary=True)
                break
            except psycopg.Error as error:
                # A new owner that may not create in the object's schema is lent that right
                # for the change (_lent_create), and the statements run again.
                lent = _lent_create(statements[group[current]][0], error)
                if lent is not None and len(texts[current]) == 1:
                    texts[current] = lent
                    continue
                raise StatementFailed(group[current], session.error(error)) from None
