"""Reading privileges and owners of a PostgreSQL database for a managed scope.

Only when a :class:`~runner.engines.model.PrivilegeScope` asks: grants (``relacl``,
``attacl``, ``proacl``, ``typacl``, ``nspacl``, read with ``aclexplode``) and default
privileges (``pg_default_acl``) whose grantee is a managed role, and owners with
``ownership``. An ACL the catalog leaves NULL is read as the server's default for the
object's kind (``acldefault``): ``EXECUTE`` on a function to ``PUBLIC`` is a grant whether it
was written or implied.

Two roles are read as no role at all, so a sandbox and the target read alike: the object's
owner as a grantee (its privileges are implicit), and the connecting role as an owner (an
object the desired SQL creates in a sandbox is the sandbox role's, one a plan creates on
the target is the runner's). A default privilege of the connecting role is recorded for
:data:`~runner.engines.model.OWN_ROLE`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from runner.engines.model import (
    OWN_ROLE,
    PUBLIC,
    DefaultGrant,
    Grant,
    Ownership,
    PrivilegeScope,
)
from runner.engines.postgresql.quoting import quoted

__all__ = ["Privileges", "read_privileges"]

_GRANTEE = f"CASE WHEN x.grantee = 0 THEN '{PUBLIC}' ELSE pg_get_userbyid(x.grantee) END"
_DEFAULT_OBJECTS = {"r": "TABLES", "S": "SEQUENCES", "f": "FUNCTIONS", "T": "TYPES", "n": "SCHEMAS"}
_RELATION_WORD = {"v": "VIEW", "m": "MATERIALIZED VIEW", "S": "SEQUENCE"}
_NO_OWNER = frozenset({"pg_database_owner"})
"""Owners read as none: the ``public`` schema's in a database made since PostgreSQL 15,
which every sandbox database has before any desired SQL runs (so it declares nothing)."""


@dataclass(frozen=True, slots=True)
class _Catalog:
    """One catalog whose objects carry an ACL and an owner."""

    name: str
    acl: str
    owner: str
    default_kind: str  # the acldefault() kind, an SQL expression over ``o``
    names: str  # the columns naming an object: (schema, name, kind, arguments)
    join: str  # what ``names`` needs
    only: str = "true"  # which rows are model objects (not an enum's array type)


_CATALOGS = (
    _Catalog(
        "pg_class", "relacl", "relowner", "CASE WHEN o.relkind = 'S' THEN 's' ELSE 'r' END",
        "n.nspname, o.relname, o.relkind::text, ''",
        "JOIN pg_namespace n ON n.oid = o.relnamespace",
    ),
    _Catalog(
        "pg_proc", "proacl", "proowner", "'f'",
        "n.nspname, o.proname, o.prokind::text, pg_get_function_identity_arguments(o.oid)",
        "JOIN pg_namespace n ON n.oid = o.pronamespace",
    ),
    _Catalog(
        "pg_type", "typacl", "typowner", "'T'", "n.nspname, o.typname, o.typtype::text, ''",
        "JOIN pg_namespace n ON n.oid = o.typnamespace", "o.typtype IN ('e', 'c', 'd')",
    ),
    _Catalog("pg_namespace", "nspacl", "nspowner", "'n'", "'', o.nspname, 'n', ''", ""),
)  # fmt: skip

_KEY_PREFIXES = {
    "pg_class": ("table:", "view:", "matview:", "sequence:"),
    "pg_proc": ("function:",),
    "pg_type": ("type:",),
    "pg_namespace": ("schema:",),
}


@dataclass(frozen=True, slots=True)
class Privileges:
    """What :func:`read_privileges` found, each by key."""

    grants: dict[str, Grant]
    default_grants: dict[str, DefaultGrant]
    owners: dict[str, Ownership]


def _targets(schema: str, name: str, kind: str, arguments: str) -> tuple[str, str]:
    """How a GRANT and an ALTER ... OWNER TO name an object."""
    if kind == "n":
        return f"SCHEMA {quoted(name)}", f"SCHEMA {quoted(name)}"
    full = f"{quoted(schema)}.{quoted(name)}"
    if kind in ("f", "p", "w"):
        word = "PROCEDURE" if kind == "p" else "FUNCTION"
        return f"{word} {full}({arguments})", f"{word} {full}({arguments})"
    if kind in ("e", "c", "d"):  # pg_type.typtype
        word = "DOMAIN" if kind == "d" else "TYPE"
        return f"{word} {full}", f"{word} {full}"
    grant_word = "SEQUENCE" if kind == "S" else "TABLE"
    return f"{grant_word} {full}", f"{_RELATION_WORD.get(kind, 'TABLE')} {full}"


class _Collector:
    """Exploded ACL rows, gathered into one :class:`Grant` per (object, grantee)."""

    def __init__(self, roles: Iterable[str]) -> None:
        self.roles = frozenset(roles)
        self.rows: dict[tuple[str, str, str, str], tuple[set[str], set[str]]] = defaultdict(
            lambda: (set(), set())
        )

    def add(self, on: str, target: str, column: str, grantee: str, privilege: str,
            grantable: bool) -> None:  # fmt: skip
        if grantee not in self.roles:
            return
        held, options = self.rows[(on, target, column, grantee)]
        held.add(privilege)
        if grantable:
            options.add(privilege)

    def grants(self) -> dict[str, Grant]:
        found = {}
        for (on, target, column, grantee), (held, options) in self.rows.items():
            grant = Grant(on, target, grantee, tuple(sorted(held)), tuple(sorted(options)), column)
            found[grant.key] = grant
        return dict(sorted(found.items()))


def _rows(conn: psycopg.Connection[Any], sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, params or None)
        return list(cur.fetchall())


def read_privileges(
    conn: psycopg.Connection[Any],
    scope: PrivilegeScope,
    keys: Mapping[tuple[str, int], str],
    is_linked: Callable[[str], bool],
) -> Privileges:
    """Grants, default privileges and owners of the objects ``keys`` names (catalog name and
    oid -> model key) within ``scope``. ``is_linked(key)`` is true for an object whose owner
    follows another's (a serial's sequence follows its table) and is never given its own."""
    collector = _Collector(scope.roles)
    owners: dict[str, Ownership] = {}
    table_targets: dict[int, tuple[str, str]] = {}  # relation oid -> (table key, GRANT target)
    for catalog in _CATALOGS:
        prefixes = _KEY_PREFIXES[catalog.name]
        wanted = {
            oid: key
            for (name, oid), key in keys.items()
            if name == catalog.name and key.startswith(prefixes)
        }
        if not wanted:
            continue
        oids = sorted(wanted)
        names = {}
        for oid, owner, mine, schema, name, kind, arguments in _rows(
            conn,
            f"SELECT o.oid, pg_get_userbyid(o.{catalog.owner}), o.{catalog.owner} ="
            f" (SELECT oid FROM pg_roles WHERE rolname = current_user), {catalog.names}"
            f" FROM {catalog.name} o {catalog.join} WHERE o.oid = ANY(%s) AND {catalog.only}",
            oids,
        ):
            key = wanted[oid]
            grant_target, owner_target = _targets(schema, name, kind, arguments)
            names[oid] = grant_target
            if catalog.name == "pg_class" and key.startswith("table:"):
                table_targets[oid] = (key, grant_target)
            if scope.ownership and not mine and owner not in _NO_OWNER and not is_linked(key):
                owners[f"owner:{key}"] = Ownership(key, owner_target, owner)
        if not scope.roles:
            continue
        for oid, grantee, privilege, grantable in _rows(
            conn,
            f"SELECT o.oid, {_GRANTEE}, x.privilege_type, x.is_grantable FROM {catalog.name} o,"
            f" LATERAL aclexplode(coalesce(o.{catalog.acl},"
            f' acldefault(({catalog.default_kind})::"char", o.{catalog.owner}))) x'
            f" WHERE o.oid = ANY(%s) AND {catalog.only} AND x.grantee <> o.{catalog.owner}",
            oids,
        ):
            collector.add(wanted[oid], names[oid], "", grantee, privilege, grantable)
    if scope.roles and table_targets:
        _columns(conn, collector, table_targets)
    defaults = _default_grants(conn, scope) if scope.roles else {}
    return Privileges(collector.grants(), defaults, dict(sorted(owners.items())))


def _columns(
    conn: psycopg.Connection[Any], collector: _Collector, tables: Mapping[int, tuple[str, str]]
) -> None:
    for relid, column, grantee, privilege, grantable in _rows(
        conn,
        f"SELECT a.attrelid, a.attname, {_GRANTEE}, x.privilege_type, x.is_grantable"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid,"
        " LATERAL aclexplode(a.attacl) x WHERE a.attacl IS NOT NULL AND a.attnum > 0"
        " AND NOT a.attisdropped AND a.attrelid = ANY(%s) AND x.grantee <> c.relowner",
        sorted(tables),
    ):
        key, target = tables[relid]
        on = f"column:{key.removeprefix('table:')}.{column}"
        collector.add(on, target, column, grantee, privilege, grantable)


def _default_grants(
    conn: psycopg.Connection[Any], scope: PrivilegeScope
) -> dict[str, DefaultGrant]:
    gathered: dict[tuple[str, str, str, str], tuple[set[str], set[str]]] = defaultdict(
        lambda: (set(), set())
    )
    for role, mine, schema, kind, grantee, privilege, grantable in _rows(
        conn,
        f"SELECT pg_get_userbyid(d.defaclrole), d.defaclrole = (SELECT oid FROM pg_roles"
        f" WHERE rolname = current_user), coalesce(n.nspname, '*'), d.defaclobjtype::text,"
        f" {_GRANTEE}, x.privilege_type, x.is_grantable FROM pg_default_acl d"
        " LEFT JOIN pg_namespace n ON n.oid = d.defaclnamespace,"
        " LATERAL aclexplode(d.defaclacl) x WHERE x.grantee <> d.defaclrole",
    ):
        if grantee not in scope.roles or kind not in _DEFAULT_OBJECTS:
            continue
        held, options = gathered[(OWN_ROLE if mine else role, schema, _DEFAULT_OBJECTS[kind],
                                  grantee)]  # fmt: skip
        held.add(privilege)
        if grantable:
            options.add(privilege)
    found = {}
    for (role, schema, objects, grantee), (held, options) in gathered.items():
        grant = DefaultGrant(
            role, schema, objects, grantee, tuple(sorted(held)), tuple(sorted(options))
        )
        found[grant.key] = grant
    return dict(sorted(found.items()))
