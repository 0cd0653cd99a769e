"""The engine's object model: what a database schema *is*, independent of how it was read.

Every object is a frozen, slotted dataclass with a canonical ``key`` (``table:public.orders``,
``index:public.orders_status_idx``, ``function:public.f(integer, text)``). Two models are
compared by key; everything that reaches output is sorted by key, never by set or hash
order. Definitions the server renders itself (index, constraint, view, function and trigger
definitions, type names, default expressions) are kept as the server printed them in a fixed
session, so two databases with the same schema produce the same model.

Volatile values are never part of the model: no OIDs, no sequence positions, no statistics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Final

__all__ = [
    "NO_PRIVILEGES",
    "OBJECT_CLASSES",
    "OWN_ROLE",
    "PRIVILEGE_CLASSES",
    "PUBLIC",
    "Column",
    "Comment",
    "Constraint",
    "Database",
    "DefaultGrant",
    "Definition",
    "Grant",
    "Index",
    "Ownership",
    "PrivilegeScope",
    "Sequence",
    "Table",
    "object_of",
]


@dataclass(frozen=True, slots=True)
class _InSchema:
    """An object named in a schema (a table, an index, a sequence): its key is
    ``<prefix>:<schema>.<name>``, the fields it starts with."""

    prefix: ClassVar[str]
    schema: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.prefix}:{self.schema}.{self.name}"


@dataclass(frozen=True, slots=True)
class Column:
    """One column, with the server's own spelling of its type and default."""

    name: str
    type: str
    not_null: bool = False
    default: str | None = None
    identity: str = ""  # "" | "ALWAYS" | "BY DEFAULT"
    identity_options: tuple[str, ...] = ()  # ("START WITH 1", "INCREMENT BY 1", ...)
    generated: str | None = None  # STORED generation expression
    collation: str | None = None
    extra: tuple[tuple[str, str], ...] = ()  # dialect facts (MySQL ON UPDATE, comment), sorted


@dataclass(frozen=True, slots=True)
class Constraint:
    """A table constraint as ``pg_get_constraintdef`` prints it.

    ``kind``: ``p`` primary key, ``u`` unique, ``c`` check, ``f`` foreign key, ``x`` exclusion.
    ``references`` is the referenced table's key for foreign keys (used for ordering).
    """

    table: str
    name: str
    kind: str
    definition: str
    validated: bool = True
    references: str | None = None
    columns: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"constraint:{self.table.removeprefix('table:')}.{self.name}"


@dataclass(frozen=True, slots=True)
class Table(_InSchema):
    """A table (ordinary or partitioned) with its columns in physical order."""

    prefix = "table"
    columns: tuple[Column, ...]
    partition_key: str | None = None  # "RANGE (created_at)" for a partitioned table
    partition_of: str | None = None  # parent table key for a partition
    partition_bound: str | None = None  # "FOR VALUES FROM (...) TO (...)"
    unlogged: bool = False
    row_security: bool = False
    force_row_security: bool = False
    options: tuple[tuple[str, str], ...] = ()  # dialect facts (ENGINE, STRICT, ...), sorted
    inherits: tuple[str, ...] = ()  # PostgreSQL table inheritance: parent table keys, in order

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True, slots=True)
class Index(_InSchema):
    """A stand-alone index (not one that backs a constraint), as ``pg_get_indexdef`` prints it."""

    prefix = "index"
    table: str
    definition: str
    unique: bool = False
    valid: bool = True
    """False for a PostgreSQL index an interrupted ``CREATE INDEX CONCURRENTLY`` left
    behind (``pg_index.indisvalid``/``indisready``): it is drift, and a plan rebuilds it."""


@dataclass(frozen=True, slots=True)
class Sequence(_InSchema):
    """A sequence's options; ``owned_by`` is ``column:s.t.c`` for a serial's sequence."""

    prefix = "sequence"
    data_type: str
    start: int
    increment: int
    minimum: int
    maximum: int
    cache: int
    cycle: bool
    owned_by: str | None = None


@dataclass(frozen=True, slots=True)
class Definition:
    """An object that is created and dropped whole from its server-rendered definition.

    Views, materialized views, functions, procedures, triggers, policies, enum, composite and
    domain types, schemas and extensions: any change to ``definition`` replaces the object
    (or uses ``replace`` when the engine can change it in place).
    """

    key: str
    kind: str
    create: str
    drop: str
    definition: str
    replace: str | None = None
    table: str | None = None  # for triggers and policies: the table they belong to
    extra: tuple[tuple[str, str], ...] = ()  # kind-specific facts, e.g. enum labels

    def fact(self, name: str) -> str | None:
        return next((v for k, v in self.extra if k == name), None)


@dataclass(frozen=True, slots=True)
class Comment:
    """``COMMENT ON <target> IS '<text>'``; ``target`` is the SQL that names the object."""

    on: str  # the key of the object commented on
    target: str
    text: str

    @property
    def key(self) -> str:
        return f"comment:{self.on}"


@dataclass(frozen=True, slots=True)
class Grant:
    """What one managed role (or ``PUBLIC``) may do on one object, as ``aclexplode`` reads it.

    ``on`` is the object's key (``column:s.t.c`` for a column grant, with ``column`` its
    name); ``target`` is the SQL naming the object in a GRANT (``TABLE "s"."t"``).
    ``privileges`` are sorted; ``grantable`` is the sorted subset held WITH GRANT OPTION.
    Privileges the object's owner holds are implicit and never modelled.
    """

    on: str
    target: str
    grantee: str
    privileges: tuple[str, ...]
    grantable: tuple[str, ...] = ()
    column: str = ""

    @property
    def key(self) -> str:
        return f"grant:{self.on}:{self.grantee}"


