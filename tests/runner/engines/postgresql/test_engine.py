"""The PostgreSQL engine through ``seshat-runner schema ...`` against a real server.

Each test gets a fresh database owned by a role that logs in with a password; the runner
receives the URL through an environment variable (``--url-env``), and every byte it prints
is checked for that password afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from harness.postgres import PostgresDatabase, PostgresServer
from harness.runner_cli import RunnerCLI, write

from runner.digests import sha256_digest

BASE = """
CREATE TABLE customers (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email text NOT NULL);
CREATE TABLE orders (
    id serial PRIMARY KEY,
    customer_id bigint REFERENCES customers (id),
    total numeric(10,2),
    note varchar(200)
);
CREATE INDEX orders_customer_idx ON orders (customer_id);
CREATE VIEW big_orders AS SELECT id, total FROM orders WHERE total > 100;
"""


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


def env(db: PostgresDatabase) -> dict[str, str]:
    return {"TARGET_URL": db.url_with_password}


def load(db: PostgresDatabase, sql: str) -> None:
    with db.connect_as_app() as conn:
        conn.execute(sql)


def query(db: PostgresDatabase, sql: str) -> list[tuple[Any, ...]]:
    with db.connect_as_app() as conn:
        return conn.execute(sql).fetchall()


def plan(
    runner: RunnerCLI, db: PostgresDatabase, desired: Path, *extra: str, seed: str = "0"
) -> Any:
    result = runner(
        "schema",
        "plan",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(desired),
        *extra,
        env=env(db),
        seed=seed,
    )
    return result


def apply(
    runner: RunnerCLI, db: PostgresDatabase, plan_file: Path, digest: str | None = None
) -> Any:
    """``schema apply`` of ``plan_file``, expecting ``digest`` (default: the file's own)."""
    expected = digest or sha256_digest(plan_file.read_bytes())
    command = ["schema", "apply", "--url-env", "TARGET_URL", "--plan", str(plan_file)]
    return runner(*command, "--expect-digest", expected, env=env(db))


def test_plan_apply_and_converge(runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path) -> None:
    load(db, BASE + "INSERT INTO customers (email) VALUES ('a@example.com');")
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace(
            "note varchar(200)", "note varchar(200),\n    shipped boolean DEFAULT false NOT NULL"
        )
        + "CREATE INDEX orders_total_idx ON orders (total);\n"
        + "COMMENT ON TABLE orders IS 'all orders';\n",
    )
    planned = plan(runner, db, desired, "--output", str(tmp_path / "plan.json"))
    assert planned.returncode == 0, planned.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    sql = [s["sql"] for s in document["statements"]]
    assert sql == [
        "ALTER TABLE public.orders ADD COLUMN shipped boolean DEFAULT false NOT NULL",
        "CREATE INDEX CONCURRENTLY orders_total_idx ON public.orders USING btree (total)",
        "COMMENT ON TABLE public.orders IS 'all orders'",
    ]
    assert [s["transactional"] for s in document["statements"]] == [True, False, True]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    report = json.loads(applied.stdout)
    assert report["converged"] is True and report["ran"] == [0, 1, 2]
    assert query(db, "SELECT obj_description('public.orders'::regclass)") == [("all orders",)]
    again = plan(runner, db, desired)
    assert again.returncode == 0
    assert json.loads(again.stdout)["statements"] == []
    drift = runner(
        "schema", "drift", "--url-env", "TARGET_URL", "--desired", str(desired), env=env(db)
    )
    assert drift.returncode == 0
    assert json.loads(drift.stdout)["total"] == 0


def test_drift_reports_bounded_aggregates(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, BASE + "CREATE TABLE extra (id int);")
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("note varchar(200)", "note text") + "CREATE TABLE missing (id int);",
    )
    result = runner(
        "schema", "drift", "--url-env", "TARGET_URL", "--desired", str(desired), env=env(db)
    )
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert set(report) == {"digest", "dialect", "total", "highestSeverity", "categories"}
    assert report["categories"] == {
        "missing": 1,
        "extra": 1,
        "changed": 1,
        "invalid": 0,
    }  # the view on orders is rebuilt, not drifted
    assert report["highestSeverity"] == "destructive"
    assert report["total"] == 3


