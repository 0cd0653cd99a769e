"""Reading a MySQL or MariaDB database into the engine's object model.

Everything comes from ``information_schema`` in one session. Keys use the fixed schema name
:data:`SCHEMA` instead of the database's name, so a shadow schema holding the same objects
reads exactly like the target: ``table:db.orders``, ``index:db.orders.orders_status_idx``
(index names are per table here), ``constraint:db.orders.orders_ibfk_1``, ``view:db.v``.
Definitions that name the database itself (view bodies) have that qualifier removed.

Modelled: tables with their options (engine, charset, collation, comment, row format; never
the AUTO_INCREMENT counter), columns in order (the order is part of the model here), types,
collations, defaults, ON UPDATE, AUTO_INCREMENT, generated columns, column comments and
column-level checks (``Column.extra``), primary keys, unique, ordinary, FULLTEXT and SPATIAL
indexes with prefix lengths and direction, foreign keys, table checks, views, triggers,
events, stored procedures and functions, partitioning, and the definer of every object that
runs as one (see :mod:`.definers`). Grants of managed accounts are added by :mod:`.acl`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from typing import Any

from runner.engines.model import Column, Constraint, Database, Definition, Index, Table
from runner.engines.mysql.connection import rows
from runner.engines.mysql.definers import body_of, with_definer
from runner.engines.mysql.quoting import ident, literal

__all__ = ["SCHEMA", "RoutineNotVisible", "flavor", "introspect"]

SCHEMA = "db"
"""The schema name in every key, whatever the database is called."""

_LITERAL_DEFAULT = re.compile(r"^(-?[0-9.]+(e[-+]?[0-9]+)?|'.*'|[bx]'[0-9a-fA-F]*'|NULL)$", re.S)


def flavor(conn: Any) -> tuple[str, int, str]:
    """(``mariadb`` or ``mysql``, major version, full version)."""
    version = str(rows(conn, "SELECT VERSION()")[0][0])
    name = "mariadb" if "mariadb" in version.lower() else "mysql"
    return name, int(version.split(".", 1)[0]), version


def _table_key(name: str) -> str:
    return f"table:{SCHEMA}.{name}"


def _strip_schema(text: str, database: str) -> str:
    """``text`` without qualifiers naming ``database`` (``\\`db\\`.\\`t\\``` -> ``\\`t\\```)."""
    return text.replace(ident(database) + ".", "")


class _Reader:
    def __init__(self, conn: Any, database: str) -> None:
        self.conn = conn
        self.db = database
        self.dialect, self.major, _ = flavor(conn)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return rows(self.conn, sql, (self.db,))

    # -- tables and columns --------------------------------------------------------------

    def column_checks(self) -> dict[tuple[str, str], str]:
        if self.dialect != "mariadb":
            return {}
        found: dict[tuple[str, str], str] = {}
        for table, name, clause in self.query(
            "SELECT TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema"
            ".CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = %s AND LEVEL = 'Column'"
        ):
            found[(str(table), str(name))] = str(clause)
        return found

    def tables(self) -> dict[str, Table]:
        options: dict[str, list[tuple[str, str]]] = {}
        for name, engine, collation, comment, create_options in self.query(
            "SELECT TABLE_NAME, ENGINE, TABLE_COLLATION, TABLE_COMMENT, CREATE_OPTIONS"
            " FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s"
            " AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME"
        ):
            facts = [("engine", str(engine or ""))]
            if collation:
                facts.append(("collation", str(collation)))
            if comment:
                facts.append(("comment", str(comment)))
            for option in str(create_options or "").split():
                key, _, value = option.partition("=")
                if value and key.lower() != "partitioned":
                    facts.append((key.strip("`").lower(), value))
            options[str(name)] = sorted(facts)
        checks = self.column_checks()
        columns: dict[str, list[Column]] = defaultdict(list)
        generated_sql = (
            "IS_GENERATED, GENERATION_EXPRESSION"
            if self.dialect == "mariadb"
            else "IF(GENERATION_EXPRESSION = '', 'NEVER', 'ALWAYS'), GENERATION_EXPRESSION"
        )
        for (
            table,
            name,
            column_type,
            nullable,
            default,
            extra,
            collation,
            comment,
            is_generated,
            expression,
        ) in self.query(
            "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA,"
            f" COLLATION_NAME, COLUMN_COMMENT, {generated_sql}"
            " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s"
            " ORDER BY TABLE_NAME, ORDINAL_POSITION"
        ):
            if str(table) not in options:
                continue  # a view's columns
            columns[str(table)].append(
                self.column(
                    str(table),
                    str(name),
                    str(column_type),
                    nullable == "YES",
                    default,
                    str(extra or ""),
                    collation,
                    str(comment or ""),
                    is_generated == "ALWAYS",
                    expression,
                    checks,
                )
            )
        return {
            _table_key(name): Table(
                schema=SCHEMA, name=name, columns=tuple(columns[name]), options=tuple(facts)
            )
            for name, facts in options.items()
        }

    def column(
        self,
        table: str,
        name: str,
        column_type: str,
        nullable: bool,
        default: Any,
        extra: str,
        collation: Any,
        comment: str,
        is_generated: bool,
        expression: Any,
        checks: dict[tuple[str, str], str],
    ) -> Column:
        facts: list[tuple[str, str]] = []
        lowered = extra.lower()
        if "auto_increment" in lowered:
            facts.append(("auto_increment", "true"))
        if match := re.search(r"on update (\S+)", extra, re.IGNORECASE):
            facts.append(("on_update", match.group(1).lower()))
        if "invisible" in lowered:
            facts.append(("invisible", "true"))
        if comment:
            facts.append(("comment", comment))
        if (table, name) in checks:
            facts.append(("check", checks[(table, name)]))
        generated: str | None = None
        if is_generated:
            generated = str(expression)
            facts.append(("generated", "STORED" if "stored" in lowered else "VIRTUAL"))
        text_default: str | None = None
        if default is not None and not is_generated:
            text_default = str(default)
            if self.dialect == "mysql":
                # MySQL prints literals unquoted; expressions are marked DEFAULT_GENERATED.
                if "default_generated" not in lowered and not text_default.upper().startswith(
                    "CURRENT_TIMESTAMP"
                ):
                    text_default = literal(text_default)
            elif text_default == "NULL":
                text_default = None
        return Column(
            name=name,
            type=column_type,
            not_null=not nullable,
            default=text_default,
            generated=generated,
            collation=str(collation) if collation else None,
            extra=tuple(sorted(facts)),
        )

    def show_create(self, tables: list[str]) -> dict[str, str]:
        """``SHOW CREATE TABLE`` of each table: what ``information_schema`` leaves out."""
        found: dict[str, str] = {}
        for name in tables:
            found[name] = str(
                rows(self.conn, f"SHOW CREATE TABLE {ident(self.db)}.{ident(name)}")[0][1]
            )
        return found

    # -- keys, indexes and constraints ---------------------------------------------------

    def indexes(
        self, using: dict[tuple[str, str], str]
    ) -> tuple[dict[str, Constraint], dict[str, Index]]:
        parts: dict[tuple[str, str], list[str]] = defaultdict(list)
        kinds: dict[tuple[str, str], tuple[bool, str, str]] = {}
        collation_col = "COLLATION"
        for table, name, non_unique, column, sub_part, index_type, collation, comment in self.query(
            "SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME, SUB_PART, INDEX_TYPE,"
            f" {collation_col}, INDEX_COMMENT FROM information_schema.STATISTICS"
            " WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX"
        ):
            key = (str(table), str(name))
            part = ident(str(column))
            if sub_part is not None and index_type != "SPATIAL":  # SPATIAL reports 32
                part += f"({int(sub_part)})"
            if collation == "D":
                part += " DESC"
            parts[key].append(part)
            kinds[key] = (not int(non_unique), str(index_type), str(comment or ""))
        constraints: dict[str, Constraint] = {}
        indexes: dict[str, Index] = {}
        # In the order SHOW CREATE TABLE lists them (creation order), so a table created
        # from the model lists them the same way.
        position = {key: n for n, key in enumerate(using)}
        for (table, name), columns in sorted(
            parts.items(), key=lambda kv: (kv[0][0], position.get(kv[0], -1), kv[0][1])
        ):
            unique, index_type, comment = kinds[(table, name)]
            column_list = "(" + ",".join(columns) + ")"
            if name == "PRIMARY":
                pk = Constraint(
                    table=_table_key(table),
                    name="PRIMARY",
                    kind="p",
                    definition=f"PRIMARY KEY {column_list}"
                    + (f" COMMENT {literal(comment)}" if comment else ""),
                )
                constraints[pk.key] = pk
                continue
            word = {"FULLTEXT": "FULLTEXT KEY", "SPATIAL": "SPATIAL KEY"}.get(
                index_type, "UNIQUE KEY" if unique else "KEY"
            )
            definition = f"{word} {ident(name)} {column_list}{using.get((table, name), '')}"
            if comment:
                definition += f" COMMENT {literal(comment)}"
            index = Index(
                schema=SCHEMA,
                name=f"{table}.{name.lower()}",  # index names are case-insensitive
                table=_table_key(table),
                definition=definition,
                unique=unique,
            )
            indexes[index.key] = index
        return constraints, indexes

    def foreign_keys(self) -> dict[str, Constraint]:
        columns: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        targets: dict[tuple[str, str], tuple[str, str]] = {}
        for table, name, column, ref_schema, ref_table, ref_column in self.query(
            "SELECT TABLE_NAME, CONSTRAINT_NAME, COLUMN_NAME, REFERENCED_TABLE_SCHEMA,"
            " REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME FROM information_schema"
            ".KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s AND REFERENCED_TABLE_NAME IS NOT NULL"
            " ORDER BY TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION"
        ):
            key = (str(table), str(name))
            columns[key].append((str(column), str(ref_column)))
            targets[key] = (str(ref_schema), str(ref_table))
        rules = {
            (str(t), str(n)): (str(u), str(d))
            for t, n, u, d in self.query(
                "SELECT TABLE_NAME, CONSTRAINT_NAME, UPDATE_RULE, DELETE_RULE FROM"
                " information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = %s"
            )
        }
        found: dict[str, Constraint] = {}
        for (table, name), pairs in sorted(columns.items()):
            ref_schema, ref_table = targets[(table, name)]
            on_update, on_delete = rules.get((table, name), ("RESTRICT", "RESTRICT"))
            target = (
                ident(ref_table)
                if ref_schema == self.db
                else f"{ident(ref_schema)}.{ident(ref_table)}"
            )
            definition = (
                f"FOREIGN KEY ({','.join(ident(c) for c, _ in pairs)}) REFERENCES {target}"
                f" ({','.join(ident(r) for _, r in pairs)})"
            )
            # RESTRICT is the default and is printed by nobody (an explicit one reads back
            # the same way).
            if on_delete != "RESTRICT":
                definition += f" ON DELETE {on_delete}"
            if on_update != "RESTRICT":
                definition += f" ON UPDATE {on_update}"
            constraint = Constraint(
                table=_table_key(table),
                name=name,
                kind="f",
                definition=definition,
                references=_table_key(ref_table) if ref_schema == self.db else None,
                columns=tuple(c for c, _ in pairs),
            )
            found[constraint.key] = constraint
        return found

    def checks(self) -> dict[str, Constraint]:
        level = " AND LEVEL = 'Table'" if self.dialect == "mariadb" else ""
        sql = (
            "SELECT TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema"
            f".CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = %s{level}"
        )
        if self.dialect == "mysql":
            sql = (
                "SELECT t.TABLE_NAME, c.CONSTRAINT_NAME, c.CHECK_CLAUSE FROM information_schema"
                ".CHECK_CONSTRAINTS c JOIN information_schema.TABLE_CONSTRAINTS t ON"
                " t.CONSTRAINT_SCHEMA = c.CONSTRAINT_SCHEMA AND t.CONSTRAINT_NAME ="
                " c.CONSTRAINT_NAME AND t.CONSTRAINT_TYPE = 'CHECK'"
                " WHERE c.CONSTRAINT_SCHEMA = %s"
            )
        found: dict[str, Constraint] = {}
        for table, name, clause in self.query(sql):
            constraint = Constraint(
                table=_table_key(str(table)),
                name=str(name),
                kind="c",
                definition=f"CHECK ({_strip_schema(str(clause), self.db)})",
            )
            found[constraint.key] = constraint
        return found

    # -- views and triggers --------------------------------------------------------------

    def views(self) -> dict[str, Definition]:
        columns: dict[str, list[str]] = defaultdict(list)
        for table, column in self.query(
            "SELECT c.TABLE_NAME, c.COLUMN_NAME FROM information_schema.COLUMNS c"
            " JOIN information_schema.VIEWS v ON v.TABLE_SCHEMA = c.TABLE_SCHEMA"
            " AND v.TABLE_NAME = c.TABLE_NAME WHERE c.TABLE_SCHEMA = %s"
            " ORDER BY c.TABLE_NAME, c.ORDINAL_POSITION"
        ):
            columns[str(table)].append(str(column))
        found: dict[str, Definition] = {}
        for name, body, check, security, definer, algorithm in self.query(
            "SELECT TABLE_NAME, VIEW_DEFINITION, CHECK_OPTION, SECURITY_TYPE, DEFINER, "
            + ("ALGORITHM" if self.dialect == "mariadb" else "'UNDEFINED'")
            + " FROM information_schema.VIEWS WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME"
        ):
            name = str(name)
            body = _strip_schema(str(body), self.db)
            head = f"ALGORITHM={algorithm} SQL SECURITY {security} VIEW {ident(name)}"
            tail = "" if check in (None, "NONE") else f" WITH {check} CHECK OPTION"
            definition = f"{head} AS {body}{tail}"
            view = _created(
                "view",
                name,
                definition,
                replace=f"CREATE OR REPLACE {definition}",
                extra=(("columns", ", ".join(columns[name])),),
            )
            found[view.key] = with_definer(view, str(definer))
        return found

    def triggers(self) -> dict[str, Definition]:
        found: dict[str, Definition] = {}
        for name, event, table, timing, statement, order, definer in self.query(
            "SELECT TRIGGER_NAME, EVENT_MANIPULATION, EVENT_OBJECT_TABLE, ACTION_TIMING,"
            " ACTION_STATEMENT, ACTION_ORDER, DEFINER FROM information_schema.TRIGGERS"
            " WHERE TRIGGER_SCHEMA = %s ORDER BY EVENT_OBJECT_TABLE, ACTION_ORDER"
        ):
            body = _strip_schema(str(statement), self.db)
            definition = (
                f"TRIGGER {ident(str(name))} {timing} {event} ON {ident(str(table))}"
                f" FOR EACH ROW {body}"
            )
            trigger = _created(
                "trigger",
                str(name),
                definition,
                table=_table_key(str(table)),
                extra=(("order", str(order)),),
            )
            found[trigger.key] = with_definer(trigger, str(definer))
        return found


def _created(
    kind: str,
    name: str,
    definition: str,
    *,
    replace: str | None = None,
    table: str | None = None,
    extra: tuple[tuple[str, str], ...] = (),
) -> Definition:
    """A view or trigger: created by ``CREATE <definition>``, dropped by its name."""
    return Definition(
        key=f"{kind}:{SCHEMA}.{name}",
        kind=kind,
        create=f"CREATE {definition}",
        drop=f"DROP {kind.upper()} {ident(name)}",
        definition=definition,
        replace=replace,
        table=table,
        extra=extra,
    )


_DEFINER = re.compile(
    r"^CREATE\s+DEFINER\s*=\s*(?:`(?:[^`]|``)*`|'[^']*'|\S+?)@(?:`(?:[^`]|``)*`|'[^']*'|\S+)\s+"
)
_STARTS = re.compile(r" STARTS '[^']*'")


def _without_definer(text: str, database: str) -> str:
    """``SHOW CREATE ...`` text without ``CREATE DEFINER=...`` and the database's qualifier."""
    return _DEFINER.sub("", _strip_schema(text, database), count=1).removeprefix("CREATE ")


