"""Spelling each change as PostgreSQL statements.

Safe forms by default: an index on a table that already holds rows is built
``CONCURRENTLY`` outside the transaction; a CHECK or FOREIGN KEY added to such a table is
added ``NOT VALID`` and validated afterwards (a brief lock, then a scan that lets reads and
writes continue); enum values are added with ``ADD VALUE`` in their own committed step. An
index a failed concurrent build left INVALID is dropped ``CONCURRENTLY`` and built again.
Nothing is dropped with ``CASCADE``: dependents are dropped explicitly, in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from runner.engines.changes import Change, Statement, UnsupportedChange, renderer_for
from runner.engines.model import Column, Comment, Constraint, Definition, Index, Sequence, Table
from runner.engines.postgresql.grants import GRANT_RENDERERS
from runner.engines.postgresql.quoting import ident, literal, qualified

__all__ = ["render"]


def _table_name(key: str) -> str:
    schema, name = key.split(":", 1)[1].split(".", 1)
    return qualified(schema, name)


def _column_sql(column: Column) -> str:
    sql = f"{ident(column.name)} {column.type}"
    if column.collation:
        sql += f" COLLATE {column.collation}"
    if column.generated is not None:
        sql += f" GENERATED ALWAYS AS ({column.generated}) STORED"
    elif column.identity:
        sql += f" GENERATED {column.identity} AS IDENTITY{_identity_options(column)}"
    elif column.default is not None:
        sql += f" DEFAULT {column.default}"
    if column.not_null:
        sql += " NOT NULL"
    return sql


def _identity_options(column: Column) -> str:
    return f" ({' '.join(column.identity_options)})" if column.identity_options else ""


def _create_table(change: Change) -> list[Statement]:
    table = change.new(Table)
    name = _table_name(table.key)
    unlogged = "UNLOGGED " if table.unlogged else ""
    if table.partition_of is not None:
        sql = f"CREATE {unlogged}TABLE {name} PARTITION OF {_table_name(table.partition_of)}"
        if table.columns:
            sql += " (" + ", ".join(_column_sql(c) for c in table.columns) + ")"
        sql += f" {table.partition_bound}"
    else:
        columns = ",\n    ".join(_column_sql(c) for c in table.columns)
        sql = (
            f"CREATE {unlogged}TABLE {name} (\n    {columns}\n)"
            if columns
            else (f"CREATE {unlogged}TABLE {name} ()")
        )
    if table.inherits:
        sql += f" INHERITS ({', '.join(_table_name(p) for p in table.inherits)})"
    if table.partition_key:
        sql += f" PARTITION BY {table.partition_key}"
    statements = [Statement(sql)]
    if table.row_security:
        statements.append(Statement(f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY"))
    if table.force_row_security:
        statements.append(Statement(f"ALTER TABLE {name} FORCE ROW LEVEL SECURITY"))
    return statements


def _alter(change: Change, action: str) -> list[Statement]:
    return [Statement(f"ALTER TABLE {_table_name(change.key)} {action}")]


def _add_column(change: Change) -> list[Statement]:
    return _alter(change, f"ADD COLUMN {_column_sql(change.subject(Column))}")


def _drop_column(change: Change) -> list[Statement]:
    return _alter(change, f"DROP COLUMN {ident(change.detail)}")


def _alter_column_type(change: Change) -> list[Statement]:
    """``USING`` only where an assignment cast is missing (:mod:`runner.engines.casts`): an
    explicit cast would silently truncate what an assignment cast refuses."""
    old, column = change.old(Column), change.new(Column)
    collate = f" COLLATE {column.collation}" if column.collation else ""
    name = ident(column.name)
    using = {
        "assignment": "",
        "explicit": f" USING {name}::{column.type}",
        "text": f" USING {name}::text::{column.type}",
    }.get(change.cast)
    if using is None:
        raise UnsupportedChange(
            change,
            f"column {column.name} cannot change type from {old.type} to {column.type}:"
            " PostgreSQL has no cast between them (change it in steps, or add a new column)",
        )
    return _alter(change, f"ALTER COLUMN {name} TYPE {column.type}{collate}{using}")


def _set_default(change: Change) -> list[Statement]:
    column = change.subject(Column)
    return _alter(change, f"ALTER COLUMN {ident(column.name)} SET DEFAULT {column.default}")


def _add_identity(change: Change) -> list[Statement]:
    column = change.subject(Column)
    return _alter(
        change,
        f"ALTER COLUMN {ident(column.name)} ADD GENERATED {column.identity} AS IDENTITY"
        + _identity_options(column),
    )


def _option_values(column: Column) -> dict[str, int]:
    """``START WITH``, ``MINVALUE`` and ``MAXVALUE`` of an identity column's options."""
    found: dict[str, int] = {}
    for option in column.identity_options:
        name, _, value = option.rpartition(" ")
        if name in ("START WITH", "MINVALUE", "MAXVALUE"):
            found[name] = int(value)
    return found


