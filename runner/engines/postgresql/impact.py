"""Impact checks on a PostgreSQL target (:mod:`runner.engines.impact`): one read-only
``REPEATABLE READ`` transaction, each query in a savepoint under ``statement_timeout``.

Sizes come from ``pg_class`` (``relpages``, ``reltuples``, ``pg_relation_size`` summed over a
partitioned table's partitions), estimates from ``pg_stats`` (``null_frac``, ``n_distinct``;
the view shows only what the credential may SELECT), the privilege from
``has_table_privilege``. Names are bound as parameters in catalog queries and quoted with
:func:`~runner.engines.postgresql.quoting.ident` in counting queries.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import psycopg

from runner.engines.impact import ColumnStats, ReaderBase, TableFacts, TimedOut, Unreadable
from runner.engines.postgresql.connection import connection
from runner.engines.postgresql.quoting import ident, literal, qualified
from runner.url import DatabaseURL

__all__ = ["PostgresReader", "reader"]

_CATALOG_TIMEOUT_MS = 10_000
_INTEGERS = {"smallint": (-(2**15), 2**15 - 1), "integer": (-(2**31), 2**31 - 1)}
_TEXTS = ("text", "character varying", "character")
_DIGITS = literal(r"^\s*[-+]?[0-9]+\s*$")
_LENGTH = re.compile(r"^(character varying|character)\((\d+)\)$")


def _split(key: str) -> tuple[str, str]:
    schema, name = key.split(":", 1)[1].split(".", 1)
    return schema, name


class PostgresReader(ReaderBase):
    def __init__(self, conn: psycopg.Connection[Any], timeout_ms: int) -> None:
        self.conn, self.timeout_ms, self.queries = conn, timeout_ms, 0

    def _run(self, sql: str, params: tuple[object, ...] = (), timeout_ms: int = 0) -> Any:
        self.queries += 1
        try:
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.execute(
                    "SELECT set_config('statement_timeout', %s, true)",
                    (f"{timeout_ms or self.timeout_ms}ms",),
                )
                cur.execute(sql.encode("utf-8"), params)
                return cur.fetchone()
        except psycopg.errors.QueryCanceled:
            raise TimedOut from None
        except psycopg.errors.InsufficientPrivilege:
            raise Unreadable from None

    def table(self, key: str) -> TableFacts | None:
        schema, name = _split(key)
        row = self._run(
            "SELECT c.relpages, c.reltuples,"
            " CASE WHEN c.relkind = 'p' THEN (SELECT coalesce(sum(pg_relation_size(t.relid)), 0)"
            "   FROM pg_partition_tree(c.oid) t) ELSE pg_relation_size(c.oid) END,"
            " CASE WHEN c.relkind = 'p' THEN (SELECT sum(p.reltuples)"
            "   FROM pg_partition_tree(c.oid) t JOIN pg_class p ON p.oid = t.relid"
            "   WHERE p.reltuples >= 0 AND p.relkind = 'r')"
            "   WHEN c.reltuples >= 0 THEN c.reltuples END,"
            " has_table_privilege(c.oid, 'SELECT')"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s",
            (schema, name),
            _CATALOG_TIMEOUT_MS,
        )
        if row is None:
            return None
        pages, _, size, rows, readable = row
        return TableFacts(
            bytes=int(size),
            pages=int(pages),
            rows=None if rows is None else round(float(rows)),
            readable=bool(readable),
        )

    def stats(self, key: str, column: str) -> ColumnStats | None:
        schema, name = _split(key)
        row = self._run(
            "SELECT null_frac, n_distinct FROM pg_stats WHERE schemaname = %s AND tablename = %s"
            " AND attname = %s ORDER BY inherited DESC LIMIT 1",
            (schema, name, column),
            _CATALOG_TIMEOUT_MS,
        )
        return None if row is None else ColumnStats(float(row[0]), float(row[1]))

    def one(self, sql: str) -> Any:
        return self._run(sql)

    def sequence_value(self, key: str) -> int | None:
        row = self._run(f"SELECT last_value, is_called FROM {self.name(key)}")
        return int(row[0]) if row[1] else None

    def name(self, key: str) -> str:
        return qualified(*_split(key))

    def quote(self, name: str) -> str:
        return ident(name)

    def misfit_condition(self, column: str, old: str, new: str) -> str | None:
        length = _LENGTH.match(new)
        if length is not None and old.startswith(_TEXTS):
            return f"char_length({column}) > {int(length.group(2))}"
        if new in _INTEGERS:
            low, high = _INTEGERS[new]
            if old in ("integer", "bigint") or old.startswith("numeric"):
                return f"{column} NOT BETWEEN {low} AND {high}"
        if (new in _INTEGERS or new == "bigint") and old.startswith(_TEXTS):
            return f"{column} !~ {_DIGITS}"  # values that are not integers
        return None

    def label_condition(self, column: str, labels: tuple[str, ...]) -> str | None:
        if not labels:
            return f"{column} IS NOT NULL"
        return f"{column}::text NOT IN ({', '.join(literal(label) for label in labels)})"


@contextlib.contextmanager
def reader(url: DatabaseURL, timeout_ms: int) -> Iterator[PostgresReader]:
    """A reader on ``url``: read-only, one snapshot (the planning session's kind)."""
    with connection(url, read_only=True) as conn, conn.transaction():
        yield PostgresReader(conn, timeout_ms)
