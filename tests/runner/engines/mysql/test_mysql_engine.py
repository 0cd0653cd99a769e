"""The MySQL/MariaDB engine through ``seshat-runner schema ...`` against a real MariaDB.

Each test gets a fresh database granted to an app user that logs in with a password; the
runner receives the URL through an environment variable (``--url-env``) or the password
through ``MYSQL_PWD``, and every byte it prints is checked for the password and for any
sandbox schema name afterwards. Planning creates nothing on the target's server: the desired
schema and the dry run go to the runner's private MariaDB sandbox.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.databases import database_url
from harness.mariadb import MariaDBDatabase
from harness.runner_cli import RUNNER, RunnerCLI, write

from runner.digests import sha256_digest

BASE = """
CREATE TABLE customers (
  id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
  email varchar(200) NOT NULL,
  UNIQUE KEY email_uq (email)
) COMMENT='people';
CREATE TABLE orders (
  id int NOT NULL AUTO_INCREMENT,
  customer_id bigint,
  total decimal(10,2) DEFAULT 0,
  note varchar(200) COMMENT 'free text',
  PRIMARY KEY (id),
  CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id)
);
CREATE VIEW big_orders AS SELECT id, total FROM orders WHERE total > 100;
"""
SANDBOX = re.compile(r"seshat_[0-9a-f]{12}")
"""A sandbox schema's name (the app user, ``seshat_app``, may be printed: it is a definer)."""


@pytest.fixture
def db(mariadb_database: MariaDBDatabase) -> Iterator[MariaDBDatabase]:
    before = schemas(mariadb_database)
    yield mariadb_database
    assert schemas(mariadb_database) == before, "planning made a schema on the target server"


@pytest.fixture
def runner(db: MariaDBDatabase) -> Iterator[RunnerCLI]:
    cli = RunnerCLI(secrets=[db.server.app_password])
    yield cli
    assert cli.leaks() == [], "the password appeared in the runner's output"
    assert not any(SANDBOX.search(out) for out in cli.outputs), "a sandbox schema name was printed"


def schemas(db: MariaDBDatabase) -> list[str]:
    return [r[0] for r in query(db, "SHOW DATABASES")]


def env(db: MariaDBDatabase) -> dict[str, str]:
    return {"TARGET_URL": db.url_with_password}


def load(db: MariaDBDatabase, sql: str) -> None:
    with db.connect_as_app() as conn, conn.cursor() as cur:
        for statement in [s for s in sql.split(";") if s.strip()]:
            cur.execute(statement)