def _events(reader: _Reader) -> dict[str, Definition]:
    """Events, from ``SHOW CREATE EVENT`` without a recurring start time.

    A recurring event starts when it is created unless told otherwise, so its start time
    is not compared (the server cannot tell an explicit start from the default one).
    """
    found: dict[str, Definition] = {}
    for name, definer in reader.query(
        "SELECT EVENT_NAME, DEFINER FROM information_schema.EVENTS WHERE EVENT_SCHEMA = %s"
        " ORDER BY EVENT_NAME"
    ):
        row = rows(reader.conn, f"SHOW CREATE EVENT {ident(reader.db)}.{ident(str(name))}")[0]
        text = _STARTS.sub("", _without_definer(str(row[3]), reader.db))
        key = f"event:{SCHEMA}.{name}"
        event = Definition(
            key=key,
            kind="event",
            create=f"CREATE {text}",
            drop=f"DROP EVENT {ident(str(name))}",
            definition=text,
            replace=f"CREATE OR REPLACE {text}" if reader.dialect == "mariadb" else None,
        )
        found[key] = with_definer(event, str(definer))
    return found


class RoutineNotVisible(Exception):
    """``SHOW CREATE PROCEDURE|FUNCTION`` gave no text: the credential may not read it."""


def _routines(reader: _Reader) -> dict[str, Definition]:
    """Stored procedures and functions, from ``SHOW CREATE PROCEDURE|FUNCTION``.

    The server prints the parameters and body as written and the characteristics
    (``DETERMINISTIC``, data access, ``SQL SECURITY``, ``COMMENT``) in a fixed order and
    spelling, so one routine reads the same wherever it was created. MariaDB changes one in
    place with ``CREATE OR REPLACE``; MySQL drops and creates it again.
    """
    found: dict[str, Definition] = {}
    for name, kind, security, definer in reader.query(
        "SELECT ROUTINE_NAME, ROUTINE_TYPE, SECURITY_TYPE, DEFINER FROM information_schema"
        ".ROUTINES WHERE ROUTINE_SCHEMA = %s AND ROUTINE_TYPE IN ('PROCEDURE', 'FUNCTION')"
        " ORDER BY ROUTINE_TYPE, ROUTINE_NAME"
    ):
        word = str(kind)
        shown = rows(reader.conn, f"SHOW CREATE {word} {ident(reader.db)}.{ident(str(name))}")
        if not shown or shown[0][2] is None:
            raise RoutineNotVisible(f"{word.lower()} {name}")
        text = _without_definer(str(shown[0][2]), reader.db)
        key = f"{word.lower()}:{SCHEMA}.{name}"
        routine = Definition(
            key=key,
            kind=word.lower(),
            create=f"CREATE {text}",
            drop=f"DROP {word} {ident(str(name))}",
            definition=text,
            replace=f"CREATE OR REPLACE {text}" if reader.dialect == "mariadb" else None,
            extra=(("security_definer", "true" if security == "DEFINER" else "false"),),
        )
        found[key] = with_definer(routine, str(definer))
    return found