def test_destructive_plans_are_refused_unless_allowed(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, BASE)
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("    note varchar(200)\n", "").replace("numeric(10,2),", "numeric(10,2)"),
    )
    refused = plan(runner, db, desired)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["refusal"]["code"] == "destructive_disallowed"
    allowed = plan(runner, db, desired, "--allow-destructive")
    assert allowed.returncode == 0, allowed.stderr
    statement = json.loads(allowed.stdout)["statements"]
    assert "DROP_COLUMN" in [h["code"] for s in statement for h in s["hazards"]]
    assert json.loads(allowed.stdout)["summary"]["destructive"] is True


@pytest.mark.parametrize(
    ("change", "kind", "code"),
    [
        (("note varchar(200)", "note varchar(20)"), "destructive", "NARROWING_TYPE"),
        (("total numeric(10,2)", "total integer"), "lock", "TABLE_REWRITE"),
        (("note varchar(200)", "note varchar(200) NOT NULL"), "data", "DATA_DEPENDENT_NOT_NULL"),
        (
            ("note varchar(200)", "note varchar(200) CHECK (note <> '')"),
            "data",
            "DATA_DEPENDENT_CHECK",
        ),
        (("note varchar(200)", "note varchar(200) UNIQUE"), "data", "DATA_DEPENDENT_UNIQUE"),
    ],
)
def test_each_hazard_kind_is_computed_from_the_change(
    runner: RunnerCLI,
    db: PostgresDatabase,
    tmp_path: Path,
    change: tuple[str, str],
    kind: str,
    code: str,
) -> None:
    load(db, BASE)
    desired = write(tmp_path / "schema.sql", BASE.replace(*change))
    result = plan(runner, db, desired, "--allow-destructive")
    assert result.returncode == 0, result.stdout + result.stderr
    found = {
        (h["kind"], h["code"])
        for s in json.loads(result.stdout)["statements"]
        for h in s["hazards"]
    }
    assert (kind, code) in found


def test_privilege_changes_are_flagged(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, BASE)
    desired = write(
        tmp_path / "schema.sql",
        BASE
        + """
ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_orders ON orders USING (customer_id = 1);
CREATE FUNCTION admin_count() RETURNS bigint LANGUAGE sql SECURITY DEFINER
    AS 'SELECT count(*) FROM public.orders';
""",
    )
    result = plan(runner, db, desired)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["privilege_changes"] == [
        "ROW_SECURITY",
        "SECURITY_DEFINER",
    ]


