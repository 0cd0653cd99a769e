"""``seshat preview``: which resources a pull request changes and what changed for each
(gitops/preview/changes.py), on real components."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from harness.preview_pr import ORDERS_V1, commit, declare_orders, open_branch, preview
from harness.reconcile_world import World, schema_yaml


def test_an_unrelated_file_changes_no_resource(world: World) -> None:
    declare_orders(world)
    open_branch(world)
    world.remote.write_file("README.md", "# shop\n")
    commit(world, "docs")

    status, document, _ = preview(world)

    assert status == 0
    assert document["resources"] == []


def test_a_declaration_edit_shows_the_fields_and_the_plan_a_merge_reaches(world: World) -> None:
    layout = declare_orders(world)
    open_branch(world)
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, extra=", lockTimeout: 7s")
    )
    commit(world, "a longer lock timeout")

    status, document, _ = preview(world)
    again = preview(world)

    assert status == 0
    assert again == (status, document, again[2])  # the same inputs, the same preview
    [orders] = document["resources"]
    assert orders["outcome"] == "Plan" and orders["reason"] == "AwaitingApproval"
    assert orders["fields"] == [
        {"field": "spec.policy.lockTimeout", "base": '"30s"', "head": '"7s"'}
    ]
    plan = orders["plan"]
    assert plan["approvals"] == 1 and plan["carriesOver"] is True
    assert "CREATE TABLE orders" in plan["sql"]
    assert plan["sql"].startswith(f"-- Seshat plan {plan['id']}\n")  # one id, as plan.sql

    # Merged as is: the reconciler records exactly the plan the preview showed.
    world.remote.work.git.checkout("--quiet", "main")
    world.remote.work.git.merge("--quiet", "--no-ff", "--no-edit", "pr")
    world.remote.work.git.push("--quiet", "origin", "main")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert world.status("orders")["status"]["plan"]["id"] == plan["id"]  # type: ignore[index]


def test_a_new_digest_behind_the_same_tag_counts_as_a_change(world: World) -> None:
    declare_orders(world)
    recorded = world.status("orders")["status"]["source"]["digest"]  # type: ignore[index]
    # CI pushes new content under the same tag; the pull request touches only a README.
    world.artifact("orders-v1", ORDERS_V1 + "CREATE TABLE refunds (id INTEGER PRIMARY KEY);\n")
    open_branch(world)
    world.remote.write_file("README.md", "# shop\n")
    commit(world, "docs")

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert orders["recordedDigest"] == recorded
    assert orders["resolvedDigest"] not in (None, recorded)
    assert any("now resolves to" in reason for reason in orders["changes"])
    assert "CREATE TABLE refunds" in orders["plan"]["sql"]


def test_a_policy_edit_lists_the_resources_it_governs(world: World) -> None:
    declare_orders(world)
    open_branch(world)
    policies = world.remote.work_dir / "policies" / "shop.yaml"
    text = policies.read_text().replace(
        "    - approvers: {allowedSigners: policies/allowed_signers}",
        "    - approvers: {allowedSigners: policies/allowed_signers}\n      count: 2",
    )
    policies.write_text(text)
    commit(world, "two approvers")

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert orders["changes"] == ["ApprovalPolicy approvers changed"]
    assert orders["fields"] == []
    # Listed for review; judged with the base's rule (docs/preview.md).
    assert orders["plan"]["approvals"] == 1
    assert document["trustChanges"] == ["ApprovalPolicy shop/approvers changed"]


def test_an_artifact_the_base_policy_refuses_is_blocked(world: World) -> None:
    layout = declare_orders(world)
    # main rotates the CI key after the artifact was signed: the base now refuses it.
    world.remote.write_file(
        "policies/ci.pub",
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    world.remote.commit_all("rotate the CI key")
    open_branch(world)
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, extra=", lockTimeout: 7s")
    )
    commit(world, "a longer lock timeout")

    status, document, _ = preview(world)

    assert status == 1
    [orders] = document["resources"]
    assert (orders["outcome"], orders["reason"]) == ("Blocked", "ArtifactRefused")
    assert orders["plan"] is None
    assert document["trustChanges"] == []  # the head changes no policy


def test_a_broken_declaration_in_the_pull_request_is_a_problem(world: World) -> None:
    declare_orders(world)
    open_branch(world)
    world.remote.write_file(
        "databases/billing/schema.yaml",
        "apiVersion: seshat.dev/v1alpha1\nkind: DatabaseSchema\n"
        "metadata: {name: billing, namespace: shop}\nspec: {policy: {apply: Sometimes}}\n",
    )
    commit(world, "a broken declaration")

    status, document, _ = preview(world)

    assert status == 1
    assert document["problems"] and all(
        p.startswith("databases/billing/schema.yaml:") for p in document["problems"]
    )
