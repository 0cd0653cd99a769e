"""The bounded drift report: what differs between the live and the desired schema.

Aggregates only (counts per category, the highest severity, a digest of the object keys), so
a report can be stored in a status file without leaking table contents or SQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from runner.digests import digest
from runner.engines.changes import Change
from runner.engines.hazards import hazards_of
from runner.engines.model import Constraint, Index

__all__ = ["drift_report"]


def drift_report(changes: Sequence[Change], dialect: str) -> dict[str, object]:
    """Digest, total, highest severity and per-category counts of what differs.

    Counted per object: missing (only in the desired schema), extra (only in the live one),
    changed, and invalid (a constraint left NOT VALID where the desired one is validated, or
    an index a failed concurrent build left INVALID where the desired one is the same).
    Objects the plan would merely rebuild because something they depend on changes are not
    drift and are not counted.
    """
    by_key: dict[str, list[Change]] = {}
    for change in changes:
        by_key.setdefault(change.key, []).append(change)
    categories = {"missing": 0, "extra": 0, "changed": 0, "invalid": 0}
    severity = "none"
    counted: list[list[str]] = []
    for key, group in sorted(by_key.items()):
        ops = {c.op for c in group}
        befores = [c.before for c in group if c.before is not None]
        afters = [c.after for c in group if c.after is not None]
        if ops == {"drop_definition", "create_definition"} and befores == afters:
            continue  # rebuilt for a dependency, not drifted
        if ops <= {"drop_definition", "create_definition"} and all(
            c.detail == "rebuilt" for c in group
        ):
            continue  # created again with its replaced table, unchanged
        if all(c.before is None for c in group) and ops <= {
            "create_table",
            "create_definition",
            "create_index",
            "create_sequence",
            "add_constraint",
            "set_comment",
        }:
            categories["missing"] += 1
        elif all(c.after is None for c in group) and all(c.op.startswith("drop_") for c in group):
            categories["extra"] += 1
        elif _only_validation(group):
            categories["invalid"] += 1
        else:
            categories["changed"] += 1
        counted.append([key, *sorted(ops)])
        for change in group:
            if any(h.kind == "destructive" for h in hazards_of(change)):
                severity = "destructive"
            elif severity == "none":
                severity = "warning"
    return {
        "digest": digest("drift", {"objects": counted}),
        "dialect": dialect,
        "total": len(counted),
        "highestSeverity": severity,
        "categories": categories,
    }


def _only_validation(group: Sequence[Change]) -> bool:
    indexes = [c.before for c in group if isinstance(c.before, Index)]
    built = [c.after for c in group if isinstance(c.after, Index)]
    if len(indexes) == len(built) == 1 and not indexes[0].valid:
        return indexes[0].definition == built[0].definition
    befores = [c.before for c in group if isinstance(c.before, Constraint)]
    afters = [c.after for c in group if isinstance(c.after, Constraint)]
    return (
        len(befores) == len(afters) == 1
        and not befores[0].validated
        and afters[0].validated
        and befores[0].definition == afters[0].definition
    )
