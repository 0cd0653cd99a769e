"""Splitting MySQL scripts: what ends a statement and what does not."""

from __future__ import annotations

from runner.sql.split_mysql import split_mysql


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
