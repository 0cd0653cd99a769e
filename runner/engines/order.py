"""Putting changes in a deterministic, dependency-respecting order.

Phases come first (:class:`~runner.engines.changes.Phase`). Inside the drop phase a change
runs before the changes of what it depends on in the *live* database (dependents are
dropped first); inside the other phases after the changes of what it depends on in the
*desired* database. Dependencies through objects the plan does not touch still count
(a new view on an unchanged view on a new function waits for the function).

Ties are broken by (kind rank, key, op rank), never by set or dict order, so the same two
models always give the same statement order. A dependency cycle (which a consistent
catalog cannot produce) is broken at its smallest change rather than looping.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable

from runner.engines.changes import Change, Phase
from runner.engines.model import Database
from runner.engines.privileges import PRIVILEGE_OPS

__all__ = ["order"]

KIND_RANK = {
    "schema": 0,
    "extension": 1,
    "collation": 2,
    "type": 2,
    "sequence": 3,
    "function": 4,
    "table": 5,
    "constraint": 6,
    "index": 7,
    "view": 8,
    "matview": 9,
    "trigger": 10,
    "policy": 11,
    "comment": 12,
    "owner": 13,
    "grant": 14,
    "default_grant": 15,
}
OP_RANK = {
    op: rank
    for rank, op in enumerate(
        [
            "no_inherit",
            "detach_partition",
            "drop_definition",
            "drop_index",
            "drop_constraint",
            "drop_default",
            "drop_expression",
            "drop_identity",
            "drop_column",
            "drop_table",
            "drop_sequence",
            "add_enum_values",
            "create_definition",
            "replace_definition",
            "alter_domain",
            "alter_extension",
            "create_sequence",
            "alter_sequence",
            "create_table",
            "alter_column_type",  # before new columns: a generated one may read it
            "add_column",
            "set_default",
            "drop_not_null",
            "set_not_null",
            "add_identity",
            "set_identity",
            "set_identity_options",
            "set_logged",
            "set_row_security",
            "inherit",
            "attach_partition",
            "add_constraint",
            "create_index",
            "validate_constraint",
            "set_sequence_owner",
            "set_replica_identity",
            "set_comment",
            "drop_comment",
            *PRIVILEGE_OPS,
        ]
    )
}


def _rank(change: Change) -> tuple[int, int, str, int, int, str]:
    kind = change.key.split(":", 1)[0]
    return (
        int(change.phase),
        KIND_RANK.get(kind, 99),
        change.key,
        OP_RANK.get(change.op, 99),
        change.position,
        change.detail,
    )


def _reachable(start: str, edges: dict[str, set[str]], wanted: set[str]) -> set[str]:
    """Keys in ``wanted`` reachable from ``start`` along ``edges`` (not ``start`` itself)."""
    found: set[str] = set()
    seen = {start}
    stack = sorted(edges.get(start, ()))
    while stack:
        key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        if key in wanted:
            found.add(key)
        stack.extend(sorted(edges.get(key, ())))
    return found


def _edges(depends: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for dependent, dependency in depends:
        edges[dependent].add(dependency)
    return edges


def _sorted_phase(changes: list[Change], edges: dict[str, set[str]], reverse: bool) -> list[Change]:
    by_key: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        by_key[change.key].append(change)
    keys = set(by_key)
    after: dict[str, set[str]] = defaultdict(set)  # key -> keys that must run first
    for key in sorted(keys):
        for other in _reachable(key, edges, keys):
            if reverse:
                after[other].add(key)  # a dependent is dropped before its dependency
            else:
                after[key].add(other)
    waiting = {key: len(after[key]) for key in keys}
    unlocks: dict[str, set[str]] = defaultdict(set)
    for key, firsts in after.items():
        for first in firsts:
            unlocks[first].add(key)
    ready = [(_rank(min(by_key[k], key=_rank)), k) for k in keys if waiting[k] == 0]
    heapq.heapify(ready)
    result: list[Change] = []
    done: set[str] = set()
    while len(done) < len(keys):
        if not ready:  # a cycle: release its smallest member
            key = min(
                (k for k in keys if k not in done), key=lambda k: _rank(min(by_key[k], key=_rank))
            )
            waiting[key] = 0
            heapq.heappush(ready, (_rank(min(by_key[key], key=_rank)), key))
        _, key = heapq.heappop(ready)
        if key in done:
            continue
        done.add(key)
        result.extend(sorted(by_key[key], key=_rank))
        for later in sorted(unlocks[key]):
            waiting[later] -= 1
            if waiting[later] == 0:
                heapq.heappush(ready, (_rank(min(by_key[later], key=_rank)), later))
    return result


def _owned_by_dropped(changes: list[Change], live: Database) -> set[tuple[str, str]]:
    """(table, what a sub-object of it uses) for every table the plan drops: its triggers,
    policies, constraints and indexes go with it, not in changes of their own, so what
    they use (a trigger's function) is dropped only after the table. What they use among
    the dropped tables (a partition a primary key's index reaches) is no such reason."""
    dropped = {c.key for c in changes if c.op == "drop_table"}
    owners = {k: c.table for k, c in live.constraints.items()}
    owners |= {k: i.table for k, i in live.indexes.items()}
    owners |= {k: d.table for k, d in live.definitions.items() if d.table}
    return {
        (owners[dependent], dependency)
        for dependent, dependency in live.depends
        if owners.get(dependent) in dropped and dependency not in dropped
    }


def order(changes: list[Change], live: Database, desired: Database) -> list[Change]:
    """``changes`` in execution order (see the module docstring)."""
    live_edges = _edges(live.depends | _owned_by_dropped(changes, live))
    desired_edges = _edges(desired.depends)
    result: list[Change] = []
    for phase in Phase:
        members = [c for c in changes if c.phase is phase]
        if phase in (Phase.DROP, Phase.RELEASE):
            result += _sorted_phase(members, live_edges, reverse=True)
        else:
            result += _sorted_phase(members, desired_edges, reverse=False)
    return result
