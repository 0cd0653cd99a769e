"""From two models to a plan: diff, order, render, judge, and apply the policy.

This is the dialect-neutral part of planning. A dialect supplies its ``render`` function
(change -> statements); everything else is shared, so every engine refuses the same plans
for the same reasons.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final

from runner.digests import digest
from runner.engines.changes import Change, Statement
from runner.engines.diff import diff
from runner.engines.hazards import hazards_of
from runner.engines.keep import SkippedRemoval
from runner.engines.model import OBJECT_CLASSES, PRIVILEGE_CLASSES, Database, PrivilegeScope
from runner.engines.order import order
from runner.engines.plan import (
    HazardEntry,
    PlanDocument,
    PlanPrivileges,
    PlanStatement,
    PlanSummary,
    SkippedDrop,
)
from runner.engines.renamed import Renamed
from runner.engines.scope import Scope
from runner.errors import SeshatError

__all__ = [
    "PlanOptions",
    "PlanRefused",
    "Planned",
    "Renderer",
    "converged",
    "document_privileges",
    "fingerprint",
    "has_privileges",
    "model_document",
    "plan_changes",
    "privilege_fields",
    "remember_fingerprint",
    "sandbox_fields",
]

Renderer = Callable[[Change], list[Statement]]
Differ = Callable[[Database, Database], list[Change]]


class PlanRefused(SeshatError):
    """The policy forbids this plan; ``reason`` is a stable snake_case code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """What the caller allows; its digest is part of every plan."""

    allow_destructive: bool = False
    protected_tables: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    schemas: tuple[str, ...] = ()
    exclude_schemas: tuple[str, ...] = ()
    managed_roles: tuple[str, ...] = ()
    manage_ownership: bool = False
    procedural_schema: bool = False
    """Procedural statements of the desired schema ran (``spec.policy.proceduralSchema``)."""
    sandbox_isolation: str = "jail"
    """How the private sandbox server was isolated (``spec.dev.isolation``)."""
    skip_drops: bool = False
    """Leave what only the live schema has alone instead of dropping it
    (``spec.policy.drops: Skip``, ``--skip-drops``; :mod:`runner.engines.keep`)."""

    @property
    def scope(self) -> Scope:
        return Scope.of(self.exclude, self.schemas, self.exclude_schemas)

    @property
    def privileges(self) -> PrivilegeScope:
        """Which privileges the plan manages (none by default)."""
        return PrivilegeScope.of(self.managed_roles, self.manage_ownership)

    def digest(self) -> str:
        value: dict[str, object] = {
            "allowDestructive": self.allow_destructive,
            "protectedTables": sorted({t.lower() for t in self.protected_tables}),
            **self.scope.key(),
        }
        value.update(privilege_fields(self.privileges))
        value.update(sandbox_fields(self.procedural_schema, self.sandbox_isolation))
        if self.skip_drops:  # only when set: default plans keep their options digest
            value["drops"] = "skip"
        return digest("plan-options", value)


def sandbox_fields(procedural: bool, isolation: str) -> dict[str, object]:
    """How the desired schema runs (procedural statements or not, the sandbox's isolation)
    in a digest or a cache key: nothing for the defaults (declarations only, a jailed
    sandbox), so what was keyed before they existed keeps its key."""
    value: dict[str, object] = {}
    if procedural:
        value["proceduralSchema"] = True
    if isolation != "jail":
        value["sandboxIsolation"] = isolation
    return value


def privilege_fields(scope: PrivilegeScope) -> dict[str, object]:
    """``scope`` in a digest or a cache key: nothing for the empty scope, so what was keyed
    before privileges existed keeps its key."""
    if not scope.active:
        return {}
    return {"managedRoles": list(scope.roles), "manageOwnership": scope.ownership}


_SCALARS = (str, int, bool, type(None))
SECTIONS: Final = ("tables", "constraints", "indexes", "sequences", "definitions", "comments")
PRIVILEGE_SECTIONS: Final = {
    "grants": "grants",
    "defaultGrants": "default_grants",
    "owners": "owners",
}
"""The privilege sections by document name; present only when a model has privileges."""
_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}
_FIELD_NAMES: Final = {  # every model class's fields, in the order rows hold them
    kind.__name__: [f.name for f in dataclasses.fields(kind)] for kind in OBJECT_CLASSES
}
_PRIVILEGE_FIELD_NAMES: Final = {
    **_FIELD_NAMES,
    **{kind.__name__: [f.name for f in dataclasses.fields(kind)] for kind in PRIVILEGE_CLASSES},
}


