"""From two models to a plan: diff, order, render, judge, and apply the policy.

This is the dialect-neutral part of planning. A dialect supplies its ``render`` function
(change -> statements); everything else is shared, so every engine refuses the same plans
for the same reasons.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from runner.digests import digest
from runner.engines.changes import Change, Statement
from runner.engines.diff import diff
from runner.engines.hazards import hazards_of
from runner.engines.model import Database
from runner.engines.order import order
from runner.engines.plan import HazardEntry, PlanDocument, PlanStatement, PlanSummary
from runner.errors import SeshatError

__all__ = [
    "PlanOptions",
    "PlanRefused",
    "Planned",
    "converged",
    "fingerprint",
    "model_document",
    "plan_changes",
]

Renderer = Callable[[Change], list[Statement]]
Differ = Callable[[Database, Database], list[Change]]


class PlanRefused(SeshatError):
    """The policy forbids this plan; ``reason`` is a stable snake_case code."""

    code = "PlanRefused"
    blocked = True

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

    def digest(self) -> str:
        return digest(
            "plan-options",
            {
                "allowDestructive": self.allow_destructive,
                "protectedTables": sorted({t.lower() for t in self.protected_tables}),
                "exclude": sorted(set(self.exclude)),
            },
        )


def model_document(db: Database) -> dict[str, object]:
    """A schema model as plain data (what ``schema inspect`` prints and fingerprints cover)."""
    return {
        "dialect": db.dialect,
        "serverMajor": db.server_major,
        "tables": {k: dataclasses.asdict(v) for k, v in db.tables.items()},
        "constraints": {k: dataclasses.asdict(v) for k, v in db.constraints.items()},
        "indexes": {k: dataclasses.asdict(v) for k, v in db.indexes.items()},
        "sequences": {k: dataclasses.asdict(v) for k, v in db.sequences.items()},
        "definitions": {k: dataclasses.asdict(v) for k, v in db.definitions.items()},
        "comments": {k: dataclasses.asdict(v) for k, v in db.comments.items()},
    }


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


def fingerprint(db: Database) -> str:
    """The digest of a schema model (its objects; not the dependency edges)."""
    return digest("schema-model", model_document(db))


@dataclass(frozen=True, slots=True)
class Planned:
    """The ordered changes and their statements, before a document is made of them."""

    changes: tuple[Change, ...]
    statements: tuple[PlanStatement, ...]

    def document(
        self, live: Database, desired: Database, expected: str, options: PlanOptions
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
) -> Planned:
    """Diff, order and render; raises :class:`PlanRefused` when the policy forbids the plan.

    ``differ`` is the shared :func:`~runner.engines.diff.diff` unless a dialect wraps it
    (SQLite turns what it cannot alter into table rebuilds; MySQL adds column moves).
    """
    changes = order(differ(live, desired), live, desired)
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