def test_protected_tables_are_refused_directly_and_through_dependencies(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(
        db,
        "CREATE DOMAIN money_amount AS numeric(10,2);"
        + BASE.replace("total numeric(10,2)", "total money_amount"),
    )
    desired = write(
        tmp_path / "a.sql",
        "CREATE DOMAIN money_amount AS numeric(10,2);"
        + BASE.replace("total numeric(10,2)", "total money_amount").replace(
            "note varchar(200)", "note text"
        ),
    )
    direct = plan(runner, db, desired, "--protected-table", "orders")
    assert direct.returncode == 1
    assert json.loads(direct.stdout)["refusal"]["code"] == "protected_table"
    through = write(
        tmp_path / "b.sql",
        "CREATE DOMAIN money_amount AS numeric(10,2) CHECK (VALUE >= 0);"
        + BASE.replace("total numeric(10,2)", "total money_amount"),
    )
    via_domain = plan(runner, db, through, "--protected-table", "public.orders")
    assert via_domain.returncode == 1
    assert "used by a protected table" in json.loads(via_domain.stdout)["refusal"]["message"]
    other = plan(runner, db, through, "--protected-table", "customers")
    assert other.returncode == 0, other.stdout


def test_excluded_objects_are_neither_planned_nor_dropped(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(
        db,
        BASE
        + "CREATE SCHEMA audit; CREATE TABLE audit.events (id int);"
        + "CREATE TABLE scratch_notes (x int);",
    )
    desired = write(tmp_path / "schema.sql", BASE)
    result = plan(runner, db, desired, "--exclude", "audit.*", "--exclude", "public.scratch_*")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["statements"] == []


def test_stale_and_tampered_plans_are_refused(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, BASE)
    desired = write(tmp_path / "schema.sql", BASE + "CREATE TABLE later (id int);")
    plan_file = tmp_path / "plan.json"
    assert plan(runner, db, desired, "--output", str(plan_file)).returncode == 0
    digest = sha256_digest(plan_file.read_bytes())
    tampered = tmp_path / "tampered.json"
    tampered.write_text(plan_file.read_text().replace("later", "lat3r"))
    result = apply(runner, db, tampered, digest)
    assert result.returncode == 1
    assert json.loads(result.stdout)["refusal"]["code"] == "digest_mismatch"
    load(db, "ALTER TABLE orders ADD COLUMN by_hand int;")  # drift after planning
    stale = apply(runner, db, plan_file, digest)
    assert stale.returncode == 1
    assert json.loads(stale.stdout)["refusal"]["code"] == "stale_plan"
    assert query(db, "SELECT to_regclass('public.later')") == [(None,)]


def test_a_failing_statement_is_reported_and_rolled_back(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, BASE + "INSERT INTO orders (note) VALUES (NULL);")
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("note varchar(200)", "note varchar(200) NOT NULL")
        + "CREATE TABLE audit_log (id int);",
    )
    plan_file = tmp_path / "plan.json"
    # Shadows hold no rows; the impact checks do count them (and refuse), so not measured.
    assert plan(runner, db, desired, "--output", str(plan_file), "--impact", "off").returncode == 0
    result = runner(
        "schema", "apply", "--url-env", "TARGET_URL", "--plan", str(plan_file), env=env(db)
    )
    assert result.returncode == 2
    report = json.loads(result.stdout)
    assert report["failed"] is not None and report["converged"] is False
    assert "contains null values" in report["error"]
    assert query(db, "SELECT to_regclass('public.audit_log')") == [(None,)]


def test_a_desired_schema_that_does_not_load_names_file_and_line(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    folder = tmp_path / "schema"
    folder.mkdir()
    write(folder / "01_tables.sql", "CREATE TABLE a (id int);\n")
    write(folder / "02_broken.sql", "CREATE TABLE b (id int);\n\nCREATE TABLE c (id nosuchtype);\n")
    result = plan(runner, db, folder)
    assert result.returncode == 2
    assert 'seshat-runner: 02_broken.sql:3: type "nosuchtype" does not exist' in result.stderr


def test_plans_are_byte_identical_across_processes_and_hash_seeds(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, BASE)
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("note varchar(200)", "note text, tags text[]")
        + "CREATE TYPE status AS ENUM ('new', 'paid'); CREATE TABLE a (s status);"
        + "CREATE TABLE b (a_s status);"
        + "CREATE VIEW v2 AS SELECT * FROM big_orders; CREATE INDEX b_idx ON b (a_s);",
    )
    outputs = {
        plan(runner, db, desired, "--no-cache", seed=seed).stdout for seed in ("1", "2", "987")
    }
    assert len(outputs) == 1
    assert json.loads(outputs.pop())["statements"]


def test_planning_makes_no_database_on_the_target_server(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, BASE)

    def databases() -> list[tuple[str, ...]]:
        with db.server.connect() as admin:
            return [tuple(r) for r in admin.execute("SELECT datname FROM pg_database ORDER BY 1")]

    before = databases()
    changed = BASE.replace("note varchar(200)", "note varchar(300)")
    assert plan(runner, db, write(tmp_path / "s.sql", changed)).returncode == 0
    drift = runner(
        "schema",
        "drift",
        "--url-env",
        "TARGET_URL",
        "--desired",
        str(tmp_path / "s.sql"),
        env=env(db),
    )
    assert drift.returncode == 1, drift.stderr
    assert databases() == before
    assert not any("seshat_" in out for out in runner.outputs)


def test_a_password_on_the_command_line_is_refused(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    result = runner("schema", "inspect", "--url", db.url_with_password)
    assert result.returncode == 2
    assert "refusing a credential in the command line" in result.stderr


def test_inspect_prints_the_model_as_canonical_json(
    runner: RunnerCLI, db: PostgresDatabase
) -> None:
    load(db, BASE)
    result = runner("schema", "inspect", "--url-env", "TARGET_URL", env=env(db))
    assert result.returncode == 0
    model = json.loads(result.stdout)
    assert "table:public.orders" in model["tables"]
    assert result.stdout.strip() == json.dumps(
        model, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def test_connection_errors_are_redacted(runner: RunnerCLI, db: PostgresDatabase) -> None:
    encoded = quote(db.server.app_password, safe="")  # the URL holds it percent-encoded
    wrong = db.url_with_password.replace(encoded, encoded + "x")
    assert wrong != db.url_with_password
    runner.secrets.append(db.server.app_password + "x")
    result = runner("schema", "inspect", "--url-env", "TARGET_URL", env={"TARGET_URL": wrong})
    assert result.returncode == 2
    assert "cannot connect to the database" in result.stderr


def test_an_explicit_sandbox_must_be_another_server_and_empty(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path, second_postgres_server: PostgresServer
) -> None:
    load(db, BASE)
    desired = write(tmp_path / "schema.sql", BASE + "CREATE TABLE later (id int);")
    # On the target's own server: refused, whatever database it names.
    with db.server.connect() as admin:
        admin.execute(f"CREATE DATABASE seshat_dev_{db.name[-8:]} OWNER {db.server.app_user}")
    try:
        same = plan(runner, db, desired, "--dev-url", db.server.url(f"seshat_dev_{db.name[-8:]}"))
        assert same.returncode == 1
        assert json.loads(same.stdout)["refusal"]["code"] == "sandbox_refused"
        assert "target server itself" in same.stdout
    finally:
        with db.server.connect() as admin:
            admin.execute(f"DROP DATABASE seshat_dev_{db.name[-8:]} WITH (FORCE)")
    # On another server: used, and left as it was.
    other = second_postgres_server
    name = f"dev_{db.name[-8:]}"
    with other.connect() as admin:
        admin.execute(f"CREATE DATABASE {name}")
    dev = other.url(name)
    try:
        result = plan(runner, db, desired, "--dev-url", dev)
        assert result.returncode == 0, result.stdout + result.stderr
        assert [s["sql"] for s in json.loads(result.stdout)["statements"]] == [
            "CREATE TABLE public.later (\n    id integer\n)"
        ]
        with psycopg.connect(dev, autocommit=True) as conn:
            assert conn.execute(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n"
                " ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
            ).fetchone() == (0,)
            conn.execute("CREATE TABLE precious (id int)")
        with other.connect() as admin:
            left = admin.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE 'seshat%'"
            ).fetchall()
        assert left == []
        refused = plan(runner, db, desired, "--dev-url", dev, "--no-cache")
        assert refused.returncode == 1
        assert "the dev database is not empty" in refused.stdout
        with psycopg.connect(dev, autocommit=True) as conn:
            assert conn.execute("SELECT to_regclass('public.precious') IS NOT NULL").fetchone() == (
                True,
            )
    finally:
        with other.connect() as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_an_invalid_index_is_drift_and_the_plan_rebuilds_it(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    """A CREATE INDEX CONCURRENTLY that failed leaves an INVALID index: the schema is not
    converged, drift says so, and the plan drops and builds it again."""
    table = "CREATE TABLE accounts (id int PRIMARY KEY, email text NOT NULL);\n"
    load(db, table + "INSERT INTO accounts VALUES (1, 'a@x'), (2, 'a@x');")
    with db.connect_as_app() as conn, pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("CREATE UNIQUE INDEX CONCURRENTLY accounts_email ON accounts (email)")
    load(db, "DELETE FROM accounts WHERE id = 2")  # the duplicate that made it fail is gone
    assert query(
        db, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'accounts_email'::regclass"
    ) == [(False,)]
    desired = write(
        tmp_path / "schema.sql", table + "CREATE UNIQUE INDEX accounts_email ON accounts (email);\n"
    )
    drift = runner(
        "schema", "drift", "--url-env", "TARGET_URL", "--desired", str(desired), env=env(db)
    )
    assert drift.returncode == 1, drift.stderr  # 1: the schema drifted
    report = json.loads(drift.stdout)
    assert (report["total"], report["categories"]["invalid"]) == (1, 1), report
    planned = plan(runner, db, desired, "--output", str(tmp_path / "plan.json"))
    assert planned.returncode == 0, planned.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    assert [s["sql"] for s in document["statements"]] == [
        "DROP INDEX CONCURRENTLY public.accounts_email",
        "CREATE UNIQUE INDEX CONCURRENTLY accounts_email ON public.accounts USING btree (email)",
    ]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["converged"] is True
    assert query(
        db, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'accounts_email'::regclass"
    ) == [(True,)]
    assert json.loads(plan(runner, db, desired).stdout)["statements"] == []


def test_unqualified_names_resolve_through_the_targets_search_path(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    """A role whose search path starts with its own schema gets its tables there, as it
    would running the desired SQL itself: the sandbox loads it with the target's path."""
    app = db.server.app_user
    with db.connect() as admin:
        admin.execute(f'CREATE SCHEMA app_space AUTHORIZATION "{app}"')
        admin.execute(
            f'ALTER ROLE "{app}" IN DATABASE "{db.name}" SET search_path = app_space, public'
        )
    load(db, "CREATE TABLE bigdata (data bigint);")
    assert query(db, "SELECT to_regclass('app_space.bigdata') IS NOT NULL") == [(True,)]
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE bigdata (data bigint);\n"
        "CREATE TABLE users (id bigint NOT NULL, name text);\n",
    )
    planned = plan(runner, db, desired, "--output", str(tmp_path / "plan.json"))
    assert planned.returncode == 0, planned.stderr
    sql = [s["sql"] for s in json.loads((tmp_path / "plan.json").read_text())["statements"]]
    assert sql == ["CREATE TABLE app_space.users (\n    id bigint NOT NULL,\n    name text\n)"]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert query(db, "SELECT to_regclass('public.users') IS NULL") == [(True,)]
    assert json.loads(plan(runner, db, desired).stdout)["statements"] == []


def test_schema_scope_manages_only_the_chosen_schemas(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    """``--schema`` and ``--exclude-schema``: a database shared with objects another tool
    manages. The scope travels in the plan, so apply needs no flags and re-reads the live
    schema through it."""
    load(
        db,
        "CREATE SCHEMA app; CREATE SCHEMA audit; CREATE TABLE audit.events (id int);"
        "CREATE TABLE app.old (id int); CREATE TABLE public.notes (id int);",
    )
    desired = write(tmp_path / "schema.sql", "CREATE TABLE app.accounts (id bigint);\n")
    out = tmp_path / "plan.json"
    planned = plan(
        runner, db, desired, "--allow-destructive", "--schema", "app", "--output", str(out)
    )
    assert planned.returncode == 0, planned.stderr
    document = json.loads(out.read_text())
    assert document["schemas"] == ["app"] and "exclude_schemas" not in document
    assert [s["sql"] for s in document["statements"]] == [
        "DROP TABLE app.old",
        "CREATE TABLE app.accounts (\n    id bigint\n)",
    ]
    applied = apply(runner, db, out)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["converged"] is True
    assert query(db, "SELECT to_regclass('audit.events') IS NOT NULL") == [(True,)]
    # The other way round: everything but audit (and public's notes are then managed).
    both = write(
        tmp_path / "both.sql",
        "CREATE TABLE app.accounts (id bigint);\nCREATE TABLE notes (id int);\n",
    )
    again = plan(runner, db, both, "--exclude-schema", "audit")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["statements"] == []
    # Without a scope, audit.events would be dropped: the scope is what protects it.
    unscoped = plan(runner, db, both, "--allow-destructive")
    assert [s["sql"] for s in json.loads(unscoped.stdout)["statements"]] == [
        "DROP TABLE audit.events"
    ]


# -- rename hints (runner/engines/renames.py) --------------------------------------------------

RENAMES_BEFORE = """
CREATE TYPE order_state AS ENUM ('new', 'paid');
CREATE TYPE tier AS ENUM ('low', 'high');
CREATE TABLE old_accounts (
    id bigint NOT NULL,
    user_name varchar(50),
    state order_state DEFAULT 'new',
    level tier NOT NULL DEFAULT 'low',
    email text,
    CONSTRAINT old_email_key UNIQUE (email)
);
CREATE INDEX old_state_idx ON old_accounts (state);
COMMENT ON COLUMN old_accounts.user_name IS 'login';
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER accounts_touch BEFORE UPDATE ON old_accounts
    FOR EACH ROW EXECUTE FUNCTION touch();
INSERT INTO old_accounts VALUES (1, 'ada', 'paid', 'low', 'ada@example.com');
"""
RENAMES_AFTER = """
CREATE TYPE order_status /* @renamed from=order_state */ AS ENUM ('new', 'paid');
CREATE TYPE tier AS ENUM (
    'basic', -- @renamed from=low
    'plus',
    'high'
);
CREATE TABLE accounts ( -- @renamed from=old_accounts
    id bigint NOT NULL,
    username text NOT NULL, -- @renamed from=user_name
    state order_status DEFAULT 'new',
    level tier NOT NULL DEFAULT 'basic',
    email text,
    CONSTRAINT accounts_email_key UNIQUE (email) /* @renamed from=old_email_key */
);
CREATE INDEX accounts_state_idx /* @renamed from=old_state_idx */ ON accounts (state);
COMMENT ON COLUMN accounts.username IS 'login';
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER accounts_touch BEFORE UPDATE ON accounts
    FOR EACH ROW EXECUTE FUNCTION touch();
"""


def test_rename_hints_rename_instead_of_drop_and_add(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, RENAMES_BEFORE)
    desired = write(tmp_path / "schema.sql", RENAMES_AFTER)
    made = plan(runner, db, desired, "--output", str(tmp_path / "plan.json"), "--no-cache")
    assert made.returncode == 0, made.stdout + made.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    assert [(s["op"], s["sql"]) for s in document["statements"]] == [
        ("rename_type", "ALTER TYPE public.order_state RENAME TO order_status"),
        ("rename_enum_value", "ALTER TYPE public.tier RENAME VALUE 'low' TO 'basic'"),
        ("rename_table", "ALTER TABLE public.old_accounts RENAME TO accounts"),
        ("rename_column", "ALTER TABLE public.accounts RENAME COLUMN user_name TO username"),
        ("rename_index", "ALTER INDEX public.old_state_idx RENAME TO accounts_state_idx"),
        (
            "rename_constraint",
            "ALTER TABLE public.accounts RENAME CONSTRAINT old_email_key TO accounts_email_key",
        ),
        ("add_enum_values", "ALTER TYPE public.tier ADD VALUE 'plus' AFTER 'basic'"),
        (
            "alter_column_type",
            "ALTER TABLE public.accounts ALTER COLUMN username TYPE text",
        ),
        ("set_not_null", "ALTER TABLE public.accounts ALTER COLUMN username SET NOT NULL"),
    ]
    assert document["summary"]["destructive"] is False
    other_seed = plan(runner, db, desired, "--no-cache", seed="4242")
    assert other_seed.returncode == 0, other_seed.stderr
    assert other_seed.stdout.encode() == (tmp_path / "plan.json").read_bytes()
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["converged"] is True
    rows = query(db, "SELECT id, username, state::text, level::text, email FROM accounts")
    assert rows == [(1, "ada", "paid", "basic", "ada@example.com")]
    again = plan(runner, db, desired)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["statements"] == []


def test_rename_hint_from_a_column_that_still_exists_is_refused(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, "CREATE TABLE users (id int, username text, user_name varchar(50));")
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE users (\n  id int,\n  username text,\n"
        "  user_name varchar(100) -- @renamed from=username\n);",
    )
    result = plan(runner, db, desired)
    assert result.returncode == 2
    assert (
        "schema.sql:4: cannot rename column 'username' to 'user_name' - "
        "column 'username' still exists" in result.stderr
    )
    assert query(db, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'users'")[
        0
    ] == (3,)


def test_a_rename_hint_whose_old_name_is_gone_is_ignored(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, "CREATE TABLE users (id int, email text);")
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE users (id int, email text, -- @renamed from=mail\n  age int);",
    )
    made = plan(runner, db, desired)
    assert made.returncode == 0, made.stderr
    assert [s["sql"] for s in json.loads(made.stdout)["statements"]] == [
        "ALTER TABLE public.users ADD COLUMN age integer"
    ]


def test_a_renamed_table_takes_its_serial_sequence_and_key_along(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, "CREATE TABLE old_t (id serial PRIMARY KEY, n int); INSERT INTO old_t (n) VALUES (5);")
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE t ( -- @renamed from=old_t\n  id serial PRIMARY KEY,\n  n int\n);",
    )
    made = plan(runner, db, desired, "--output", str(tmp_path / "plan.json"), "--no-cache")
    assert made.returncode == 0, made.stdout + made.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    # Named after the table, so renamed with it: the desired schema has the new names.
    assert [s["sql"] for s in document["statements"]] == [
        "ALTER TABLE public.old_t RENAME TO t",
        "ALTER TABLE public.t RENAME CONSTRAINT old_t_pkey TO t_pkey",
        "ALTER SEQUENCE public.old_t_id_seq RENAME TO t_id_seq",
    ]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert query(db, "SELECT id, n FROM t") == [(1, 5)]
    assert query(db, "INSERT INTO t (n) VALUES (6) RETURNING id") == [(2,)]
    again = plan(runner, db, desired)
    assert json.loads(again.stdout)["statements"] == []


def test_renaming_a_type_a_protected_table_uses_is_refused(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(db, "CREATE TYPE mood AS ENUM ('ok'); CREATE TABLE diary (m mood DEFAULT 'ok');")
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TYPE feeling /* @renamed from=mood */ AS ENUM ('ok');\n"
        "CREATE TABLE diary (m feeling DEFAULT 'ok');\n",
    )
    refused = plan(runner, db, desired, "--protected-table", "diary")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["refusal"]["code"] == "protected_table"
    made = plan(runner, db, desired)
    assert made.returncode == 0, made.stderr
    assert [s["sql"] for s in json.loads(made.stdout)["statements"]] == [
        "ALTER TYPE public.mood RENAME TO feeling"
    ]


def test_skip_drops_leaves_what_only_the_database_has_and_lists_it(
    runner: RunnerCLI, db: PostgresDatabase, tmp_path: Path
) -> None:
    load(
        db,
        BASE
        + "ALTER TABLE orders ADD COLUMN old_code text;\n"
        + "CREATE INDEX orders_note_idx ON orders (note);\n"
        + "CREATE TABLE legacy (id integer);\n"
        + "CREATE VIEW legacy_ids AS SELECT id FROM legacy;\n"
        + "ALTER TABLE customers ENABLE ROW LEVEL SECURITY;\n"
        + "INSERT INTO legacy VALUES (1);\n",
    )
    changed = BASE.replace("SELECT id, total FROM orders", "SELECT id FROM orders")
    desired = write(tmp_path / "schema.sql", changed + "CREATE TABLE audit (id integer);\n")
    planned = plan(runner, db, desired, "--skip-drops", "--output", str(tmp_path / "plan.json"))
    assert planned.returncode == 0, planned.stderr
    document = json.loads((tmp_path / "plan.json").read_text())
    assert document["drops"] == "skip"
    assert document["skipped"] == [
        {"detail": "", "key": "column:public.orders.old_code", "op": "drop_column"},
        {"detail": "", "key": "index:public.orders_note_idx", "op": "drop_index"},
        {
            "detail": "DISABLE ROW LEVEL SECURITY",
            "key": "table:public.customers",
            "op": "set_row_security",
        },
        {"detail": "", "key": "table:public.legacy", "op": "drop_table"},
        {"detail": "", "key": "view:public.legacy_ids", "op": "drop_definition"},
    ]
    # The changed view is still dropped and created again; nothing else is removed.
    assert {(s["op"], s["key"]) for s in document["statements"]} == {
        ("drop_definition", "view:public.big_orders"),
        ("create_definition", "view:public.big_orders"),
        ("create_table", "table:public.audit"),
    }
    assert document["summary"]["destructive"] is False
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert query(db, "SELECT id FROM legacy_ids") == [(1,)]
    assert query(db, "SELECT count(old_code) FROM orders") == [(0,)]
    assert query(db, "SELECT relrowsecurity FROM pg_class WHERE relname = 'customers'") == [(True,)]
    assert query(db, "SELECT 1 FROM pg_indexes WHERE indexname = 'orders_note_idx'") == [(1,)]
    assert query(
        db, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'big_orders'"
    ) == [(1,)]
    # Converged: the next plan is empty and still lists what it leaves alone.
    again = plan(runner, db, desired, "--skip-drops")
    assert again.returncode == 0, again.stderr
    skipping = json.loads(again.stdout)
    assert skipping["statements"] == [] and skipping["skipped"] == document["skipped"]
    # The setting is part of the plan: planned without it, the drops come back, under
    # another options digest; a default plan records neither field.
    dropping = json.loads(plan(runner, db, desired, "--allow-destructive").stdout)
    assert "drops" not in dropping and "skipped" not in dropping
    assert dropping["options"] != skipping["options"]
    assert ("drop_table", "table:public.legacy") in {
        (s["op"], s["key"]) for s in dropping["statements"]
    }
