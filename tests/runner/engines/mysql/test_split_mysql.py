"""Splitting MySQL scripts: what ends a statement and what does not."""

from __future__ import annotations

import pytest

from runner.sql.split_mysql import MysqlLexing, split_mysql


def test_quotes_and_comments_do_not_end_a_statement() -> None:
    script = (
        "CREATE TABLE t (a varchar(9) DEFAULT 'x;y', `b;c` int); -- a comment; still one\n"
        "# hash comment;\n"
        "INSERT INTO t VALUES ('it''s; \\' fine', 1); /* block; comment */\n"
    )
    assert [(p.line, p.sql) for p in split_mysql(script)] == [
        (1, "CREATE TABLE t (a varchar(9) DEFAULT 'x;y', `b;c` int)"),
        (
            1,
            "-- a comment; still one\n# hash comment;\nINSERT INTO t VALUES ('it''s; \\' fine', 1)",
        ),
    ]


def test_compound_bodies_and_delimiter() -> None:
    script = (
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN\n"
        "  IF NEW.a IS NULL THEN SET NEW.a = CASE WHEN 1 THEN 'x' END; END IF;\n"
        "END;\n"
        "DELIMITER //\n"
        "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END//\n"
        "DELIMITER ;\n"
        "BEGIN;\n"
        "SELECT 3;\n"
    )
    pieces = split_mysql(script)
    assert [p.line for p in pieces] == [1, 5, 7, 8]
    assert pieces[0].sql.endswith("END IF;\nEND")
    assert pieces[1].sql == "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END"
    assert [p.sql for p in pieces[2:]] == ["BEGIN", "SELECT 3"]


def test_routine_bodies_with_loops_labels_handlers_and_case_statements() -> None:
    body = (
        "CREATE PROCEDURE walk(IN n int)\n"
        "BEGIN\n"
        "  DECLARE i int DEFAULT 0;\n"
        "  DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN SET i = -1; END;\n"
        "  outer_loop: LOOP\n"
        "    SET i = i + 1;\n"
        "    CASE WHEN i > n THEN LEAVE outer_loop; ELSE SET @s = 'END; x'; END CASE;\n"
        "    REPEAT SET i = i + 1; UNTIL i > 3 END REPEAT;\n"
        "    WHILE i < 2 DO SET i = i + 1; END WHILE;\n"
        "  END LOOP outer_loop;\n"
        "  lbl: BEGIN SELECT i; END lbl;\n"
        "END"
    )
    function = "CREATE FUNCTION f(x int) RETURNS int DETERMINISTIC RETURN x + 1"
    pieces = split_mysql(f"{body};\n{function};\nSELECT f(1);\n")
    assert [p.sql for p in pieces] == [body, function, "SELECT f(1)"]
    assert [p.line for p in pieces] == [1, 13, 14]


# How the session's sql_mode reads quotes (runner/sql/classify.py sets it and reads it so).
LEXINGS = {
    "backslash escapes a quote by default": (
        MysqlLexing(),
        "SELECT 'a\\'; b'; SELECT 2;",
        ["SELECT 'a\\'; b'", "SELECT 2"],
    ),
    "NO_BACKSLASH_ESCAPES: a backslash escapes nothing": (
        MysqlLexing(backslash_escapes=False),
        "SELECT 'a\\'; SELECT 2;",
        ["SELECT 'a\\'", "SELECT 2"],
    ),
    "ANSI_QUOTES: a double-quoted name has no escapes": (
        MysqlLexing(ansi_quotes=True),
        'SELECT "a\\"; SELECT 2;',
        ['SELECT "a\\"', "SELECT 2"],
    ),
    "two dashes and a control character start a comment": (
        MysqlLexing(),
        "SELECT 1 --\x0b; not code\n; SELECT 2;",
        ["SELECT 1 --\x0b; not code", "SELECT 2"],
    ),
    "two dashes and a letter are two minus signs": (
        MysqlLexing(),
        "SELECT 1 --1; SELECT 2;",
        ["SELECT 1 --1", "SELECT 2"],
    ),
    "a comment line does not hide the next line": (
        MysqlLexing(),
        "--\n-- dump header\n--\n/*!40101 SET @a = @@sql_mode */;\nSELECT 2;",
        ["--\n-- dump header\n--\n/*!40101 SET @a = @@sql_mode */", "SELECT 2"],
    ),
}


@pytest.mark.parametrize("case", sorted(LEXINGS))
def test_quotes_and_comments_read_as_the_session_reads_them(case: str) -> None:
    lexing, script, statements = LEXINGS[case]
    assert [p.sql for p in split_mysql(script, lexing)] == statements
