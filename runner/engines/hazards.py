"""Judging how risky each change is, from the structured change alone (never from SQL).

Four kinds, each with stable codes:

* ``destructive``: data or integrity is lost (a dropped table, column or sequence, a
  narrowing type change, a removed enum value). A plan is destructive if any change is.
* ``data``: may fail on the rows already there (SET NOT NULL, a new unique index or
  constraint, a new CHECK or FOREIGN KEY on an existing table).
* ``lock``: blocks others while it runs (a table rewrite, an ACCESS EXCLUSIVE scan, an index
  build that blocks writes, an unchanged dependent dropped and created again because something
  it uses is replaced: ``DEPENDENT_REBUILT``, on the dependent's own statements).
* ``privilege``: changes who may see or do what (row security, policies, security definer
  functions, grants, revokes, owners). Such plans always need an approval. A revoke is also
  ``destructive``: like a drop, it can break whatever relied on the access.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.engines.changes import Change
from runner.engines.model import Column, Constraint, Definition, Index

__all__ = ["Hazard", "hazards_of", "is_narrowing"]


@dataclass(frozen=True, slots=True, order=True)
class Hazard:
    kind: str  # destructive | data | lock | privilege
    code: str


_ROUTINES = frozenset({"function", "procedure"})
"""Kinds that may run with their definer's privileges (``SECURITY DEFINER``)."""

_INTEGER_RANK = {"smallint": 1, "integer": 2, "bigint": 3}
_PARAM = re.compile(
    r"^(?P<base>[a-z ]+?)(?:\((?P<args>[0-9, ]+)\))?(?P<rest>( with(out)? time zone)?)$"
)


def _parse(type_: str) -> tuple[str, tuple[int, ...]]:
    match = _PARAM.match(type_)
    if match is None:
        return type_, ()
    args = tuple(int(a) for a in (match["args"] or "").replace(" ", "").split(",") if a)
    return match["base"] + (match["rest"] or ""), args


_MYSQL_INTEGERS = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 5}
_MYSQL_TEXTS = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}
_MYSQL_TYPE = re.compile(
    r"^(?P<base>tinyint|smallint|mediumint|int|bigint|varchar|char|decimal|tinytext|text"
    r"|mediumtext|longtext)(?:\((?P<args>[0-9,]+)\))?(?P<unsigned> unsigned)?( zerofill)?$"
)


def _mysql_narrowing(old: str, new: str) -> bool | None:
    """The verdict for MySQL type spellings (``int(11)``, ``varchar(20)``, ``decimal(10,2)``,
    ``mediumtext``, ``unsigned``), which PostgreSQL never prints; ``None`` for other types.
    """
    a, b = _MYSQL_TYPE.match(old), _MYSQL_TYPE.match(new)
    mysql_only = ("(", " unsigned", "tinyint", "mediumint", "tinytext", "mediumtext", "longtext")
    if a is None or b is None or not any(m in old + new for m in mysql_only):
        return None
    base_a, base_b = a["base"], b["base"]
    args_a = [int(x) for x in (a["args"] or "").split(",") if x]
    args_b = [int(x) for x in (b["args"] or "").split(",") if x]
    if base_a in _MYSQL_INTEGERS and base_b in _MYSQL_INTEGERS:
        rank_a, rank_b = _MYSQL_INTEGERS[base_a], _MYSQL_INTEGERS[base_b]
        if a["unsigned"] and not b["unsigned"]:
            return rank_b <= rank_a
        return bool(b["unsigned"] and not a["unsigned"]) or rank_b < rank_a
    if base_a in ("varchar", "char") and base_b in ("varchar", "char"):
        return (base_a, base_b) == ("varchar", "char") or args_b[:1] < args_a[:1]
    if base_a in ("varchar", "char") and base_b in _MYSQL_TEXTS:
        return _MYSQL_TEXTS[base_b] < (args_a[0] if args_a else 1) * 4
    if base_a in _MYSQL_TEXTS and base_b in _MYSQL_TEXTS:
        return _MYSQL_TEXTS[base_b] < _MYSQL_TEXTS[base_a]
    if base_a == base_b == "decimal":
        p_a, s_a = [*args_a, 0][:2] if args_a else (10, 0)
        p_b, s_b = [*args_b, 0][:2] if args_b else (10, 0)
        return s_b < s_a or (p_b - s_b) < (p_a - s_a)
    return True


def is_narrowing(old: str, new: str) -> bool:
    """True unless ``old`` -> ``new`` is known to keep every value (a widening)."""
    if old == new:
        return False
    if old.endswith("[]") and new.endswith("[]"):
        return is_narrowing(old.removesuffix("[]"), new.removesuffix("[]"))
    if (mysql := _mysql_narrowing(old, new)) is not None:
        return mysql
    (a, a_args), (b, b_args) = _parse(old), _parse(new)
    if a in _INTEGER_RANK and b in _INTEGER_RANK:
        return _INTEGER_RANK[b] < _INTEGER_RANK[a]
    if a in _INTEGER_RANK and b == "numeric":
        return bool(b_args)  # unconstrained numeric holds any integer
    if a in ("character varying", "character") and b == "text":
        return False
    if a == b == "character varying" or a == b == "character":
        return bool(b_args) and (not a_args or b_args[0] < a_args[0])
    if a == "character" and b == "character varying":
        return bool(b_args) and (not a_args or b_args[0] < a_args[0])
    if a == b == "numeric":
        if not b_args:
            return False
        if not a_args:
            return True
        a_scale = a_args[1] if len(a_args) > 1 else 0
        b_scale = b_args[1] if len(b_args) > 1 else 0
        return b_scale < a_scale or (b_args[0] - b_scale) < (a_args[0] - a_scale)
    if a == b and a.startswith(("timestamp", "time", "interval")):
        return bool(b_args) and (not a_args or b_args[0] < a_args[0])
    if a == "real" and b == "double precision":
        return False
    return b != "text"