_IDENT = re.compile(r"`((?:[^`]|``)+)`")


def _references(text: str) -> set[str]:
    return {m.group(1).replace("``", "`") for m in _IDENT.finditer(text)}


_KEY_LINE = re.compile(
    r"^  (?:UNIQUE |FULLTEXT |SPATIAL )?KEY `((?:[^`]|``)+)` \(.*\)( USING (?:BTREE|HASH|RTREE))?"
)
_PARTITION = re.compile(r"(?:/\*!\d+ )?(PARTITION BY .*?)(?: \*/)?$", re.DOTALL)


def _from_show_create(texts: dict[str, str]) -> tuple[dict[tuple[str, str], str], dict[str, str]]:
    """Explicit index algorithms (``USING BTREE``) and partition clauses, by table."""
    using: dict[tuple[str, str], str] = {}
    partitions: dict[str, str] = {}
    for table, text in texts.items():
        for line in text.splitlines():
            if match := _KEY_LINE.match(line):
                using[(table, match.group(1).replace("``", "`"))] = match.group(2) or ""
        _, marker, tail = text.partition("PARTITION BY ")
        if marker and (match := _PARTITION.search(marker + tail)):
            partitions[table] = " ".join(match.group(1).split())
    return using, partitions


def introspect(conn: Any, database: str) -> Database:
    """The model of ``database`` on ``conn``'s server."""
    reader = _Reader(conn, database)
    tables = reader.tables()
    using, partitions = _from_show_create(reader.show_create([t.name for t in tables.values()]))
    for key, table in list(tables.items()):
        if table.name in partitions:
            tables[key] = replace(table, partition_key=partitions[table.name])
    keys, indexes = reader.indexes(using)
    constraints = {**keys, **reader.foreign_keys(), **reader.checks()}
    views = reader.views()
    triggers = reader.triggers()
    depends: set[tuple[str, str]] = set()
    for constraint in constraints.values():
        if constraint.references and constraint.references != constraint.table:
            depends.add((constraint.table, constraint.references))
        depends.add((constraint.key, constraint.table))
        if constraint.references:
            depends.add((constraint.key, constraint.references))
    for index in indexes.values():
        depends.add((index.key, index.table))
    routines = _routines(reader)
    functions = {k.split(".", 1)[1]: k for k, r in routines.items() if r.kind == "function"}
    names = {**functions, **{t.name: k for k, t in tables.items()}}
    names |= {k.split(".", 1)[1]: k for k in views}
    for key, view in views.items():
        for name in sorted(_references(body_of(view))):
            target = names.get(name)
            if target is not None and target != key:
                depends.add((key, target))
    for key, trigger in triggers.items():
        assert trigger.table is not None
        depends.add((key, trigger.table))
    return Database(
        dialect=reader.dialect,
        server_major=reader.major,
        tables=tables,
        constraints=constraints,
        indexes=indexes,
        definitions={**views, **triggers, **_events(reader), **routines},
        depends=frozenset(depends),
    )