@dataclass(frozen=True, slots=True)
class DefaultGrant:
    """A default privilege (``ALTER DEFAULT PRIVILEGES``) for objects ``role`` creates later.

    ``role`` is :data:`OWN_ROLE` for the role that plans and applies (the runner's own login
    on the target, the sandbox role in a sandbox); ``schema`` is ``*`` for every schema;
    ``objects`` is the plural keyword (``TABLES``, ``SEQUENCES``, ``FUNCTIONS``, ``TYPES``,
    ``SCHEMAS``).
    """

    role: str
    schema: str
    objects: str
    grantee: str
    privileges: tuple[str, ...]
    grantable: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"default_grant:{self.role}:{self.schema}:{self.objects}:{self.grantee}"


@dataclass(frozen=True, slots=True)
class Ownership:
    """Who owns an object, when that is a role other than the one that plans and applies
    (an object created by the runner, or by the sandbox role, has no ownership entry: the
    two read alike). ``target`` is the SQL naming the object in ``ALTER ... OWNER TO``."""

    on: str
    target: str
    owner: str

    @property
    def key(self) -> str:
        return f"owner:{self.on}"


OWN_ROLE: Final = "CURRENT_USER"
"""The role a :class:`DefaultGrant` names when it is the connecting role's own."""

PUBLIC: Final = "PUBLIC"
"""The grantee every role is a member of (``managed_roles: [PUBLIC]`` manages it)."""


@dataclass(frozen=True, slots=True)
class PrivilegeScope:
    """Which privileges a model holds: grants and default privileges whose grantee is one of
    ``roles`` (``PUBLIC`` included by that name), and owners with ``ownership``. The empty
    scope (the default) reads nothing about privileges."""

    roles: tuple[str, ...] = ()
    ownership: bool = False

    @classmethod
    def of(cls, roles: Iterable[str], ownership: bool = False) -> PrivilegeScope:
        """Roles deduplicated and sorted, ``public`` in any case spelled ``PUBLIC``."""
        names = {PUBLIC if r.lower() == "public" else r for r in roles}
        return cls(tuple(sorted(names)), ownership)

    @property
    def active(self) -> bool:
        return bool(self.roles) or self.ownership


NO_PRIVILEGES: Final = PrivilegeScope()
"""The default scope: privileges are not read, planned or fingerprinted."""


def object_of(on: str) -> str:
    """The top-level object a grant or owner is about (a column's table)."""
    if on.startswith("column:"):
        return "table:" + on.removeprefix("column:").rsplit(".", 1)[0]
    return on


OBJECT_CLASSES: Final = (Table, Column, Constraint, Index, Sequence, Definition, Comment)
"""Every class a model's objects are made of (a fingerprint names each one's fields)."""

PRIVILEGE_CLASSES: Final = (Grant, DefaultGrant, Ownership)
"""The classes of a model's privilege sections, which only a :class:`PrivilegeScope` that is
:attr:`~PrivilegeScope.active` fills (a fingerprint names them only then, so the models
and plans of a scope without privileges are what they were before privileges existed)."""


@dataclass(frozen=True, slots=True)
class Database:
    """A whole schema: every object by key, plus the dependency edges the catalog records.

    ``depends`` holds (dependent key, dependency key) pairs between top-level objects;
    creations are ordered by the desired model's edges and drops by the live model's. A
    column that depends on something (its type, a function its default calls) also has an
    edge of its own, ``column:<schema>.<table>.<name>``, besides its table's.

    ``casts`` holds the server's type conversions as (source, target, context) triples of
    type names without modifiers (``format_type(oid, NULL)``); context is ``i`` implicit,
    ``a`` assignment or ``e`` explicit, and an empty source or target stands for any type
    (the I/O conversions to and from string types). Empty for dialects without them.
    """

    dialect: str
    server_major: int
    tables: dict[str, Table] = field(default_factory=dict)
    constraints: dict[str, Constraint] = field(default_factory=dict)
    indexes: dict[str, Index] = field(default_factory=dict)
    sequences: dict[str, Sequence] = field(default_factory=dict)
    definitions: dict[str, Definition] = field(default_factory=dict)
    comments: dict[str, Comment] = field(default_factory=dict)
    grants: dict[str, Grant] = field(default_factory=dict)
    default_grants: dict[str, DefaultGrant] = field(default_factory=dict)
    owners: dict[str, Ownership] = field(default_factory=dict)
    depends: frozenset[tuple[str, str]] = frozenset()
    casts: frozenset[tuple[str, str, str]] = frozenset()

    def object_keys(self) -> set[str]:
        """The keys of the schema's objects (tables, constraints, indexes, sequences,
        definitions), without what is attached to them (comments, grants, owners)."""
        return (
            set(self.tables)
            | set(self.constraints)
            | set(self.indexes)
            | set(self.sequences)
            | set(self.definitions)
        )

    def keys(self) -> Iterable[str]:
        yield from self.tables
        yield from self.constraints
        yield from self.indexes
        yield from self.sequences
        yield from self.definitions
        yield from self.comments
        yield from self.grants
        yield from self.default_grants
        yield from self.owners
