"""Reading ``@renamed`` hints from desired SQL (``runner/engines/renames.py``) and applying
them to a live model (``runner/engines/renamed.py``): which spellings count, where a hint
must stand, and how a hint that contradicts the desired schema is refused."""

from __future__ import annotations

import pytest

from runner.engines.desired import DesiredSchemaError
from runner.engines.model import Column, Database, Index, Table
from runner.engines.postgresql.quoting import ident
from runner.engines.renamed import Spelling, renamed, rewrite
from runner.engines.renames import Naming, read_hints, resolve
from runner.sql.split import split_postgresql

POSTGRES = Naming(default_schema="public", fold_unquoted=True)


def split(text: str) -> list[tuple[int, str]]:
    return [(piece.line, piece.sql) for piece in split_postgresql(text)]


def hints(sql: str) -> list[tuple[str, str, str, str]]:
    """(kind, name, old name, where) of each hint, names joined by dots as written."""
    return [
        (
            h.kind,
            ".".join(n for n, _ in h.table + h.name) if h.table else ".".join(n for n, _ in h.name),
            ".".join(n for n, _ in h.old),
            h.where,
        )
        for h in read_hints([("s.sql", sql)], split)
    ]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "CREATE TABLE users ( -- @renamed from=accounts\n  id int\n);",
            [("table", "users", "accounts", "s.sql:1")],
        ),
        (
            "CREATE TABLE new_users /* @renamed from=old_users */ (id int);",
            [("table", "new_users", "old_users", "s.sql:1")],
        ),
        (
            'CREATE TABLE "Users" ( -- @renamed from="user accounts"\n id int);',
            [("table", "Users", "user accounts", "s.sql:1")],
        ),
        (
            "CREATE TABLE t (\n  id int,\n  b text, -- @renamed from=a\n"
            '  c int /* @renamed from="x.y" */\n);',
            [("column", "t.b", "a", "s.sql:3"), ("column", "t.c", "x.y", "s.sql:4")],
        ),
        (
            "CREATE TABLE t (\n  id int,\n  CONSTRAINT t_u UNIQUE (id) -- @renamed from=old_u\n);",
            [("index", "t.t_u", "old_u", "s.sql:3")],
        ),
        (
            "CREATE UNIQUE INDEX CONCURRENTLY i2 /* @renamed from=i1 */ ON ONLY s.t (a);",
            [("index", "s.t.i2", "i1", "s.sql:1")],
        ),
        (
            "CREATE TYPE s.st /* @renamed from=s.old */ AS ENUM ('a');",
            [("type", "s.st", "s.old", "s.sql:1")],
        ),
        (
            "CREATE TYPE st AS ENUM (\n  /* @renamed from=old */\n  'a'\n);",
            [("type", "st", "old", "s.sql:2")],
        ),
        (
            "CREATE TYPE st AS ENUM (\n  'a', -- @renamed from=b\n"
            "  'it''s' /* @renamed from=c */\n);",
            [("enum_value", "st", "b", "s.sql:2"), ("enum_value", "st", "c", "s.sql:3")],
        ),
    ],
)
def test_hints_are_attached_to_what_their_line_declares(
    sql: str, expected: list[tuple[str, str, str, str]]
) -> None:
    assert hints(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE /* @renamed from=old */ TYPE st AS ENUM ('a');",
        "CREATE TYPE /* @renamed from=old */ st AS ENUM ('a');",
        "CREATE TYPE st AS /* @renamed from=old */ ENUM ('a');",
        "CREATE TYPE st AS ENUM /* @renamed from=old */ ('a');",
        "CREATE TABLE t (id int, PRIMARY KEY (id) -- @renamed from=old\n);",
        "SELECT 1 -- @renamed from=old",
        "CREATE TABLE t (note text DEFAULT '-- @renamed from=x');",
    ],
)
def test_hints_elsewhere_are_ignored(sql: str) -> None:
    assert hints(sql) == []


def test_the_first_hint_of_an_object_wins() -> None:
    sql = "CREATE TYPE st /* @renamed from=one */ AS ENUM ( /* @renamed from=two */ 'a');"
    assert hints(sql) == [("type", "st", "one", "s.sql:1")]


def _db(*tables: Table, indexes: tuple[Index, ...] = ()) -> Database:
    return Database(
        "postgresql",
        16,
        tables={t.key: t for t in tables},
        indexes={i.key: i for i in indexes},
    )


def test_a_hint_that_contradicts_the_desired_schema_is_refused() -> None:
    desired = _db(Table("public", "users", (Column("username", "text"), Column("b", "text"))))
    found = read_hints(
        [("s.sql", "CREATE TABLE users (username text, b text -- @renamed from=username\n);")],
        split,
    )
    with pytest.raises(
        DesiredSchemaError, match=r"s\.sql:1: cannot rename column 'username' to 'b'"
    ):
        resolve(found, desired, POSTGRES)


def test_unquoted_names_fold_and_quoted_ones_do_not() -> None:
    desired = _db(Table("public", "Users", (Column("b", "text"),)))
    sql = 'CREATE TABLE "Users" ( -- @renamed from=OLD\n B text -- @renamed from="A"\n);'
    renames = resolve(read_hints([("s.sql", sql)], split), desired, POSTGRES)
    assert [(r.kind, r.table, r.new, r.old) for r in renames.items] == [
        ("column", "table:public.Users", "b", "A"),
        ("table", "table:public.Users", "table:public.Users", "table:public.old"),
    ]


def test_renaming_the_live_model_renames_references() -> None:
    live = _db(
        Table("public", "old", (Column("a", "text"),)),
        indexes=(
            Index(
                "public",
                "old_a",
                "table:public.old",
                "CREATE INDEX old_a ON public.old USING btree (a)",
            ),
        ),
    )
    desired = _db(Table("public", "new", (Column("b", "text"),)))
    sql = "CREATE TABLE new ( -- @renamed from=old\n b text -- @renamed from=a\n);"
    result = renamed(
        live, resolve(read_hints([("s.sql", sql)], split), desired, POSTGRES), Spelling(quote=ident)
    )
    assert [c.op for c in result.changes] == ["rename_table", "rename_column"]
    assert list(result.view.tables) == ["table:public.new"]
    assert result.view.indexes["index:public.old_a"].definition == (
        "CREATE INDEX old_a ON public.new USING btree (b)"
    )
    again = renamed(
        result.view,
        resolve(read_hints([("s.sql", sql)], split), desired, POSTGRES),
        Spelling(quote=ident),
    )
    assert again.changes == () and again.view is result.view


def test_rewrite_leaves_strings_comments_and_other_qualifiers_alone() -> None:
    text = "CHECK (a <> 'a' AND x.a > 0 AND \"a\" < 9) -- a"
    assert rewrite(text, ("a",), "Bee", ident) == (
        'CHECK ("Bee" <> \'a\' AND x.a > 0 AND "Bee" < 9) -- a'
    )