def _set_identity_options(change: Change) -> list[Statement]:
    """New identity options; when the new bounds exclude the old start, the sequence is
    moved to its new start in between, but only if it never gave out a value.

    ``ALTER SEQUENCE`` checks the sequence's current value against the new bounds; an
    identity that was never used sits on its old start ("RESTART value (-200) cannot be less
    than MINVALUE (-100)"). So the bounds are first widened to hold both, an unused
    sequence is set to the new start, and the bounds narrowed. A used sequence is never
    moved back: if its value is outside the new bounds, the last statement fails.
    """
    old, column = change.old(Column), change.new(Column)
    name = ident(column.name)
    options = " ".join(f"SET {option}" for option in column.identity_options)
    before, after = _option_values(old), _option_values(column)
    if len(before) < 3 or len(after) < 3:
        return _alter(change, f"ALTER COLUMN {name} {options}")
    start, low, high = after["START WITH"], after["MINVALUE"], after["MAXVALUE"]
    if low <= before["START WITH"] <= high:
        return _alter(change, f"ALTER COLUMN {name} {options}")
    wide_low, wide_high = min(low, before["MINVALUE"]), max(high, before["MAXVALUE"])
    widened = [o for o in column.identity_options if not o.startswith(("MINVALUE", "MAXVALUE"))]
    sequence = f"pg_get_serial_sequence({literal(_table_name(change.key))}, {literal(column.name)})"
    return [
        *_alter(
            change,
            f"ALTER COLUMN {name} "
            + " ".join(f"SET {o}" for o in widened)
            + f" SET MINVALUE {wide_low} SET MAXVALUE {wide_high}",
        ),
        Statement(
            f"SELECT setval(s.seq::regclass, {start}, false) FROM (SELECT {sequence} AS seq) s"
            " JOIN pg_catalog.pg_sequences p"
            " ON pg_catalog.format('%I.%I', p.schemaname, p.sequencename)::regclass"
            " = s.seq::regclass WHERE p.last_value IS NULL"
        ),
        *_alter(change, f"ALTER COLUMN {name} SET MINVALUE {low} SET MAXVALUE {high}"),
    ]


def _set_identity(change: Change) -> list[Statement]:
    column = change.subject(Column)
    return _alter(change, f"ALTER COLUMN {ident(column.name)} SET GENERATED {column.identity}")


def _alter_column(action: str) -> Callable[[Change], list[Statement]]:
    """The renderer of a change whose statement is ``ALTER COLUMN <its column> <action>``."""

    def render(change: Change) -> list[Statement]:
        return _alter(change, f"ALTER COLUMN {ident(change.detail)} {action}")

    return render


def _set_logged(change: Change) -> list[Statement]:
    return _alter(change, "SET UNLOGGED" if change.new(Table).unlogged else "SET LOGGED")


def _set_row_security(change: Change) -> list[Statement]:
    table = change.new(Table)
    return [
        *_alter(
            change,
            "ENABLE ROW LEVEL SECURITY" if table.row_security else "DISABLE ROW LEVEL SECURITY",
        ),
        *_alter(
            change,
            "FORCE ROW LEVEL SECURITY"
            if table.force_row_security
            else "NO FORCE ROW LEVEL SECURITY",
        ),
    ]


