"""The first wall, against real servers: a desired schema is declarations, not a program.

One engine-neutral suite (:class:`DeclarationsSuite`), subclassed once per dialect with its
own hostile corpus. Each hostile statement sits on line 3 of ``schema.sql``, between
ordinary declarations; the plan must be refused ``statement_not_declarative``, naming that
file, line and the statement's kind, before any of the desired SQL ran: the sandbox is never
opened and nothing is loaded. Then: the opt-in lets procedural statements run and the plan
records it (a different plan id); what pg_dump, mariadb-dump and SQLite's dump write plans
to nothing against the database they were dumped from; and a statement the splitter and the
server read differently fails, never running a second statement.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from harness.mariadb import MariaDBDatabase
from harness.postgres import PostgresDatabase, postgres_bin_dir
from harness.runner_cli import RunnerCLI, write

from runner.engines.base import engine_for
from runner.engines.cache import PlanCache
from runner.engines.desired import DesiredSchemaError
from runner.engines.planner import PlanOptions, PlanRefused
from runner.sql import classify
from runner.url import parse_url


class DeclarationsSuite:
    """The suite; a subclass names its dialect, its target and its hostile corpus."""

    dialect: ClassVar[str]
    base: ClassVar[str]  # two lines of declarations: the hostile statement goes on line 3
    refused: ClassVar[dict[str, tuple[str, str]]]  # case -> (statement, the kind named)
    smuggle: ClassVar[str]  # a procedural statement that creates the table ``smuggled``

    @pytest.fixture
    def url(self) -> str:
        raise NotImplementedError

    def desired(self, tmp_path: Path, statement: str) -> Path:
        return write(
            tmp_path / "schema.sql", f"{self.base}{statement}\nCREATE TABLE later (a int);\n"
        )

    def plan(self, url: str, desired: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return RunnerCLI()(
            "schema", "plan", "--url-env", "TARGET_URL", "--desired", str(desired), *extra,
            env={"TARGET_URL": url},
            timeout=300,
        )  # fmt: skip

    def test_each_refused_class_is_named_by_file_line_and_kind_before_anything_runs(
        self, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        engine = engine_for(parse_url(url), cache=PlanCache(tmp_path, enabled=False))

        def never(*args: Any, **kwargs: Any) -> AbstractContextManager[Any]:
            raise AssertionError("the desired SQL reached a sandbox")

        monkeypatch.setattr(engine, "sandbox", never)
        monkeypatch.setattr(engine, "normalize", never)
        for case, (statement, kind) in sorted(self.refused.items()):
            folder = tmp_path / case.replace(" ", "_")
            folder.mkdir()
            with pytest.raises(PlanRefused) as refused:
                engine.plan(self.desired(folder, statement), PlanOptions())
            assert refused.value.reason == "statement_not_declarative", case
            expected = f"schema.sql:3: {kind} is not a declaration (statement_not_declarative)"
            assert refused.value.message.startswith(expected), (case, refused.value.message)

    def test_a_refusal_is_what_the_user_sees(self, url: str, tmp_path: Path) -> None:
        statement, kind = self.refused[sorted(self.refused)[0]]
        result = self.plan(url, self.desired(tmp_path, statement))
        assert result.returncode == 1, result.stderr
        refusal = json.loads(result.stdout)["refusal"]
        assert refusal["code"] == "statement_not_declarative"
        assert refusal["message"].startswith(f"schema.sql:3: {kind} is not a declaration")

    def test_the_opt_in_lets_procedural_sql_run_and_the_plan_records_it(
        self, url: str, tmp_path: Path
    ) -> None:
        desired = self.desired(tmp_path, self.smuggle)
        refused = self.plan(url, desired)
        assert refused.returncode == 1, refused.stderr
        assert json.loads(refused.stdout)["refusal"]["code"] == "statement_not_declarative"
        ran = self.plan(url, desired, "--procedural-schema")
        assert ran.returncode == 0, ran.stderr
        document = json.loads(ran.stdout)
        assert document["procedural_schema"] is True
        assert any("smuggled" in s["key"] for s in document["statements"])
        # Declarations alone plan the same statements either way; the opt-in is recorded, so
        # the plan (and every id made of it) differs.
        (tmp_path / "plain").mkdir()
        plain = write(tmp_path / "plain" / "schema.sql", self.base)
        without = self.plan(url, plain)
        opted = self.plan(url, plain, "--procedural-schema")
        assert without.returncode == opted.returncode == 0, without.stderr + opted.stderr
        first, second = json.loads(without.stdout), json.loads(opted.stdout)
        assert first["statements"] == second["statements"]
        assert "procedural_schema" not in first and second["procedural_schema"] is True
        assert first["options"] != second["options"] and without.stdout != opted.stdout

    def test_a_text_the_splitter_and_the_server_read_differently_fails(
        self, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A splitter that keeps a whole file as one statement (the worst disagreement): the
        classifier sees one declaration, the server two statements, and it runs neither."""
        monkeypatch.setattr(classify, "_pieces", lambda dialect, text, lexing: [(1, text)])
        desired = write(
            tmp_path / "schema.sql", "CREATE TABLE a (x int);\nCREATE INDEX smuggled ON a (x)"
        )
        engine = engine_for(parse_url(url), cache=PlanCache(tmp_path, enabled=False))
        with pytest.raises(DesiredSchemaError) as failed:
            engine.plan(desired, PlanOptions())
        assert str(failed.value).startswith("schema.sql:1: ")


