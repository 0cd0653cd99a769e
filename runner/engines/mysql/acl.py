"""Reading the grants of managed accounts on one MariaDB database.

From the grant tables themselves (``mysql.db``, ``mysql.tables_priv``, ``mysql.columns_priv``,
``mysql.procs_priv``): ``information_schema`` shows other accounts' grants only to a reader
who may read those tables anyway, and has no routine grants at all. Only rows of the managed
accounts on the database being read count, and only for objects the model holds: MariaDB
keeps a table's grants after the table is dropped, and they are nobody's business until a
table of that name exists again.

``accounts`` maps the account a server knows to the grantee the model records: the identity
on the target, the sandbox's stand-in accounts to the managed ones they stand for.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import pymysql

from runner.engines.model import Database, Grant
from runner.engines.mysql.grants import DATABASE_KEY
from runner.engines.mysql.introspect import SCHEMA
from runner.engines.mysql.quoting import ident

__all__ = ["GRANT_TABLES", "GrantsNotVisible", "with_grants"]

GRANT_TABLES = ("mysql.db", "mysql.tables_priv", "mysql.columns_priv", "mysql.procs_priv")
"""What a credential must be able to read for its plans to manage privileges."""

_NAMES = {
    "CREATE_TMP_TABLE": "CREATE TEMPORARY TABLES",
    "DELETE VERSIONING ROWS": "DELETE HISTORY",
    "DELETE_HISTORY": "DELETE HISTORY",
}


class GrantsNotVisible(Exception):
    """The credential may not read the grant tables."""


def _name(raw: str) -> str:
    """``SHOW VIEW`` of ``Show view`` or ``Show_view_priv``."""
    text = raw.removesuffix("_priv").upper()
    return _NAMES.get(text, text.replace("_", " "))


def _patterns(database: str) -> set[str]:
    """How ``mysql.db`` may spell ``database``: as given, or with ``_`` and ``%`` escaped."""
    escaped = database.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")
    return {database, escaped}


class _Collector:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str, str], tuple[set[str], bool]] = defaultdict(
            lambda: (set(), False)
        )

    def add(self, on: str, target: str, column: str, grantee: str, privileges: set[str],
            option: bool) -> None:  # fmt: skip
        held, had = self.rows[(on, target, column, grantee)]
        held.update(privileges)
        self.rows[(on, target, column, grantee)] = (held, had or option)

    def grants(self) -> dict[str, Grant]:
        found = {}
        for (on, target, column, grantee), (held, option) in self.rows.items():
            if not held:
                continue  # a grant option alone (a column grant's) grants nothing
            names = tuple(sorted(held))
            grant = Grant(on, target, grantee, names, names if option else (), column)
            found[grant.key] = grant
        return dict(sorted(found.items()))


def _query(conn: Any, sql: str, params: tuple[Any, ...]) -> tuple[list[str], list[tuple[Any, ...]]]:
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            names = [str(d[0]) for d in cur.description or ()]
            return names, list(cur.fetchall())
    except pymysql.err.OperationalError as error:
        if error.args and error.args[0] in (1142, 1143, 1044):
            raise GrantsNotVisible(str(error.args[1])) from None
        raise
    except pymysql.err.ProgrammingError as error:
        if error.args and error.args[0] in (1142, 1143, 1044):
            raise GrantsNotVisible(str(error.args[1])) from None
        raise


def _set(value: Any) -> set[str]:
    if isinstance(value, (set, frozenset)):
        return {str(v) for v in value if v}
    return {v for v in str(value or "").split(",") if v}


def with_grants(conn: Any, database: str, db: Database, accounts: Mapping[str, str]) -> Database:
    """``db`` (read from ``database``) with the grants ``accounts`` hold there."""
    if not accounts:
        return db
    collector = _Collector()
    users = sorted({a.rpartition("@")[0] for a in accounts})
    marks = ", ".join("%s" for _ in users)

    def grantee(user: Any, host: Any) -> str | None:
        return accounts.get(f"{user}@{host}")

    names, found = _query(
        conn,
        f"SELECT * FROM mysql.db WHERE User IN ({marks}) AND Db IN (%s, %s)",
        (*users, *sorted(_patterns(database))),
    )
    for row in found:
        record = dict(zip(names, row, strict=True))
        who = grantee(record["User"], record["Host"])
        if who is None:
            continue
        held = {
            _name(n)
            for n, value in record.items()
            if n.endswith("_priv") and n != "Grant_priv" and str(value) == "Y"
        }
        collector.add(DATABASE_KEY, "*", "", who, held, str(record.get("Grant_priv")) == "Y")
    objects = {
        **{t.name: (key, ident(t.name)) for key, t in db.tables.items()},
        **{
            key.split(".", 1)[1]: (key, ident(key.split(".", 1)[1]))
            for key, d in db.definitions.items()
            if d.kind == "view"
        },
    }
    _, found = _query(
        conn,
        "SELECT User, Host, Table_name, Table_priv FROM mysql.tables_priv"
        f" WHERE User IN ({marks}) AND Db = %s",
        (*users, database),
    )
    for user, host, table, privileges in found:
        who = grantee(user, host)
        if who is None or str(table) not in objects:
            continue
        held = {_name(p) for p in _set(privileges)}
        key, target = objects[str(table)]
        collector.add(key, target, "", who, held - {"GRANT"}, "GRANT" in held)
    _, found = _query(
        conn,
        "SELECT User, Host, Table_name, Column_name, Column_priv FROM mysql.columns_priv"
        f" WHERE User IN ({marks}) AND Db = %s",
        (*users, database),
    )
    for user, host, table, column, privileges in found:
        who = grantee(user, host)
        key_target = objects.get(str(table))
        if who is None or key_target is None:
            continue
        key, target = key_target
        owner = db.tables.get(key)
        if owner is None or owner.column(str(column)) is None:
            continue
        on = f"column:{SCHEMA}.{table}.{column}"
        collector.add(on, target, str(column), who, {_name(p) for p in _set(privileges)}, False)
    _, found = _query(
        conn,
        "SELECT User, Host, Routine_name, Routine_type, Proc_priv FROM mysql.procs_priv"
        f" WHERE User IN ({marks}) AND Db = %s",
        (*users, database),
    )
    for user, host, name, kind, privileges in found:
        who = grantee(user, host)
        key = f"{str(kind).lower()}:{SCHEMA}.{name}"
        if who is None or key not in db.definitions:
            continue
        held = {_name(p) for p in _set(privileges)}
        target = f"{str(kind).upper()} {ident(str(name))}"
        collector.add(key, target, "", who, held - {"GRANT"}, "GRANT" in held)
    return dataclasses.replace(db, grants=collector.grants())
