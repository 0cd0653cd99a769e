"""The SQLite engine: plan, dry-run, apply, drift and inspect on a database file.

URLs: ``sqlite:///relative.db`` (relative to the current directory) and
``sqlite:////absolute/path.db``. The engine never creates a database file: ``inspect``,
``drift`` and ``apply`` need it to exist, and ``plan`` against a missing file plans from
an empty schema (what the first apply would create) without creating it. An empty file is
an empty SQLite database, so ``touch app.db`` is how a first apply starts.

Planning opens the file read-only (``mode=ro``), and first reads its first page: a write
that was interrupted (a hot journal, a WAL needing recovery) is
:class:`~runner.errors.RecoveryNeeded` there, settled only by :meth:`SqliteEngine.recover`
(:mod:`.recovery`). The desired schema is normalized in an
in-memory sandbox that can reach no file (:mod:`.sandbox`); the dry run applies the plan to
a sandbox holding a copy of the live *schema* (its ``CREATE`` statements, never its rows).
An apply holds the
database's own write lock (``BEGIN IMMEDIATE``) from the staleness check to the commit,
runs every statement in that one transaction and checks foreign keys before committing.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from runner.digests import digest
from runner.engines.cache import engine_version
from runner.engines.core import Engine, LoadPiece, load_retrying
from runner.engines.desired import DesiredSchemaError
from runner.engines.keep import Kept
from runner.engines.model import NO_PRIVILEGES, Database, PrivilegeScope
from runner.engines.plan import PlanDocument, PlanStatement, plan_digest
from runner.engines.planner import (
    Planned,
    PlanRefused,
    Renderer,
    fingerprint,
)
from runner.engines.renamed import Spelling
from runner.engines.renames import Naming
from runner.engines.report import ApplyOptions, ApplyReport, StatementFailed
from runner.engines.scope import EVERYTHING, Scope, apply_scope
from runner.engines.sqlite.introspect import introspect, model_of, read_catalog, server_major
from runner.engines.sqlite.rebuild import sqlite_diff
from runner.engines.sqlite.recovery import probe, recover, translated
from runner.engines.sqlite.render import render
from runner.engines.sqlite.sandbox import copy_schema, limited
from runner.engines.sqlite.sandbox import sandbox as open_sandbox
from runner.engines.sqlite.sqltext import SqlTextError, ident, normalize, split_script
from runner.errors import CanNotRunError, ConfigurationError
from runner.url import DatabaseURL

__all__ = ["SqliteEngine", "database_path"]


def database_path(url: DatabaseURL) -> Path:
    """The file a ``sqlite://`` URL names (three slashes: relative; four: absolute)."""
    path = url.database
    if not path or path == ":memory:":
        raise ConfigurationError("the sqlite URL names no database file")
    return Path(path)


def _session(conn: sqlite3.Connection) -> None:
    """The settings every plan statement runs under (in the dry run and in the apply)."""
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("PRAGMA legacy_alter_table = ON")


def _run(conn: sqlite3.Connection, statements: Sequence[PlanStatement]) -> None:
    """Run ``statements`` inside the caller's transaction; then check foreign keys."""
    for index, statement in enumerate(statements):
        try:
            conn.execute(statement.sql)
        except sqlite3.Error as error:
            raise StatementFailed(index, str(error)) from None
    violations = conn.execute("PRAGMA foreign_key_check").fetchall()
    if violations:
        table, rowid, parent, _ = violations[0]
        touching = [i for i, s in enumerate(statements) if s.key == f"table:main.{table}"]
        index = touching[-1] if touching else len(statements) - 1
        raise StatementFailed(
            index,
            f"foreign key check failed: {len(violations)} rows of {table} have no parent row "
            f"in {parent} (first: rowid {rowid})",
        )


def _load(conn: sqlite3.Connection, pieces: Sequence[LoadPiece]) -> None:
    """Run the desired schema's classified ``pieces`` (:meth:`Engine.declared
    <runner.engines.core.Engine.declared>`; :func:`~runner.engines.core.load_retrying`),
    each with ``execute``, which runs exactly one statement (two are an error, before either
    runs), never ``executescript``."""

    def run(piece: LoadPiece) -> str | None:
        try:
            conn.execute(piece.sql)
        except sqlite3.Error as error:
            return str(error)
        return None

    load_retrying(pieces, run)


