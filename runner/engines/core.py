"""The engine core: how a plan and a drift report are made, once for every dialect.

:class:`Engine` holds the sequence the seed and DESIGN.md describe:

1. **observe** the target, read-only (the live model and the facts a sandbox must match);
2. **normalize** the desired files in a sandbox, unless the planning cache already holds
   the model for exactly these files, this server and this engine;
3. **diff, order, render, judge** (:func:`~runner.engines.planner.plan_changes`, with the
   dialect's differ and renderer);
4. **dry-run** the statements on a rebuild of the part of the live schema they can affect
   (:mod:`runner.engines.dryscope`; the whole of it when that fails) in a fresh sandbox
   database, unless the cache holds the verdict for exactly this live schema, this desired
   schema and these statements; not at all when there is no statement to run and the live
   schema already is the desired one (PostgreSQL and MariaDB, whose sandbox is a server).

A sandbox is started only when a step needs one, so a plan whose results are all cached
never starts a server. Reading the target and loading the desired files into the sandbox do
not depend on each other, so they run side by side (the target in a second thread, on its
own read-only connection). A dialect (``postgresql/``, ``mysql/``, ``sqlite/``) subclasses
:class:`Engine` and supplies the hooks below; it never repeats the sequence. Capability
switches (:attr:`Engine.transactional_ddl`, :attr:`Engine.journals`) say what shared code
may expect of it. The engine for a URL comes from :func:`runner.engines.base.engine_for`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypedDict, TypeVar

from runner.deadline import leave_signals_to_the_main_thread
from runner.digests import Digest, digest
from runner.engines.cache import PlanCache, engine_version
from runner.engines.changes import UnsupportedChange
from runner.engines.desired import DesiredSchemaError, desired_files
from runner.engines.drift import drift_report
from runner.engines.dryscope import (
    created_keys,
    dry_run_scope,
    merged,
    restrict,
    untouched_equal,
)
from runner.engines.impact import DEFAULT_TIMEOUT_MS, ImpactReport, Reader, measure, probes
from runner.engines.keep import Kept, SkippedRemoval, keep_live_only
from runner.engines.model import NO_PRIVILEGES, Database, PrivilegeScope
from runner.engines.plan import HazardEntry, PlanDocument, PlanStatement
from runner.engines.planner import (
    Planned,
    PlanOptions,
    PlanRefused,
    Renderer,
    converged,
    fingerprint,
    plan_changes,
    privilege_fields,
    sandbox_fields,
)
from runner.engines.renamed import Renamed, Spelling, renamed
from runner.engines.renames import Naming, read_hints, resolve
from runner.engines.report import ApplyOptions, ApplyReport
from runner.engines.scope import EVERYTHING, Scope, apply_scope
from runner.engines.servers import ISOLATIONS, SandboxRefusal
from runner.errors import ConfigurationError, RecoveryNeeded
from runner.sql.classify import NeedsSuperuser, NotDeclarative, declared
from runner.url import DatabaseURL

__all__ = ["ISOLATIONS", "Engine", "EnginePolicy", "LoadPiece", "load_retrying"]

FactsT = TypeVar("FactsT")
SandboxT = TypeVar("SandboxT")


class _Lazy(Generic[SandboxT]):
    """A sandbox entered on first use and left with the plan (``stack``)."""

    def __init__(
        self, stack: contextlib.ExitStack, opener: Callable[[], AbstractContextManager[SandboxT]]
    ) -> None:
        self._stack, self._opener = stack, opener
        self._sandbox: SandboxT | None = None
        self._opened = False

    def get(self) -> SandboxT:
        if not self._opened:
            self._sandbox = self._stack.enter_context(self._opener())
            self._opened = True
        return self._sandbox  # type: ignore[return-value]


class EnginePolicy(TypedDict, total=False):
    """The keywords of :class:`Engine`'s constructor besides the URLs, for a caller that
    passes them through (:func:`runner.engines.base.engine_for`): their defaults are the
    constructor's."""

    cache: PlanCache | None
    procedural: bool
    isolation: str


