"""Reading the grants of managed accounts and roles on one MariaDB database.

From the grant tables themselves (``mysql.db``, ``mysql.tables_priv``, ``mysql.columns_priv``,
``mysql.procs_priv``, and ``mysql.roles_mapping`` for role memberships): ``information_schema``
shows other accounts' grants only to a reader who may read those tables anyway, and has no
routine grants at all. Only rows of the managed grantees on the database being read count.

MariaDB keeps table and column grants by *name*: ``DROP TABLE`` and ``DROP COLUMN`` leave
them in ``tables_priv`` and ``columns_priv``, and the next table (or view) of that name has
them at once. So they are read whether or not the object exists (a grant on a name nothing
holds is keyed ``table:`` like a table's), and the differ compares them by name
(:mod:`.diff`). Routine grants go with the routine (``DROP PROCEDURE`` removes them), so
only those of routines the model holds are read.

``accounts`` maps the grantee a server knows (``user@host``; a role, ``PUBLIC`` included, is
``name@``: its rows have an empty host) to the grantee the model records: the identity on
the target, the sandbox's stand-ins to the managed grantees they stand for. A role
membership (``GRANT role TO grantee``) is read when both the role and the grantee are
managed: ``grant:role:<role>:<grantee>``, privilege ``MEMBER``, grantable ``WITH ADMIN
OPTION``.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pymysql

from runner.engines.changes import Change, Phase
from runner.engines.model import PUBLIC, Database, Grant, object_of
from runner.engines.mysql.grants import (
    DATABASE_KEY,
    GRANT_RENDERERS,
    MEMBER,
    account_sql,
    is_role,
    role_key,
)
from runner.engines.mysql.introspect import SCHEMA
from runner.engines.mysql.quoting import ident

__all__ = [
    "GRANT_TABLES",
    "ROLE_TABLE",
    "GrantsNotVisible",
    "left_behind",
    "orphans",
    "with_grants",
]

GRANT_TABLES = ("mysql.db", "mysql.tables_priv", "mysql.columns_priv", "mysql.procs_priv")
"""What a credential must be able to read for its plans to manage privileges."""

ROLE_TABLE = "mysql.roles_mapping"
"""What it must also read when a managed grantee is a role (role memberships)."""

_NAMES = {
    "CREATE_TMP_TABLE": "CREATE TEMPORARY TABLES",
    "DELETE VERSIONING ROWS": "DELETE HISTORY",
    "DELETE_HISTORY": "DELETE HISTORY",
}
_DENIED = (1142, 1143, 1044)


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

    def add_level(self, on: str, target: str, grantee: str, privileges: Any) -> None:
        """A table's or routine's privilege set, whose ``Grant`` is the grant option."""
        held = {_name(p) for p in _set(privileges)}
        self.add(on, target, "", grantee, held - {"GRANT"}, "GRANT" in held)

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
    except (pymysql.err.OperationalError, pymysql.err.ProgrammingError) as error:
        if error.args and error.args[0] in _DENIED:
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
    views = {k.split(".", 1)[1]: k for k, d in db.definitions.items() if d.kind == "view"}

    def on(table: str) -> str:
        """A table's or view's key; a name nothing holds is keyed as a table's."""
        return views.get(table, f"table:{SCHEMA}.{table}")

    def of(table: str, columns: str) -> list[tuple[Any, ...]]:
        """The managed grantees' rows of ``mysql.<table>`` on ``database``."""
        sql = f"SELECT User, Host, {columns} FROM mysql.{table} WHERE User IN ({marks})"
        return _query(conn, sql + " AND Db = %s", (*users, database))[1]

    for user, host, table, privileges in of("tables_priv", "Table_name, Table_priv"):
        if (who := grantee(user, host)) is not None:
            collector.add_level(on(str(table)), ident(str(table)), who, privileges)
    columns = of("columns_priv", "Table_name, Column_name, Column_priv")
    for user, host, table, column, privileges in columns:
        if (who := grantee(user, host)) is None:
            continue
        key = f"column:{SCHEMA}.{table}.{column}"
        held = {_name(p) for p in _set(privileges)}
        collector.add(key, ident(str(table)), str(column), who, held, False)
    for user, host, name, kind, privileges in of(
        "procs_priv", "Routine_name, Routine_type, Proc_priv"
    ):
        who = grantee(user, host)
        key = f"{str(kind).lower()}:{SCHEMA}.{name}"
        if who is not None and key in db.definitions:
            collector.add_level(key, f"{str(kind).upper()} {ident(str(name))}", who, privileges)
    if any(is_role(g) and g != PUBLIC for g in accounts.values()):  # a role to be granted
        _, found = _query(
            conn,
            f"SELECT User, Host, Role, Admin_option FROM {ROLE_TABLE} WHERE User IN ({marks})",
            tuple(users),
        )
        for user, host, role, admin in found:
            who, granted = grantee(user, host), accounts.get(f"{role}@")
            if who is not None and granted is not None:
                target = account_sql(granted)
                collector.add(role_key(granted), target, "", who, {MEMBER}, str(admin) == "Y")
    return dataclasses.replace(db, grants=collector.grants())


# -- grants on names nothing holds -------------------------------------------------------------


def _held(db: Database, grant: Grant) -> bool:
    """Whether ``grant`` is on an object ``db`` holds (a column of a view counts as held)."""
    if grant.on.startswith("column:"):
        table = object_of(grant.on)
        found = db.tables.get(table)
        view = "view:" + table.removeprefix("table:") in db.definitions
        return view or (found is not None and found.column(grant.column) is not None)
    return not grant.on.startswith("table:") or grant.on in db.tables


def orphans(db: Database) -> tuple[Database, list[Grant]]:
    """``db`` without its grants on names nothing holds (MariaDB keeps a dropped table's and
    column's grants), and those grants."""
    left = [g for g in db.grants.values() if not _held(db, g)]
    kept = {k: g for k, g in db.grants.items() if _held(db, g)}
    return dataclasses.replace(db, grants=kept), left


def left_behind(db: Database, left: Sequence[Grant]) -> Iterator[tuple[str, bool]]:
    """Statements that leave ``left`` (grants on names ``db`` does not hold) as a drop
    leaves them: a stand-in table or column of the name is made, granted on and dropped
    again (a server grants on no table that does not exist). Each with whether it grants."""
    by_table: dict[str, list[Grant]] = defaultdict(list)
    for grant in left:
        by_table[grant.target].append(grant)
    for target, grants in sorted(by_table.items()):
        columns = sorted({g.column for g in grants if g.column})
        table = db.tables.get(object_of(grants[0].on))
        if table is not None:
            added = ", ".join(f"ADD COLUMN {ident(c)} int" for c in columns)
            yield f"ALTER TABLE {target} {added}", False
        else:
            body = ", ".join(f"{ident(c)} int" for c in columns or ["seshat_stand_in"])
            yield f"CREATE TABLE {target} ({body})", False
        for grant in sorted(grants, key=lambda g: g.key):
            for statement in GRANT_RENDERERS["grant"](
                Change("grant", grant.key, Phase.FINISH, after=grant)
            ):
                yield statement.sql, True
        if table is not None:
            yield (
                f"ALTER TABLE {target} {', '.join(f'DROP COLUMN {ident(c)}' for c in columns)}",
                False,
            )
        else:
            yield f"DROP TABLE {target}", False
