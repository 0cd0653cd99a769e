"""The PostgreSQL statement splitter: quotes, dollar quotes and comments hide semicolons."""

from __future__ import annotations

import pytest

from runner.sql.split import Piece, split_postgresql


def test_statements_split_on_semicolons_with_their_starting_lines() -> None:
    script = "CREATE TABLE a (x int);\n\nCREATE TABLE b (y int);\nSELECT 1"
    assert split_postgresql(script) == [
        Piece("CREATE TABLE a (x int)", 1),
        Piece("CREATE TABLE b (y int)", 3),
        Piece("SELECT 1", 4),
    ]


def test_semicolons_inside_strings_identifiers_dollar_quotes_and_comments_do_not_split() -> None:
    script = (
        "INSERT INTO t VALUES ('a;b', E'c\\';d');\n"
        'CREATE TABLE "we;ird" (x int);\n'
        "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$ BEGIN RETURN 1; END $body$;\n"
        "DO $$ BEGIN PERFORM 1; END $$;\n"
        "-- a comment; with a semicolon\n"
        "/* block; /* nested; */ still comment; */ SELECT 2;\n"
    )
    pieces = split_postgresql(script)
    assert [p.line for p in pieces] == [1, 2, 3, 4, 5]
    assert pieces[2].sql.endswith("END $body$")
    assert pieces[4].sql.endswith("SELECT 2")


def test_comment_only_trailers_are_not_statements() -> None:
    assert split_postgresql("SELECT 1;\n-- done\n") == [Piece("SELECT 1", 1)]


def test_splitting_is_linear_in_the_number_of_statements() -> None:
    pieces = split_postgresql("CREATE TABLE t (id int);\n" * 20000)
    assert len(pieces) == 20000
    assert pieces[-1].line == 20000


# Where a statement ends, as the server reads the text: each case is a script and the
# statements it holds. The loaders send each statement alone (the extended query protocol),
# so a text the splitter cuts where the server would not fails instead of running.
SERVER_READINGS = {
    "a name ending in $E before a string is a name and a plain string": (
        "SELECT a$E'\\'; SELECT 2; --';",
        ["SELECT a$E'\\'", "SELECT 2"],
    ),
    "E at a word's start opens an escape string": (
        "SELECT E'\\'; x';\nSELECT 2;",
        ["SELECT E'\\'; x'", "SELECT 2"],
    ),
    "an escape string right after a dollar quote": (
        "SELECT $$a$$ || E'\\'; x';\nSELECT 2;",
        ["SELECT $$a$$ || E'\\'; x'", "SELECT 2"],
    ),
    "a dollar-quote tag beyond ASCII": (
        "CREATE FUNCTION f() RETURNS int AS $é$ SELECT 1; $é$ LANGUAGE sql;\nSELECT 2;",
        ["CREATE FUNCTION f() RETURNS int AS $é$ SELECT 1; $é$ LANGUAGE sql", "SELECT 2"],
    ),
    "a name with dollars is not a dollar quote": (
        "SELECT x$$ FROM t; SELECT 2;",
        ["SELECT x$$ FROM t", "SELECT 2"],
    ),
    "a SQL-standard function body holds semicolons": (
        "CREATE FUNCTION g(x int) RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT x; SELECT 2; END;"
        "\nCREATE TABLE t (a int);",
        [
            "CREATE FUNCTION g(x int) RETURNS int LANGUAGE sql "
            "BEGIN ATOMIC SELECT x; SELECT 2; END",
            "CREATE TABLE t (a int)",
        ],
    ),
    "CASE ... END inside a routine body nests": (
        "CREATE OR REPLACE PROCEDURE p() LANGUAGE sql BEGIN ATOMIC "
        "SELECT CASE WHEN true THEN 1 END; END; SELECT 3;",
        [
            "CREATE OR REPLACE PROCEDURE p() LANGUAGE sql BEGIN ATOMIC "
            "SELECT CASE WHEN true THEN 1 END; END",
            "SELECT 3",
        ],
    ),
    "a comment inside a routine body leaves it open": (
        "CREATE FUNCTION g() RETURNS int LANGUAGE sql BEGIN ATOMIC /* c */ SELECT 1; END;"
        "\nSELECT 2;",
        [
            "CREATE FUNCTION g() RETURNS int LANGUAGE sql BEGIN ATOMIC /* c */ SELECT 1; END",
            "SELECT 2",
        ],
    ),
    "a parameter named begin opens no body": (
        "CREATE FUNCTION f(begin int) RETURNS int LANGUAGE sql RETURN 1; SELECT 2;",
        ["CREATE FUNCTION f(begin int) RETURNS int LANGUAGE sql RETURN 1", "SELECT 2"],
    ),
    "BEGIN outside a routine is a statement of its own": (
        "BEGIN; CREATE TABLE t (a int); COMMIT;",
        ["BEGIN", "CREATE TABLE t (a int)", "COMMIT"],
    ),
}


@pytest.mark.parametrize("case", sorted(SERVER_READINGS))
def test_statements_end_where_the_server_ends_them(case: str) -> None:
    script, statements = SERVER_READINGS[case]
    assert [p.sql for p in split_postgresql(script)] == statements
