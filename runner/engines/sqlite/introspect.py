"""Reading a SQLite database's schema into the shared model.

Sources: ``sqlite_schema`` (what exists, and its stored CREATE text), the pragmas
``table_xinfo`` (columns, types, defaults, NOT NULL, primary key, generated columns),
``table_list`` (STRICT, WITHOUT ROWID), ``index_list``/``index_info`` (UNIQUE constraints)
and ``foreign_key_list``; and the stored text, read by :mod:`~runner.engines.sqlite.sqltext`,
for what no pragma tells (CHECK, COLLATE, generation expressions, AUTOINCREMENT).

Reading is two steps: :func:`read_catalog` runs the queries (the :class:`Catalog`, plain
rows), :func:`model_of` makes the model of them; the engine can skip the second for a
catalog it has read before.

Everything lives in schema ``main``. Keys: ``table:main.t``, ``index:main.i``,
``view:main.v``, ``trigger:main.tr``, ``constraint:main.t.<name>`` where unnamed
constraints get a name derived from what they say (``unique(a,b)``, ``check_<digest>``),
so the same schema always has the same keys.

Dialect facts: ``Table.options`` holds ``strict``, ``without_rowid``, ``autoincrement``,
``constraints`` (the table constraints, normalized) and ``sql`` (the stored CREATE text the
table is rebuilt from; it is never compared); ``Column.extra`` holds ``def`` (the column's
whole definition, normalized) and ``generated`` (``stored`` or ``virtual``).
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass, fields
from typing import Any

from runner.engines.model import Column, Constraint, Database, Definition, Index, Table
from runner.engines.sqlite.sqltext import (
    Kind,
    TableText,
    ident,
    normalize,
    parse_create_table,
    tokens,
)
from runner.errors import CanNotRunError

__all__ = ["SCHEMA", "Catalog", "introspect", "model_of", "read_catalog", "server_major"]

SCHEMA = "main"
_NO_ACTION = "NO ACTION"


def server_major() -> int:
    """The SQLite library's major version (3)."""
    return int(sqlite3.sqlite_version.split(".")[0])


