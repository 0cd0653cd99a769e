"""Reading a PostgreSQL database into the engine's object model.

Introspection runs in a fixed session (``search_path = ''``, UTC, ISO dates, C messages) so
every name the server prints is schema-qualified and every rendering is stable. The model
keeps the server's own definitions (``pg_get_indexdef``, ``pg_get_constraintdef``,
``pg_get_viewdef``, ``pg_get_functiondef``, ``pg_get_triggerdef``, ``format_type``,
``pg_get_expr``), so the desired schema, normalized by loading it into a scratch database,
reads exactly like a live database with the same schema.

Left out on purpose: system schemas, objects that belong to an extension (``pg_depend``
deptype ``e``), internal triggers, child indexes and inherited constraints of partitions,
sequence positions, and (unless a :class:`~runner.engines.model.PrivilegeScope` asks for
them, :mod:`.acl`) ownership and privileges.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import psycopg

from runner.engines.model import (
    NO_PRIVILEGES,
    Column,
    Comment,
    Constraint,
    Database,
    Definition,
    Index,
    PrivilegeScope,
    Sequence,
    Table,
)
from runner.engines.postgresql.acl import Privileges, read_privileges
from runner.engines.postgresql.quoting import ident, literal, qualified

__all__ = ["SESSION_SETTINGS", "introspect", "prepare_session"]

SESSION_SETTINGS = {
    "search_path": "",
    "TimeZone": "UTC",
    "DateStyle": "ISO, YMD",
    "IntervalStyle": "postgres",
    "extra_float_digits": "3",
    "bytea_output": "hex",
    "standard_conforming_strings": "on",
    "check_function_bodies": "off",
}

USER_SCHEMA = """
    n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
"""
NOT_FROM_EXTENSION = """
    NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = {catalog}::regclass
                AND e.objid = {oid} AND e.deptype = 'e')
