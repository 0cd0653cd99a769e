"""Approvals, visibly: rejected approval files are listed in the status with why, counted
in ``seshat_approvals``, and one plan id is shown everywhere (status, plan.sql's header,
``seshat plan show``)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from harness.reconcile_world import World, schema_yaml, tables
from harness.sshkeys import SSHKeyFactory

from gitops.metrics import REGISTRY
from runner.digests import digest_hex


def _status(world: World, name: str) -> dict[str, Any]:
    status = world.status(name)["status"]
    assert isinstance(status, dict)
    return status


def _rejected(world: World, name: str) -> list[tuple[str, str]]:
    listed = _status(world, name).get("rejectedApprovals") or []
    return [(entry["file"], entry["reason"]) for entry in listed]


def _count(reason: str) -> float:
    found = REGISTRY.get_sample_value(
        "seshat_approvals_total", {"outcome": "rejected", "reason": reason}
    )
    return found or 0.0


def test_an_approval_by_an_untrusted_signer_is_listed_and_counted(
    world: World, ssh_key_factory: SSHKeyFactory
) -> None:
    layout = world.artifact("a", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert "rejectedApprovals" not in _status(world, "orders")  # nothing to list: no key
    plan = _status(world, "orders")["plan"]["id"]
    before = _count("untrusted_signer")
    world.approve("orders", plan, key=ssh_key_factory("mallory@example.com").private_key)
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert tables(database) == []
    file = f"approvals/shop/orders/{digest_hex(plan)}.yaml"
    assert _rejected(world, "orders") == [(file, "untrusted_signer")]
    detail = _status(world, "orders")["rejectedApprovals"][0]["detail"]
    assert "allowed signers do not list" in detail
    assert _count("untrusted_signer") == before + 1
    shown = world.seshat("status", "shop/orders", "--repo", world.remote.remote_url)
    assert f"shop/orders: approval {file} not accepted: untrusted_signer" in shown.stdout
    # A pass that decides the same keeps the same bytes: no new status commit.
    commits = len(world.status_log())
    world.reconcile()
    assert len(world.status_log()) == commits


def test_a_stale_and_a_malformed_approval_are_listed_and_the_spent_one_is_not(
    world: World,
) -> None:
    layout = world.artifact("d", "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT);\n")
    database = world.database("orders")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare")
    world.reconcile()
    old_plan = _status(world, "orders")["plan"]["id"]
    world.approve("orders", old_plan)
    with sqlite3.connect(database) as conn:  # someone changes the database by hand
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    conn.close()
    world.remote.write_file("approvals/shop/orders/junk.yaml", "kind: Approval\nspec: 7\n")
    world.remote.commit_all("a file that is no approval")
    before = _count("stale_plan")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    new_plan = _status(world, "orders")["plan"]["id"]
    assert new_plan != old_plan
    stale = f"approvals/shop/orders/{digest_hex(old_plan)}.yaml"
    assert _rejected(world, "orders") == sorted(
        [("approvals/shop/orders/junk.yaml", "malformed"), (stale, "stale_plan")]
    )
    listed = _status(world, "orders")["rejectedApprovals"]
    detail = next(entry["detail"] for entry in listed if entry["reason"] == "stale_plan")
    assert old_plan in detail and new_plan in detail
    assert _count("stale_plan") == before + 1
    # The current plan approved and applied: the list empties (the junk file removed), and
    # the approval spent on that Apply is not listed afterwards.
    (world.remote.work_dir / "approvals/shop/orders/junk.yaml").unlink()
    world.approve("orders", new_plan)
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    assert "rejectedApprovals" not in _status(world, "orders")


def test_one_plan_id_in_the_status_the_sql_header_and_plan_show(world: World) -> None:
    layout = world.artifact("p", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    world.database("orders")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare")
    world.reconcile()
    plan = _status(world, "orders")["plan"]["id"]
    sql = world.show("seshat/status", f"plans/shop/orders/{digest_hex(plan)}.sql")
    assert sql.splitlines()[0] == f"-- Seshat plan {plan}"
    shown = world.seshat("plan", "show", "shop/orders", "--repo", world.remote.remote_url)
    assert shown.returncode == 0, shown.stderr
    assert f"plan id      {plan} (verified)" in shown.stdout
    assert f"seshat approve shop/orders --plan {plan}" in shown.stdout
    assert f"-- Seshat plan {plan}\n" in shown.stdout
    # The id the header names is the id an approval must name: approving it applies.
    world.approve("orders", plan)
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}


GITHUB_CONFIG = """\
apiVersion: seshat.dev/v1alpha1
kind: Config
spec:
  reviews: {forge: github, repository: acme/shop, tokenFromEnv: GH_TOKEN,
            apiUrl: "https://api.github.test"}
