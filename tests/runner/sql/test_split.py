"""The PostgreSQL statement splitter: quotes, dollar quotes and comments hide semicolons."""

from __future__ import annotations

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