def has_privileges(db: Database) -> bool:
    """Whether ``db`` holds grants, default privileges or owners (a managed scope read them)."""
    return bool(db.grants or db.default_grants or db.owners)


def _new_fields(value: Any) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]] | None:
    """A dataclass's field names and one reader of their values (an ``attrgetter``), kept
    in ``_FIELDS`` for its class; None for a value that is not a dataclass.

    A plan of a thousand tables reads its models' fields several times (fingerprints,
    documents), so this is hot: callers look in ``_FIELDS`` first, scalars never come here.
    """
    if not dataclasses.is_dataclass(value):
        return None
    names = tuple(f.name for f in dataclasses.fields(value))
    getter = operator.attrgetter(*names)
    read: Callable[[Any], tuple[Any, ...]] = getter if len(names) > 1 else (lambda v: (getter(v),))
    fields = _FIELDS[type(value)] = (names, read)
    return fields


def _data(value: Any, *, named: bool) -> Any:
    """A model object as plain data, nested objects likewise and tuples as lists: each
    object a dict of its fields (``named``; ``dataclasses.asdict`` without its deep copies,
    the model being frozen), or the list of its fields' values in order (the compact form
    fingerprints and cache entries use)."""
    kind = type(value)
    if kind is tuple or kind is list:
        return [_data(item, named=named) for item in value]
    fields = _FIELDS.get(kind) or _new_fields(value)
    if fields is None:
        return value
    names, read = fields
    items = [item if type(item) in _SCALARS else _data(item, named=named) for item in read(value)]
    return dict(zip(names, items, strict=True)) if named else items


def _model_data(db: Database, *, named: bool) -> dict[str, Any]:
    data = {
        "dialect": db.dialect,
        "serverMajor": db.server_major,
        **{
            name: {k: _data(v, named=named) for k, v in getattr(db, name).items()}
            for name in SECTIONS
        },
    }
    if has_privileges(db):
        for name, attribute in PRIVILEGE_SECTIONS.items():
            data[name] = {k: _data(v, named=named) for k, v in getattr(db, attribute).items()}
    return data


def model_document(db: Database) -> dict[str, object]:
    """A schema model as plain data (what ``schema inspect`` prints and fingerprints cover)."""
    return _model_data(db, named=True)


def model_rows(db: Database) -> dict[str, Any]:
    """A schema model's objects as rows of field values, per section, keyed as in the
    model (what fingerprints cover and the planning cache stores; not the edges)."""
    return _model_data(db, named=False)


def converged(result: Database, desired: Database, differ: Differ = diff) -> str:
    """The fingerprint of a dry run's ``result``, or :class:`PlanRefused` if it did not
    reach ``desired`` (every engine's dry run ends here)."""
    remaining = differ(result, desired)
    if remaining:
        first = remaining[0]
        raise PlanRefused(
            "dry_run_not_converged",
            f"after the dry run {len(remaining)} differences remain "
            f"(first: {first.op} {first.key})",
        )
    return fingerprint(result)


_FINGERPRINTS: OrderedDict[int, tuple[Database, str]] = OrderedDict()


def fingerprint(db: Database) -> str:
    """The digest of a schema model (its objects; not the dependency edges).

    A model is frozen, so its fingerprint is computed once: the last few are remembered
    (with the model, so its id cannot be reused), since a plan asks for the same ones
    several times (cache keys, the plan document, the dry run's verdict).
    """
    found = _FINGERPRINTS.get(id(db))
    if found is not None and found[0] is db:
        _FINGERPRINTS.move_to_end(id(db))
        return found[1]
    rows = model_rows(db)
    # The rows with the field names of every class they use: a renamed or reordered field
    # is a different fingerprint. Built by Seshat from typed models, so not checked again.
    names = _PRIVILEGE_FIELD_NAMES if has_privileges(db) else _FIELD_NAMES
    value = digest("schema-model", {"fields": names, "objects": rows}, checked=False)
    remember_fingerprint(db, value)
    return value


