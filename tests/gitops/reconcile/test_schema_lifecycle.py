"""The schema lifecycle end to end on real components: a Git repository with a bare remote,
an OCI layout holding a signed schema artifact, SQLite databases, the real seshat-runner,
SSH-signed approvals, and the status branch read back from the remote."""

from __future__ import annotations

import json
import subprocess

import pytest
from harness.gitrepo import GIT_ENV
from harness.reconcile_world import World, schema_yaml, tables


def test_plan_approve_apply_in_sync(world: World) -> None:
    layout = world.artifact(
        "orders-v1", "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER);\n"
    )
    database = world.database("orders")
    world.remote.write_file("databases/orders/schema.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare orders")

    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert tables(database) == []  # nothing applied without an approval
    status = world.status("orders")
    plan = status["status"]["plan"]  # type: ignore[index]
    plan_id = plan["id"]
    assert status["resource"]["uid"]  # type: ignore[index]
    assert world.status_log() == ["shop/orders: AwaitingApproval"]

    # What people see: seshat status and seshat plan show, read from the remote.
    listed = world.seshat("status", "--repo", world.remote.remote_url, "--format", "json")
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    assert entry["status"]["phase"] == "AwaitingApproval"
    table = world.seshat("status", "--repo", world.remote.remote_url)
    assert "shop/orders" in table.stdout and "AwaitingApproval" in table.stdout
    assert "drift 1 (warning)" in table.stdout  # the table the plan creates is missing
    shown = world.seshat("plan", "show", "shop/orders", "--repo", world.remote.remote_url)
    assert shown.returncode == 0, shown.stderr
    assert f"plan id      {plan_id}" in shown.stdout and "(verified)" in shown.stdout
    assert "CREATE TABLE orders" in shown.stdout
    assert f"seshat approve shop/orders --plan {plan_id}" in shown.stdout

    # The same pass again: nothing material changed, no new commit.
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert world.status_log() == ["shop/orders: AwaitingApproval"]

    approved = world.seshat(
        "approve",
        "shop/orders",
        "--plan",
        plan_id,
        "--repo",
        world.remote.work_dir,
        "--key",
        world.alice.private_key,
    )
    assert approved.returncode == 0, approved.stderr
    world.remote.commit_all("approve the orders plan")

    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    assert tables(database) == ["orders"]
    final = world.status("orders")["status"]
    assert final["phase"] == "InSync"  # type: ignore[index]
    assert final["lastApplied"]["planId"] == plan_id  # type: ignore[index]
    assert final["lastApplied"]["outcome"] == "Applied"  # type: ignore[index]
    assert world.status_log() == [
        "shop/orders: Applying -> InSync",
        "shop/orders: AwaitingApproval -> Applying",  # the dispatch marker, before the Apply
        "shop/orders: AwaitingApproval",
    ]
    assert world.phases("orders") == ["InSync", "Applying", "AwaitingApproval"]
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    assert len(world.status_log()) == 3


def test_apply_policies_and_blocked_verdicts(world: World) -> None:
    v1 = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\n"
    layout = world.artifact("items", v1)
    unsigned = world.artifact("unsigned", v1, sign=False)
    for name in ("always", "never", "dropper", "unsigned", "weird"):
        world.database(name, "CREATE TABLE legacy (id INTEGER);" if name == "dropper" else "")
    world.remote.write_file("databases/always.yaml", schema_yaml("always", layout, apply="Always"))
    world.remote.write_file("databases/never.yaml", schema_yaml("never", layout, apply="Never"))
    world.remote.write_file(
        "databases/dropper.yaml", schema_yaml("dropper", layout, apply="Always")
    )
    world.remote.write_file("databases/unsigned.yaml", schema_yaml("unsigned", unsigned))
    world.remote.write_file("databases/weird.yaml", schema_yaml("weird", layout, engine="oracle"))
    world.remote.write_file(
        "databases/twins.yaml",
        schema_yaml("twin-a", layout, key="twin")
        + "---\n"
        + schema_yaml("twin-b", layout, key="twin"),
    )
    world.remote.write_file(
        "databases/broken.yaml", schema_yaml("broken", layout).replace("OnApproval", "Sometimes")
    )
    # Files that once stopped the whole pass: problems of their own, the rest reconciles.
    world.remote.write_file("databases/kind.yaml", "kind: [DatabaseSchema]\n")
    world.remote.write_file(
        "databases/tagged.yaml", schema_yaml("tagged", layout) + "  interval: !!int abc\n"
    )
    world.remote.commit_all("many resources")
    verdicts = world.reconcile()
    assert verdicts == {
        "shop/always": "InSync/InSync",
        "shop/never": "Blocked/ApplyDisabled",
        "shop/dropper": "Blocked/DestructiveChangesDisallowed",
        "shop/unsigned": "Blocked/ArtifactRefused",
        "shop/weird": "Blocked/UnsupportedEngine",
        "shop/twin-a": "Blocked/RealmConflict",
        "shop/twin-b": "Blocked/RealmConflict",
        "shop/broken": "Blocked/ConfigurationError",
    }
    assert tables(world.tmp / "always.db") == ["items"]
    assert tables(world.tmp / "never.db") == []
    assert tables(world.tmp / "dropper.db") == ["legacy"]
    never = world.status("never")["status"]
    assert never["plan"]["id"].startswith("sha256:")  # type: ignore[index]
    broken = json.dumps(world.status("broken"))
    assert "Sometimes" in broken and "spec.policy.apply" in broken


