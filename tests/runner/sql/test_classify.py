"""What a desired schema may hold (runner/sql/classify.py), as tables of cases per dialect.

Each case is a statement and what the classifier makes of it: ``run`` (a declaration or a
safe session setting), ``skip`` (never sent), ``procedural`` (refused unless the declaration
opts in) or ``outside`` (always refused); and the kind a refusal names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.sql.classify import (
    NeedsSuperuser,
    NotDeclarative,
    classify,
    declared,
    leakproof_function,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "dumps"

MARIADB_MODE = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER"

POSTGRESQL = [
    # Declarations.
    ("CREATE TABLE t (a int)", "run", "CREATE TABLE"),
    ("create unlogged table if not exists t (a int)", "run", "CREATE TABLE"),
    ("CREATE TABLE t (LIKE u INCLUDING ALL)", "run", "CREATE TABLE"),
    ("CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (1) TO (2)", "run", "CREATE TABLE"),
    ("-- a comment\n/* and /* a nested */ one */ CREATE INDEX ON t (a)", "run", "CREATE INDEX"),
    ("CREATE UNIQUE INDEX CONCURRENTLY i ON t (a)", "run", "CREATE INDEX"),
    ("CREATE OR REPLACE RECURSIVE VIEW v (n) AS SELECT 1", "run", "CREATE VIEW"),
    ("CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$", "run", None),
    ("CREATE PROCEDURE p() LANGUAGE plpgsql AS $$BEGIN NULL; END$$", "run", None),
    (
        "CREATE CONSTRAINT TRIGGER tr AFTER INSERT ON t FOR EACH ROW EXECUTE FUNCTION f()",
        "run",
        None,
    ),
    ("CREATE TEXT SEARCH CONFIGURATION c (COPY = english)", "run", None),
    ("CREATE OPERATOR CLASS c FOR TYPE int USING btree AS OPERATOR 1 <", "run", None),
    ("CREATE EXTENSION IF NOT EXISTS citext", "run", "CREATE EXTENSION"),
    ("CREATE SCHEMA s CREATE TABLE t (a int) CREATE VIEW v AS SELECT 1", "run", None),
    ("ALTER DEFAULT PRIVILEGES IN SCHEMA s GRANT SELECT ON TABLES TO r", "run", None),
    ("ALTER TABLE t OWNER TO app", "run", "ALTER TABLE"),
    ("DROP MATERIALIZED VIEW IF EXISTS mv", "run", "DROP MATERIALIZED VIEW"),
    ("COMMENT ON COLUMN t.a IS 'DROP DATABASE x; -- not code'", "run", "COMMENT ON"),
    ("COMMENT ON EXTENSION citext IS 'x'", "run", "COMMENT ON"),
    ("GRANT SELECT ON t TO app", "run", "GRANT"),
    ("REVOKE ALL ON t FROM PUBLIC", "run", "REVOKE"),
    # pg_dump's session settings, and the lexing ones fixed.
    ("SET statement_timeout = 0", "run", "SET statement_timeout"),
    ("SET lock_timeout = '5s'", "run", "SET lock_timeout"),
    ("SET client_encoding = 'UTF8'", "run", "SET client_encoding"),
    ("SET NAMES 'utf8'", "run", "SET client_encoding"),
    ("SET standard_conforming_strings = on", "run", "SET standard_conforming_strings"),
    ("SELECT pg_catalog.set_config('search_path', '', false)", "run", None),
    ('SET search_path = app, "$user", public', "run", "SET search_path"),
    ("SET LOCAL search_path TO 'a b'", "run", "SET search_path"),
    ("SET default_tablespace = ''", "run", "SET default_tablespace"),
    ("SET default_table_access_method = heap", "run", None),
    ("SET xmloption = content", "run", "SET xmloption"),
    ("SET client_min_messages = warning", "run", None),
    ("SET row_security = off", "run", None),
    ("SET check_function_bodies = false", "run", None),
    ("SET standard_conforming_strings = off", "outside", None),
    ("SET client_encoding = 'SJIS'", "outside", None),
    ("SET NAMES 'BIG5'", "outside", None),
    ("SET search_path = DEFAULT", "outside", None),
    ("SET work_mem = '1GB'", "outside", "SET work_mem"),
    ("SET session_preload_libraries = 'x'", "outside", None),
    ("SET myapp.secret = 'x'", "outside", "SET myapp.secret"),
    ("SET ROLE postgres", "outside", "SET ROLE"),
    ("SET SESSION AUTHORIZATION postgres", "outside", "SET SESSION AUTHORIZATION"),
    ("SET TIME ZONE 'UTC'", "outside", "SET TIME ZONE"),
    ("RESET ALL", "outside", "RESET"),
    ("SELECT set_config('standard_conforming_strings', 'off', false)", "procedural", "SELECT"),
    ("SELECT pg_catalog.set_config('search_path', '', false); SELECT 1", "procedural", None),
    # Procedural: refused unless the declaration opts in.
    ("DO $$ BEGIN EXECUTE 'CREATE TABLE x ()'; END $$", "procedural", "DO block"),
    ("CALL p()", "procedural", "CALL"),
    ("SELECT 1", "procedural", "SELECT"),
    ("WITH x AS (DELETE FROM t RETURNING 1) SELECT 1", "procedural", "WITH query"),
    ("INSERT INTO t VALUES (1)", "procedural", "INSERT"),
    ("UPDATE t SET a = 1", "procedural", "UPDATE"),
    ("DELETE FROM t", "procedural", "DELETE"),
    ("MERGE INTO t USING u ON true WHEN MATCHED THEN DELETE", "procedural", "MERGE"),
    ("TRUNCATE t", "procedural", "TRUNCATE"),
    ("CREATE TABLE t AS SELECT pg_read_file('/etc/passwd')", "procedural", "CREATE TABLE AS"),
    ("CREATE TEMP TABLE t (a) AS VALUES (1)", "procedural", "CREATE TABLE AS"),
    ("PREPARE q AS SELECT 1", "procedural", "PREPARE"),
    ("EXECUTE q", "procedural", "EXECUTE"),
    ("EXPLAIN ANALYZE DELETE FROM t", "procedural", "EXPLAIN"),
    ("VACUUM FULL t", "procedural", "VACUUM"),
    ("REFRESH MATERIALIZED VIEW mv", "procedural", "REFRESH MATERIALIZED VIEW"),
    ("NOTIFY channel", "procedural", "NOTIFY"),
    ("LOCK TABLE t", "procedural", "LOCK"),
    # Outside the schema: always refused.
    ("COPY t FROM PROGRAM 'id'", "outside", "COPY"),
    ("LOAD 'auto_explain'", "outside", "LOAD"),
    ("ALTER SYSTEM SET log_statement = 'all'", "outside", "ALTER SYSTEM"),
    ("ALTER DATABASE d SET standard_conforming_strings = off", "outside", "ALTER DATABASE"),
    ("CREATE ROLE mallory SUPERUSER", "outside", "CREATE ROLE"),
    ("ALTER ROLE CURRENT_USER SET search_path = x", "outside", "ALTER ROLE"),
    ("CREATE USER MAPPING FOR u SERVER s", "outside", "CREATE USER MAPPING"),
    ("CREATE SERVER s FOREIGN DATA WRAPPER postgres_fdw", "outside", "CREATE SERVER"),
    ("CREATE FOREIGN TABLE f (a int) SERVER s", "outside", "CREATE FOREIGN TABLE"),
    ("CREATE EVENT TRIGGER e ON ddl_command_end EXECUTE FUNCTION f()", "outside", None),
    ("CREATE SUBSCRIPTION s CONNECTION 'host=x' PUBLICATION p", "outside", None),
    ("CREATE TABLESPACE ts LOCATION '/tmp'", "outside", "CREATE TABLESPACE"),
    ("CREATE TRUSTED LANGUAGE plx HANDLER h", "outside", "CREATE LANGUAGE"),
    ("CREATE FUNCTION f() RETURNS int LANGUAGE c AS 'libevil', 'f'", "outside", None),
    ("SECURITY LABEL ON TABLE t IS 'x'", "outside", "SECURITY LABEL"),
    ("REASSIGN OWNED BY a TO b", "outside", "REASSIGN OWNED"),
    ("DROP OWNED BY a", "outside", "DROP OWNED"),
    ("COMMENT ON DATABASE d IS 'x'", "outside", "COMMENT ON DATABASE"),
    ("IMPORT FOREIGN SCHEMA s FROM SERVER x INTO y", "outside", None),
    ("DISCARD ALL", "outside", "DISCARD"),
    ("ROLLBACK", "outside", "ROLLBACK"),
    ("PREPARE TRANSACTION 'x'", "outside", "PREPARE TRANSACTION"),
    ("\\! id", "outside", "a statement that does not start with a keyword"),
    ("FROBNICATE t", "outside", "FROBNICATE (not recognized)"),
    # Transaction control around a file: never sent.
    ("BEGIN", "skip", None),
    ("START TRANSACTION ISOLATION LEVEL SERIALIZABLE", "skip", None),
    ("COMMIT", "skip", None),
    ("END", "skip", None),
    ("\\unrestrict abc", "skip", None),
]

MYSQL = [
    ("CREATE TABLE t (a int) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4", "run", "CREATE TABLE"),
    ("CREATE TABLE cars (id int, engine varchar(20)) ENGINE MyISAM", "run", "CREATE TABLE"),
    ("CREATE TABLE cars (id int, engine multipolygon, engine2 vector(3))", "run", None),
    ("ALTER TABLE t ADD COLUMN engine int, CHANGE engine motor int", "run", "ALTER TABLE"),
    ("CREATE TABLE t (a int, b int AS (a * 2) VIRTUAL) WITH SYSTEM VERSIONING", "run", None),
    (
        "CREATE TABLE p (a int) PARTITION BY RANGE (a) "
        "(PARTITION p0 VALUES LESS THAN (10) ENGINE = InnoDB)",
        "run",
        "CREATE TABLE",
    ),
    ("CREATE TABLE t LIKE u", "run", "CREATE TABLE"),
    ("CREATE OR REPLACE TABLE t (a int)", "run", "CREATE TABLE"),
    ("CREATE DEFINER=`root`@`localhost` SQL SECURITY INVOKER VIEW v AS SELECT 1", "run", None),
    (
        "/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=`root`@`localhost` SQL "
        "SECURITY DEFINER */ /*!50001 VIEW `v` AS select 1 AS `a` */",
        "run",
        "CREATE VIEW",
    ),
    ("CREATE DEFINER=app@'%' PROCEDURE p() BEGIN SELECT 1; END", "run", "CREATE PROCEDURE"),
    ("CREATE FUNCTION f(x int) RETURNS int DETERMINISTIC RETURN x + 1", "run", None),
    ("CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO DELETE FROM t", "run", "CREATE EVENT"),
    ("CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1", "run", None),
    ("CREATE SEQUENCE s", "run", "CREATE SEQUENCE"),
    ("CREATE UNIQUE INDEX i ON t (a)", "run", "CREATE INDEX"),
    ("CREATE VECTOR INDEX v ON t (embedding) M=8 DISTANCE=cosine", "run", "CREATE INDEX"),
    ("DROP TEMPORARY TABLE IF EXISTS t", "run", "DROP TABLE"),
    ("RENAME TABLE a TO b", "run", "RENAME TABLE"),
    ("GRANT SELECT ON db.* TO app", "run", "GRANT"),
    ("USE db", "run", "USE"),
    # mysqldump's settings.
    ("/*!40101 SET NAMES utf8mb4 */", "run", "SET NAMES"),
    ("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'", "run", "SET NAMES"),
    ("/*!40103 SET TIME_ZONE='+00:00' */", "run", "SET time_zone"),
    ("/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */", "run", None),
    ("/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */", "run", None),
    ("SET character_set_client = utf8mb4", "run", "SET character_set_client"),
    ("SET SESSION foreign_key_checks = 0", "run", "SET foreign_key_checks"),
    ("SET @@session.sql_notes = 0", "run", "SET sql_notes"),
    ("SET NAMES gbk", "outside", None),
    ("SET character_set_client = sjis", "outside", None),
    ("SET sql_mode = 'ANSI_QUOTES'", "outside", None),
    ("SET sql_mode = 'STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES'", "outside", None),
    ("SET sql_mode = 'ORACLE'", "outside", None),
    ("SET sql_mode = CONCAT(@@sql_mode, ',ANSI')", "outside", None),
    ("SET sql_mode = DEFAULT", "outside", None),
    ("SET sql_mode = @not_saved", "outside", None),
    ("SET max_statement_time = 0", "outside", "SET max_statement_time"),
    ("SET GLOBAL event_scheduler = ON", "outside", "SET GLOBAL"),
    ("SET @@global.sql_mode = ''", "outside", "SET @@global"),
    ("SET PASSWORD = 'x'", "outside", "SET PASSWORD"),
    ("SET ROLE admin", "outside", "SET ROLE"),
    ("SET STATEMENT sql_mode = '' FOR SELECT 1", "outside", "SET STATEMENT"),
    ("SET default_storage_engine = CONNECT", "outside", None),
    ("SET @x = 1", "procedural", "SET of a user variable"),
    # Procedural.
    ("SELECT 1", "procedural", "SELECT"),
    ("INSERT INTO t VALUES (1)", "procedural", "INSERT"),
    ("REPLACE INTO t VALUES (1)", "procedural", "REPLACE"),
    ("CALL p()", "procedural", "CALL"),
    ("DO SLEEP(1)", "procedural", "DO"),
    ("BEGIN NOT ATOMIC SELECT 1; END", "procedural", "BEGIN NOT ATOMIC block"),
    ("CREATE TABLE t SELECT 1 AS a", "procedural", "CREATE TABLE ... SELECT"),
    ("CREATE TABLE t (a int) AS SELECT 1", "procedural", "CREATE TABLE ... SELECT"),
    ("CREATE TABLE t (a int) IGNORE SELECT 1", "procedural", None),
    ("CREATE TABLE t (WITH x AS (SELECT 1) SELECT * FROM x)", "procedural", None),
    ("LOCK TABLES t WRITE", "procedural", "LOCK"),
    ("TRUNCATE TABLE t", "procedural", "TRUNCATE"),
    ("PREPARE s FROM 'SELECT 1'", "procedural", "PREPARE"),
    ("DROP PREPARE s", "procedural", "DROP PREPARE"),
    # Outside.
    ("CREATE TABLE t (a int) DATA DIRECTORY = '/tmp/x'", "outside", "DATA DIRECTORY table option"),
    ("CREATE TABLE t (a int) ENGINE=MyISAM INDEX DIRECTORY='/tmp/x'", "outside", None),
    ("ALTER TABLE t ADD PARTITION (PARTITION p9 DATA DIRECTORY '/tmp/x')", "outside", None),
    (
        "CREATE TABLE t (a int) ENGINE=CONNECT TABLE_TYPE=CSV FILE_NAME='/etc/passwd'",
        "outside",
        None,
    ),
    ("CREATE TABLE t (a int) ENGINE = 'FEDERATED' CONNECTION='mysql://x'", "outside", None),
    ("ALTER TABLE t ENGINE SPIDER", "outside", "ENGINE=SPIDER (a storage engine not allowed)"),
    ("CREATE FUNCTION f RETURNS STRING SONAME 'evil.so'", "outside", None),
    ("INSTALL SONAME 'ha_connect'", "outside", "INSTALL"),
    ("LOAD DATA INFILE '/etc/passwd' INTO TABLE t", "outside", "LOAD"),
    ("CREATE DATABASE other", "outside", "CREATE DATABASE"),
    ("CREATE SCHEMA other", "outside", "CREATE SCHEMA"),
    ("DROP DATABASE other", "outside", "DROP DATABASE"),
    ("CREATE USER mallory", "outside", "CREATE USER"),
    ("CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (HOST 'x')", "outside", None),
    ("KILL 1", "outside", "KILL"),
    ("SHUTDOWN", "outside", "SHUTDOWN"),
    ("FLUSH PRIVILEGES", "outside", "FLUSH"),
    ("BINLOG 'x'", "outside", "BINLOG"),
    ("ROLLBACK", "outside", "ROLLBACK"),
    ("/*!50001 SELECT 1 -- a comment inside */", "outside", None),
    # Never sent.
    ("BEGIN", "skip", None),
    ("START TRANSACTION", "skip", None),
    ("COMMIT", "skip", None),
    ("DO SETVAL(`s`, 1, 0)", "skip", "DO SETVAL"),
    ("/*M!999999\\- enable the sandbox mode */", "skip", None),
    ("-- only a comment", "skip", None),
]

SQLITE = [
    ("CREATE TABLE t (a INTEGER PRIMARY KEY);", "run", "CREATE TABLE"),
    ("CREATE TEMP TABLE t (a);", "run", "CREATE TABLE"),
    ("CREATE UNIQUE INDEX i ON t (a);", "run", "CREATE INDEX"),
    ("CREATE VIEW v AS SELECT 1;", "run", "CREATE VIEW"),
    (
        "CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO log VALUES (1); END;",
        "run",
        "CREATE TRIGGER",
    ),
    ("CREATE VIRTUAL TABLE docs USING fts5(body);", "run", "CREATE VIRTUAL TABLE"),
    ("ALTER TABLE t ADD COLUMN b;", "run", "ALTER TABLE"),
    ("DROP INDEX i;", "run", "DROP INDEX"),
    ("PRAGMA foreign_keys=OFF;", "run", "PRAGMA foreign_keys"),
    ("PRAGMA main.user_version = 3;", "run", "PRAGMA user_version"),
    ("PRAGMA trusted_schema = ON;", "outside", "PRAGMA trusted_schema"),
    ("PRAGMA writable_schema = ON;", "outside", None),
    ("PRAGMA legacy_alter_table = OFF;", "outside", None),
    ("ATTACH 'other.db' AS o;", "outside", "ATTACH"),
    ("VACUUM INTO '/tmp/copy.db';", "outside", "VACUUM"),
    ("CREATE VIRTUAL TABLE f USING fsdir;", "outside", "virtual table module fsdir"),
    ("SAVEPOINT s;", "outside", "SAVEPOINT"),
    ("SELECT load_extension('x');", "procedural", "SELECT"),
    ("INSERT INTO t VALUES (1);", "procedural", "INSERT"),
    ("CREATE TABLE t AS SELECT 1;", "procedural", "CREATE TABLE AS"),
    ("WITH RECURSIVE c(x) AS (SELECT 1) SELECT x FROM c;", "procedural", "WITH query"),
    ("BEGIN TRANSACTION;", "skip", None),
    ("COMMIT;", "skip", None),
    ("END TRANSACTION;", "skip", None),
]


def _cases(
    dialect: str, table: list[tuple[str, str, str | None]]
) -> list[tuple[str, str, str, str | None]]:
    return [(dialect, sql, action, kind) for sql, action, kind in table]


@pytest.mark.parametrize(
    ("dialect", "sql", "action", "kind"),
    _cases("postgresql", POSTGRESQL) + _cases("mysql", MYSQL) + _cases("sqlite", SQLITE),
)
def test_each_statement_is_classified_by_its_leading_keywords(
    dialect: str, sql: str, action: str, kind: str | None
) -> None:
    verdict = classify(dialect, sql, sql_mode=MARIADB_MODE if dialect == "mysql" else "")
    assert verdict.action == action, verdict
    if kind is not None:
        assert verdict.kind == kind


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgresql", "DO $$ BEGIN END $$"),
        ("postgresql", "CREATE TABLE t AS SELECT 1"),
        ("mysql", "INSERT INTO t VALUES (1)"),
        ("sqlite", "SELECT 1;"),
    ],
)
def test_the_opt_in_lets_procedural_statements_run(dialect: str, sql: str) -> None:
    assert classify(dialect, sql).action == "procedural"
    assert classify(dialect, sql, procedural=True).action == "run"


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgresql", "ALTER SYSTEM SET x = 1"),
        ("postgresql", "SET standard_conforming_strings = off"),
        ("mysql", "CREATE TABLE t (a int) DATA DIRECTORY '/tmp'"),
        ("mysql", "SET NAMES big5"),
        ("sqlite", "ATTACH 'x' AS y;"),
    ],
)
def test_the_opt_in_never_lets_what_reaches_outside_run(dialect: str, sql: str) -> None:
    assert classify(dialect, sql, procedural=True).action == "outside"


MATERIALIZED = [
    (
        "CREATE MATERIALIZED VIEW mv AS SELECT 1",
        "CREATE MATERIALIZED VIEW mv AS SELECT 1\nWITH NO DATA",
    ),
    (
        "CREATE MATERIALIZED VIEW mv AS SELECT 1 -- trailing comment",
        "CREATE MATERIALIZED VIEW mv AS SELECT 1\nWITH NO DATA -- trailing comment",
    ),
    (
        "CREATE MATERIALIZED VIEW mv AS SELECT 1 WITH DATA",
        "CREATE MATERIALIZED VIEW mv AS SELECT 1 WITH NO DATA",
    ),
    (
        "create materialized view mv as select 1 with data",
        "create materialized view mv as select 1 WITH NO DATA",
    ),
    (
        "CREATE MATERIALIZED VIEW mv AS SELECT 1 WITH NO DATA",
        "CREATE MATERIALIZED VIEW mv AS SELECT 1 WITH NO DATA",
    ),
    (
        "CREATE MATERIALIZED VIEW mv AS SELECT 'WITH DATA'",
        "CREATE MATERIALIZED VIEW mv AS SELECT 'WITH DATA'\nWITH NO DATA",
    ),
]


@pytest.mark.parametrize(("sql", "runs"), MATERIALIZED)
def test_a_materialized_view_is_created_with_no_data(sql: str, runs: str) -> None:
    verdict = classify("postgresql", sql)
    assert (verdict.action, verdict.sql) == ("run", runs)
    assert classify("postgresql", sql, procedural=True).sql == sql  # opted in: as written


def test_a_refusal_names_the_file_line_and_kind_of_the_first_refused_statement() -> None:
    files = [
        ("a.sql", "CREATE TABLE t (a int);\n"),
        ("b.sql", "CREATE TABLE u (a int);\n\n-- seed it\nINSERT INTO u VALUES (1);\nCALL p();\n"),
    ]
    with pytest.raises(NotDeclarative) as refused:
        declared("postgresql", files)
    message = str(refused.value)
    assert message.startswith(
        "b.sql:4: INSERT is not a declaration (statement_not_declarative): a desired schema "
        "holds only CREATE/ALTER/DROP, COMMENT, GRANT/REVOKE and safe SET; a declaration may "
        "let procedural statements run with spec.policy.proceduralSchema: true"
    )
    assert message.endswith("see docs/engine.md (1 more such statement)")
    assert (refused.value.file, refused.value.line, refused.value.kind) == ("b.sql", 4, "INSERT")


def test_a_restore_is_allowed_only_from_a_variable_saved_from_the_same_setting() -> None:
    saved = "SET @old = @@character_set_client;\nSET character_set_client = @old;\n"
    assert [c.kind for c in declared("mysql", [("a.sql", saved)])] == [
        "SET @variable = @@variable",
        "SET character_set_client",
    ]
    crossed = "SET @old = @@sql_notes;\nSET sql_mode = @old;\n"
    with pytest.raises(NotDeclarative, match=r"a\.sql:2: SET sql_mode from a variable"):
        declared("mysql", [("a.sql", crossed)])
    other_file = [("a.sql", "SET @old = @@sql_mode;\n"), ("b.sql", "SET sql_mode = @old;\n")]
    with pytest.raises(NotDeclarative, match=r"b\.sql:1: "):
        declared("mysql", other_file)


def test_an_sql_mode_keeps_the_quoting_the_session_started_with() -> None:
    """A target in NO_BACKSLASH_ESCAPES: the dump's own mode may keep the flag, never drop it
    (the server would read backslashes again); without the flag, it may never be gained."""
    lexing = "STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES"
    keeps = "SET sql_mode = 'NO_BACKSLASH_ESCAPES,NO_AUTO_VALUE_ON_ZERO'"
    drops = "SET sql_mode = 'NO_AUTO_VALUE_ON_ZERO'"
    assert classify("mysql", keeps, sql_mode=lexing).action == "run"
    assert classify("mysql", drops, sql_mode=lexing).action == "outside"
    assert classify("mysql", drops, sql_mode=MARIADB_MODE).action == "run"
    assert classify("mysql", keeps, sql_mode=MARIADB_MODE).action == "outside"


def test_quotes_are_read_as_the_session_reads_them() -> None:
    """With NO_BACKSLASH_ESCAPES a backslash ends nothing: the DATA DIRECTORY a default-mode
    reading would take for the inside of a string is code, and refused."""
    sql = "CREATE TABLE t (a int) COMMENT '\\' DATA DIRECTORY = '/tmp/x' -- '"
    assert classify("mysql", sql, sql_mode="NO_BACKSLASH_ESCAPES").action == "outside"


DUMPS = [
    ("postgresql", "pg_dump_schema_only.sql", ""),
    ("mysql", "mariadb_dump_no_data.sql", MARIADB_MODE),
]


@pytest.mark.parametrize(("dialect", "name", "mode"), DUMPS)
def test_what_the_dump_tools_write_is_accepted(dialect: str, name: str, mode: str) -> None:
    """``pg_dump --schema-only`` and ``mariadb-dump --no-data --routines --events
    --triggers`` of a schema with one object of each kind: every statement runs or is
    skipped; none is refused."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    kinds = {c.kind for c in declared(dialect, [(name, text)], sql_mode=mode)}
    assert {"CREATE TABLE", "CREATE VIEW", "CREATE FUNCTION", "CREATE PROCEDURE"} <= kinds


def test_leakproof_needs_a_superuser_and_only_leakproof_does() -> None:
    body = " RETURNS bool LANGUAGE sql AS $$ SELECT 'LEAKPROOF' = 'x' $$"
    assert leakproof_function("CREATE FUNCTION f()" + body + " IMMUTABLE NOT LEAKPROOF") is None
    assert leakproof_function("CREATE FUNCTION f()" + body) is None
    assert leakproof_function("ALTER FUNCTION s.f(int) LEAKPROOF") == "ALTER FUNCTION s.f LEAKPROOF"
    text = 'CREATE TABLE t (a int);\nCREATE OR REPLACE FUNCTION s."F"()' + body + " LEAKPROOF;"
    with pytest.raises(NeedsSuperuser) as refused:
        declared("postgresql", [("a.sql", text)])
    assert refused.value.reason == "superuser_required"
    assert str(refused.value).startswith(
        'a.sql:2: CREATE FUNCTION s."F" LEAKPROOF needs a superuser'
    )