class SqliteEngine(Engine[None, None]):
    """One SQLite database file."""

    dialect = "sqlite"
    transactional_ddl = True
    transaction_modes = frozenset({"auto", "all"})
    naming = Naming(default_schema="main", schemas=False)
    spelling = Spelling(
        quote=lambda name: normalize(ident(name)),  # as the model spells it: bare if plain
        qualified_references=False,
        deparsed_definitions=False,
        kinds=frozenset({"table", "column"}),  # no ALTER INDEX: an index is dropped, created
    )
    partial_dry_run = False  # the dry run copies the live schema's text: all of it is cheap

    path: Path  # the target's database file (dev_url is not used: the sandbox is in memory)

    def prepare(self) -> None:
        self.path = database_path(self.url)

    # -- connections -------------------------------------------------------------------

    @contextlib.contextmanager
    def _connect(self, mode: str, timeout: float = 5.0) -> Iterator[sqlite3.Connection]:
        if not self.path.is_file():
            raise CanNotRunError(
                f"{self.path}: no such SQLite database file (create it first, e.g. an empty "
                "file: an empty file is an empty database)"
            )
        uri = f"file:{quote(str(self.path.resolve()))}?mode={mode}"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout)
        except sqlite3.Error as error:
            raise CanNotRunError(f"{self.path}: cannot open: {error}") from None
        try:
            if mode == "ro":
                probe(conn, self.path)  # an interrupted write is named, never misread
            yield conn
        finally:
            conn.close()

    # -- the hooks -----------------------------------------------------------------------

    def facts(self) -> None:
        return None

    def _read(self, scope: Scope) -> Database:
        """The target's schema, read-only (``mode=ro``). A catalog read before, by this
        engine's code and this SQLite library, is the model the planning cache kept for it:
        its CREATE text is not tokenized again."""
        with self._connect("ro") as conn:
            catalog = read_catalog(conn)
        key = digest(
            "sqlite-live-model",
            {
                "catalog": catalog.document(),
                "server": self.server_key(None),
                "engine": engine_version(),
            },
        )
        model = self.cache.live(key)
        if model is None:
            model = model_of(catalog)
            self.cache.keep_live(key, model)
        return apply_scope(model, scope)

    def observe(self, scope: Scope) -> Database:
        """The live schema; a missing file is an empty schema (what a first apply would
        create), never created."""
        if not self.path.exists():
            return Database(dialect="sqlite", server_major=server_major())
        return self._read(scope)

    def inspect(
        self, scope: Scope = EVERYTHING, privileges: PrivilegeScope = NO_PRIVILEGES
    ) -> Database:
        self._check_scope(scope)
        self.manage(privileges)
        return self._read(scope)

    def server_key(self, facts: None) -> dict[str, object]:
        return {"sqlite": sqlite3.sqlite_version}

    @contextlib.contextmanager
    def impact_reader(self, timeout_ms: int) -> Iterator[Any]:
        from runner.engines.sqlite.impact import reader

        with self._connect("ro") as conn, reader(conn, timeout_ms) as found:
            yield found

    def sandbox(self, facts: None) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()  # each step opens an in-memory sandbox of its own

    def normalize(self, sandbox: None, files: list[tuple[str, str]], scope: Scope) -> Database:
        """The desired schema, loaded into an in-memory sandbox and read back."""
        pieces = self.declared(files)
        conn = open_sandbox()
        try:
            with limited():
                _load(conn, pieces)
                return apply_scope(introspect(conn), scope)
        finally:
            conn.close()

    def declared(self, files: list[tuple[str, str]], sql_mode: str = "") -> list[LoadPiece]:
        """:meth:`Engine.declared <runner.engines.core.Engine.declared>`; text the splitter
        cannot tokenize is an invalid desired schema."""
        try:
            return super().declared(files, sql_mode)
        except SqlTextError as error:
            raise DesiredSchemaError(str(error)) from None

    def renderer(self, desired: Database, live: Database) -> Renderer:
        return render

    def drift_differ(self, live: Database, desired: Database) -> list[Any]:
        return sqlite_diff(live, desired)

    def split(self, text: str) -> list[tuple[int, str]]:
        return split_script(text)

    def check_kept(self, planned: Planned, kept: Kept) -> None:
        """A table is rebuilt from the desired schema's own CREATE text, which lacks the
        columns and constraints ``drops: skip`` keeps, so a rebuild cannot keep them
        (and a kept table constraint always makes one): refused, naming what."""
        for change in planned.changes:
            if change.op != "rebuild_table":
                continue
            name = change.key.removeprefix("table:")
            mine = (f"column:{name}.", f"constraint:{name}.")
            parts = sorted(k for k in kept.kept_parts if k.startswith(mine))
            if parts:
                raise PlanRefused(
                    "unsupported_change",
                    f"drops: skip cannot keep {parts[0]} on SQLite: table {name} is rebuilt "
                    "from the desired CREATE TABLE, which does not have it; declare it, or "
                    "plan with drops: Plan",
                )

    def dry_run(
        self, sandbox: None, baseline: Database, statements: Sequence[PlanStatement]
    ) -> tuple[list[PlanStatement], Database]:
        """The plan on an in-memory copy of the live schema (its stored ``CREATE`` text,
        never its rows; ``baseline`` is the model of that same file)."""
        conn = open_sandbox()
        try:
            if self.path.exists():
                with self._connect("ro") as source:
                    try:
                        copy_schema(source, conn)
                    except sqlite3.Error as error:
                        raise PlanRefused(
                            "dry_run_failed",
                            f"could not copy the live schema for the dry run: {error}",
                        ) from None
            _session(conn)
            conn.execute("BEGIN IMMEDIATE")
            try:
                with limited():
                    _run(conn, statements)
            except StatementFailed as failure:
                conn.execute("ROLLBACK")
                raise PlanRefused(
                    "dry_run_failed",
                    f"statement {failure.index + 1} failed in the dry run: {failure.error}",
                ) from None
            conn.execute("COMMIT")
            with limited():
                result = introspect(conn)
        finally:
            conn.close()
        return list(statements), result

    def _check_drift_target(self, scope: Scope) -> None:
        """A drift report needs the database file to exist."""
        if not self.path.is_file():
            self.inspect(scope)  # says the file is missing

    # -- recovering and applying ---------------------------------------------------------

    def recover(self) -> dict[str, object]:
        """Roll back a hot journal (or recover a WAL) an interrupted write left, under
        SQLite's own locks (:func:`.recovery.recover`)."""
        return recover(self.path, timeout=30.0)

    def apply(self, document: PlanDocument, options: ApplyOptions) -> ApplyReport:
        """Run ``document`` in one transaction under the database's write lock (``auto`` and
        ``all`` alike; ``none`` is refused before, :attr:`transaction_modes`)."""
        report = ApplyReport(plan_id=plan_digest(document))
        with self._connect("rw", timeout=options.lock_timeout_ms / 1000) as conn:
            _session(conn)
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as error:
                if "locked" in str(error) or "busy" in str(error):
                    raise PlanRefused(
                        "locked", "another connection holds this database's write lock"
                    ) from None
                raise translated(error, self.path) from None
            try:
                live = apply_scope(introspect(conn), document.scope)
                if fingerprint(live) != document.observed:
                    raise PlanRefused(
                        "stale_plan", "the live schema changed since the plan was made"
                    )
                _run(conn, document.statements)
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error as error:
                    last = max(0, len(document.statements) - 1)
                    raise StatementFailed(last, f"could not commit: {error}") from None
            except StatementFailed as failure:
                conn.execute("ROLLBACK")
                report.failed = failure.index
                report.error = failure.error
                report.rolled_back = list(range(failure.index))
                return report
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            report.ran = list(range(len(document.statements)))
            after = apply_scope(introspect(conn), document.scope)
            report.settle(fingerprint(after) == document.expected)
        return report