def _rows(conn: sqlite3.Connection, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return list(conn.execute(sql, args).fetchall())


def _grouped(conn: sqlite3.Connection, sql: str) -> dict[str, list[tuple[Any, ...]]]:
    """Rows by their first column (the rest of each row kept, in query order)."""
    groups: dict[str, list[tuple[Any, ...]]] = {}
    for row in _rows(conn, sql):
        groups.setdefault(str(row[0]), []).append(tuple(row[1:]))
    return groups


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


Rows = list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Catalog:
    """Everything introspection reads from the database: ``sqlite_schema``'s rows and the
    pragmas' rows, as SQLite returned them. The model is a function of these rows and the
    SQLite library's major version alone, so :meth:`document` can key a model read before
    (``SqliteEngine`` keeps it in the planning cache: an unchanged catalog is not read again,
    and its CREATE text not tokenized again)."""

    schema: Rows
    xinfo: dict[str, Rows]
    index_list: dict[str, Rows]
    unique_info: dict[str, Rows]
    foreign_keys: dict[str, Rows]
    table_list: dict[str, tuple[Any, Any]]

    def document(self) -> dict[str, object]:
        """The rows as JSON values (names, text, integers and nulls: what the pragmas
        return)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def read_catalog(conn: sqlite3.Connection) -> Catalog:
    """The rows the model of the ``main`` database behind ``conn`` is made from."""
    tables = "FROM sqlite_schema m JOIN {} p WHERE m.type = 'table'"
    try:
        return Catalog(
            schema=_rows(
                conn,
                "SELECT type, name, tbl_name, sql FROM sqlite_schema"
                " WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND sql IS NOT NULL"
                " ORDER BY type, name",
            ),
            # Every pragma in one query each (a query per table costs seconds at 1,000
            # tables).
            xinfo=_grouped(
                conn, "SELECT m.name, p.* " + tables.format("pragma_table_xinfo(m.name)")
            ),
            index_list=_grouped(
                conn,
                "SELECT m.name, p.* "
                + tables.format("pragma_index_list(m.name)")
                + " ORDER BY p.name",
            ),
            unique_info=_grouped(
                conn,
                "SELECT p.name, i.* "
                + tables.format("pragma_index_list(m.name)").replace(
                    " p ", " p JOIN pragma_index_info(p.name) i "
                )
                + " AND p.origin = 'u' ORDER BY p.name, i.seqno",
            ),
            foreign_keys=_grouped(
                conn, "SELECT m.name, p.* " + tables.format("pragma_foreign_key_list(m.name)")
            ),
            table_list={
                str(r[0]): (r[1], r[2])
                for r in _rows(
                    conn, "SELECT name, strict, wr FROM pragma_table_list WHERE schema = ?", SCHEMA
                )
            },
        )
    except sqlite3.Error as error:
        raise CanNotRunError(f"cannot read the SQLite schema: {error}") from None


class _Reader:
    def __init__(self, catalog: Catalog) -> None:
        self.tables: dict[str, Table] = {}
        self.constraints: dict[str, Constraint] = {}
        self.indexes: dict[str, Index] = {}
        self.definitions: dict[str, Definition] = {}
        self.depends: set[tuple[str, str]] = set()
        self.schema = catalog.schema
        self.xinfo = catalog.xinfo
        self.index_list = catalog.index_list
        self.unique_info = catalog.unique_info
        self.foreign_keys = catalog.foreign_keys
        self.table_list = catalog.table_list
        # Names are case-insensitive in SQLite: references resolve through lower case.
        self.names: dict[str, str] = {}
        for kind, name, _, _ in self.schema:
            if kind in ("table", "view"):
                self.names[name.lower()] = f"{kind}:{SCHEMA}.{name}"

    def key_of(self, name: str) -> str:
        return self.names.get(name.lower(), f"table:{SCHEMA}.{name}")

    def references(self, sql: str, own: str) -> set[str]:
        """Keys of the tables and views a definition's text names."""
        found = set()
        for piece in tokens(sql):
            if piece.kind in (Kind.IDENTIFIER, Kind.VAR):
                key = self.names.get(piece.text.lower())
                if key is not None and key != own:
                    found.add(key)
        return found

    # -- tables -----------------------------------------------------------------------

    def table(self, name: str, sql: str) -> None:
        key = f"table:{SCHEMA}.{name}"
        text = parse_create_table(sql)
        info = self.xinfo.get(name, [])
        parsed = {c.name.lower(): c for c in text.columns}
        columns: list[Column] = []
        for _cid, column_name, type_, notnull, default, _pk, hidden in info:
            written = parsed.get(str(column_name).lower())
            extra: list[tuple[str, str]] = []
            if written is not None:
                extra.append(("def", written.definition))
            if hidden in (2, 3):
                extra.append(("generated", "stored" if hidden == 3 else "virtual"))
            columns.append(
                Column(
                    name=str(column_name),
                    type=str(type_ or ""),
                    not_null=bool(notnull),
                    default=None if default is None else normalize(str(default)),
                    generated=written.generated if written is not None and hidden else None,
                    collation=written.collation if written is not None else None,
                    extra=tuple(sorted(extra)),
                )
            )
        strict, without_rowid = self.table_list.get(name, (0, 0))
        options = [("sql", sql)]
        if strict:
            options.append(("strict", "true"))
        if without_rowid:
            options.append(("without_rowid", "true"))
        if text.autoincrement:
            options.append(("autoincrement", "true"))
        if text.constraints:
            options.append(("constraints", " , ".join(text.constraints)))
        self.tables[key] = Table(SCHEMA, name, tuple(columns), options=tuple(sorted(options)))
        self.table_constraints(key, name, info, text)

    def add_constraint(self, constraint: Constraint) -> None:
        base, number = constraint.name, 1
        while constraint.key in self.constraints:
            number += 1
            constraint = Constraint(
                constraint.table,
                f"{base}_{number}",
                constraint.kind,
                constraint.definition,
                references=constraint.references,
                columns=constraint.columns,
            )
        self.constraints[constraint.key] = constraint

    def table_constraints(
        self, key: str, name: str, info: list[tuple[Any, ...]], text: TableText
    ) -> None:
        primary = [str(row[1]) for row in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        if primary:
            columns = ", ".join(ident(c) for c in primary)
            self.add_constraint(
                Constraint(
                    key, "primary_key", "p", f"PRIMARY KEY ({columns})", columns=tuple(primary)
                )
            )
        for _seq, index_name, _unique, origin, _partial in self.index_list.get(name, []):
            if origin != "u":
                continue
            members = [str(r[2]) for r in self.unique_info.get(index_name, [])]
            self.add_constraint(
                Constraint(
                    key,
                    f"unique({','.join(members)})",
                    "u",
                    f"UNIQUE ({', '.join(ident(c) for c in members)})",
                    columns=tuple(members),
                )
            )
        groups: dict[int, list[tuple[Any, ...]]] = {}
        for row in self.foreign_keys.get(name, []):
            groups.setdefault(int(row[0]), []).append(row)
        for rows in groups.values():
            rows.sort(key=lambda r: r[1])
            parent = str(rows[0][2])
            parent_key = self.key_of(parent)
            parent_name = parent_key.split(".", 1)[1]
            sources = [str(r[3]) for r in rows]
            targets = [str(r[4]) for r in rows if r[4] is not None]
            definition = (
                f"FOREIGN KEY ({', '.join(ident(c) for c in sources)}) REFERENCES "
                f"{ident(parent_name)}"
                + (f" ({', '.join(ident(c) for c in targets)})" if targets else "")
            )
            on_update, on_delete, match = rows[0][5], rows[0][6], rows[0][7]
            if on_update != _NO_ACTION:
                definition += f" ON UPDATE {on_update}"
            if on_delete != _NO_ACTION:
                definition += f" ON DELETE {on_delete}"
            if match not in (None, "NONE"):
                definition += f" MATCH {match}"
            self.add_constraint(
                Constraint(
                    key,
                    f"fk({','.join(sources)})->{parent_name}({','.join(targets)})",
                    "f",
                    definition,
                    references=parent_key,
                    columns=tuple(sources),
                )
            )
            if parent_key != key:
                self.depends.add((key, parent_key))
        checks = [c for column in text.columns for c in column.checks] + list(text.checks)
        for given, expression in checks:
            self.add_constraint(
                Constraint(
                    key, given or f"check_{_digest(expression)}", "c", f"CHECK ({expression})"
                )
            )

    # -- indexes, views, triggers -------------------------------------------------------

    def index(self, name: str, table: str, sql: str) -> None:
        key = f"index:{SCHEMA}.{name}"
        unique = any(r[1] == name and r[2] for r in self.index_list.get(table, []))
        table_key = self.key_of(table)
        self.indexes[key] = Index(SCHEMA, name, table_key, normalize(sql), unique=unique)
        self.depends.add((key, table_key))

    def definition(self, kind: str, name: str, sql: str, table: str | None = None) -> None:
        """A view, or a trigger on ``table``: kept as its ``CREATE`` text, depending on what
        that names (and a trigger on its table)."""
        key = f"{kind}:{SCHEMA}.{name}"
        owner = self.key_of(table) if table is not None else None
        self.definitions[key] = Definition(
            key=key,
            kind=kind,
            create=sql,
            drop=f"DROP {kind.upper()} {ident(name)}",
            definition=normalize(sql),
            table=owner,
        )
        uses = self.references(sql, key) | ({owner} if owner is not None else set())
        self.depends |= {(key, other) for other in uses}

    def read(self) -> Database:
        for kind, name, _, sql in self.schema:
            if kind == "table":
                self.table(str(name), str(sql))
        for kind, name, table, sql in self.schema:
            if kind == "index":
                self.index(str(name), str(table), str(sql))
            elif kind == "view":
                self.definition("view", str(name), str(sql))
            elif kind == "trigger":
                self.definition("trigger", str(name), str(sql), table=str(table))
        return Database(
            dialect="sqlite",
            server_major=server_major(),
            tables=dict(sorted(self.tables.items())),
            constraints=dict(sorted(self.constraints.items())),
            indexes=dict(sorted(self.indexes.items())),
            definitions=dict(sorted(self.definitions.items())),
            depends=frozenset(self.depends),
        )


def model_of(catalog: Catalog) -> Database:
    """The schema model ``catalog`` describes (its CREATE text read by
    :mod:`~runner.engines.sqlite.sqltext`)."""
    return _Reader(catalog).read()


def introspect(conn: sqlite3.Connection) -> Database:
    """The schema model of the ``main`` database behind ``conn``."""
    return model_of(read_catalog(conn))
