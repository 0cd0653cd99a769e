"""The planning cache: a plan whose inputs are unchanged reuses the normalized desired model
and the dry-run verdict, never starts a sandbox, and gives the same bytes; damaged entries
are computed again; ``--no-cache`` plans cold."""

from __future__ import annotations

import json
from pathlib import Path

from harness.postgres import PostgresDatabase
from harness.runner_cli import RunnerCLI, write

from runner.engines.cache import model_entry, model_from_entry
from runner.engines.planner import fingerprint
from runner.engines.postgresql.connection import connection
from runner.engines.postgresql.introspect import introspect
from runner.url import parse_url

BASE = """
CREATE TYPE mood AS ENUM ('ok', 'sad');
CREATE TABLE people (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, m mood,
                     name text COLLATE "C" NOT NULL DEFAULT 'x' CHECK (name <> ''));
CREATE INDEX people_name ON people (lower(name)) WHERE m = 'ok';
CREATE VIEW happy AS SELECT id, name FROM people WHERE m = 'ok';
COMMENT ON TABLE people IS 'everyone';
"""


def test_a_model_survives_its_cached_form(postgres_database: PostgresDatabase) -> None:
    with postgres_database.connect() as conn:
        conn.execute(BASE)
    with connection(parse_url(postgres_database.server.url(postgres_database.name))) as conn:
        model = introspect(conn)
    again = model_from_entry(json.loads(json.dumps(model_entry(model))))
    assert again == model
    assert fingerprint(again) == fingerprint(model)


def test_an_unchanged_plan_reuses_the_cache_and_never_starts_a_sandbox(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    db = postgres_database
    with db.connect() as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    desired = write(tmp_path / "s.sql", "CREATE TABLE t (id int PRIMARY KEY, n text);\n" + BASE)
    cache = tmp_path / "cache"
    runner = RunnerCLI()

    def plan(*extra: str, bindir: str | None = None) -> tuple[int, str]:
        # --cache-dir wins over SESHAT_CACHE_DIR (the session's own cache, set in conftest).
        env = {"TARGET_URL": db.server.url(db.name)}
        if bindir is not None:
            env["SESHAT_PG_BINDIR"] = bindir
        command = ["--cache-dir", str(cache), "schema", "plan", "--url-env", "TARGET_URL"]
        done = runner(*command, "--desired", str(desired), *extra, env=env)
        return done.returncode, done.stdout

    cold = plan()
    assert cold[0] == 0, cold
    entries = sorted(p.relative_to(cache).parts[1] for p in (cache / "plans").rglob("*.json"))
    assert entries == ["desired", "verdict"]
    # No server binaries: only a plan that needs no sandbox can be made.
    assert plan(bindir="/nonexistent") == cold
    refused = plan("--no-cache", bindir="/nonexistent")
    assert refused[0] == 1 and json.loads(refused[1])["refusal"]["code"] == "sandbox_unavailable"
    # A damaged entry is a miss: computed again (with a sandbox), the same bytes, rewritten.
    for entry in (cache / "plans").rglob("*.json"):
        entry.write_text(entry.read_text().replace('"', "'", 3))
    assert plan(bindir="/nonexistent")[0] == 1
    assert plan() == cold
    assert plan(bindir="/nonexistent") == cold


def test_a_cache_other_users_could_write_is_refused(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    """Cache entries decide what a plan says: a cache folder that is a symbolic link, or
    that group or others may write, is never used."""
    desired = write(tmp_path / "s.sql", "CREATE TABLE t (id int PRIMARY KEY);\n")
    runner = RunnerCLI()
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    for folder in (link, shared):
        env = {"TARGET_URL": postgres_database.server.url(postgres_database.name)}
        env["SESHAT_CACHE_DIR"] = str(folder)
        done = runner(
            "schema", "plan", "--url-env", "TARGET_URL", "--desired", str(desired), env=env
        )
        refusal = json.loads(done.stdout)["refusal"]
        assert done.returncode == 1 and refusal["code"] == "sandbox_unavailable", done
        assert str(folder) in refusal["message"]
    assert list(real.iterdir()) == [] and list(shared.iterdir()) == []


def test_the_plan_that_proves_an_apply_starts_no_sandbox(
    postgres_database: PostgresDatabase, tmp_path: Path
) -> None:
    """After an apply the live schema is new to the cache, yet the fresh plan that proves
    convergence has nothing to run and nothing to reach: it is made without a sandbox
    server (none could start here), and it promises the live schema as it is."""
    db = postgres_database
    desired = write(tmp_path / "s.sql", "CREATE TABLE t (id int PRIMARY KEY, n text);\n" + BASE)
    cache = tmp_path / "cache"
    runner = RunnerCLI()
    env = {"TARGET_URL": db.server.url(db.name)}
    target = ["--cache-dir", str(cache), "schema", "plan", "--url-env", "TARGET_URL"]
    first = runner(
        *target, "--desired", str(desired), "--output", str(tmp_path / "p.json"), env=env
    )
    assert first.returncode == 0, first.stdout + first.stderr
    applied = runner(
        "schema", "apply", "--url-env", "TARGET_URL", "--plan", str(tmp_path / "p.json"), env=env
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    proof = runner(
        *target, "--desired", str(desired), env={**env, "SESHAT_PG_BINDIR": "/nonexistent"}
    )
    assert proof.returncode == 0, proof.stdout + proof.stderr
    document = json.loads(proof.stdout)
    assert document["statements"] == []
    with connection(parse_url(db.server.url(db.name))) as conn:
        assert document["expected"] == fingerprint(introspect(conn))
    # A plan with something to run still needs its dry run, so it still needs a server.
    changed = write(tmp_path / "c.sql", desired.read_text() + "CREATE TABLE u (id int);\n")
    needs = runner(
        *target, "--desired", str(changed), env={**env, "SESHAT_PG_BINDIR": "/nonexistent"}
    )
    assert needs.returncode == 1 and json.loads(needs.stdout)["refusal"]["code"] == (
        "sandbox_unavailable"
    )