class NaturalDisagreement(DeclarationsSuite):
    """For a dialect whose splitter is known to read some text as one statement where the
    server reads two: that text fails, and its second statement never runs."""

    disagreement: ClassVar[str]  # one piece to the splitter, two to the server
    disagreement_error: ClassVar[str]  # what the server answers to it

    def test_a_natural_disagreement_fails_and_never_runs_a_second_statement(
        self, url: str, tmp_path: Path
    ) -> None:
        desired = write(tmp_path / "schema.sql", self.disagreement)
        result = self.plan(url, desired)
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"schema.sql:1: {self.disagreement_error}" in result.stderr


# -- PostgreSQL ----------------------------------------------------------------------------


class TestPostgresql(NaturalDisagreement):
    dialect = "postgresql"
    base = "CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL);\n-- hostile:\n"
    smuggle = "DO $$ BEGIN EXECUTE 'CREATE TABLE smuggled (a int)'; END $$;"
    # psql's rule, which the splitter follows: in CREATE FUNCTION, BEGIN opens a body (and
    # `begin` is a valid function name); the server reads two statements.
    disagreement = (
        "CREATE FUNCTION begin() RETURNS int LANGUAGE sql RETURN 1;\n"
        "CREATE TABLE smuggled (a int);\n"
    )
    disagreement_error = "cannot insert multiple commands into a prepared statement"
    refused: ClassVar[dict[str, tuple[str, str]]] = {
        "a DO block": ("DO $$ BEGIN EXECUTE 'CREATE TABLE x (a int)'; END $$;", "DO block"),
        "call": ("CALL make_tables();", "CALL"),
        "select": ("SELECT pg_sleep(1);", "SELECT"),
        "select into": ("SELECT 1 AS a INTO copied;", "SELECT"),
        "insert": ("INSERT INTO accounts VALUES (1, 'a');", "INSERT"),
        "update": ("UPDATE accounts SET owner = 'b';", "UPDATE"),
        "delete": ("DELETE FROM accounts;", "DELETE"),
        "merge": (
            "MERGE INTO accounts a USING accounts b ON true WHEN MATCHED THEN DELETE;",
            "MERGE",
        ),
        "truncate": ("TRUNCATE accounts;", "TRUNCATE"),
        "copy from a program": ("COPY accounts FROM PROGRAM 'id';", "COPY"),
        "create table as": (
            "CREATE TABLE leak AS SELECT pg_read_file('/etc/hostname');",
            "CREATE TABLE AS",
        ),
        "prepare": ("PREPARE q AS SELECT 1;", "PREPARE"),
        "execute": ("EXECUTE q;", "EXECUTE"),
        "load a library": ("LOAD 'auto_explain';", "LOAD"),
        "listen": ("LISTEN channel;", "LISTEN"),
        "notify": ("NOTIFY channel;", "NOTIFY"),
        "vacuum": ("VACUUM accounts;", "VACUUM"),
        "analyze": ("ANALYZE accounts;", "ANALYZE"),
        "cluster": ("CLUSTER accounts USING accounts_pkey;", "CLUSTER"),
        "reindex": ("REINDEX TABLE accounts;", "REINDEX"),
        "refresh": ("REFRESH MATERIALIZED VIEW mv;", "REFRESH MATERIALIZED VIEW"),
        "alter system": ("ALTER SYSTEM SET log_statement = 'all';", "ALTER SYSTEM"),
        "alter database": (
            "ALTER DATABASE current SET standard_conforming_strings = off;",
            "ALTER DATABASE",
        ),
        "create database": ("CREATE DATABASE other;", "CREATE DATABASE"),
        "create role": ("CREATE ROLE mallory SUPERUSER LOGIN;", "CREATE ROLE"),
        "alter role": ("ALTER ROLE CURRENT_USER SET search_path = 'evil';", "ALTER ROLE"),
        "create user": ("CREATE USER mallory;", "CREATE USER"),
        "create group": ("CREATE GROUP admins;", "CREATE GROUP"),
        "create tablespace": ("CREATE TABLESPACE ts LOCATION '/tmp';", "CREATE TABLESPACE"),
        "create server": ("CREATE SERVER s FOREIGN DATA WRAPPER postgres_fdw;", "CREATE SERVER"),
        "create wrapper": ("CREATE FOREIGN DATA WRAPPER w;", "CREATE FOREIGN DATA WRAPPER"),
        "create user mapping": (
            "CREATE USER MAPPING FOR CURRENT_USER SERVER s;",
            "CREATE USER MAPPING",
        ),
        "create subscription": (
            "CREATE SUBSCRIPTION s CONNECTION 'host=x' PUBLICATION p;",
            "CREATE SUBSCRIPTION",
        ),
        "create publication": ("CREATE PUBLICATION p FOR ALL TABLES;", "CREATE PUBLICATION"),
        "an event trigger": (
            "CREATE EVENT TRIGGER e ON ddl_command_end EXECUTE FUNCTION f();",
            "CREATE EVENT TRIGGER",
        ),
        "set role": ("SET ROLE postgres;", "SET ROLE"),
        "set session authorization": (
            "SET SESSION AUTHORIZATION postgres;",
            "SET SESSION AUTHORIZATION",
        ),
        "reset": ("RESET ALL;", "RESET"),
        "a setting not allowed": ("SET work_mem = '1GB';", "SET work_mem"),
        "a string-literal setting": ("SET application_name = 'x';", "SET application_name"),
        "lexing: backslashes": (
            "SET standard_conforming_strings = off;",
            "SET standard_conforming_strings to a value other than the safe ones",
        ),
        "lexing: an encoding": (
            "SET client_encoding = 'SJIS';",
            "SET client_encoding to a value other than the safe ones",
        ),
        "lexing through set_config": (
            "SELECT set_config('standard_conforming_strings', 'off', false);",
            "SELECT",
        ),
        "a C function": (
            "CREATE FUNCTION f() RETURNS int LANGUAGE c AS 'libevil', 'f';",
            "CREATE FUNCTION in LANGUAGE C (a shared library)",
        ),
        "transaction control": ("ROLLBACK;", "ROLLBACK"),
    }  # fmt: skip

    @pytest.fixture
    def url(self, postgres_database: PostgresDatabase) -> Iterator[str]:
        with postgres_database.connect() as conn:
            conn.execute(self.base)
        yield postgres_database.server.url(postgres_database.name)

    def test_a_materialized_view_is_loaded_with_no_data(
        self, postgres_database: PostgresDatabase, url: str, tmp_path: Path
    ) -> None:
        """The view's query never runs while the desired schema loads (a query that fails
        when it runs loads), and the view reads back as the target's populated one."""
        view = "CREATE MATERIALIZED VIEW mv AS SELECT 1 / 0 AS a"
        with postgres_database.connect() as conn:
            conn.execute(f"{view} WITH NO DATA")
        desired = write(tmp_path / "schema.sql", f"{self.base}{view};\n")
        result = self.plan(url, desired)
        assert result.returncode == 0, result.stdout + result.stderr
        assert json.loads(result.stdout)["statements"] == []
        ran = self.plan(url, desired, "--procedural-schema")  # opted in: the query runs
        assert ran.returncode == 2 and "division by zero" in ran.stderr, ran.stderr

    def test_pg_dump_of_the_target_plans_to_nothing(
        self, postgres_database: PostgresDatabase, url: str, tmp_path: Path
    ) -> None:
        """pg_dump's preamble (its settings, set_config, \\restrict lines) is accepted and
        a materialized view made WITH NO DATA reads back as the target's."""
        with postgres_database.connect() as conn:
            conn.execute(
                "CREATE SCHEMA app; CREATE TYPE app.mood AS ENUM ('ok', 'sad');"
                "CREATE TABLE app.t (id int PRIMARY KEY, m app.mood, note text DEFAULT 'a;b');"
                "CREATE MATERIALIZED VIEW app.mv AS SELECT id FROM app.t;"
                "CREATE INDEX ON app.mv (id);"
                "CREATE FUNCTION app.f(x int) RETURNS int LANGUAGE sql IMMUTABLE "
                "BEGIN ATOMIC SELECT x + 1; END;"
                "COMMENT ON TABLE app.t IS 'it''s';"
            )
        server = postgres_database.server
        dump = subprocess.run(
            [str(postgres_bin_dir() / "pg_dump"), "--schema-only", "--no-owner", "--no-privileges",
             "-h", server.host, "-p", str(server.port), "-U", server.user, postgres_database.name],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        desired = write(tmp_path / "dump.sql", dump.stdout)
        result = self.plan(url, desired)
        assert result.returncode == 0, result.stdout + result.stderr
        assert json.loads(result.stdout)["statements"] == []


# -- MySQL and MariaDB ---------------------------------------------------------------------


class TestMysql(NaturalDisagreement):
    dialect = "mysql"
    base = "CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL);\n-- hostile:\n"
    smuggle = "PREPARE st FROM 'CREATE TABLE smuggled (a int)';\nEXECUTE st;"
    # `begin` is a valid column name; the splitter takes it for a compound body's start.
    disagreement = "CREATE TABLE t (begin int);\nCREATE INDEX smuggled ON accounts (id);\n"
    disagreement_error = "You have an error in your SQL syntax"
    refused: ClassVar[dict[str, tuple[str, str]]] = {
        "select": ("SELECT SLEEP(1);", "SELECT"),
        "select into outfile": ("SELECT 'x' INTO OUTFILE '/tmp/pwned';", "SELECT"),
        "insert": ("INSERT INTO accounts VALUES (1, 'a');", "INSERT"),
        "replace": ("REPLACE INTO accounts VALUES (1, 'a');", "REPLACE"),
        "update": ("UPDATE accounts SET owner = 'b';", "UPDATE"),
        "delete": ("DELETE FROM accounts;", "DELETE"),
        "truncate": ("TRUNCATE TABLE accounts;", "TRUNCATE"),
        "load data": ("LOAD DATA INFILE '/etc/passwd' INTO TABLE accounts;", "LOAD"),
        "call": ("CALL p();", "CALL"),
        "do": ("DO SLEEP(1);", "DO"),
        "prepare": ("PREPARE st FROM 'SELECT 1';", "PREPARE"),
        "execute": ("EXECUTE st;", "EXECUTE"),
        "create table select": (
            "CREATE TABLE copied SELECT * FROM accounts;",
            "CREATE TABLE ... SELECT",
        ),
        "an anonymous block": ("BEGIN NOT ATOMIC SELECT 1; END;", "BEGIN NOT ATOMIC block"),
        "install a plugin": ("INSTALL PLUGIN connect SONAME 'ha_connect';", "INSTALL"),
        "install a library": ("INSTALL SONAME 'ha_connect';", "INSTALL"),
        "uninstall": ("UNINSTALL PLUGIN connect;", "UNINSTALL"),
        "a UDF": (
            "CREATE FUNCTION evil RETURNS STRING SONAME 'evil.so';",
            "CREATE FUNCTION ... SONAME (a shared library)",
        ),
        "lock tables": ("LOCK TABLES accounts WRITE;", "LOCK"),
        "kill": ("KILL 1;", "KILL"),
        "shutdown": ("SHUTDOWN;", "SHUTDOWN"),
        "flush": ("FLUSH TABLES;", "FLUSH"),
        "handler": ("HANDLER accounts OPEN;", "HANDLER"),
        "data directory": (
            "CREATE TABLE f (a int) ENGINE=MyISAM DATA DIRECTORY = '/tmp';",
            "DATA DIRECTORY table option",
        ),
        "index directory": (
            "CREATE TABLE f (a int) ENGINE=MyISAM INDEX DIRECTORY = '/tmp';",
            "INDEX DIRECTORY table option",
        ),
        "a partition's data directory": (
            "CREATE TABLE f (a int) PARTITION BY HASH (a) (PARTITION p0 DATA DIRECTORY '/tmp');",
            "DATA DIRECTORY table option",
        ),
        "engine connect": (
            "CREATE TABLE f (a int) ENGINE=CONNECT TABLE_TYPE=CSV FILE_NAME='/etc/passwd';",
            "ENGINE=CONNECT (a storage engine not allowed)",
        ),
        "engine federated": (
            "CREATE TABLE f (a int) ENGINE=FEDERATED CONNECTION='mysql://u@h/d/t';",
            "ENGINE=FEDERATED (a storage engine not allowed)",
        ),
        "engine spider": (
            "ALTER TABLE accounts ENGINE=SPIDER;",
            "ENGINE=SPIDER (a storage engine not allowed)",
        ),
        "lexing: a character set": ("SET NAMES gbk;", "SET NAMES of an unsafe character set"),
        "lexing: ansi quotes": (
            "SET sql_mode = 'ANSI_QUOTES';",
            "SET sql_mode to a value other than the safe ones",
        ),
        "lexing: backslashes": (
            "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES';",
            "SET sql_mode to a value other than the safe ones",
        ),
        "a restore not saved": (
            "SET sql_mode = @evil;",
            "SET sql_mode from a variable not saved from @@sql_mode",
        ),
        "the statement bound": ("SET max_statement_time = 0;", "SET max_statement_time"),
        "a global setting": ("SET GLOBAL general_log = 1;", "SET GLOBAL"),
        "create database": ("CREATE DATABASE other;", "CREATE DATABASE"),
        "create user": ("CREATE USER mallory;", "CREATE USER"),
        "create server": (
            "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (HOST 'h');",
            "CREATE SERVER",
        ),
    }  # fmt: skip

    @pytest.fixture
    def url(self, mariadb_database: MariaDBDatabase) -> Iterator[str]:
        with mariadb_database.connect() as conn, conn.cursor() as cur:
            cur.execute(self.base.splitlines()[0])
        yield mariadb_database.server.url(mariadb_database.name)

    def test_mariadb_dump_of_the_target_plans_to_nothing(
        self, mariadb_database: MariaDBDatabase, url: str, tmp_path: Path
    ) -> None:
        """mariadb-dump's executable comments, saved and restored settings, sandbox-mode line
        and DO SETVAL are accepted; views, triggers, routines and events load."""
        with mariadb_database.connect() as conn, conn.cursor() as cur:
            for statement in (
                "CREATE TABLE t (id int PRIMARY KEY, a varchar(10) DEFAULT 'x;y', "
                "b int AS (id * 2) VIRTUAL) COMMENT 'it''s'",
                "CREATE VIEW v AS SELECT id FROM t",
                "CREATE SEQUENCE s",
                "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.a = 'q'; END",
                "CREATE FUNCTION fn(x int) RETURNS int DETERMINISTIC RETURN x + 1",
                "CREATE PROCEDURE pr() BEGIN SELECT 1; END",
                "CREATE EVENT ev ON SCHEDULE EVERY 1 DAY DO DELETE FROM t WHERE id < 0",
            ):
                cur.execute(statement)
        server = mariadb_database.server
        dump = subprocess.run(
            ["mariadb-dump", "--no-defaults", "--no-data", "--routines", "--events", "--triggers",
             f"--socket={server.socket_path}", "-u", server.user, mariadb_database.name],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        desired = write(tmp_path / "dump.sql", dump.stdout)
        result = self.plan(url, desired)
        assert result.returncode == 0, result.stdout + result.stderr
        assert json.loads(result.stdout)["statements"] == []


# -- SQLite ----------------------------------------------------------------------------------


class TestSqlite(DeclarationsSuite):
    dialect = "sqlite"
    base = "CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT NOT NULL);\n-- hostile:\n"
    smuggle = "CREATE TABLE smuggled AS SELECT 1 AS a;"
    refused: ClassVar[dict[str, tuple[str, str]]] = {
        "attach": ("ATTACH 'other.db' AS o;", "ATTACH"),
        "detach": ("DETACH o;", "DETACH"),
        "vacuum into": ("VACUUM INTO 'copy.db';", "VACUUM"),
        "a pragma that trusts the schema": ("PRAGMA trusted_schema = ON;", "PRAGMA trusted_schema"),
        "a pragma that edits the schema table": (
            "PRAGMA writable_schema = ON;",
            "PRAGMA writable_schema",
        ),
        "select": ("SELECT load_extension('evil');", "SELECT"),
        "insert": ("INSERT INTO accounts VALUES (1, 'a');", "INSERT"),
        "replace": ("REPLACE INTO accounts VALUES (1, 'a');", "REPLACE"),
        "create table as": ("CREATE TABLE copied AS SELECT * FROM accounts;", "CREATE TABLE AS"),
        "a recursive query": (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c;",
            "WITH query",
        ),
        "reindex": ("REINDEX;", "REINDEX"),
        "a file-reading virtual table": (
            "CREATE VIRTUAL TABLE f USING fsdir;",
            "virtual table module fsdir",
        ),
        "savepoint": ("SAVEPOINT s;", "SAVEPOINT"),
    }  # fmt: skip

    @pytest.fixture
    def url(self, tmp_path: Path) -> Iterator[str]:
        live = tmp_path / "app.db"
        conn = sqlite3.connect(live)
        conn.executescript(self.base)
        conn.close()
        yield f"sqlite:///{live}"

    def test_sqlite_dump_of_the_target_plans_to_nothing(self, url: str, tmp_path: Path) -> None:
        """What ``iterdump`` (the ``.dump`` of SQLite's shell) writes: PRAGMA foreign_keys,
        BEGIN TRANSACTION and COMMIT around the schema."""
        live = Path(url.removeprefix("sqlite:///"))
        conn = sqlite3.connect(live)
        conn.executescript(
            "CREATE INDEX owners ON accounts (owner);"
            "CREATE VIEW owners_v AS SELECT owner FROM accounts;"
            "CREATE TRIGGER t AFTER INSERT ON accounts BEGIN SELECT 1; END;"
        )
        dump = "PRAGMA foreign_keys=OFF;\n" + "\n".join(conn.iterdump()) + "\n"
        conn.close()
        assert "BEGIN TRANSACTION;" in dump and "COMMIT;" in dump
        desired = write(tmp_path / "dump.sql", dump)
        result = self.plan(url, desired)
        assert result.returncode == 0, result.stdout + result.stderr
        assert json.loads(result.stdout)["statements"] == []
