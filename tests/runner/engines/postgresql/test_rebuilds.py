"""Rebuilds in dependency order, USING casts and the changes they need, on a real server.

Each test loads a current schema (and rows), plans toward a desired schema through
``seshat-runner``, applies the plan and then checks what a user relies on: the database's
model equals that of a fresh database loaded from the desired SQL, a second plan is empty,
and the rows survive wherever the change allows it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.postgres import PostgresDatabase, temporary_postgres_database
from harness.runner_cli import RunnerCLI, write

from runner.digests import sha256_digest
from runner.engines.planner import model_document
from runner.engines.postgresql.introspect import introspect


@pytest.fixture
def db(postgres_database: PostgresDatabase) -> Iterator[PostgresDatabase]:
    with postgres_database.server.connect() as admin:
        admin.execute(f"ALTER ROLE {postgres_database.server.app_user} CREATEDB")
    yield postgres_database


@pytest.fixture
def runner(db: PostgresDatabase) -> Iterator[RunnerCLI]:
    cli = RunnerCLI(secrets=[db.server.app_password])
    yield cli
    assert cli.leaks() == [], "the password appeared in the runner's output"


def _env(db: PostgresDatabase) -> dict[str, str]:
    return {"TARGET_URL": db.url_with_password}


def _load(db: PostgresDatabase, sql: str) -> None:
    with db.connect_as_app() as conn:
        conn.execute(sql)


def _query(db: PostgresDatabase, sql: str) -> list[tuple[Any, ...]]:
    with db.connect_as_app() as conn:
        return conn.execute(sql).fetchall()


def _model(db: PostgresDatabase) -> dict[str, object]:
    with db.connect_as_app() as conn:
        return model_document(introspect(conn))


def _plan(runner: RunnerCLI, db: PostgresDatabase, desired: Path, *extra: str) -> Any:
    return runner(
        "schema",
        "plan",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(desired),
        "--allow-destructive",
        *extra,
        env=_env(db),
    )


def converge(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path, current: str, desired_sql: str
) -> list[dict[str, Any]]:
    """Load ``current``, plan and apply toward ``desired_sql``; check the result equals a
    database loaded from ``desired_sql`` and that nothing is left to plan. The plan's
    statements."""
    _load(db, current)
    desired = write(tmp_path / "schema.sql", desired_sql)
    plan_file = tmp_path / "plan.json"
    planned = _plan(runner, db, desired, "--output", str(plan_file))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    statements: list[dict[str, Any]] = json.loads(plan_file.read_text())["statements"]
    applied = runner(
        "schema",
        "apply",
        "--url-env",
        "TARGET_URL",
        "--plan",
        str(plan_file),
        "--expect-digest",
        sha256_digest(plan_file.read_bytes()),
        env=_env(db),
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["converged"] is True
    again = _plan(runner, db, desired)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["statements"] == []
    with temporary_postgres_database(db.server) as fresh:
        _load(fresh, desired_sql)
        assert _model(db) == _model(fresh)
    return statements


def sql_of(statements: list[dict[str, Any]]) -> list[str]:
    return [" ".join(s["sql"].split()) for s in statements]


def first(sql: list[str], prefix: str) -> int:
    return next(i for i, statement in enumerate(sql) if statement.startswith(prefix))


def hazards_of(statements: list[dict[str, Any]], key: str) -> set[str]:
    return {h["code"] for s in statements if s["key"] == key for h in s["hazards"]}


# -- type changes and USING ------------------------------------------------------------


def test_enum_to_another_enum_converts_through_text_and_drops_the_old_type_last(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    statements = converge(
        runner,
        db,
        tmp_path,
        "CREATE TYPE old_status AS ENUM ('a', 'b');"
        "CREATE TABLE items (id bigint PRIMARY KEY, status old_status NOT NULL);"
        "INSERT INTO items VALUES (1, 'a'), (2, 'b');",
        "CREATE TYPE new_status AS ENUM ('a', 'b');"
        "CREATE TABLE items (id bigint PRIMARY KEY, status new_status NOT NULL);",
    )
    assert sql_of(statements) == [
        "CREATE TYPE public.new_status AS ENUM ('a', 'b')",
        "ALTER TABLE public.items ALTER COLUMN status TYPE public.new_status"
        " USING status::text::public.new_status",
        "DROP TYPE public.old_status",
    ]
    assert _query(db, "SELECT id, status::text FROM items ORDER BY id") == [(1, "a"), (2, "b")]


def test_enum_in_another_schema_to_text_needs_no_using_and_drops_the_type_after(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    statements = converge(
        runner,
        db,
        tmp_path,
        "CREATE SCHEMA myschema; CREATE TYPE myschema.item_status AS ENUM ('on', 'off');"
        "CREATE TABLE items (id bigint PRIMARY KEY, status myschema.item_status NOT NULL);"
        "INSERT INTO items VALUES (1, 'off');",
        "CREATE SCHEMA myschema;CREATE TABLE items (id bigint PRIMARY KEY, status text NOT NULL);",
    )
    assert sql_of(statements) == [
        "ALTER TABLE public.items ALTER COLUMN status TYPE text",
        "DROP TYPE myschema.item_status",
    ]
    assert _query(db, "SELECT status FROM items") == [("off",)]


def test_text_with_a_default_becomes_an_enum_with_another_default(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    statements = converge(
        runner,
        db,
        tmp_path,
        "CREATE TABLE items (id bigint PRIMARY KEY, status text NOT NULL DEFAULT 'active');"
        "INSERT INTO items VALUES (1, 'inactive');",
        "CREATE TYPE item_status AS ENUM ('active', 'inactive', 'pending');"
        "CREATE TABLE items (id bigint PRIMARY KEY,"
        " status item_status NOT NULL DEFAULT 'pending');",
    )
    assert sql_of(statements) == [
        "ALTER TABLE public.items ALTER COLUMN status DROP DEFAULT",
        "CREATE TYPE public.item_status AS ENUM ('active', 'inactive', 'pending')",
        "ALTER TABLE public.items ALTER COLUMN status TYPE public.item_status"
        " USING status::public.item_status",
        "ALTER TABLE public.items ALTER COLUMN status SET DEFAULT 'pending'::public.item_status",
    ]
    _load(db, "INSERT INTO items (id) VALUES (2)")
    assert _query(db, "SELECT id, status::text FROM items ORDER BY id") == [
        (1, "inactive"),
        (2, "pending"),
    ]


def test_using_is_written_only_where_no_assignment_cast_exists(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    statements = converge(
        runner,
        db,
        tmp_path,
        "CREATE TABLE t (id int PRIMARY KEY, n text, v varchar(200), k integer, a integer[]);"
        "INSERT INTO t VALUES (1, '42', 'abc', 7, '{1,2}');",
        "CREATE TABLE t (id int PRIMARY KEY, n integer, v varchar(20), k text, a bigint[]);",
    )
    assert sql_of(statements) == [
        "ALTER TABLE public.t ALTER COLUMN a TYPE bigint[]",
        "ALTER TABLE public.t ALTER COLUMN k TYPE text",
        "ALTER TABLE public.t ALTER COLUMN n TYPE integer USING n::integer",
        # An assignment cast refuses a value that is too long where ::varchar(20) truncates.
        "ALTER TABLE public.t ALTER COLUMN v TYPE character varying(20)",
    ]
    assert _query(db, "SELECT n, v, k, a FROM t") == [(42, "abc", "7", [1, 2])]


def test_a_type_change_without_any_cast_is_refused_naming_the_column(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    _load(db, "CREATE TABLE t (id int PRIMARY KEY, at bigint)")
    desired = write(tmp_path / "schema.sql", "CREATE TABLE t (id int PRIMARY KEY, at timestamp)")
    refused = _plan(runner, db, desired)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    refusal = json.loads(refused.stdout)["refusal"]
    assert refusal["code"] == "unsupported_change"
    assert "column at" in refusal["message"]
    assert "bigint" in refusal["message"] and "timestamp" in refusal["message"]


# -- identity and sequences ---------------------------------------------------------------


def test_identity_bounds_that_exclude_the_old_start_move_an_unused_identity(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    converge(
        runner,
        db,
        tmp_path,
        "CREATE TABLE voltages (volt int GENERATED BY DEFAULT AS IDENTITY"
        " (START WITH -200 INCREMENT BY 10 MINVALUE -200 MAXVALUE 200), x int);"
        "CREATE TABLE used (id int GENERATED ALWAYS AS IDENTITY, x int);"
        "INSERT INTO used (x) VALUES (1), (2);",
        "CREATE TABLE voltages (volt int GENERATED BY DEFAULT AS IDENTITY"
        " (START WITH -100 INCREMENT BY 5 MINVALUE -100 MAXVALUE 100), x int);"
        "CREATE TABLE used (id int GENERATED ALWAYS AS IDENTITY (INCREMENT BY 2), x int);",
    )
    _load(db, "INSERT INTO voltages (x) VALUES (1); INSERT INTO used (x) VALUES (3)")
    assert _query(db, "SELECT volt FROM voltages") == [(-100,)]
    # A used identity keeps its position: no value is handed out twice.
    assert _query(db, "SELECT id FROM used ORDER BY id") == [(1,), (2,), (4,)]


def test_a_sequence_is_released_before_its_owner_column_and_table_are_dropped(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    statements = converge(
        runner,
        db,
        tmp_path,
        "CREATE SEQUENCE counter; CREATE SEQUENCE other;"
        "CREATE TABLE a (id int DEFAULT nextval('counter'), old_col int);"
        "ALTER SEQUENCE counter OWNED BY a.old_col;"
        "CREATE TABLE gone (id int); ALTER SEQUENCE other OWNED BY gone.id;"
        "CREATE TABLE b (id int); SELECT setval('counter', 41);",
        "CREATE SEQUENCE counter; CREATE SEQUENCE other;"
        "CREATE TABLE a (id int DEFAULT nextval('counter'));"
        "CREATE TABLE b (id int); ALTER SEQUENCE counter OWNED BY b.id;",
    )
    assert sql_of(statements) == [
        "ALTER SEQUENCE public.counter OWNED BY NONE",
        "ALTER SEQUENCE public.other OWNED BY NONE",
        "ALTER TABLE public.a DROP COLUMN old_col",
        "DROP TABLE public.gone",
        "ALTER SEQUENCE public.counter OWNED BY public.b.id",
    ]
    assert _query(db, "SELECT nextval('counter')") == [(42,)]


# -- dependents rebuilt in dependency order ------------------------------------------------

FUNCTION_USERS = """
CREATE FUNCTION f(x int) RETURNS {result} LANGUAGE sql IMMUTABLE RETURN x + 1;
CREATE TABLE t (id int DEFAULT f(1), v int CHECK (f(v) > 0), name text);
CREATE VIEW vv AS SELECT f(id) AS y FROM t;
CREATE FUNCTION g(x int) RETURNS int LANGUAGE sql IMMUTABLE BEGIN ATOMIC SELECT f(x) * 2; END;
CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER t_trg BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION {trigger}();
"""


def test_a_function_replaced_takes_its_view_default_check_function_and_trigger_along(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    statements = converge(
        runner,
        db,
        tmp_path,
        FUNCTION_USERS.format(result="int", trigger="tf")
        + "INSERT INTO t (v, name) VALUES (1, 'kept');",
        FUNCTION_USERS.format(result="bigint", trigger="tf2"),
    )
    sql = sql_of(statements)
    assert sql.index("ALTER TABLE public.t ALTER COLUMN id DROP DEFAULT") < sql.index(
        "DROP FUNCTION public.f(x integer)"
    )
    assert sql.index("DROP TRIGGER t_trg ON public.t") < sql.index("DROP FUNCTION public.tf()")
    assert first(sql, "CREATE OR REPLACE FUNCTION public.tf2()") < sql.index(
        "CREATE TRIGGER t_trg BEFORE INSERT ON public.t FOR EACH ROW EXECUTE FUNCTION public.tf2()"
    )
    assert hazards_of(statements, "view:public.vv") == {"DEPENDENT_REBUILT"}
    assert hazards_of(statements, "function:public.g(x integer)") == {"DEPENDENT_REBUILT"}
    assert _query(db, "SELECT id, v, name FROM t") == [(2, 1, "kept")]


def test_a_replaced_partitioned_table_brings_back_its_partitions_policies_and_views(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    schema = """
    CREATE TABLE p (id int, k int) PARTITION BY {by} (k);
    CREATE TABLE p1 PARTITION OF p FOR VALUES {bound};
    ALTER TABLE p ENABLE ROW LEVEL SECURITY;
    CREATE POLICY pp ON p USING (id > 0);
    CREATE VIEW pv AS SELECT id FROM p;
    COMMENT ON COLUMN p.id IS 'the id';
    """
    statements = converge(
        runner,
        db,
        tmp_path,
        schema.format(by="RANGE", bound="FROM (1) TO (10)"),
        schema.format(by="LIST", bound="IN (1)"),
    )
    sql = sql_of(statements)
    assert sql.index("DROP VIEW public.pv") < sql.index("DROP TABLE public.p")
    assert "CREATE POLICY pp ON public.p AS PERMISSIVE FOR ALL TO PUBLIC USING ((id > 0))" in sql
    assert hazards_of(statements, "policy:public.p.pp") >= {"ROW_SECURITY", "DEPENDENT_REBUILT"}


def test_an_enum_losing_a_label_holds_its_columns_as_text_meanwhile(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    statements = converge(
        runner,
        db,
        tmp_path,
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');"
        "CREATE TABLE m (id int, md mood DEFAULT 'ok', mds mood[]);"
        "CREATE VIEW mv AS SELECT id, md FROM m;"
        "INSERT INTO m VALUES (1, 'happy', '{ok,happy}');",
        "CREATE TYPE mood AS ENUM ('ok', 'happy', 'ecstatic');"
        "CREATE TABLE m (id int, md mood DEFAULT 'ok', mds mood[]);"
        "CREATE VIEW mv AS SELECT id, md FROM m;",
    )
    sql = sql_of(statements)
    assert sql.index("ALTER TABLE public.m ALTER COLUMN md TYPE text") < sql.index(
        "DROP TYPE public.mood"
    )
    assert "ALTER TABLE public.m ALTER COLUMN md TYPE public.mood USING md::public.mood" in sql
    assert _query(db, "SELECT md::text, mds::text FROM m") == [("happy", "{ok,happy}")]


def test_a_view_that_does_not_use_a_retyped_column_is_kept(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    current = """
    CREATE TABLE base (id int PRIMARY KEY, amount numeric(10,2), label text);
    CREATE VIEW v1 AS SELECT id, amount FROM base;
    CREATE VIEW v2 AS SELECT id FROM v1;
    CREATE VIEW whole AS SELECT base FROM base;
    CREATE MATERIALIZED VIEW labels AS SELECT label FROM base;
    """
    _load(db, current + "INSERT INTO base VALUES (1, 2.5, 'x'); REFRESH MATERIALIZED VIEW labels;")
    statements = converge(
        runner, db, tmp_path, "", current.replace("amount numeric(10,2)", "amount numeric(12,2)")
    )
    rebuilt = {s["key"] for s in statements if s["op"] == "drop_definition"}
    assert rebuilt == {"view:public.v1", "view:public.v2", "view:public.whole"}
    assert _query(db, "SELECT label FROM labels") == [("x",)]  # not rebuilt, rows kept


def test_a_dropped_table_under_a_dropped_view_and_generated_columns_added_together(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    statements = converge(
        runner,
        db,
        tmp_path,
        "CREATE TABLE gone (id int); CREATE VIEW gv AS SELECT id FROM gone;"
        "CREATE TABLE t (a int, b int); INSERT INTO t VALUES (1, 2);",
        "CREATE TABLE t (a int, b int, s int GENERATED ALWAYS AS (a + b) STORED,"
        " d int GENERATED ALWAYS AS (a * 2) STORED);",
    )
    sql = sql_of(statements)
    assert sql.index("DROP VIEW public.gv") < sql.index("DROP TABLE public.gone")
    assert _query(db, "SELECT a, b, s, d FROM t") == [(1, 2, 3, 2)]


def test_a_retyped_column_takes_the_policy_trigger_and_generated_column_reading_it(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    schema = """
    CREATE TABLE t (id int PRIMARY KEY, owner_id {type}, amount {type}, note text,
        doubled {type} GENERATED ALWAYS AS (amount * 2) STORED);
    ALTER TABLE t ENABLE ROW LEVEL SECURITY;
    CREATE POLICY own ON t USING (owner_id = 1);
    CREATE POLICY noted ON t USING (note IS NOT NULL);
    CREATE FUNCTION tf() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
    CREATE TRIGGER big BEFORE UPDATE ON t FOR EACH ROW WHEN (NEW.amount > 100)
        EXECUTE FUNCTION tf();
    """
    statements = converge(
        runner,
        db,
        tmp_path,
        schema.format(type="int") + "INSERT INTO t VALUES (1, 1, 5, 'n');",
        schema.format(type="bigint"),
    )
    rebuilt = {s["key"] for s in statements if s["op"] == "drop_definition"}
    assert rebuilt == {"policy:public.t.own", "trigger:public.t.big"}  # not "noted"
    assert _query(db, "SELECT id, owner_id, amount, doubled FROM t") == [(1, 1, 5, 10)]


def test_a_view_kept_over_a_dropped_table_is_dropped_first_and_created_again(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    statements = converge(
        runner,
        db,
        tmp_path,
        "CREATE TABLE t (id int); CREATE VIEW v AS SELECT id FROM t;",
        "CREATE VIEW v AS SELECT 1 AS id;",
    )
    assert sql_of(statements) == [
        "DROP VIEW public.v",
        "DROP TABLE public.t",
        "CREATE VIEW public.v AS SELECT 1 AS id",
    ]


def test_a_partition_parents_column_change_rebuilds_views_over_its_partitions(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    schema = """
    CREATE TABLE p (id int, k int, amount {type}) PARTITION BY LIST (k);
    CREATE TABLE p1 PARTITION OF p FOR VALUES IN (1);
    CREATE VIEW v1 AS SELECT amount FROM p1;
    """
    statements = converge(
        runner,
        db,
        tmp_path,
        schema.format(type="int") + "INSERT INTO p VALUES (1, 1, 10);",
        schema.format(type="bigint"),
    )
    assert hazards_of(statements, "view:public.v1") == {"DEPENDENT_REBUILT"}
    assert _query(db, "SELECT amount FROM v1") == [(10,)]


def test_a_domain_changing_its_base_type_holds_its_columns_as_the_old_base_meanwhile(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    schema = "CREATE DOMAIN qty AS {base} CHECK (VALUE >= 0);"
    schema += "CREATE TABLE o (id int, q qty DEFAULT 1);"
    statements = converge(
        runner,
        db,
        tmp_path,
        schema.format(base="int") + "INSERT INTO o VALUES (1, 5);",
        schema.format(base="bigint"),
    )
    sql = sql_of(statements)
    assert sql.index("ALTER TABLE public.o ALTER COLUMN q TYPE integer") < sql.index(
        "DROP DOMAIN public.qty"
    )
    assert _query(db, "SELECT id, q FROM o") == [(1, 5)]


def test_drift_counts_a_replaced_table_not_what_is_created_again_with_it(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    schema = """
    CREATE TABLE p (id int, k int) PARTITION BY {by} (k);
    CREATE TABLE p1 PARTITION OF p FOR VALUES {bound};
    ALTER TABLE p ENABLE ROW LEVEL SECURITY;
    CREATE POLICY pp ON p USING (id > 0);
    CREATE VIEW pv AS SELECT id FROM p;
    """
    _load(db, schema.format(by="RANGE", bound="FROM (1) TO (10)"))
    desired = write(tmp_path / "schema.sql", schema.format(by="LIST", bound="IN (1)"))
    drift = runner(
        "schema", "drift", "--url-env", "TARGET_URL", "--desired", str(desired), env=_env(db)
    )
    assert drift.returncode == 1, drift.stdout + drift.stderr
    report = json.loads(drift.stdout)
    assert report["categories"] == {"changed": 2, "extra": 0, "invalid": 0, "missing": 0}