class Engine(Generic[FactsT, SandboxT]):
    """One target database; subclasses supply the hooks (see the module docstring)."""

    dialect: ClassVar[str]
    transactional_ddl: ClassVar[bool] = True
    """Whether a run of statements can be one transaction (PostgreSQL, SQLite) or each
    statement commits on its own (MySQL)."""
    transaction_modes: ClassVar[frozenset[str]] = frozenset({"auto", "all", "none"})
    """The ``transactionMode`` values an Apply can honour: ``all`` needs transactional DDL,
    ``none`` statements that may each commit on their own (SQLite's rebuilds may not)."""
    journals: ClassVar[bool] = False
    """Whether :meth:`apply` keeps a per-statement journal (:attr:`ApplyOptions.journal`)."""
    manages_privileges: ClassVar[bool] = False
    """Whether the dialect reads grants and owners when a :class:`PrivilegeScope` asks
    (PostgreSQL; MariaDB grants only); others refuse a scope that is not empty."""
    naming: ClassVar[Naming | None] = None
    """How written names become keys, for rename hints (None: hints are not read)."""
    spelling: ClassVar[Spelling | None] = None
    """What renames the dialect can express, and how its definitions spell names."""
    partial_dry_run: ClassVar[bool] = True
    """Whether :meth:`dry_run` may rebuild only a scope of the live schema (SQLite copies the
    whole schema's text, which costs nothing to narrow)."""
    has_schemas: ClassVar[bool] = False
    """Whether a database holds several schemas a scope may choose from (PostgreSQL)."""

    def __init__(
        self,
        url: DatabaseURL,
        dev_url: DatabaseURL | None = None,
        *,
        cache: PlanCache | None = None,
        procedural: bool = False,
        isolation: str = "jail",
    ) -> None:
        if isolation not in ISOLATIONS:
            raise ConfigurationError(
                f"sandbox isolation {isolation!r} is not one of {', '.join(ISOLATIONS)}"
            )
        self.url = url
        self.dev_url = dev_url
        self.procedural = procedural
        """Whether procedural statements of the desired schema run (the declaration's
        ``spec.policy.proceduralSchema``; :mod:`runner.sql.classify`)."""
        self.isolation = isolation
        """How a private sandbox server is isolated (:data:`ISOLATIONS`)."""
        self._classified: tuple[object, object, list[LoadPiece]] | None = None
        self.cache = cache if cache is not None else PlanCache(Path("."), enabled=False)
        self.scratch_names: list[str] = []  # never printed: the caller redacts them
        self.used_live = False  # the last normalization needed the live model
        self._live: Callable[[], Database] | None = None  # the reading a normalization may use
        self.privileges = NO_PRIVILEGES  # what every reading of this plan or drift manages
        self.planned: tuple[Database, tuple[Any, ...]] | None = None  # the last plan's live
        # model and changes, for its impact checks (:meth:`impact`)
        self.prepare()

    def prepare(self) -> None:
        """Read what the dialect needs from the URL (its refusal is a configuration error,
        raised here, before anything runs)."""

    @contextlib.contextmanager
    def entered(self, opened: AbstractContextManager[Any]) -> Iterator[Any]:
        """Use a sandbox: its scratch names are kept (to be redacted from every output),
        and one that may not be used is a refusal (``sandbox_refused``)."""
        try:
            with opened as sandbox:
                try:
                    yield sandbox
                finally:
                    self.scratch_names += sandbox.names
        except SandboxRefusal as refusal:
            raise PlanRefused("sandbox_refused", str(refusal)) from None

    @contextlib.contextmanager
    def server_sandbox(
        self,
        facts: FactsT,
        dev: Callable[[DatabaseURL, FactsT], AbstractContextManager[SandboxT]],
        private: Callable[..., AbstractContextManager[SandboxT]],
    ) -> Iterator[SandboxT]:
        """The sandbox of a dialect with a server (:meth:`sandbox`), :meth:`entered`: the
        explicit one ``dev_url`` names (``dev``), else a private server matching ``facts``
        (``private``, isolated as :attr:`isolation` says)."""
        opened = (
            dev(self.dev_url, facts) if self.dev_url else private(facts, isolation=self.isolation)
        )
        with self.entered(opened) as sandbox:
            yield sandbox

    # -- the hooks -----------------------------------------------------------------------

    def facts(self) -> FactsT:
        """What a sandbox must match of the target (version, settings): a quick read."""
        raise NotImplementedError

    def observe(self, scope: Scope) -> Database:
        """The live model in ``scope``, read-only."""
        raise NotImplementedError

    def server_key(self, facts: FactsT) -> dict[str, object]:
        """What of the server decides a normalization or a dry run (version, settings); the
        core adds which explicit sandbox, if any, runs them (:meth:`_server`)."""
        raise NotImplementedError

    def sandbox(self, facts: FactsT) -> AbstractContextManager[SandboxT]:
        """Where desired SQL, rebuilds and dry runs execute; never the target."""
        raise NotImplementedError

    def normalize(self, sandbox: SandboxT, files: list[tuple[str, str]], scope: Scope) -> Database:
        """Load ``files`` into a fresh sandbox database and read back what is in ``scope``.
        A load that needs
        the live model asks :meth:`live_model` for it."""
        raise NotImplementedError

    def changes(
        self,
        live: Database,
        desired: Database,
        options: PlanOptions,
        renamed: Renamed | None = None,
    ) -> Planned:
        """Diff, order, render and judge (:func:`~runner.engines.planner.plan_changes` with
        the dialect's :meth:`drift_differ` and :meth:`renderer`); ``renamed`` is ``live`` with
        the desired schema's rename hints applied, and their changes. A change the dialect
        cannot express refuses the plan (``unsupported_change``). The dialect's hooks:
        :meth:`renderer`, :meth:`check_desired` before, :meth:`finish_plan` after."""
        render = self.renderer(desired, renamed.view if renamed else live)
        self.check_desired(desired, options)
        try:
            planned = plan_changes(
                live, desired, options, render, differ=self.drift_differ, renamed=renamed
            )
        except UnsupportedChange as error:
            raise PlanRefused("unsupported_change", str(error)) from None
        return self.finish_plan(planned)

    def renderer(self, desired: Database, live: Database) -> Renderer:
        """The dialect's render function for a plan from ``live`` (the renamed view when
        hints rename) toward ``desired``."""
        raise NotImplementedError

    def check_desired(self, desired: Database, options: PlanOptions) -> None:
        """Refuse, before planning, what ``desired`` asks of the target that only the target
        can say it lacks (PostgreSQL: roles; MySQL: accounts). Nothing by default."""

    def finish_plan(self, planned: Planned) -> Planned:
        """What the dialect does to a plan once it is rendered (MySQL: refuse unknown
        definers, merge ALTERs of one table). Nothing by default."""
        return planned

    def check_kept(self, planned: Planned, kept: Kept) -> None:
        """Refuse a ``drops: skip`` plan that cannot keep what :func:`keep_live_only` kept
        (SQLite: a column or constraint of a table it rebuilds). Nothing by default."""

    def split(self, text: str) -> list[tuple[int, str]]:
        """(line, text) of each statement of a desired file, for reading rename hints."""
        raise NotImplementedError

    def dry_run(
        self, sandbox: SandboxT, baseline: Database, statements: Sequence[PlanStatement]
    ) -> tuple[list[PlanStatement], Database]:
        """Rebuild ``baseline`` (the live schema, or a scope of it) in a fresh sandbox
        database and run ``statements`` there: the statements as the dry run judged them
        (lock probes), and the whole schema it reached (the core applies the scope)."""
        raise NotImplementedError

    def impact_reader(self, timeout_ms: int) -> AbstractContextManager[Reader]:
        """A read-only session on the target for impact checks, each query bounded by
        ``timeout_ms`` (:mod:`runner.engines.impact`)."""
        raise NotImplementedError

    def impact(
        self, document: PlanDocument, mode: str, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> ImpactReport | None:
        """The figures of the plan :meth:`plan` just made (``document``): None with mode
        ``off`` or nothing planned. Observations beside the plan, never in it."""
        if mode == "off" or self.planned is None:
            return None
        live, changes = self.planned
        found = probes(changes, document, live)
        return measure(lambda: self.impact_reader(timeout_ms), found, live, mode)

    def drift_differ(self, live: Database, desired: Database) -> list[Any]:
        from runner.engines.diff import diff

        return diff(live, desired)

    def apply(self, document: PlanDocument, options: ApplyOptions) -> ApplyReport:
        raise NotImplementedError

    def recover(self) -> dict[str, object]:
        """Settle what an interrupted write left that a reader cannot read past (the
        ``recover`` operation, run alone with the Apply's credential under the realm lease);
        what was found and done, as :class:`~runner.protocol.results.RecoveryReport`'s
        fields. The default: a server that recovers its own sessions (PostgreSQL, MariaDB)
        leaves nothing to replay here; :meth:`leftovers` names what a person must settle."""
        leftovers = self.leftovers()
        detail = "nothing to recover" if not leftovers else "; ".join(leftovers)
        return {"found": "none", "recovered": False, "detail": detail, "leftovers": leftovers}

    def leftovers(self) -> list[str]:
        """What a killed session left behind that only a person should settle, each named
        (a prepared transaction); never guessed at, never removed."""
        return []

    def check_transaction_mode(self, mode: str, document: PlanDocument | None = None) -> None:
        """Refuse (``transaction_mode_unsupported``) a mode this engine cannot honour, or
        ``all`` for a plan holding a statement that cannot run in a transaction."""
        if mode not in self.transaction_modes:
            why = (
                "its DDL commits implicitly, so a plan cannot run as one transaction"
                if mode == "all"
                else "a plan runs as one transaction (a table rebuild is only safe so)"
            )
            raise PlanRefused(
                "transaction_mode_unsupported",
                f"transactionMode {mode} is not possible on {self.dialect}: {why}",
            )
        if mode == "all" and document is not None:
            alone = [i + 1 for i, s in enumerate(document.statements) if not s.transactional]
            if alone:
                raise PlanRefused(
                    "transaction_mode_unsupported",
                    "transactionMode all: statement(s) "
                    f"{', '.join(map(str, alone[:10]))} cannot run inside a transaction",
                )

    def classifier_mode(self, facts: FactsT) -> str:
        """The session mode the desired SQL is read in (MySQL: the ``sql_mode`` the loader
        sets, which decides how quotes are read); empty for dialects without one."""
        return ""

    def declared(self, files: list[tuple[str, str]], sql_mode: str = "") -> list[LoadPiece]:
        """The statements of the desired ``files`` that may run, each exactly as it runs
        (:func:`runner.sql.classify.declared`; ``sql_mode``: :meth:`classifier_mode`); a
        statement that is not a declaration is the refusal ``statement_not_declarative``,
        before anything runs. Classified once per plan: the core asks before it opens a
        sandbox, the dialect's loader again for the pieces it runs. A normalized model the
        cache holds needs no classification: its key binds the files, this code (runner/sql
        included), the policy and the server's mode, so they passed when it was made."""
        if self._classified is not None and self._classified[:2] == (files, sql_mode):
            return self._classified[2]
        try:
            found = declared(self.dialect, files, procedural=self.procedural, sql_mode=sql_mode)
        except (NotDeclarative, NeedsSuperuser) as refusal:
            raise PlanRefused(refusal.reason, str(refusal)) from None
        pieces = [LoadPiece(s.file, s.line, s.sql) for s in found]
        self._classified = (files, sql_mode, pieces)
        return pieces

    def policy_key(self) -> dict[str, object]:
        """What of the engine's own policy decides a normalization or a dry run, for cache
        keys (:func:`~runner.engines.planner.sandbox_fields`)."""
        return sandbox_fields(self.procedural, self.isolation)

    def live_model(self) -> Database:
        """The live model, for a normalization that needs it (PostgreSQL: a schema only the
        live database has); it waits for the read. Such a normalization sets
        :attr:`used_live`: it is not the desired files' alone, so it is not cached."""
        assert self._live is not None, "the live model is lent to a normalization only"
        self.used_live = True
        return self._live()

    # -- the sequence --------------------------------------------------------------------

    def manage(self, scope: PrivilegeScope) -> None:
        """Read (and plan) the privileges ``scope`` names from now on; a dialect that cannot
        is a refusal, ``unsupported_option``."""
        if scope.active and not self.manages_privileges:
            raise PlanRefused(
                "unsupported_option",
                f"managed roles and ownership are not supported for {self.dialect} yet",
            )
        self.privileges = scope

    def inspect(
        self, scope: Scope = EVERYTHING, privileges: PrivilegeScope = NO_PRIVILEGES
    ) -> Database:
        self._check_scope(scope)
        self.manage(privileges)
        self.facts()  # what it refuses (a credential that cannot see everything), inspect too
        return self.observe(scope)

    def _check_drift_target(self, scope: Scope) -> None:
        """Refuse a drift report of a target there is nothing to compare with. The default:
        a server's database is there (a connection says otherwise); SQLite's file may not be,
        and :meth:`observe` reads a missing one as empty, which drift must not."""

    def _check_scope(self, scope: Scope) -> None:
        if (scope.schemas or scope.exclude_schemas) and not self.has_schemas:
            raise ConfigurationError(
                f"a {self.dialect} target has no schemas to choose from: --schema and "
                "--exclude-schema (policy.schemas, policy.excludeSchemas) are for PostgreSQL"
            )

    def _desired(
        self,
        lazy: _Lazy[SandboxT],
        files: list[tuple[str, str]],
        live: Callable[[], Database],
        facts: FactsT,
        scope: Scope,
    ) -> Database:
        key = digest(
            "desired-model",
            {
                "dialect": self.dialect,
                "files": [[name, digest("file", {"text": text})] for name, text in files],
                "server": self._server(facts),
                "engine": engine_version(),
                **scope.key(),
                **privilege_fields(self.privileges),
                **self.policy_key(),
            },
        )
        found = self.cache.desired(key)
        if found is not None:
            # Made by this code from these files under the same policy and server mode:
            # their classification passed then, and would now.
            return found
        # Refused (statement_not_declarative) before a sandbox starts and anything runs.
        self.declared(files, self.classifier_mode(facts))
        self._live, self.used_live = live, False
        model = self.normalize(lazy.get(), files, scope)
        if not self.used_live:  # a normalization that borrowed from the live schema is not
            self.cache.keep_desired(key, model)  # this key's alone: not kept
        return model

    def _renamed(
        self, files: list[tuple[str, str]], live: Database, desired: Database
    ) -> Renamed | None:
        """``live`` with the rename hints of the desired ``files`` applied
        (:mod:`runner.engines.renames`); None where the dialect reads no hints.

        Hints are read from the files each time, not cached: they are comments, which the
        normalized desired model does not hold. The desired files' bytes are part of every
        cache key and the rename statements part of the verdict's, so a changed hint is
        never answered from an entry made without it."""
        if self.naming is None or self.spelling is None:
            return None
        hints = read_hints(files, self.split)
        if not hints:
            return None
        return renamed(live, resolve(hints, desired, self.naming), self.spelling, desired)

    def _server(self, facts: FactsT) -> dict[str, object]:
        """The server part of a cache key: the dialect's :meth:`server_key`, and the explicit
        sandbox (``dev_url``) a normalization or a dry run would run in."""
        explicit = self.dev_url.display() if self.dev_url else None
        return {**self.server_key(facts), "explicitSandbox": explicit}

    @contextlib.contextmanager
    def _reading(self, scope: Scope) -> Iterator[Callable[[], Database]]:
        """The live model, read in a second thread while the caller goes on."""

        def observed() -> Database:
            live = self.observe(scope)
            fingerprint(live)  # remembered: the plan needs it, and this thread has time
            return live

        with ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="seshat-observe",
            initializer=leave_signals_to_the_main_thread,
        ) as pool:
            future = pool.submit(observed)
            yield future.result

    def _verdict_key(
        self,
        live: Database,
        desired: Database,
        statements: Sequence[PlanStatement],
        facts: FactsT,
        options: PlanOptions,
    ) -> Digest:
        return digest(
            "dry-run-verdict",
            {
                "dialect": self.dialect,
                "live": fingerprint(live),
                "desired": fingerprint(desired),
                "statements": [s.model_dump(mode="json") for s in statements],
                "server": self._server(facts),
                "engine": engine_version(),
                **options.scope.key(),
                **privilege_fields(options.privileges),
                **self.policy_key(),
            },
        )

    def plan(self, desired_path: Path, options: PlanOptions) -> PlanDocument:
        """A verified plan from the live schema to ``desired_path`` (see the module
        docstring); :class:`~runner.engines.planner.PlanRefused` when it may not be made."""
        self._check_scope(options.scope)
        self.manage(options.privileges)
        if (options.procedural_schema, options.sandbox_isolation) != (
            self.procedural,
            self.isolation,
        ):
            raise ConfigurationError(
                "the plan's options and the engine disagree on proceduralSchema or the "
                "sandbox isolation: the plan must record what the engine does"
            )
        facts = self.facts()
        with contextlib.ExitStack() as stack:
            read = stack.enter_context(self._reading(options.scope))
            lazy = _Lazy(stack, lambda: self.sandbox(facts))
            files = desired_files(desired_path)
            desired = declared_model = self._desired(lazy, files, read, facts, options.scope)
            live = read()
            renamed_live = self._renamed(files, live, desired)
            skipped: tuple[SkippedRemoval, ...] = ()
            if options.skip_drops:
                kept = keep_live_only(renamed_live.view if renamed_live else live, desired)
                desired, skipped = kept.desired, kept.skipped
            planned = self.changes(live, desired, options, renamed_live)
            if options.skip_drops:
                self.check_kept(planned, kept)
            self.planned = (live, planned.changes)
            key = self._verdict_key(live, desired, planned.statements, facts, options)
            cached = self.cache.verdict(key)
            if cached is not None:
                statements = [PlanStatement.model_validate(s) for s in cached["statements"]]
                expected = str(cached["expected"])
            else:
                statements, expected = self._dry_run(lazy, live, desired, planned, options)
                self.cache.keep_verdict(
                    key,
                    {
                        "statements": [s.model_dump(mode="json") for s in statements],
                        "expected": expected,
                    },
                )
        return Planned(planned.changes, tuple(statements)).document(
            live, declared_model, expected, options, skipped
        )

    def _dry_run(
        self,
        lazy: _Lazy[SandboxT],
        live: Database,
        desired: Database,
        planned: Planned,
        options: PlanOptions,
    ) -> tuple[list[PlanStatement], str]:
        """The dry run on a scope of the live schema where that is enough, else on all of
        it; the statements as judged and the fingerprint the plan promises."""
        differ = self.drift_differ

        def run(baseline: Database) -> tuple[list[PlanStatement], Database]:
            """The dry run on ``baseline``, and the schema it reached in the managed scope."""
            statements, result = self.dry_run(lazy.get(), baseline, planned.statements)
            return statements, apply_scope(result, options.scope)

        if self.partial_dry_run:
            if not planned.statements and not differ(live, desired):
                # Nothing to run and nothing to reach (a converged database, the fresh
                # plan that proves an apply): the live schema is what the plan promises.
                # A dry run would start a server to rebuild a part of it and run nothing.
                return [], fingerprint(live)
            scope = dry_run_scope(live, desired, planned.changes)
            created = created_keys(live, desired)
            left_out = (live.tables.keys() | live.definitions.keys()) - scope
            if left_out and untouched_equal(live, desired, scope, differ):
                try:
                    statements, result = run(restrict(live, scope))
                    wanted = scope | created
                    converged(restrict(result, wanted), restrict(desired, wanted), differ)
                    return statements, fingerprint(merged(live, result, scope, created))
                except PlanRefused as refusal:
                    if not refusal.reason.startswith("dry_run_"):
                        raise  # else: the whole live schema, below, settles it
        statements, result = run(live)
        return statements, converged(result, desired, differ)

    def drift(
        self,
        desired_path: Path,
        scope: Scope = EVERYTHING,
        privileges: PrivilegeScope = NO_PRIVILEGES,
    ) -> dict[str, object]:
        """A bounded drift report: the live schema against the desired one, in ``scope``.

        What a killed session left (:meth:`leftovers`) is refused first, named: no plan can
        get past it (a prepared transaction holds its locks and changes). The desired files'
        rename hints are read as :meth:`plan` reads them, so a pending rename is one changed
        object (the renamed one, as the plan renames it), never a missing one and an extra
        one, and what follows the rename is no drift."""
        self._check_drift_target(scope)
        self._check_scope(scope)
        self.manage(privileges)
        left = self.leftovers()
        if left:
            raise RecoveryNeeded(
                f"a killed session left what a person must settle: {'; '.join(left)}",
                "leftovers",
            )
        facts = self.facts()
        with contextlib.ExitStack() as stack:
            read = stack.enter_context(self._reading(scope))
            lazy = _Lazy(stack, lambda: self.sandbox(facts))
            files = desired_files(desired_path)
            desired = self._desired(lazy, files, read, facts, scope)
            live = read()
        renamed = self._renamed(files, live, desired)
        if renamed is None:
            return drift_report(self.drift_differ(live, desired), live.dialect)
        changes = [*renamed.changes, *self.drift_differ(renamed.view, desired)]
        return drift_report(changes, live.dialect)