def remember_fingerprint(db: Database, value: str) -> None:
    """Record ``value`` as ``db``'s fingerprint (it was stored beside a verified copy)."""
    _FINGERPRINTS[id(db)] = (db, value)
    while len(_FINGERPRINTS) > 8:
        _FINGERPRINTS.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Planned:
    """The ordered changes and their statements, before a document is made of them."""

    changes: tuple[Change, ...]
    statements: tuple[PlanStatement, ...]

    def document(
        self,
        live: Database,
        desired: Database,
        expected: str,
        options: PlanOptions,
        skipped: Sequence[SkippedRemoval] = (),
    ) -> PlanDocument:
        hazards = Counter(h.code for s in self.statements for h in s.hazards)
        privilege = sorted(
            {h.code for s in self.statements for h in s.hazards if h.kind == "privilege"}
        )
        return PlanDocument(
            dialect=live.dialect,
            server_major=live.server_major,
            observed=fingerprint(live),
            desired=fingerprint(desired),
            expected=expected,
            options=options.digest(),
            exclude=sorted(set(options.exclude)),
            schemas=sorted(set(options.schemas)) or None,
            exclude_schemas=sorted(set(options.exclude_schemas)) or None,
            privileges=_plan_privileges(options.privileges),
            procedural_schema=True if options.procedural_schema else None,
            sandbox_isolation="none" if options.sandbox_isolation == "none" else None,
            drops="skip" if options.skip_drops else None,
            skipped=[SkippedDrop(key=s.key, op=s.op, detail=s.detail) for s in skipped]
            if options.skip_drops
            else None,
            statements=list(self.statements),
            summary=PlanSummary(
                statements=len(self.statements),
                destructive=any(
                    h.kind == "destructive" for s in self.statements for h in s.hazards
                ),
                privilege_changes=privilege,
                hazards=dict(sorted(hazards.items())),
            ),
        )


def _plan_privileges(scope: PrivilegeScope) -> PlanPrivileges | None:
    if not scope.active:
        return None
    return PlanPrivileges(managed_roles=list(scope.roles), manage_ownership=scope.ownership)


def document_privileges(document: PlanDocument) -> PrivilegeScope:
    """The privileges ``document`` was planned with (to read the live schema as it did)."""
    found = document.privileges
    if found is None:
        return PrivilegeScope()
    return PrivilegeScope.of(found.managed_roles, found.manage_ownership)


def _protected(table_key: str, protected: Sequence[str]) -> bool:
    schema_name = table_key.split(":", 1)[1].lower()
    name = schema_name.split(".", 1)[1]
    return any(fnmatchcase(schema_name if "." in p else name, p.lower()) for p in protected)


def _check_policy(changes: Sequence[Change], live: Database, options: PlanOptions) -> None:
    protected_keys = {k for k in live.tables if _protected(k, options.protected_tables)}
    # What a protected table depends on (its column types, domains, sequences) is protected too.
    reaches = {b for a, b in live.depends if a in protected_keys}
    for change in changes:
        touched = sorted(t for t in change.tables if t in protected_keys)
        if change.key in reaches and not change.op.startswith(("create_", "add_enum_values")):
            touched = [f"{change.key} (used by a protected table)"]
        if touched:
            raise PlanRefused(
                "protected_table",
                f"the plan would change protected table {touched[0].removeprefix('table:')} "
                f"({change.op})",
            )
    if not options.allow_destructive:
        for change in changes:
            codes = [h.code for h in hazards_of(change) if h.kind == "destructive"]
            if codes:
                raise PlanRefused(
                    "destructive_disallowed",
                    f"the plan is destructive ({codes[0]} on {change.key.split(':', 1)[1]}) "
                    "and destructive changes are not allowed",
                )


def plan_changes(
    live: Database,
    desired: Database,
    options: PlanOptions,
    render: Renderer,
    differ: Differ = diff,
    renamed: Renamed | None = None,
) -> Planned:
    """Diff, order and render; raises :class:`PlanRefused` when the policy forbids the plan.

    ``differ`` is the shared :func:`~runner.engines.diff.diff` unless a dialect wraps it
    (SQLite turns what it cannot alter into table rebuilds; MySQL adds column moves).
    ``renamed`` is ``live`` with the desired schema's rename hints applied
    (:mod:`runner.engines.renamed`): its renames run first, and the rest of the plan is
    diffed from the renamed model.
    """
    view, renames = (renamed.view, list(renamed.changes)) if renamed else (live, [])
    changes = renames + order(differ(view, desired), view, desired)
    _check_policy(changes, live, options)
    statements: list[PlanStatement] = []
    for change in changes:
        entries = [
            HazardEntry.model_validate({"kind": h.kind, "code": h.code}) for h in hazards_of(change)
        ]
        for statement in render(change):
            statements.append(
                PlanStatement(
                    op=change.op,
                    key=change.key,
                    sql=statement.sql,
                    transactional=statement.transactional,
                    hazards=entries,
                )
            )
    return Planned(tuple(changes), tuple(statements))