CONFIG = """\
apiVersion: seshat.dev/v1alpha1
kind: Config
spec:
  reviews: {forge: github, repository: acme/shop, tokenFromEnv: GH_TOKEN,
            apiUrl: "https://api.github.test"}
"""


def test_review_branch_and_pull_request(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """GitHub itself cannot run here: its REST API is played by ``responses``; the review
    branch is pushed to the real bare remote."""
    import responses
    from responses import matchers

    token = "ghp_" + "s3cr3t" * 6
    monkeypatch.setenv("GH_TOKEN", token)
    layout = world.artifact("rv", "CREATE TABLE orders (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file("seshat.yaml", CONFIG)
    world.remote.write_file("databases/orders/schema.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare orders")
    api = "https://api.github.test/repos/acme/shop"
    head = {"head": "acme:seshat/review/shop/orders", "state": "open"}
    pr = {"number": 7, "html_url": "https://github.test/acme/shop/pull/7", "state": "open"}

    with responses.RequestsMock(assert_all_requests_are_fired=True) as api_mock:
        api_mock.get(f"{api}/pulls", json=[], match=[matchers.query_param_matcher(head)])
        created = api_mock.post(f"{api}/pulls", json=pr, status=201)
        assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
        body = json.loads(created.calls[0].request.body or b"{}")
        plan_id = world.status("orders")["status"]["plan"]["id"]  # type: ignore[index]
        assert body["head"] == "seshat/review/shop/orders" and body["base"] == "main"
        assert body["title"] == "Seshat: shop/orders AwaitingApproval"
        assert f"seshat approve shop/orders --plan {plan_id}" in body["body"]
        assert "CREATE TABLE orders" in body["body"]
        assert created.calls[0].request.headers["Authorization"] == f"Bearer {token}"

    shown = world.show("seshat/review/shop/orders", ".seshat/reviews/shop/orders.md")
    assert f"`{plan_id}`" in shown

    approved = world.seshat(
        "approve",
        "shop/orders",
        "--plan",
        plan_id,
        "--repo",
        world.remote.work_dir,
        "--key",
        world.alice.private_key,
    )
    assert approved.returncode == 0
    world.remote.commit_all("approve")
    with responses.RequestsMock(assert_all_requests_are_fired=True) as api_mock:
        api_mock.get(f"{api}/pulls", json=[pr], match=[matchers.query_param_matcher(head)])
        comment = api_mock.post(f"{api}/issues/7/comments", json={}, status=201)
        closed = api_mock.patch(f"{api}/pulls/7", json=pr | {"state": "closed"})
        assert world.reconcile() == {"shop/orders": "InSync/InSync"}
        assert json.loads(closed.calls[0].request.body or b"{}") == {"state": "closed"}
        assert "InSync" in json.loads(comment.calls[0].request.body or b"{}")["body"]
    assert tables(database) == ["orders"]
    log = subprocess.run(
        ["git", "--git-dir", str(world.remote.remote_path), "log", "-p", "--all"],
        capture_output=True,
        text=True,
        env=GIT_ENV,
        check=True,
    ).stdout
    assert token not in log