def query(db: MariaDBDatabase, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with db.connect() as conn, conn.cursor() as cur:
        cur.execute(sql, args or None)
        return list(cur.fetchall())


def columns(db: MariaDBDatabase, table: str) -> list[str]:
    return [
        r[0]
        for r in query(
            db,
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s"
            " AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            db.name,
            table,
        )
    ]


def plan(
    runner: RunnerCLI, db: MariaDBDatabase, desired: Path, *extra: str, seed: str = "0"
) -> Any:
    args = ["schema", "plan", "--url-env", "TARGET_URL", "--desired", str(desired), *extra]
    return runner(*args, env=env(db), seed=seed)


def apply(runner: RunnerCLI, db: MariaDBDatabase, plan_file: Path, *extra: str) -> Any:
    args = ["schema", "apply", "--url-env", "TARGET_URL", "--plan", str(plan_file), *extra]
    return runner(*args, env=env(db))


def planned(runner: RunnerCLI, db: MariaDBDatabase, desired: Path, out: Path) -> dict[str, Any]:
    result = plan(runner, db, desired, "--output", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def test_plan_apply_converge_and_idempotent(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, BASE + "INSERT INTO customers (email) VALUES ('a@example.com');")
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace(
            "  total decimal(10,2) DEFAULT 0,",
            "  total decimal(10,2) DEFAULT 0,\n  shipped tinyint(1) NOT NULL DEFAULT 0,",
        ).replace("COMMENT='people'", "COMMENT='customers'")
        + "CREATE INDEX orders_total_idx ON orders (total);\n",
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    assert document["dialect"] == "mariadb" and document["server_major"] == 10
    assert [s["sql"] for s in document["statements"]] == [
        "ALTER TABLE `customers` COMMENT='customers'",
        "ALTER TABLE `orders` ADD COLUMN `shipped` tinyint(1) NOT NULL DEFAULT 0 AFTER `total`",
        "ALTER TABLE `orders` ADD KEY `orders_total_idx` (`total`)",
    ]
    assert not any(s["transactional"] for s in document["statements"])
    digest = sha256_digest((tmp_path / "plan.json").read_bytes())
    applied = apply(runner, db, tmp_path / "plan.json", "--expect-digest", digest)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    report = json.loads(applied.stdout)
    assert report["converged"] is True and report["ran"] == [0, 1, 2]
    assert set(report) == {"plan", "ran", "failed", "error", "rolledBack", "converged"}
    journal = (tmp_path / "plan.json.journal").read_text().splitlines()
    events = [(r["event"], r.get("index")) for r in map(json.loads, journal)]
    assert events == [
        ("begin", None),
        *[(e, i) for i in range(3) for e in ("started", "finished")],
        ("end", None),
    ]
    assert columns(db, "orders") == ["id", "customer_id", "total", "shipped", "note"]
    assert query(db, f"SELECT email FROM `{db.name}`.customers") == [("a@example.com",)]
    again = plan(runner, db, desired)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["statements"] == []
    drift = runner(
        "schema", "drift", "--url-env", "TARGET_URL", "--desired", str(desired), env=env(db)
    )
    assert drift.returncode == 0, drift.stdout + drift.stderr
    assert json.loads(drift.stdout)["total"] == 0


def test_password_from_mysql_pwd(runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path) -> None:
    load(db, BASE)
    server = db.server
    url = database_url("mysql", server.host, server.port, server.app_user, db.name)
    desired = write(tmp_path / "schema.sql", BASE + "CREATE TABLE extra (id int PRIMARY KEY);")
    args = ["schema", "plan", "--url", url, "--desired", str(desired)]
    result = runner(*args, env={"MYSQL_PWD": server.app_password})
    assert result.returncode == 0, result.stderr
    statements = json.loads(result.stdout)["statements"]
    assert [s["op"] for s in statements] == ["create_table"]
    refused = runner("schema", "inspect", "--url", db.url_with_password)
    assert refused.returncode == 2 and "refusing a credential" in refused.stderr


def test_inspect_prints_the_model_without_counters(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, BASE + "INSERT INTO customers (email) VALUES ('a@example.com'), ('b@example.com');")
    result = runner("schema", "inspect", "--url-env", "TARGET_URL", env=env(db))
    assert result.returncode == 0, result.stderr
    model = json.loads(result.stdout)
    assert model["dialect"] == "mariadb"
    customers = model["tables"]["table:db.customers"]
    assert dict(map(tuple, customers["options"])) == {
        "collation": "utf8mb4_unicode_ci",
        "comment": "people",
        "engine": "InnoDB",
    }
    assert customers["columns"][0]["extra"] == [["auto_increment", "true"]]  # never a counter
    assert [c["name"] for c in model["tables"]["table:db.orders"]["columns"]] == [
        "id",
        "customer_id",
        "total",
        "note",
    ]
    fk = model["constraints"]["constraint:db.orders.orders_customer_fk"]
    assert fk["definition"] == "FOREIGN KEY (`customer_id`) REFERENCES `customers` (`id`)"
    assert "index:db.customers.email_uq" in model["indexes"]
    assert db.name not in json.dumps(model["definitions"])  # keys and bodies are name-free


def test_column_reorder_keeps_data(runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path) -> None:
    load(
        db, "CREATE TABLE t (a int, b varchar(10), c int, d int); INSERT INTO t VALUES (1,'x',3,4)"
    )
    desired = write(
        tmp_path / "schema.sql", "CREATE TABLE t (b varchar(10), c int, d int, e int, a int);"
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    assert [(s["op"], s["sql"]) for s in document["statements"]] == [
        ("add_column", "ALTER TABLE `t` ADD COLUMN `e` int(11) NULL AFTER `d`"),
        (
            "move_column",
            "ALTER TABLE `t` MODIFY COLUMN `a` int(11) NULL AFTER `e`",
        ),
    ]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert columns(db, "t") == ["b", "c", "d", "e", "a"]
    assert query(db, f"SELECT b, c, d, e, a FROM `{db.name}`.t") == [("x", 3, 4, None, 1)]
    assert json.loads(plan(runner, db, desired).stdout)["statements"] == []


def test_implicit_foreign_key_index_is_not_drift(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    # The live table's index for the foreign key was declared by hand under another name;
    # the desired schema declares only the foreign key, for which the server names the index.
    load(
        db,
        "CREATE TABLE p (id int PRIMARY KEY);"
        "CREATE TABLE c (id int PRIMARY KEY, p_id int, KEY legacy_p (p_id));"
        "ALTER TABLE c ADD CONSTRAINT c_p_fk FOREIGN KEY (p_id) REFERENCES p (id)",
    )
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE p (id int PRIMARY KEY);"
        "CREATE TABLE c (id int PRIMARY KEY, p_id int,"
        " CONSTRAINT c_p_fk FOREIGN KEY (p_id) REFERENCES p (id));",
    )
    drift = runner(
        "schema", "drift", "--url-env", "TARGET_URL", "--desired", str(desired), env=env(db)
    )
    assert drift.returncode == 0, drift.stdout + drift.stderr
    assert json.loads(drift.stdout)["total"] == 0
    assert json.loads(plan(runner, db, desired).stdout)["statements"] == []


def test_algorithm_probe_is_the_lock_hazard(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, "CREATE TABLE t (id int PRIMARY KEY, a int, b varchar(20))")
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE t (id int PRIMARY KEY, a bigint, b varchar(20), c int, KEY b_idx (b));",
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    hazards = {s["sql"]: [h["code"] for h in s["hazards"]] for s in document["statements"]}
    assert hazards == {
        "ALTER TABLE `t` MODIFY COLUMN `a` bigint(20) NULL": ["ALGORITHM_COPY"],
        "ALTER TABLE `t` ADD COLUMN `c` int(11) NULL AFTER `b`": [],  # INSTANT
        "ALTER TABLE `t` ADD KEY `b_idx` (`b`)": ["ALGORITHM_INPLACE"],
    }
    assert document["summary"]["hazards"] == {"ALGORITHM_COPY": 1, "ALGORITHM_INPLACE": 1}
    assert document["summary"]["destructive"] is False  # int -> bigint widens


def _journal_events(path: Path) -> list[tuple[str, int | None]]:
    if not path.exists():
        return []
    return [(r["event"], r.get("index")) for r in map(json.loads, path.read_text().splitlines())]


def test_interrupted_apply_reports_what_ran(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, "CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY);")
    load(db, "CREATE TABLE c (id int PRIMARY KEY); INSERT INTO b VALUES (1)")
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE a (id int PRIMARY KEY, x int);"
        "CREATE TABLE b (id int PRIMARY KEY, x int);"
        "CREATE TABLE c (id int PRIMARY KEY, x int);",
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    assert [s["sql"].split("`")[1] for s in document["statements"]] == ["a", "b", "c"]
    journal = tmp_path / "apply.journal"
    # Another session reads b in an open transaction: its metadata lock makes the second
    # ALTER wait, and the runner is killed while it waits.
    with db.connect(autocommit=False) as blocker:
        with blocker.cursor() as cur:
            cur.execute("SELECT * FROM b")
        args = ["schema", "apply", "--url-env", "TARGET_URL", "--plan", str(tmp_path / "plan.json")]
        process = subprocess.Popen(
            [*RUNNER, *args, "--journal", str(journal)],
            env={**os.environ, **env(db)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while ("started", 1) not in _journal_events(journal):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the apply never reached statement 2"
                time.sleep(0.1)
            time.sleep(0.5)
            assert _journal_events(journal)[-1] == ("started", 1)
        finally:
            process.send_signal(signal.SIGKILL)
            process.communicate()
        blocker.rollback()
    assert process.returncode == -signal.SIGKILL
    assert "x" in columns(db, "a") and "x" not in columns(db, "c")
    again = apply(runner, db, tmp_path / "plan.json", "--journal", str(journal))
    assert again.returncode == 2, again.stdout + again.stderr
    report = json.loads(again.stdout)
    assert report["interrupted"] is True
    assert report["ran"] == [0] and report["unknown"] == 1 and report["failed"] is None
    assert "statements that ran: 1" in report["error"]
    assert "outcome of statement 2 is unknown" in report["error"]
    assert "x" not in columns(db, "c"), "nothing runs after an interruption"


def test_refusals(runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path) -> None:
    load(db, BASE)
    smaller = write(
        tmp_path / "smaller.sql", BASE.replace("  note varchar(200) COMMENT 'free text',\n", "")
    )
    refused = plan(runner, db, smaller)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["refusal"]["code"] == "destructive_disallowed"
    protected = plan(runner, db, smaller, "--allow-destructive", "--protected-table", "orders")
    assert json.loads(protected.stdout)["refusal"]["code"] == "protected_table"

    made = plan(runner, db, smaller, "--allow-destructive", "--output", str(tmp_path / "plan.json"))
    assert made.returncode == 0, made.stderr
    wrong = apply(runner, db, tmp_path / "plan.json", "--expect-digest", "sha256:" + "0" * 64)
    assert wrong.returncode == 1
    assert json.loads(wrong.stdout)["refusal"]["code"] == "digest_mismatch"

    with db.connect() as holder, holder.cursor() as cur:
        cur.execute("SELECT GET_LOCK(%s, 0)", (f"seshat-schema-apply:{db.name}",))
        locked = apply(runner, db, tmp_path / "plan.json", "--lock-timeout", "1")
    assert locked.returncode == 1
    assert json.loads(locked.stdout)["refusal"]["code"] == "locked"

    load(db, "ALTER TABLE customers ADD COLUMN nickname varchar(20)")
    stale = apply(runner, db, tmp_path / "plan.json")
    assert stale.returncode == 1
    assert json.loads(stale.stdout)["refusal"]["code"] == "stale_plan"
    assert "note" in columns(db, "orders")


def test_plan_refused_until_destructive_allowed(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, BASE)
    smaller = write(
        tmp_path / "smaller.sql", BASE.replace("  note varchar(200) COMMENT 'free text',\n", "")
    )
    out = tmp_path / "plan.json"
    result = plan(runner, db, smaller, "--allow-destructive", "--output", str(out))
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    assert document["summary"]["destructive"] is True
    assert apply(runner, db, out).returncode == 0
    assert "note" not in columns(db, "orders")


def test_plans_are_deterministic(runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path) -> None:
    load(db, BASE)
    desired = write(
        tmp_path / "schema.sql",
        BASE.replace("note varchar(200)", "note varchar(300), flag bool NOT NULL DEFAULT 0")
        + "CREATE TABLE z (id int PRIMARY KEY, v text, FULLTEXT KEY v_ft (v));"
        + "CREATE TABLE y (id int PRIMARY KEY, z_id int REFERENCES z (id));"
        + "CREATE INDEX orders_note ON orders (note(20), total DESC);",
    )
    first = plan(runner, db, desired, "--no-cache", seed="1")
    second = plan(runner, db, desired, "--no-cache", seed="12345")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert len(json.loads(first.stdout)["statements"]) >= 5


def test_a_desired_schema_error_names_its_file_and_line(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, BASE)
    bad = write(
        tmp_path / "bad.sql",
        "CREATE TABLE ok (id int);\n\nCREATE TABLE broken (id nosuchtype);",
    )
    result = plan(runner, db, bad)
    assert result.returncode == 2
    assert "bad.sql:3:" in result.stderr
    other = write(tmp_path / "other.sql", "USE elsewhere; CREATE TABLE t (id int);")
    refused = plan(runner, db, other)
    assert refused.returncode == 2 and "USE names another database" in refused.stderr


def test_plan_and_apply_through_operations_with_a_journal(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    from runner.digests import canonical_json
    from runner.protocol.frame import Found, find_last_frame

    def op(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        path = write(tmp_path / f"{request['id']}.json", json.dumps(request))
        result = runner("op", "--input", str(path), env={"DB_URL": db.url_with_password})
        frame = find_last_frame(result.stdout)
        assert isinstance(frame, Found), result.stdout + result.stderr
        return result.returncode, frame.payload

    load(db, "CREATE TABLE items (id int PRIMARY KEY, name text)")
    desired = tmp_path / "desired"
    desired.mkdir()
    write(desired / "schema.sql", "CREATE TABLE items (id int PRIMARY KEY, name text, n int);")
    url = {"from_env": "DB_URL"}
    status, payload = op({"operation": "plan", "id": "p1", "url": url, "desired": str(desired)})
    assert status == 0, payload
    plan_file = tmp_path / "plan.json"
    plan_file.write_bytes(canonical_json(payload["result"]["plan"]) + b"\n")
    journal = tmp_path / "op.journal"
    status, payload = op(
        {
            "operation": "apply",
            "id": "a1",
            "url": url,
            "plan": str(plan_file),
            "expect_digest": payload["result"]["planDigest"],
            "journal": str(journal),
        }
    )
    assert status == 0, payload
    assert payload["result"]["apply"]["converged"] is True
    assert _journal_events(journal)[-1] == ("end", None)


def _converged_and_empty_after(
    runner: RunnerCLI, db: MariaDBDatabase, desired: Path, tmp_path: Path
) -> list[str]:
    document = planned(runner, db, desired, tmp_path / "plan.json")
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["converged"] is True
    again = plan(runner, db, desired)
    assert again.returncode == 0 and json.loads(again.stdout)["statements"] == []
    return [s["sql"] for s in document["statements"]]


def test_a_table_that_loses_every_column_drops_them_last(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, "CREATE TABLE users (id int PRIMARY KEY); INSERT INTO users VALUES (7)")
    desired = write(tmp_path / "schema.sql", "CREATE TABLE users (user_id int PRIMARY KEY);")
    result = plan(runner, db, desired, "--allow-destructive", "--output", str(tmp_path / "p"))
    assert result.returncode == 0, result.stdout + result.stderr
    sql = [s["sql"] for s in json.loads((tmp_path / "p").read_text())["statements"]]
    # MySQL refuses to drop a table's last column: the new one comes first.
    assert sql[-1] == "ALTER TABLE `users` DROP COLUMN `id`"
    assert sql[0].startswith("ALTER TABLE `users` ADD COLUMN `user_id` int(11) NOT NULL")
    applied = apply(runner, db, tmp_path / "p")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert columns(db, "users") == ["user_id"]


def test_an_unnamed_foreign_key_pointed_elsewhere_keeps_its_index(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    tables = "CREATE TABLE users (id int PRIMARY KEY); CREATE TABLE admins (id int PRIMARY KEY);"
    posts = "CREATE TABLE posts (id int PRIMARY KEY, author_id int, FOREIGN KEY (author_id) {});"
    load(db, tables + posts.format("REFERENCES users (id)"))
    desired = write(tmp_path / "schema.sql", tables + posts.format("REFERENCES admins (id)"))
    # The server generated `author_id` for the key; added back, it would replace it with
    # `posts_ibfk_1`. Made an ordinary index first, it serves the new key as it is.
    assert _converged_and_empty_after(runner, db, desired, tmp_path) == [
        "ALTER TABLE `posts` DROP FOREIGN KEY `posts_ibfk_1`",
        "ALTER TABLE `posts` DROP INDEX `author_id`, ADD KEY `author_id` (`author_id`)",
        "ALTER TABLE `posts` ADD CONSTRAINT `posts_ibfk_1` FOREIGN KEY (`author_id`)"
        " REFERENCES `admins` (`id`)",
    ]
    shown = query(db, "SHOW CREATE TABLE posts")[0][1]
    assert "KEY `author_id` (`author_id`)" in shown and "posts_ibfk_1` (" not in shown


# -- rename hints (runner/engines/renames.py) --------------------------------------------------

RENAMES_BEFORE = """
CREATE TABLE old_accounts (
  id bigint NOT NULL,
  user_name varchar(50),
  email varchar(100),
  KEY old_email_idx (email)
);
INSERT INTO old_accounts VALUES (1, 'ada', 'ada@example.com');
"""
RENAMES_AFTER = """
CREATE TABLE accounts ( -- @renamed from=old_accounts
  id bigint NOT NULL,
  username varchar(80), -- @renamed from=user_name
  email varchar(100),
  KEY email_idx (email) /* @renamed from=old_email_idx */
);
"""


def test_rename_hints_rename_and_keep_rows(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, RENAMES_BEFORE)
    desired = write(tmp_path / "schema.sql", RENAMES_AFTER)
    document = planned(runner, db, desired, tmp_path / "plan.json")
    assert [(s["op"], s["sql"]) for s in document["statements"]] == [
        ("rename_table", "RENAME TABLE `old_accounts` TO `accounts`"),
        ("rename_column", "ALTER TABLE `accounts` RENAME COLUMN `user_name` TO `username`"),
        ("rename_index", "ALTER TABLE `accounts` RENAME INDEX `old_email_idx` TO `email_idx`"),
        (
            "alter_column_type",
            "ALTER TABLE `accounts` MODIFY COLUMN `username` varchar(80)"
            " COLLATE utf8mb4_unicode_ci NULL",
        ),
    ]
    assert not document["summary"]["destructive"]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["converged"] is True
    assert columns(db, "accounts") == ["id", "username", "email"]
    rows = query(db, f"SELECT id, username, email FROM `{db.name}`.accounts")
    assert rows == [(1, "ada", "ada@example.com")]
    again = plan(runner, db, desired)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["statements"] == []


def test_rename_hint_from_a_column_that_still_exists_is_refused(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, "CREATE TABLE users (id int, username text, user_name varchar(50))")
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
    assert columns(db, "users") == ["id", "username", "user_name"]


def test_renamed_table_gets_its_auto_increment_key_in_one_statement(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(db, "CREATE TABLE old_a (id bigint NOT NULL, n int); INSERT INTO old_a VALUES (7, 1)")
    desired = write(
        tmp_path / "schema.sql",
        "CREATE TABLE a ( -- @renamed from=old_a\n"
        "  id bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,\n  n int\n);",
    )
    document = planned(runner, db, desired, tmp_path / "plan.json")
    assert [s["sql"] for s in document["statements"]] == [
        "RENAME TABLE `old_a` TO `a`",
        "ALTER TABLE `a` MODIFY COLUMN `id` bigint(20) NOT NULL AUTO_INCREMENT,"
        " ADD PRIMARY KEY (`id`)",
    ]
    applied = apply(runner, db, tmp_path / "plan.json")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert query(db, f"SELECT id, n FROM `{db.name}`.a") == [(7, 1)]
    assert json.loads(plan(runner, db, desired).stdout)["statements"] == []


def test_skip_drops_leaves_what_only_the_database_has_and_lists_it(
    runner: RunnerCLI, db: MariaDBDatabase, tmp_path: Path
) -> None:
    load(
        db,
        BASE
        + "ALTER TABLE orders ADD COLUMN old_code varchar(10) AFTER total;\n"
        + "CREATE INDEX orders_note_idx ON orders (note);\n"
        + "CREATE TABLE legacy (id int);\n"
        + "CREATE VIEW legacy_ids AS SELECT id FROM legacy;\n"
        + "INSERT INTO legacy VALUES (1);\n",
    )
    changed = BASE.replace("SELECT id, total FROM orders", "SELECT id FROM orders").replace(
        "note varchar(200) COMMENT 'free text',",
        "note varchar(200) COMMENT 'free text',\n  shipped tinyint DEFAULT 0,",
    )
    desired = write(tmp_path / "schema.sql", changed)
    out = tmp_path / "plan.json"
    result = plan(runner, db, desired, "--skip-drops", "--output", str(out))
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    assert document["drops"] == "skip"
    skipped = [(s["op"], s["key"].split(":", 1)[0], s["key"].rsplit(".", 1)[1])
               for s in document["skipped"]]  # fmt: skip
    assert skipped == [
        ("drop_column", "column", "old_code"),
        ("drop_index", "index", "orders_note_idx"),
        ("drop_table", "table", "legacy"),
        ("drop_definition", "view", "legacy_ids"),
    ]
    ops = sorted((s["op"], s["key"].rsplit(".", 1)[1]) for s in document["statements"])
    assert ("add_column", "orders") in ops and ("move_column", "orders") not in ops
    assert {o for o, k in ops if k == "big_orders"}  # the changed view is replaced
    assert not any(o.startswith("drop_") and k != "big_orders" for o, k in ops)
    applied = apply(runner, db, out)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert columns(db, "orders") == ["id", "customer_id", "total", "old_code", "note", "shipped"]
    assert columns(db, "big_orders") == ["id"]
    assert query(db, f"SELECT id FROM `{db.name}`.legacy_ids") == [(1,)]
    assert query(
        db,
        "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s"
        " AND INDEX_NAME = 'orders_note_idx'",
        db.name,
    ) == [(1,)]
    again = plan(runner, db, desired, "--skip-drops")
    assert again.returncode == 0, again.stderr
    skipping = json.loads(again.stdout)
    assert skipping["statements"] == [] and skipping["skipped"] == document["skipped"]
    dropping = json.loads(plan(runner, db, desired, "--allow-destructive").stdout)
    assert "drops" not in dropping and dropping["options"] != skipping["options"]
    assert {s["op"] for s in dropping["statements"]} >= {"drop_table", "drop_column"}