def _detach_partition(change: Change) -> list[Statement]:
    table = change.old(Table)
    parent = _table_name(table.partition_of or "")
    return [Statement(f"ALTER TABLE {parent} DETACH PARTITION {_table_name(table.key)}")]


def _attach_partition(change: Change) -> list[Statement]:
    table = change.new(Table)
    parent = _table_name(table.partition_of or "")
    attach = f"ATTACH PARTITION {_table_name(table.key)} {table.partition_bound}"
    return [Statement(f"ALTER TABLE {parent} {attach}")]


def _set_replica_identity(change: Change) -> list[Statement]:
    identity = dict(change.new(Table).options).get("replica_identity", "DEFAULT")
    return _alter(change, f"REPLICA IDENTITY {identity}")


def _inherit(change: Change) -> list[Statement]:
    return _alter(change, f"INHERIT {_table_name(change.detail)}")


def _no_inherit(change: Change) -> list[Statement]:
    return _alter(change, f"NO INHERIT {_table_name(change.detail)}")


def _drop_table(change: Change) -> list[Statement]:
    return [Statement(f"DROP TABLE {_table_name(change.key)}")]


def _add_constraint(change: Change) -> list[Statement]:
    constraint = change.new(Constraint)
    table = _table_name(constraint.table)
    name = ident(constraint.name)
    definition = constraint.definition
    # A partitioned table takes no NOT VALID constraint (PostgreSQL validates it through
    # its partitions): the constraint is added validated, in one step.
    deferred_validation = (
        change.existing_table
        and constraint.kind in ("c", "f")
        and constraint.validated
        and change.detail != "partitioned"
    )
    if deferred_validation:
        return [
            Statement(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition} NOT VALID"),
            Statement(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}"),
        ]
    return [Statement(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")]


def _drop_constraint(change: Change) -> list[Statement]:
    constraint = change.old(Constraint)
    return [
        Statement(
            f"ALTER TABLE {_table_name(constraint.table)} DROP CONSTRAINT {ident(constraint.name)}"
        )
    ]


def _create_index(change: Change) -> list[Statement]:
    index = change.new(Index)
    # Concurrent builds cannot run on a partitioned table, nor inside a transaction.
    if change.existing_table and " USING " in index.definition and not _on_partitioned(change):
        head, _, rest = index.definition.partition(" INDEX ")
        return [Statement(f"{head} INDEX CONCURRENTLY {rest}", transactional=False)]
    return [Statement(index.definition)]


def _on_partitioned(change: Change) -> bool:
    return change.detail == "partitioned"


def _drop_index(change: Change) -> list[Statement]:
    index = change.old(Index)
    if change.detail == "invalid":  # left by a failed concurrent build: nothing reads it
        return [
            Statement(
                f"DROP INDEX CONCURRENTLY {qualified(index.schema, index.name)}",
                transactional=False,
            )
        ]
    return [Statement(f"DROP INDEX {qualified(index.schema, index.name)}")]


def _sequence_options(sequence: Sequence) -> str:
    return (
        f" AS {sequence.data_type} INCREMENT BY {sequence.increment} MINVALUE {sequence.minimum}"
        f" MAXVALUE {sequence.maximum} START WITH {sequence.start} CACHE {sequence.cache}"
        f" {'CYCLE' if sequence.cycle else 'NO CYCLE'}"
    )


def _sequence_with_options(verb: str) -> Callable[[Change], list[Statement]]:
    def render(change: Change) -> list[Statement]:
        sequence = change.new(Sequence)
        name = qualified(sequence.schema, sequence.name)
        return [Statement(f"{verb} SEQUENCE {name}{_sequence_options(sequence)}")]

    return render


_create_sequence = _sequence_with_options("CREATE")
_alter_sequence = _sequence_with_options("ALTER")


def _set_sequence_owner(change: Change) -> list[Statement]:
    sequence = change.new(Sequence)
    if sequence.owned_by is None:
        owner = "NONE"
    else:
        schema, table, column = sequence.owned_by.removeprefix("column:").split(".", 2)
        owner = f"{qualified(schema, table)}.{ident(column)}"
    return [
        Statement(f"ALTER SEQUENCE {qualified(sequence.schema, sequence.name)} OWNED BY {owner}")
    ]


def _drop_sequence(change: Change) -> list[Statement]:
    sequence = change.old(Sequence)
    return [Statement(f"DROP SEQUENCE {qualified(sequence.schema, sequence.name)}")]


def _create_definition(change: Change) -> list[Statement]:
    return [Statement(change.subject(Definition).create)]


def _replace_definition(change: Change) -> list[Statement]:
    definition = change.subject(Definition)
    if definition.replace is None:
        raise UnsupportedChange(change, "cannot be replaced in place")
    return [Statement(definition.replace)]


def _drop_definition(change: Change) -> list[Statement]:
    return [Statement(change.subject(Definition).drop)]


def _add_enum_values(change: Change) -> list[Statement]:
    old, new = change.old(Definition), change.new(Definition)
    before = json.loads(old.fact("labels") or "[]")
    after = json.loads(new.fact("labels") or "[]")
    name = new.key.split(":", 1)[1].split(".", 1)
    statements: list[Statement] = []
    for position, label in enumerate(after):
        if label in before:
            continue
        where = (
            f" AFTER {literal(after[position - 1])}"
            if position > 0
            else (f" BEFORE {literal(after[1])}" if len(after) > 1 else "")
        )
        statements.append(
            Statement(
                f"ALTER TYPE {qualified(*name)} ADD VALUE {literal(label)}{where}",
                transactional=False,
            )
        )
    return statements


def _alter_domain(change: Change) -> list[Statement]:
    old, new = change.old(Definition), change.new(Definition)
    a = json.loads(old.fact("facts") or "{}")
    b = json.loads(new.fact("facts") or "{}")
    name = qualified(*new.key.split(":", 1)[1].split(".", 1))
    out: list[Statement] = []
    for constraint in sorted(a["checks"]):
        if constraint not in b["checks"] or a["checks"][constraint] != b["checks"][constraint]:
            out.append(Statement(f"ALTER DOMAIN {name} DROP CONSTRAINT {ident(constraint)}"))
    if a["default"] != b["default"]:
        out.append(
            Statement(
                f"ALTER DOMAIN {name} DROP DEFAULT"
                if b["default"] is None
                else f"ALTER DOMAIN {name} SET DEFAULT {b['default']}"
            )
        )
    if a["notnull"] != b["notnull"]:
        out.append(Statement(f"ALTER DOMAIN {name} {'SET' if b['notnull'] else 'DROP'} NOT NULL"))
    for constraint in sorted(b["checks"]):
        if constraint not in a["checks"] or a["checks"][constraint] != b["checks"][constraint]:
            definition, validated = b["checks"][constraint]
            suffix = "" if validated else " NOT VALID"
            out.append(
                Statement(
                    f"ALTER DOMAIN {name} ADD CONSTRAINT {ident(constraint)} {definition}{suffix}"
                )
            )
    return out


def _alter_extension(change: Change) -> list[Statement]:
    new = change.subject(Definition)
    name, schema = new.definition.split(" ", 1)
    return [Statement(f"ALTER EXTENSION {ident(name)} SET SCHEMA {ident(schema)}")]


def _set_comment(change: Change) -> list[Statement]:
    comment = change.new(Comment)
    return [Statement(f"COMMENT ON {comment.target} IS {literal(comment.text)}")]


def _drop_comment(change: Change) -> list[Statement]:
    comment = change.old(Comment)
    return [Statement(f"COMMENT ON {comment.target} IS NULL")]


# -- renames (runner/engines/renamed.py): each names the object by its old name ------------


def _rename_table(change: Change) -> list[Statement]:
    old, new = change.old(Table), change.new(Table)
    return [Statement(f"ALTER TABLE {_table_name(old.key)} RENAME TO {ident(new.name)}")]


def _rename_column(change: Change) -> list[Statement]:
    old, new = change.old(Column), change.new(Column)
    return _alter(change, f"RENAME COLUMN {ident(old.name)} TO {ident(new.name)}")


def _rename_index(change: Change) -> list[Statement]:
    old, new = change.old(Index), change.new(Index)
    return [Statement(f"ALTER INDEX {qualified(old.schema, old.name)} RENAME TO {ident(new.name)}")]


def _rename_constraint(change: Change) -> list[Statement]:
    old, new = change.old(Constraint), change.new(Constraint)
    rename = f"RENAME CONSTRAINT {ident(old.name)} TO {ident(new.name)}"
    return [Statement(f"ALTER TABLE {_table_name(new.table)} {rename}")]


def _rename_enum_value(change: Change) -> list[Statement]:
    old, new = change.old(Definition), change.new(Definition)
    before = json.loads(old.fact("labels") or "[]")
    after = json.loads(new.fact("labels") or "[]")
    was, now = next((a, b) for a, b in zip(before, after, strict=True) if a != b)
    rename = f"RENAME VALUE {literal(was)} TO {literal(now)}"
    return [Statement(f"ALTER TYPE {_table_name(new.key)} {rename}")]


def _rename_sequence(change: Change) -> list[Statement]:
    old, new = change.old(Sequence), change.new(Sequence)
    return [
        Statement(f"ALTER SEQUENCE {qualified(old.schema, old.name)} RENAME TO {ident(new.name)}")
    ]


def _rename_type(change: Change) -> list[Statement]:
    old, new = change.old(Definition), change.new(Definition)
    name = new.key.split(":", 1)[1].split(".", 1)[1]
    return [Statement(f"ALTER TYPE {_table_name(old.key)} RENAME TO {ident(name)}")]


RENDERERS: dict[str, Callable[[Change], list[Statement]]] = {
    "rename_table": _rename_table,
    "rename_column": _rename_column,
    "rename_index": _rename_index,
    "rename_constraint": _rename_constraint,
    "rename_type": _rename_type,
    "rename_sequence": _rename_sequence,
    "rename_enum_value": _rename_enum_value,
    "create_table": _create_table,
    "drop_table": _drop_table,
    "add_column": _add_column,
    "drop_column": _drop_column,
    "alter_column_type": _alter_column_type,
    "set_default": _set_default,
    "drop_default": _alter_column("DROP DEFAULT"),
    "drop_expression": _alter_column("DROP EXPRESSION"),
    "add_identity": _add_identity,
    "set_identity": _set_identity,
    "set_identity_options": _set_identity_options,
    "drop_identity": _alter_column("DROP IDENTITY"),
    "set_not_null": _alter_column("SET NOT NULL"),
    "drop_not_null": _alter_column("DROP NOT NULL"),
    "set_logged": _set_logged,
    "inherit": _inherit,
    "no_inherit": _no_inherit,
    "set_row_security": _set_row_security,
    "set_replica_identity": _set_replica_identity,
    "detach_partition": _detach_partition,
    "attach_partition": _attach_partition,
    "add_constraint": _add_constraint,
    "drop_constraint": _drop_constraint,
    "create_index": _create_index,
    "drop_index": _drop_index,
    "create_sequence": _create_sequence,
    "alter_sequence": _alter_sequence,
    "set_sequence_owner": _set_sequence_owner,
    "drop_sequence": _drop_sequence,
    "create_definition": _create_definition,
    "replace_definition": _replace_definition,
    "drop_definition": _drop_definition,
    "add_enum_values": _add_enum_values,
    "alter_domain": _alter_domain,
    "alter_extension": _alter_extension,
    "set_comment": _set_comment,
    "drop_comment": _drop_comment,
    **GRANT_RENDERERS,
}
"""The change-class -> render-function table (one entry per op the differ emits)."""


def render(change: Change) -> list[Statement]:
    """The statements that carry out ``change`` on PostgreSQL."""
    return renderer_for(RENDERERS, change, "PostgreSQL")(change)