"""


def test_the_review_pull_request_gets_one_comment_per_rejected_approval(
    world: World, ssh_key_factory: SSHKeyFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub's REST API is played by ``responses`` (a forge's API is the one place a test
    double is allowed); the review branch is real. A rejection counts as already said only
    in a comment Seshat's own identity wrote: a stranger who copies the marker (it is built
    from public data) silences nothing, and without an identity it is said again."""
    import responses
    from responses import matchers

    monkeypatch.setenv("GH_TOKEN", "ghp_" + "t0ken" * 8)
    layout = world.artifact("rv", "CREATE TABLE orders (id INTEGER PRIMARY KEY);\n")
    world.database("orders")
    world.remote.write_file("seshat.yaml", GITHUB_CONFIG)
    world.remote.write_file("databases/orders/schema.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare orders")
    api = "https://api.github.test/repos/acme/shop"
    head = {"head": "acme:seshat/review/shop/orders", "state": "open"}
    pr = {"number": 7, "html_url": "https://github.test/acme/shop/pull/7", "state": "open"}
    with responses.RequestsMock(assert_all_requests_are_fired=True) as api_mock:
        api_mock.get(f"{api}/pulls", json=[], match=[matchers.query_param_matcher(head)])
        api_mock.post(f"{api}/pulls", json=pr, status=201)
        world.reconcile()  # no approval yet: nothing rejected, no comment listed or posted
    plan = _status(world, "orders")["plan"]["id"]
    world.approve("orders", plan, key=ssh_key_factory("mallory@example.com").private_key)
    file = f"approvals/shop/orders/{digest_hex(plan)}.yaml"

    seshat = {"login": "seshat-bot", "id": 4242}
    alice, mallory = {"login": "alice", "id": 7}, {"login": "mallory", "id": 666}
    with responses.RequestsMock(assert_all_requests_are_fired=True) as api_mock:
        api_mock.get(f"{api}/pulls", json=[pr], match=[matchers.query_param_matcher(head)])
        updated = api_mock.patch(f"{api}/pulls/7", json=pr)
        api_mock.get("https://api.github.test/user", json=seshat)
        api_mock.get(f"{api}/issues/7/comments", json=[{"body": "LGTM", "user": alice}])
        posted = api_mock.post(f"{api}/issues/7/comments", json={}, status=201)
        assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
        comment = json.loads(posted.calls[0].request.body or b"{}")["body"]
        assert len(posted.calls) == 1
        assert f"`{file}`" in comment and "`untrusted_signer`" in comment
        assert comment.startswith("<!-- seshat:rejected-approval sha256:")
        body = json.loads(updated.calls[0].request.body or b"{}")["body"]
        assert "Approvals not accepted" in body and "untrusted_signer" in body

    said = [{"body": "LGTM", "user": alice}, {"body": comment, "user": seshat}]
    with responses.RequestsMock(assert_all_requests_are_fired=True) as api_mock:
        api_mock.get(f"{api}/pulls", json=[pr], match=[matchers.query_param_matcher(head)])
        api_mock.patch(f"{api}/pulls/7", json=pr)
        api_mock.get("https://api.github.test/user", json=seshat)
        api_mock.get(f"{api}/issues/7/comments", json=said)
        world.reconcile()  # the same rejection again: already said, nothing posted
        # ``responses`` records every request made in this process while it is active, from
        # any thread (a thread an earlier test left running once added a GET here): only
        # the calls on the forge's API are the pass's.
        github = "https://api.github.test/"
        forge = [c for c in api_mock.calls if str(c.request.url).startswith(github)]
        shown = [f"{c.request.method} {c.request.url}" for c in api_mock.calls]
        assert [c.request.method for c in forge] == ["GET", "PATCH", "GET", "GET"], shown

    copied = [{"body": "LGTM", "user": alice}, {"body": comment, "user": mallory}]
    with responses.RequestsMock(assert_all_requests_are_fired=True) as api_mock:
        api_mock.get(f"{api}/pulls", json=[pr], match=[matchers.query_param_matcher(head)])
        api_mock.patch(f"{api}/pulls/7", json=pr)
        api_mock.get("https://api.github.test/user", json=seshat)
        api_mock.get(f"{api}/issues/7/comments", json=copied)
        again = api_mock.post(f"{api}/issues/7/comments", json={}, status=201)
        world.reconcile()  # Mallory posted the marker first: Seshat still says it
        assert len(again.calls) == 1

    with responses.RequestsMock(assert_all_requests_are_fired=True) as api_mock:
        api_mock.get(f"{api}/pulls", json=[pr], match=[matchers.query_param_matcher(head)])
        api_mock.patch(f"{api}/pulls/7", json=pr)
        api_mock.get("https://api.github.test/user", status=403, json={"message": "no"})
        api_mock.post("https://api.github.test/graphql", status=401, json={"message": "no"})
        unknown = api_mock.post(f"{api}/issues/7/comments", json={}, status=201)
        world.reconcile()  # who Seshat is cannot be learned: nothing counts as said
        assert len(unknown.calls) == 1
        listed = [c for c in api_mock.calls if "/issues/7/comments?" in str(c.request.url)]
        assert listed == []  # not even read: no comment can be known as Seshat's