def _binary_compatible(old: str, new: str) -> bool:
    """A type change PostgreSQL makes without rewriting the table."""
    (a, a_args), (b, b_args) = _parse(old), _parse(new)
    if a in ("character varying",) and b in ("character varying", "text"):
        return not b_args or (bool(a_args) and b_args[0] >= a_args[0])
    if a == b == "numeric" and a_args and b_args and len(a_args) == len(b_args) == 2:
        return a_args[1] == b_args[1] and b_args[0] >= a_args[0]
    return a == "text" and b == "character varying" and not b_args


_PRIVILEGE_CODES = {
    "grant": "GRANT",
    "revoke": "REVOKE",
    "revoke_grant_option": "REVOKE",
    "set_owner": "OWNER_CHANGE",
}


def hazards_of(change: Change) -> list[Hazard]:
    """Every hazard of ``change``, sorted."""
    found: set[Hazard] = set()
    op = change.op

    def add(kind: str, code: str) -> None:
        found.add(Hazard(kind, code))

    if op == "drop_table":
        add("destructive", "DROP_TABLE")
    elif op == "drop_column":
        add("destructive", "DROP_COLUMN")
    elif op == "drop_sequence":
        add("destructive", "DROP_SEQUENCE")
    elif op == "alter_column_type":
        old, new = change.old(Column), change.new(Column)
        if is_narrowing(old.type, new.type):
            add("destructive", "NARROWING_TYPE")
        if not _binary_compatible(old.type, new.type) or old.collation != new.collation:
            add("lock", "TABLE_REWRITE")
    elif op == "add_column":
        column = change.new(Column)
        if (
            column.not_null
            and column.default is None
            and not column.identity
            and (column.generated is None)
        ):
            add("data", "DATA_DEPENDENT_NOT_NULL")
        if column.generated is not None or column.identity:
            add("lock", "TABLE_REWRITE")
    elif op == "attach_partition":  # every row is checked against the bounds
        add("data", "DATA_DEPENDENT_CHECK")
        add("lock", "LOCK_ACCESS_EXCLUSIVE_SCAN")
    elif op == "set_not_null":
        add("data", "DATA_DEPENDENT_NOT_NULL")
        add("lock", "LOCK_ACCESS_EXCLUSIVE_SCAN")
    elif op == "add_constraint":
        constraint = change.new(Constraint)
        if change.existing_table:
            code = {"p": "UNIQUE", "u": "UNIQUE", "x": "UNIQUE", "c": "CHECK", "f": "FK"}
            add("data", f"DATA_DEPENDENT_{code[constraint.kind]}")
            if constraint.kind in ("p", "u", "x"):
                add("lock", "LOCK_SHARE_BLOCKS_WRITES")
    elif op == "create_index":
        index = change.new(Index)
        if change.existing_table and index.unique:
            add("data", "DATA_DEPENDENT_UNIQUE")
        if change.existing_table and change.detail == "partitioned":
            add("lock", "LOCK_SHARE_BLOCKS_WRITES")
    elif op == "drop_definition":
        definition = change.old(Definition)
        if definition.kind == "matview":
            add("destructive", "DROP_MATERIALIZED_VIEW")
        if definition.kind == "policy":
            add("privilege", "ROW_SECURITY")
        if definition.kind == "enum" and change.after is None:
            add("destructive", "DROP_TYPE")
    if op in ("drop_definition", "create_definition") and change.detail == "rebuilt":
        add("lock", "DEPENDENT_REBUILT")
    if op == "set_row_security":
        add("privilege", "ROW_SECURITY")
    if op in ("create_definition", "replace_definition"):
        definition = change.new(Definition)
        if definition.kind == "policy":
            add("privilege", "ROW_SECURITY")
        if definition.kind in _ROUTINES and definition.fact("security_definer") == "true":
            add("privilege", "SECURITY_DEFINER")
    if op == "create_table":
        table = change.after
        if getattr(table, "row_security", False):
            add("privilege", "ROW_SECURITY")
    if op in _PRIVILEGE_CODES:
        add("privilege", _PRIVILEGE_CODES[op])
    if op in ("revoke", "revoke_grant_option"):
        add("destructive", "REVOKE")
    if op == "rebuild_table":
        add("lock", "TABLE_REBUILD")
    # A composite change has the hazards of what it stands for; its own lock replaces theirs.
    for part in change.parts:
        found.update(h for h in hazards_of(part) if h.kind != "lock")
    return sorted(found)