"""

ObjectId = tuple[int, int, int]  # (catalog oid, object oid, sub id)


def prepare_session(conn: psycopg.Connection[Any]) -> None:
    """Fix the settings that change how the server renders definitions."""
    with conn.cursor() as cur:
        for name, value in SESSION_SETTINGS.items():
            cur.execute("SELECT set_config(%s, %s, false)", (name, value))
    try:
        with conn.transaction():  # a savepoint inside a transaction: a refusal costs nothing
            conn.execute("SET lc_messages = 'C'")
    except psycopg.errors.InsufficientPrivilege:
        pass


_IDENTITY = {"a": "ALWAYS", "d": "BY DEFAULT"}


def _rows(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def _ext(catalog: str, oid: str) -> str:
    return NOT_FROM_EXTENSION.format(catalog=f"'{catalog}'", oid=oid)


class _Reader:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.ids: dict[ObjectId, str] = {}  # catalog object -> model key
        self.comment_targets: dict[ObjectId, tuple[str, str]] = {}  # -> (key, SQL target)
        self.column_names: dict[ObjectId, tuple[str, str, str]] = {}  # -> (schema, table, name)
        self.column_keys: dict[ObjectId, str] = {}  # a column or its default -> column key
        names = _rows(
            conn,
            "SELECT c, c::regclass::oid FROM unnest(ARRAY['pg_class', 'pg_type', 'pg_proc',"
            " 'pg_constraint', 'pg_attrdef', 'pg_rewrite', 'pg_trigger', 'pg_policy',"
            " 'pg_namespace', 'pg_extension', 'pg_collation']) AS c",
        )
        self.catalog = {name: int(oid) for name, oid in names}
        self.tables: dict[str, Table] = {}
        self.constraints: dict[str, Constraint] = {}
        self.indexes: dict[str, Index] = {}
        self.sequences: dict[str, Sequence] = {}
        self.definitions: dict[str, Definition] = {}

    def define(self, catalog: str, oid: int, target: str, definition: Definition) -> None:
        """Keep ``definition``, read from ``catalog``'s row ``oid`` (``target`` names it in
        ``COMMENT ON``)."""
        self.register(catalog, oid, definition.key, target)
        self.definitions[definition.key] = definition

    def register(self, catalog: str, oid: int, key: str, target: str | None = None) -> None:
        self.ids[(self.catalog[catalog], oid, 0)] = key
        if target is not None:
            self.comment_targets[(self.catalog[catalog], oid, 0)] = (key, target)

    # -- schemas and extensions -----------------------------------------------------------

    def schemas(self) -> None:
        for oid, name in _rows(
            self.conn,
            f"SELECT n.oid, n.nspname FROM pg_namespace n WHERE {USER_SCHEMA}"
            f" AND {_ext('pg_namespace', 'n.oid')} ORDER BY 2",
        ):
            key = f"schema:{name}"
            self.define(
                "pg_namespace",
                oid,
                f"SCHEMA {ident(name)}",
                Definition(
                    key,
                    "schema",
                    f"CREATE SCHEMA {ident(name)}",
                    f"DROP SCHEMA {ident(name)}",
                    name,
                ),
            )

    def extensions(self) -> None:
        for oid, name, schema in _rows(
            self.conn,
            "SELECT e.oid, e.extname, n.nspname FROM pg_extension e"
            " JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname <> 'plpgsql' ORDER BY 2",
        ):
            key = f"extension:{name}"
            self.define(
                "pg_extension",
                oid,
                f"EXTENSION {ident(name)}",
                Definition(
                    key,
                    "extension",
                    f"CREATE EXTENSION IF NOT EXISTS {ident(name)} WITH SCHEMA {ident(schema)}",
                    f"DROP EXTENSION {ident(name)}",
                    f"{name} {schema}",
                ),
            )

    # -- collations -----------------------------------------------------------------------

    def collations(self, major: int) -> None:
        """Collations made with ``CREATE COLLATION`` (libc or ICU): created before the
        columns, domains and indexes that use them (``pg_depend``)."""
        locale = "c.colllocale" if major >= 17 else "c.colliculocale"
        rules = "c.collicurules" if major >= 16 else "NULL"
        for oid, schema, name, provider, deterministic, collate, ctype, icu, icu_rules in _rows(
            self.conn,
            "SELECT c.oid, n.nspname, c.collname, c.collprovider, c.collisdeterministic,"
            f" c.collcollate, c.collctype, {locale}, {rules}"
            " FROM pg_collation c JOIN pg_namespace n ON n.oid = c.collnamespace"
            f" WHERE {USER_SCHEMA} AND {_ext('pg_collation', 'c.oid')} ORDER BY 2, 3",
        ):
            key = f"collation:{schema}.{name}"
            full = qualified(schema, name)
            options = []
            if provider == "i":
                options += ["provider = icu", f"locale = {literal(icu or '')}"]
                if icu_rules is not None:
                    options.append(f"rules = {literal(icu_rules)}")
            elif collate == ctype:
                options += ["provider = libc", f"locale = {literal(collate or '')}"]
            else:
                options += [
                    "provider = libc",
                    f"lc_collate = {literal(collate or '')}",
                    f"lc_ctype = {literal(ctype or '')}",
                ]
            if not deterministic:
                options.append("deterministic = false")
            body = ", ".join(options)
            self.define(
                "pg_collation",
                oid,
                f"COLLATION {full}",
                Definition(
                    key,
                    "collation",
                    f"CREATE COLLATION {full} ({body})",
                    f"DROP COLLATION {full}",
                    body,
                ),
            )

    # -- types ------------------------------------------------------------------------------

    def types(self) -> None:
        rows = _rows(
            self.conn,
            "SELECT t.oid, n.nspname, t.typname, t.typtype, t.typrelid, t.typarray,"
            " format_type(t.typbasetype, t.typtypmod), t.typnotnull,"
            " pg_get_expr(t.typdefaultbin, 0),"
            " CASE WHEN t.typcollation <> 0 AND t.typcollation <> bt.typcollation"
            "   THEN (SELECT quote_ident(cn.nspname) || '.' || quote_ident(co.collname)"
            "         FROM pg_collation co JOIN pg_namespace cn ON cn.oid = co.collnamespace"
            "         WHERE co.oid = t.typcollation) END"
            " FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
            " LEFT JOIN pg_type bt ON bt.oid = t.typbasetype"
            " LEFT JOIN pg_class rc ON rc.oid = t.typrelid"
            f" WHERE {USER_SCHEMA} AND {_ext('pg_type', 't.oid')}"
            " AND (t.typtype IN ('e', 'd') OR (t.typtype = 'c' AND rc.relkind = 'c'))"
            " ORDER BY 2, 3",
        )
        labels = defaultdict(list)
        for typ, label in _rows(
            self.conn, "SELECT enumtypid, enumlabel FROM pg_enum ORDER BY enumtypid, enumsortorder"
        ):
            labels[typ].append(label)
        domain_checks = defaultdict(list)
        for typ, oid, name, definition, validated in _rows(
            self.conn,
            "SELECT contypid, oid, conname, pg_get_constraintdef(oid), convalidated"
            " FROM pg_constraint WHERE contypid <> 0 ORDER BY contypid, conname",
        ):
            domain_checks[typ].append((oid, name, definition, validated))
        attributes = defaultdict(list)
        for relid, name, type_, collation in _rows(
            self.conn,
            "SELECT a.attrelid, a.attname, format_type(a.atttypid, a.atttypmod),"
            " CASE WHEN a.attcollation <> t.typcollation THEN (SELECT quote_ident(cn.nspname)"
            "  || '.' || quote_ident(co.collname) FROM pg_collation co JOIN pg_namespace cn"
            "  ON cn.oid = co.collnamespace WHERE co.oid = a.attcollation) END"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_type t ON t.oid = a.atttypid"
            " WHERE c.relkind = 'c' AND a.attnum > 0 AND NOT a.attisdropped"
            " ORDER BY a.attrelid, a.attnum",
        ):
            attributes[relid].append((name, type_, collation))
        for oid, schema, name, kind, relid, array, base, notnull, default, collation in rows:
            key = f"type:{schema}.{name}"
            full = qualified(schema, name)
            self.register("pg_type", oid, key)
            self.ids[(self.catalog["pg_type"], array, 0)] = key
            if kind == "e":
                values = labels[oid]
                self.define(
                    "pg_type",
                    oid,
                    f"TYPE {full}",
                    Definition(
                        key,
                        "enum",
                        f"CREATE TYPE {full} AS ENUM ({', '.join(literal(v) for v in values)})",
                        f"DROP TYPE {full}",
                        json.dumps(values),
                        extra=(("labels", json.dumps(values)),),
                    ),
                )
            elif kind == "c":
                self.ids[(self.catalog["pg_class"], relid, 0)] = key
                self.register("pg_type", oid, key, f"TYPE {full}")
                parts = [
                    f"{ident(a)} {t}" + (f" COLLATE {c}" if c else "")
                    for a, t, c in attributes[relid]
                ]
                self.definitions[key] = Definition(
                    key,
                    "composite",
                    f"CREATE TYPE {full} AS ({', '.join(parts)})",
                    f"DROP TYPE {full}",
                    ", ".join(parts),
                )
            else:
                self.register("pg_type", oid, key, f"DOMAIN {full}")
                checks = domain_checks[oid]
                for con_oid, con_name, _, _ in checks:
                    self.ids[(self.catalog["pg_constraint"], con_oid, 0)] = key
                    self.comment_targets[(self.catalog["pg_constraint"], con_oid, 0)] = (
                        f"{key}.constraint.{con_name}",
                        f"CONSTRAINT {ident(con_name)} ON DOMAIN {full}",
                    )
                sql = f"CREATE DOMAIN {full} AS {base}"
                sql += f" COLLATE {collation}" if collation else ""
                sql += f" DEFAULT {default}" if default is not None else ""
                sql += " NOT NULL" if notnull else ""
                for _, con_name, definition, _validated in checks:
                    sql += f" CONSTRAINT {ident(con_name)} {definition}"
                facts = {
                    "base": base,
                    "collation": collation or "",
                    "default": default,
                    "notnull": bool(notnull),
                    "checks": {n: [d, bool(v)] for _, n, d, v in checks},
                }
                self.definitions[key] = Definition(
                    key,
                    "domain",
                    sql,
                    f"DROP DOMAIN {full}",
                    json.dumps(facts, sort_keys=True),
                    extra=(("facts", json.dumps(facts)),),
                )

    # -- tables, columns, constraints ----------------------------------------------------

    def tables_and_columns(self) -> None:
        rows = _rows(
            self.conn,
            "SELECT c.oid, n.nspname, c.relname, c.relkind, c.relpersistence,"
            " c.relrowsecurity, c.relforcerowsecurity,"
            " CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END,"
            " CASE WHEN c.relispartition THEN (SELECT pn.nspname || '.' || p.relname"
            "   FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent"
            "   JOIN pg_namespace pn ON pn.oid = p.relnamespace WHERE i.inhrelid = c.oid) END,"
            " CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, c.oid) END,"
            " c.relreplident, (SELECT quote_ident(ic.relname) FROM pg_index i"
            "   JOIN pg_class ic ON ic.oid = i.indexrelid"
            "   WHERE i.indrelid = c.oid AND i.indisreplident)"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE c.relkind IN ('r', 'p') AND {USER_SCHEMA} AND {_ext('pg_class', 'c.oid')}"
            " ORDER BY 2, 3",
        )
        columns: dict[int, list[Column]] = defaultdict(list)
        column_rows = _rows(
            self.conn,
            "SELECT a.attrelid, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),"
            " a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated,"
            " CASE WHEN a.attcollation <> t.typcollation THEN (SELECT quote_ident(cn.nspname)"
            "  || '.' || quote_ident(co.collname) FROM pg_collation co JOIN pg_namespace cn"
            "  ON cn.oid = co.collnamespace WHERE co.oid = a.attcollation) END, a.attislocal, d.oid"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid"
            " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            f" WHERE c.relkind IN ('r', 'p') AND {USER_SCHEMA} AND a.attnum > 0"
            " AND NOT a.attisdropped ORDER BY a.attrelid, a.attnum",
        )
        identity_options: dict[tuple[int, int], tuple[str, ...]] = {}
        for relid, num, start, inc, low, high, cache, cycle in _rows(
            self.conn,
            "SELECT d.refobjid, d.refobjsubid, s.seqstart, s.seqincrement, s.seqmin, s.seqmax,"
            " s.seqcache, s.seqcycle FROM pg_depend d JOIN pg_sequence s ON s.seqrelid = d.objid"
            " WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass"
            " AND d.deptype = 'i'",
        ):
            identity_options[(relid, num)] = (
                f"START WITH {start}",
                f"INCREMENT BY {inc}",
                f"MINVALUE {low}",
                f"MAXVALUE {high}",
                f"CACHE {cache}",
                "CYCLE" if cycle else "NO CYCLE",
            )
        inherits: dict[int, list[str]] = defaultdict(list)
        for child, parent in _rows(
            self.conn,
            "SELECT i.inhrelid, 'table:' || pn.nspname || '.' || p.relname FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent"
            " JOIN pg_namespace pn ON pn.oid = p.relnamespace"
            " WHERE NOT c.relispartition AND p.relkind IN ('r', 'p')"
            " ORDER BY i.inhrelid, i.inhseqno",
        ):
            inherits[child].append(parent)
        by_oid = {row[0]: row for row in rows}
        pg_class, pg_attrdef = self.catalog["pg_class"], self.catalog["pg_attrdef"]
        for (
            relid,
            num,
            name,
            type_,
            notnull,
            default,
            identity,
            generated,
            coll,
            local,
            defoid,
        ) in column_rows:
            if relid not in by_oid:
                continue
            relation = by_oid[relid]
            schema, table = relation[1], relation[2]
            key = f"table:{schema}.{table}"
            self.ids[(pg_class, relid, num)] = key
            self.column_names[(pg_class, relid, num)] = (schema, table, name)
            self.column_keys[(pg_class, relid, num)] = f"column:{schema}.{table}.{name}"
            if defoid is not None:
                self.ids[(pg_attrdef, defoid, 0)] = key
                self.column_keys[(pg_attrdef, defoid, 0)] = f"column:{schema}.{table}.{name}"
            if relation[8] is not None and not local:
                continue  # a partition's inherited columns belong to its parent
            columns[relid].append(
                Column(
                    name=name,
                    type=type_,
                    not_null=bool(notnull),
                    default=None if generated == "s" else default,
                    identity=_IDENTITY.get(identity, ""),
                    identity_options=identity_options.get((relid, num), ()),
                    generated=default if generated == "s" else None,
                    collation=coll,
                )
            )
        for (
            oid,
            schema,
            name,
            kind,
            persistence,
            rls,
            force,
            partkey,
            parent,
            bound,
            replident,
            replindex,
        ) in rows:
            table = Table(
                schema=schema,
                name=name,
                columns=tuple(columns[oid]),
                partition_key=partkey,
                partition_of=f"table:{parent}" if parent else None,
                partition_bound=bound,
                unlogged=persistence == "u",
                row_security=bool(rls),
                force_row_security=bool(force),
                inherits=tuple(inherits[oid]),
                options=_replica_identity(replident, replindex),
            )
            self.register("pg_class", oid, table.key, f"TABLE {qualified(schema, name)}")
            self.tables[table.key] = table
            del kind

    def constraints_(self) -> None:
        table_oids = {
            oid: key
            for (cat, oid, sub), key in self.ids.items()
            if cat == self.catalog["pg_class"] and sub == 0 and key.startswith("table:")
        }
        for oid, relid, name, kind, definition, validated, ref, index, cols in _rows(
            self.conn,
            "SELECT con.oid, con.conrelid, con.conname, con.contype,"
            " pg_get_constraintdef(con.oid), con.convalidated, con.confrelid, con.conindid,"
            " ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, i)"
            "   JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i)"
            " FROM pg_constraint con WHERE con.conrelid <> 0 AND con.contype IN"
            " ('p', 'u', 'c', 'f', 'x') AND con.conparentid = 0 AND con.conislocal"
            " ORDER BY con.conrelid, con.conname",
        ):
            if relid not in table_oids:
                continue
            table = table_oids[relid]
            constraint = Constraint(
                table=table,
                name=name,
                kind=kind,
                definition=definition,
                validated=bool(validated),
                references=table_oids.get(ref) if kind == "f" else None,
                columns=tuple(cols),
            )
            target = f"CONSTRAINT {ident(name)} ON {qualified(*table[6:].split('.', 1))}"
            self.register("pg_constraint", oid, constraint.key, target)
            if kind in ("p", "u", "x") and index:
                self.ids[(self.catalog["pg_class"], index, 0)] = constraint.key
            self.constraints[constraint.key] = constraint
        # A constraint PostgreSQL cloned for a partition (a foreign key referencing a
        # partitioned table has one per referenced partition) stands for its root: what it
        # depends on (a partition) its root depends on.
        pg_constraint = self.catalog["pg_constraint"]
        for oid, root in _rows(
            self.conn,
            "WITH RECURSIVE up(oid, root) AS (SELECT oid, conparentid FROM pg_constraint"
            " WHERE conparentid <> 0 UNION ALL SELECT up.oid, c.conparentid FROM up"
            " JOIN pg_constraint c ON c.oid = up.root WHERE c.conparentid <> 0)"
            " SELECT up.oid, up.root FROM up JOIN pg_constraint r ON r.oid = up.root"
            " WHERE r.conparentid = 0",
        ):
            key = self.ids.get((pg_constraint, root, 0))
            if key is not None and key.startswith("constraint:"):
                self.ids.setdefault((pg_constraint, oid, 0), key)

    # -- indexes and sequences -------------------------------------------------------------

    def indexes_(self) -> None:
        for oid, schema, name, definition, unique, table_schema, table, kind, valid in _rows(
            self.conn,
            "SELECT i.indexrelid, n.nspname, ic.relname, pg_get_indexdef(i.indexrelid),"
            " i.indisunique, tn.nspname, t.relname, t.relkind, i.indisvalid AND i.indisready"
            " FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid"
            " JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = ic.relnamespace"
            " JOIN pg_namespace tn ON tn.oid = t.relnamespace"
            f" WHERE t.relkind IN ('r', 'p', 'm') AND {USER_SCHEMA} AND NOT ic.relispartition"
            f" AND {_ext('pg_class', 'i.indexrelid')}"
            " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid"
            "   AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u', 'x'))"
            " ORDER BY 2, 3",
        ):
            owner = f"{'matview' if kind == 'm' else 'table'}:{table_schema}.{table}"
            index = Index(
                schema,
                name,
                owner,
                definition.replace(" ON ONLY ", " ON ", 1),
                unique,
                valid=bool(valid),
            )
            self.register("pg_class", oid, index.key, f"INDEX {qualified(schema, name)}")
            self.indexes[index.key] = index

    def sequences_(self) -> None:
        for oid, schema, name, type_, start, inc, low, high, cache, cycle, owner in _rows(
            self.conn,
            "SELECT c.oid, n.nspname, c.relname, format_type(s.seqtypid, NULL), s.seqstart,"
            " s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle,"
            " (SELECT tn.nspname || '.' || t.relname || '.' || a.attname FROM pg_depend d"
            "   JOIN pg_class t ON t.oid = d.refobjid"
            "   JOIN pg_namespace tn ON tn.oid = t.relnamespace"
            "   JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
            "   WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid"
            "   AND d.refclassid = 'pg_class'::regclass AND d.deptype = 'a')"
            " FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE {USER_SCHEMA} AND {_ext('pg_class', 'c.oid')}"
            " AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass"
            "   AND d.objid = c.oid AND d.deptype = 'i')"
            " ORDER BY 2, 3",
        ):
            sequence = Sequence(
                schema,
                name,
                type_,
                int(start),
                int(inc),
                int(low),
                int(high),
                int(cache),
                bool(cycle),
                f"column:{owner}" if owner else None,
            )
            self.register("pg_class", oid, sequence.key, f"SEQUENCE {qualified(schema, name)}")
            self.sequences[sequence.key] = sequence

    # -- views, functions, triggers, policies ------------------------------------------------

    def views(self) -> None:
        view_columns: dict[int, list[str]] = defaultdict(list)
        for relid, name, type_ in _rows(
            self.conn,
            "SELECT a.attrelid, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid WHERE c.relkind IN ('v', 'm') AND a.attnum > 0"
            " ORDER BY a.attrelid, a.attnum",
        ):
            view_columns[relid].append(f"{ident(name)} {type_}")
        rewrites = _rows(
            self.conn,
            "SELECT r.oid, r.ev_class FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class"
            " WHERE c.relkind IN ('v', 'm')",
        )
        for oid, schema, name, kind, definition, options in _rows(
            self.conn,
            "SELECT c.oid, n.nspname, c.relname, c.relkind, pg_get_viewdef(c.oid),"
            " array_to_string(c.reloptions, ', ') FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE c.relkind IN ('v', 'm') AND {USER_SCHEMA} AND {_ext('pg_class', 'c.oid')}"
            " ORDER BY 2, 3",
        ):
            body = definition.strip().rstrip(";")
            full = qualified(schema, name)
            with_ = f" WITH ({options})" if options else ""
            columns = ", ".join(view_columns[oid])
            if kind == "v":
                key = f"view:{schema}.{name}"
                self.define(
                    "pg_class",
                    oid,
                    f"VIEW {full}",
                    Definition(
                        key,
                        "view",
                        f"CREATE VIEW {full}{with_} AS\n{body}",
                        f"DROP VIEW {full}",
                        f"{with_} {body}",
                        replace=f"CREATE OR REPLACE VIEW {full}{with_} AS\n{body}",
                        extra=(("columns", columns),),
                    ),
                )
            else:
                key = f"matview:{schema}.{name}"
                self.define(
                    "pg_class",
                    oid,
                    f"MATERIALIZED VIEW {full}",
                    Definition(
                        key,
                        "matview",
                        f"CREATE MATERIALIZED VIEW {full}{with_} AS\n{body}",
                        f"DROP MATERIALIZED VIEW {full}",
                        f"{with_} {body}",
                        extra=(("columns", columns),),
                    ),
                )
        view_keys = {
            oid: key
            for (cat, oid, _), key in self.ids.items()
            if cat == self.catalog["pg_class"] and key.split(":")[0] in ("view", "matview")
        }
        for oid, relid in rewrites:
            if relid in view_keys:
                self.ids[(self.catalog["pg_rewrite"], oid, 0)] = view_keys[relid]

    def functions(self) -> None:
        for oid, schema, name, args, kind, definition, result, arguments, secdef in _rows(
            self.conn,
            "SELECT p.oid, n.nspname, p.proname, pg_get_function_identity_arguments(p.oid),"
            " p.prokind, pg_get_functiondef(p.oid), pg_get_function_result(p.oid),"
            " pg_get_function_arguments(p.oid), p.prosecdef"
            " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            f" WHERE p.prokind IN ('f', 'p', 'w') AND {USER_SCHEMA} AND {_ext('pg_proc', 'p.oid')}"
            " ORDER BY 2, 3, 4",
        ):
            word = "PROCEDURE" if kind == "p" else "FUNCTION"
            signature = f"{qualified(schema, name)}({args})"
            key = f"function:{schema}.{name}({args})"
            self.register("pg_proc", oid, key, f"{word} {signature}")
            body = definition.strip()
            self.definitions[key] = Definition(
                key,
                "function",
                body,
                f"DROP {word} {signature}",
                body,
                replace=body,
                extra=(
                    ("result", result or ""),
                    ("arguments", arguments),
                    ("security_definer", "true" if secdef else "false"),
                ),
            )

    def triggers(self) -> None:
        for oid, schema, table, name, definition in _rows(
            self.conn,
            "SELECT t.oid, n.nspname, c.relname, t.tgname, pg_get_triggerdef(t.oid)"
            " FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE NOT t.tgisinternal AND t.tgparentid = 0 AND {USER_SCHEMA}"
            " ORDER BY 2, 3, 4",
        ):
            key = f"trigger:{schema}.{table}.{name}"
            on = qualified(schema, table)
            self.register("pg_trigger", oid, key, f"TRIGGER {ident(name)} ON {on}")
            owner = self._relation_key(schema, table)
            self.definitions[key] = Definition(
                key,
                "trigger",
                definition,
                f"DROP TRIGGER {ident(name)} ON {on}",
                definition,
                table=owner,
            )

    def _relation_key(self, schema: str, name: str) -> str:
        for prefix in ("table", "view", "matview"):
            key = f"{prefix}:{schema}.{name}"
            if key in self.tables or key in self.definitions:
                return key
        return f"table:{schema}.{name}"

    def policies(self) -> None:
        commands = {"*": "ALL", "r": "SELECT", "a": "INSERT", "w": "UPDATE", "d": "DELETE"}
        for oid, schema, table, name, permissive, cmd, roles, qual, check in _rows(
            self.conn,
            "SELECT p.oid, n.nspname, c.relname, p.polname, p.polpermissive, p.polcmd,"
            " ARRAY(SELECT CASE WHEN r = 0 THEN 'PUBLIC' ELSE quote_ident(a.rolname) END"
            "   FROM unnest(p.polroles) r LEFT JOIN pg_roles a ON a.oid = r ORDER BY 1),"
            " pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)"
            " FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid"
            f" JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {USER_SCHEMA} ORDER BY 2, 3, 4",
        ):
            key = f"policy:{schema}.{table}.{name}"
            on = qualified(schema, table)
            sql = (
                f"CREATE POLICY {ident(name)} ON {on} AS "
                f"{'PERMISSIVE' if permissive else 'RESTRICTIVE'} FOR {commands[cmd]}"
                f" TO {', '.join(roles)}"
            )
            sql += f" USING ({qual})" if qual is not None else ""
            sql += f" WITH CHECK ({check})" if check is not None else ""
            self.define(
                "pg_policy",
                oid,
                f"POLICY {ident(name)} ON {on}",
                Definition(
                    key,
                    "policy",
                    sql,
                    f"DROP POLICY {ident(name)} ON {on}",
                    sql,
                    table=f"table:{schema}.{table}",
                ),
            )

    # -- comments and dependencies -------------------------------------------------------

    def comments(self) -> dict[str, Comment]:
        found: dict[str, Comment] = {}
        for catalog, oid, sub, text in _rows(
            self.conn, "SELECT classoid, objoid, objsubid, description FROM pg_description"
        ):
            target = self.comment_targets.get((catalog, oid, sub))
            if target is None and (catalog, oid, sub) in self.column_names:
                schema, table, name = self.column_names[(catalog, oid, sub)]
                target = (
                    f"column:{schema}.{table}.{name}",
                    f"COLUMN {qualified(schema, table)}.{ident(name)}",
                )
            if target is not None:
                comment = Comment(target[0], target[1], text)
                found[comment.key] = comment
        return dict(sorted(found.items()))

    def depends(self) -> frozenset[tuple[str, str]]:
        edges: set[tuple[str, str]] = set()
        columns_of: dict[tuple[int, int], list[str]] = defaultdict(list)
        for (cat, oid, sub), key in sorted(self.column_keys.items()):
            if cat == self.catalog["pg_class"] and sub > 0:
                columns_of[(cat, oid)].append(key)
        for cat, oid, sub, refcat, refoid, refsub in _rows(
            self.conn,
            "SELECT classid, objid, objsubid, refclassid, refobjid, refobjsubid FROM pg_depend"
            " WHERE deptype IN ('n', 'a') AND NOT (classid = 'pg_class'::regclass AND"
            " deptype = 'a' AND refclassid = 'pg_class'::regclass AND objid IN"
            " (SELECT seqrelid FROM pg_sequence))",
        ):
            source = self.ids.get((cat, oid, sub)) or self.ids.get((cat, oid, 0))
            target = self.ids.get((refcat, refoid, refsub)) or self.ids.get((refcat, refoid, 0))
            if source and target and source != target:
                edges.add((source, target))
            # Column-level edges: which column of a table a type, a default's function or a
            # view actually uses (a view's column references are refobjsubid > 0).
            column = self.column_keys.get((cat, oid, sub))
            if column and target and column.startswith("column:") and target != source:
                edges.add((column, target))
            used = self.column_keys.get((refcat, refoid, refsub))
            if column and used and refsub != 0 and column != used:
                edges.add((column, used))  # a generated column reads another column
            if used and source and refsub != 0 and source != target:
                edges.add((source, used))
            elif refsub == 0 and cat == self.catalog["pg_rewrite"] and source and target:
                # A view's whole-row (or column-less) use of a table uses all its columns.
                edges |= {(source, c) for c in columns_of.get((refcat, refoid), ())}
        return frozenset(edges)

    def casts(self) -> frozenset[tuple[str, str, str]]:
        """The server's casts, and the I/O conversions every type has to and from string
        types (assignment to, explicit from: PostgreSQL's own rule)."""
        found = {
            (str(source), str(target), str(context))
            for source, target, context in _rows(
                self.conn,
                "SELECT format_type(castsource, NULL), format_type(casttarget, NULL),"
                " castcontext FROM pg_cast",
            )
        }
        for (name,) in _rows(
            self.conn, "SELECT format_type(oid, NULL) FROM pg_type WHERE typcategory = 'S'"
        ):
            found |= {("", str(name), "a"), (str(name), "", "e")}
        return frozenset(found)


def _replica_identity(kind: str, index: str | None) -> tuple[tuple[str, str], ...]:
    """A table's ``REPLICA IDENTITY`` as its one option, none for ``DEFAULT`` (the primary
    key): ``FULL``, ``NOTHING`` or ``USING INDEX name``. An index identity whose index is
    gone logs nothing, as ``NOTHING`` does."""
    if kind == "f":
        return (("replica_identity", "FULL"),)
    if kind == "n" or (kind == "i" and index is None):
        return (("replica_identity", "NOTHING"),)
    if kind == "i":
        return (("replica_identity", f"USING INDEX {index}"),)
    return ()


def _privileges(reader: _Reader, scope: PrivilegeScope) -> Privileges:
    if not scope.active:
        return Privileges({}, {}, {})
    names = {oid: name for name, oid in reader.catalog.items()}
    keys = {
        (names[catalog], oid): key
        for (catalog, oid, sub), key in reader.ids.items()
        if sub == 0 and catalog in names
    }

    def is_linked(key: str) -> bool:
        sequence = reader.sequences.get(key)
        return sequence is not None and sequence.owned_by is not None

    return read_privileges(reader.conn, scope, keys, is_linked)


def introspect(
    conn: psycopg.Connection[Any], privileges: PrivilegeScope = NO_PRIVILEGES
) -> Database:
    """The schema of the database ``conn`` is connected to (read-only), with the privileges
    and owners ``privileges`` manages (none by default)."""
    prepare_session(conn)
    reader = _Reader(conn)
    reader.schemas()
    reader.extensions()
    major = int(str(conn.info.server_version)[:-4])
    reader.collations(major)
    reader.types()
    reader.tables_and_columns()
    reader.constraints_()
    reader.indexes_()
    reader.sequences_()
    reader.views()
    reader.functions()
    reader.triggers()
    reader.policies()
    found = _privileges(reader, privileges)
    return Database(
        dialect="postgresql",
        server_major=major,
        tables=dict(sorted(reader.tables.items())),
        constraints=dict(sorted(reader.constraints.items())),
        indexes=dict(sorted(reader.indexes.items())),
        sequences=dict(sorted(reader.sequences.items())),
        definitions=dict(sorted(reader.definitions.items())),
        comments=reader.comments(),
        grants=found.grants,
        default_grants=found.default_grants,
        owners=found.owners,
        depends=reader.depends(),
        casts=reader.casts(),
    )