# -- loading desired SQL, shared by the dialects ---------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadPiece:
    """One statement of a desired file: where it is, and its text."""

    file: str
    line: int
    sql: str


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


def load_retrying(
    pieces: Sequence[LoadPiece],
    run: Callable[[LoadPiece], str | None],
    *,
    when_stuck: Callable[[], bool] = lambda: False,
) -> None:
    """Run ``pieces`` with ``run`` (which returns an error message, or None when the piece
    ran); pieces that fail are retried while any piece succeeds, so desired files may create
    objects before what they use. When a whole round fails, ``when_stuck`` may unblock the
    load (and says whether it did); else the first failure is the
    :class:`~runner.engines.desired.DesiredSchemaError`, naming its file and line."""
    pending = list(pieces)
    while pending:
        failed: list[tuple[LoadPiece, str]] = []
        for piece in pending:
            error = run(piece)
            if error is not None:
                failed.append((piece, error))
        if not failed:
            return
        if len(failed) == len(pending) and not when_stuck():
            piece, error = failed[0]
            raise DesiredSchemaError(f"{piece.file}:{piece.line}: {error}")
        pending = [piece for piece, _ in failed]


def probed_hazards(statement: PlanStatement, algorithm: str | None) -> PlanStatement:
    """``statement`` with its lock hazard replaced by what a dry-run probe found."""
    hazards = [h for h in statement.hazards if h.kind != "lock"]
    if algorithm in ("INPLACE", "COPY"):
        hazards.append(HazardEntry(kind="lock", code=f"ALGORITHM_{algorithm}"))
    hazards.sort(key=lambda h: (h.kind, h.code))
    return statement.model_copy(update={"hazards": hazards})
