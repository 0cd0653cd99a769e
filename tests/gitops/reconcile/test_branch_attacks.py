"""Seshat's own branches are untrusted input (the hardening issue, part two).

Each test plays an attacker who can push to the real bare remote (as every approver can) and
tampers with ``seshat/status`` or a review branch between passes; the controller must not
follow what it finds there, lose a safety record, or stop.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import git
import pytest
from harness.gitrepo import GIT_ENV
from harness.reconcile_world import World, migration_yaml, schema_yaml, tables
from harness.sshkeys import SSHIdentity, SSHKeyFactory

from gitops.approvals.write import approve as write_approval
from gitops.repo.loader import load_repository
from gitops.resources.approvals import ResourceRef

STATUS, REVIEW = "seshat/status", "seshat/review/shop/orders"


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside everything the controller is given, with one precious file."""
    folder = Path(tempfile.mkdtemp(prefix="seshat-outside-"))
    (folder / "precious").write_text("precious\n")
    (folder / "empty").mkdir()
    yield folder
    shutil.rmtree(folder)


def _declare(world: World, layout: Path) -> None:
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare orders")


def _replace_with_link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    os.symlink(target, path)


def test_symlinks_on_the_status_and_review_branches_are_never_followed(
    world: World, outside: Path
) -> None:
    world.database("orders")
    _declare(world, world.artifact("one", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n"))
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    with world.tamper(STATUS) as tree:
        _replace_with_link(tree / "status/shop/orders.yaml", outside / "precious")
        _replace_with_link(tree / "plans/shop/orders", outside / "empty")
    with world.tamper(REVIEW) as tree:
        _replace_with_link(tree / ".seshat/reviews/shop/orders.md", outside / "precious")
    assert world.entry(STATUS, "status/shop/orders.yaml") == "120000"

    # A new artifact: a new plan, a new status, a new review text, all written again.
    _declare(world, world.artifact("two", "CREATE TABLE t (id INTEGER PRIMARY KEY, n TEXT);\n"))
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}

    assert (outside / "precious").read_text() == "precious\n"
    assert list((outside / "empty").iterdir()) == []
    # What the branches hold now are regular files written from memory.
    assert world.entry(STATUS, "status/shop/orders.yaml") == "100644"
    assert world.entry(REVIEW, ".seshat/reviews/shop/orders.md") == "100644"
    plan = str(world.status("orders")["status"]["plan"]["path"])  # type: ignore[index]
    assert world.entry(STATUS, plan) == "100644"
    assert "CREATE TABLE" not in (outside / "precious").read_text()


# -- safety records cannot be erased or forged ----------------------------------------------

STEPWISE = {  # SQLite, no transaction: the table is created, then the INSERT fails -> Partial
    "1_items.sql": (
        "-- seshat:no-transaction\n"
        "CREATE TABLE items (id INTEGER);\n"
        "INSERT INTO nowhere VALUES (1);\n"
    ),
}


def _rows(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT version, state FROM seshat_schema_migrations").fetchall()
    conn.close()
    return [(str(v), str(s)) for v, s in rows]


def _partial_run(world: World) -> tuple[Path, str]:
    database = world.database("ledger")
    world.remote.write_file(
        "databases/ledger.yaml",
        migration_yaml("ledger", world.migrations("m1", STEPWISE), apply="Always"),
    )
    world.remote.commit_all("declare ledger")
    assert world.reconcile()["shop/ledger"] == "Blocked/RunUnresolved"
    run = world.status("ledger")["status"]["unresolvedRun"]  # type: ignore[index]
    assert run["outcome"] == "Partial" and _rows(database) == [("1", "failed")]
    return database, str(run["operationId"])


def _fixed_artifact(world: World) -> None:
    """The migration fixed (a new artifact): only an unresolved run stands in the way."""
    fixed = {"1_items.sql": "CREATE TABLE items (id INTEGER);\n"}
    world.remote.write_file(
        "databases/ledger.yaml",
        migration_yaml("ledger", world.migrations("m2", fixed), apply="Always"),
    )
    world.remote.commit_all("fix the migration")


def test_deleting_the_status_file_does_not_lift_an_unresolved_run(world: World) -> None:
    database, operation = _partial_run(world)
    _fixed_artifact(world)
    with world.tamper(STATUS) as tree:
        (tree / "status/shop/ledger.yaml").unlink()
    assert world.reconcile() == {"shop/ledger": "Blocked/RunUnresolved"}
    run = world.status("ledger")["status"]["unresolvedRun"]  # type: ignore[index]
    assert run["operationId"] == operation
    assert _rows(database) == [("1", "failed")]

    # Nor does a DatabaseSchema declared with the same name (it would share the status file).
    world.remote.write_file(
        "databases/twin.yaml", schema_yaml("ledger", world.artifact("t", "CREATE TABLE x (a INT);"))
    )
    world.remote.commit_all("a twin")
    assert world.reconcile() == {"shop/ledger": "Blocked/ConfigurationError"}
    (world.remote.work_dir / "databases/twin.yaml").unlink()
    world.remote.commit_all("no twin")
    assert world.reconcile() == {"shop/ledger": "Blocked/RunUnresolved"}

    # Nor a status file rewritten without it, nor a history rewritten by a force-push.
    with world.tamper(STATUS) as tree:
        text = (tree / "status/shop/ledger.yaml").read_text()
        (tree / "status/shop/ledger.yaml").write_text(text.split("  unresolvedRun:")[0])
    _force_fresh_history(world)
    assert world.reconcile() == {"shop/ledger": "Blocked/RunUnresolved"}
    assert _rows(database) == [("1", "failed")]

    # What settles it is what always did: a person's signed acknowledgment (the failed row
    # they have not repaired yet is what blocks next).
    world.acknowledge("ledger", operation)
    assert world.reconcile() == {"shop/ledger": "Blocked/HistoryDirty"}
    assert "unresolvedRun" not in world.status("ledger")["status"]  # type: ignore[operator]


def _force_fresh_history(world: World) -> None:
    """An attacker replaces the status branch with a one-commit history (a force-push)."""
    folder = world.tmp / "rewrite"
    repo = git.Repo.clone_from(world.remote.remote_url, folder, env=GIT_ENV)
    try:
        repo.git.update_environment(**GIT_ENV)
        with repo.config_writer() as config:
            config.set_value("user", "name", "Mallory")
            config.set_value("user", "email", "mallory@example.invalid")
        repo.git.checkout("--quiet", STATUS)
        repo.git.checkout("--quiet", "--orphan", "fresh")
        repo.git.commit("--quiet", "-m", "fresh start")
        repo.git.push("--quiet", "--force", "origin", f"HEAD:refs/heads/{STATUS}")
    finally:
        repo.close()


def _signing(world: World, keys: SSHKeyFactory) -> SSHIdentity:
    controller = keys("seshat@controller.test")
    world.remote.write_file(
        "seshat.yaml",
        "apiVersion: seshat.dev/v1alpha1\nkind: Config\nspec:\n  commit:\n"
        f"    signing: {{format: ssh, keyFile: {controller.private_key}}}\n",
    )
    world.remote.commit_all("sign status commits")
    return controller


def test_a_forged_release_is_tampering_and_releases_nothing(
    world: World, ssh_key_factory: SSHKeyFactory
) -> None:
    _signing(world, ssh_key_factory)
    database, operation = _partial_run(world)
    _fixed_artifact(world)
    forged = json.dumps(
        {
            "by": "a reading",
            "operationId": operation,
            "resource": "DatabaseMigration shop/ledger",
            "type": "settled",
        },
        separators=(",", ":"),
        sort_keys=True,
    )
    with world.tamper(STATUS, f"settle\n\nSeshat-Record: {forged}") as tree:
        text = (tree / "status/shop/ledger.yaml").read_text()
        (tree / "status/shop/ledger.yaml").write_text(text.split("  unresolvedRun:")[0])
    forged_commit = world.git("rev-parse", f"refs/heads/{STATUS}").strip()
    assert world.reconcile() == {"shop/ledger": "Blocked/StatusTampered"}
    message = world.status("ledger")["status"]["conditions"][0]["message"]  # type: ignore[index]
    assert forged_commit in message
    assert _rows(database) == [("1", "failed")]
    # A person looks, and acknowledges the forged commit: the run is still unresolved.
    world.acknowledge("ledger", forged_commit)
    assert world.reconcile() == {"shop/ledger": "Blocked/RunUnresolved"}
    assert _rows(database) == [("1", "failed")]


def test_a_consumed_approval_stays_consumed_after_the_state_file_is_lost(world: World) -> None:
    """Plans P and Q applied, the database emptied and the declaration moved back to P's
    inputs: P's id comes back, and its old approval must not apply it again."""
    database = world.database("orders")
    first = world.artifact("p", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    second = world.artifact("q", "CREATE TABLE t (id INTEGER PRIMARY KEY, n TEXT);\n")
    plans = []
    for layout in (first, second):
        _declare(world, layout)
        assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
        plans.append(str(world.status("orders")["status"]["plan"]["id"]))  # type: ignore[index]
        world.approve("orders", plans[-1])
        assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    with sqlite3.connect(database) as conn:
        conn.execute("DROP TABLE t")
    conn.close()
    _declare(world, first)
    for leftover in world.work.glob("state.sqlite*"):
        leftover.unlink()
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert world.status("orders")["status"]["plan"]["id"] == plans[0]  # type: ignore[index]
    assert tables(database) == []
    assert world.phases("orders").count("Applying") == 2


# -- seshat plan show finds a plan by its id and checks it --------------------------------


def test_plan_show_never_shows_another_plan_under_an_id(world: World, outside: Path) -> None:
    database = world.database("orders", "CREATE TABLE keep (id INTEGER PRIMARY KEY);")
    benign = world.artifact("b", "CREATE TABLE keep (id INTEGER PRIMARY KEY, n TEXT);\n")
    _declare(world, benign)
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    benign_plan = world.status("orders")["status"]["plan"]  # type: ignore[index]
    destructive = world.artifact("d", "CREATE TABLE other (id INTEGER PRIMARY KEY);\n")
    world.remote.write_file(
        "databases/o.yaml", schema_yaml("orders", destructive, extra=", allowDestructive: true")
    )
    world.remote.commit_all("drop keep")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    plan = world.status("orders")["status"]["plan"]  # type: ignore[index]
    shown = world.seshat("plan", "show", "shop/orders", "--repo", world.remote.remote_url)
    assert (
        shown.returncode == 0
        and "DROP TABLE" in shown.stdout
        and "destructive: True" in (shown.stdout)
    )
    hexes = str(plan["id"]).removeprefix("sha256:"), str(benign_plan["id"]).removeprefix("sha256:")

    def attempt(change: str) -> str:
        done = world.seshat("plan", "show", "shop/orders", "--repo", world.remote.remote_url)
        assert done.returncode == 1, (change, done.stdout)
        assert "DROP TABLE" not in done.stdout and "CREATE TABLE" not in done.stdout
        return done.stderr

    folder = "plans/shop/orders"
    # 1. The status file's path points at the older, benign plan: the path is not read;
    # the benign document copied under the destructive id does not match its binding, and
    # the benign binding copied too does not hash to the id.
    status_file = "status/shop/orders.yaml"
    for suffixes, says in (((".json", ".sql"), "binds"), ((".binding.json",), "hash to")):
        with world.tamper(STATUS) as tree:
            text = (tree / status_file).read_text()
            (tree / status_file).write_text(text.replace(f"{hexes[0]}.json", f"{hexes[1]}.json"))
            for suffix in suffixes:
                source, target = (tree / folder / f"{h}{suffix}" for h in (hexes[1], hexes[0]))
                shutil.copy(source, target)
        assert says in attempt(f"benign {suffixes} under the destructive id")
    # 2. An absolute path, or one leaving the branch: never read.
    (outside / "plan.json").write_text('{"secret": "outside"}')
    with world.tamper(STATUS) as tree:
        text = (tree / "status/shop/orders.yaml").read_text()
        text = text.replace(f"{folder}/{hexes[1]}.json", str(outside / "plan.json"))
        (tree / "status/shop/orders.yaml").write_text(text)
        _replace_with_link(tree / folder / f"{hexes[0]}.json", outside / "plan.json")
    assert "outside" not in attempt("a symlinked document")
    assert database.exists()


# -- inputs that used to stop the whole pass ------------------------------------------------


def test_one_resource_s_inputs_never_stop_the_others(world: World) -> None:
    database = world.database("orders")
    _declare(world, world.artifact("one", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n"))
    for file, name in (("long", "a" * 253), ("dots", "cat..v2"), ("lock", "cat.lock")):
        world.remote.write_file(
            f"databases/{file}.yaml",
            schema_yaml("x", world.tmp / "nowhere").replace("name: x,", f"name: {name},"),
        )
    world.remote.commit_all("names that cannot be stored")
    ledger_db, operation = _partial_run(world)
    plan = str(world.status("orders")["status"]["plan"]["id"])  # type: ignore[index]
    world.approve("orders", plan)
    approval = world.remote.work_dir / f"approvals/shop/orders/{plan.removeprefix('sha256:')}.yaml"
    bundles = approval.with_name(approval.name + ".sigstore.json")
    bundles.write_text("[" * 100_000 + "]" * 100_000)
    world.acknowledge("ledger", operation)
    acknowledgment = world.remote.work_dir / f"acknowledgments/shop/ledger/{operation}.yaml.sig"
    acknowledgment.write_bytes(
        acknowledgment.read_bytes().replace(b"-----END", b"\xff\xfe-----END")
    )
    world.remote.commit_all("hostile signature files")
    assert world.reconcile() == {
        "shop/orders": "InSync/InSync",  # its SSH signature still counts
        "shop/ledger": "Blocked/RunUnresolved",  # a garbled acknowledgment settles nothing
    }
    assert tables(database) == ["t"]
    assert _rows(ledger_db) == [("1", "failed")]
    validated = world.seshat("validate", world.remote.work_dir)
    assert validated.returncode == 1 and "Traceback" not in validated.stderr
    assert validated.stdout.count("metadata.name") == 3


def test_an_approval_dated_in_the_future_approves_nothing(world: World) -> None:
    database = world.database("orders")
    _declare(world, world.artifact("one", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n"))
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    plan = str(world.status("orders")["status"]["plan"]["id"])  # type: ignore[index]
    loaded = load_repository(world.remote.work_dir).find("DatabaseSchema", "shop", "orders")
    assert loaded is not None
    ref = ResourceRef(
        kind="DatabaseSchema",
        namespace="shop",
        name="orders",
        uid=str(loaded.resource.metadata.uid),
    )
    future = datetime(2099, 1, 1, tzinfo=UTC)  # would never reach maxAge
    write_approval(world.remote.work_dir, ref, plan, world.alice.private_key, now=future)
    world.remote.commit_all("approve, from the future")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert tables(database) == []
    world.approve("orders", plan)  # Alice again: a fresh statement dated now
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
