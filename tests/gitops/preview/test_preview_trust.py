"""``seshat preview`` judges the head with the base's trust anchors (docs/preview.md, "What
comes from the base, what from the head"): the base's VerificationPolicy, the keys it names,
its ApprovalPolicy and allowed signers, its ``seshat.yaml``. The head's changes to them are
listed for review and never used to judge the head; an artifact the base's policy refuses
runs nowhere.

Each row of the rule's table, and where it is tested:

- ``seshat.yaml``: :func:`test_the_head_seshat_yaml_is_shown_not_used`;
- the VerificationPolicy: the attack (:func:`test_a_head_that_switches_signatures_off...`)
  and :func:`test_a_verification_policy_only_the_head_declares_judges_nothing`;
- the keys it names: :func:`test_a_head_that_swaps_the_key_is_judged_with_the_base_key`,
  :func:`test_a_key_rotation_in_the_head_still_plans_with_the_base_key`;
- the ApprovalPolicy and its allowed signers:
  :func:`test_the_approvals_a_plan_needs_come_from_the_base_policy`,
  :func:`test_an_acknowledgment_counts_only_by_the_base_allowed_signers`;
- the target and ``dev``: :func:`test_the_dev_sandbox_reference_is_the_base_one` here,
  test_preview_readonly.py for ``url`` and ``previewUrl``;
- uids: test_preview_changes.py (the preview's plan id is the one the merge records);
- the status branch: :func:`test_the_head_seshat_yaml_is_shown_not_used`;
- the head's declaration, artifact, statements and realm partners: test_preview_verdicts.py
  and test_preview_changes.py.

Everything here is real: Git with a bare remote, signed (and unsigned) OCI layouts, SQLite,
the runner, run through an executor that notes what it was asked to run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from harness.preview_pr import (
    ORDERS_V1,
    commit,
    declare_orders,
    open_branch,
    preview,
    preview_recorded,
)
from harness.reconcile_world import World, migration_yaml, schema_yaml
from harness.sshkeys import SSHKeyFactory

EVIL_SQL = "CREATE TABLE pwned (secret TEXT);\n"
LAX = """\
---
apiVersion: seshat.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: lax, namespace: shop}
spec:
  artifactTypes: [application/vnd.seshat.schema.v1]
  signatures: {mode: "off"}
"""


def _unsigned_in_repository(world: World, name: str = "evil") -> str:
    """An unsigned schema artifact committed inside the pull request's tree; its reference
    as a declaration names it (relative to the repository)."""
    folder = world.tmp / f"src-{name}"
    folder.mkdir()
    (folder / "schema.sql").write_text(ORDERS_V1 + EVIL_SQL)
    ref = f"oci-layout://{world.remote.work_dir}/artifacts/{name}:v1"
    done = world.seshat("artifact", "push", folder, ref, "--type", "schema")
    assert done.returncode == 0, done.stderr
    return f"oci-layout://artifacts/{name}:v1"


def _declare_with_dev(world: World, monkeypatch: pytest.MonkeyPatch) -> Path:
    """orders on main, reconciled, with a dev sandbox reference the preview must not hand to
    a runner for an artifact the base refuses."""
    dev = world.tmp / "dev.db"
    monkeypatch.setenv("ORDERS_DEV_URL", f"sqlite:///{dev}")
    layout = world.artifact("orders-v1", ORDERS_V1)
    world.database("orders")
    world.remote.write_file(
        "databases/orders/schema.yaml", schema_yaml("orders", layout, dev_env="ORDERS_DEV_URL")
    )
    world.remote.commit_all("declare orders")
    world.reconcile()
    return layout


def _point_orders_at(world: World, layout: Path, ref: str, policy: str = "ci") -> None:
    text = schema_yaml("orders", layout, ref=ref, dev_env="ORDERS_DEV_URL")
    world.remote.write_file(
        "databases/orders/schema.yaml", text.replace("policy: ci}", f"policy: {policy}}}")
    )


def _no_signatures(world: World) -> None:
    """The head's VerificationPolicy ci checks no signature at all."""
    policies = world.remote.work_dir / "policies" / "shop.yaml"
    policies.write_text(
        policies.read_text().replace(
            "  signatures:\n    count: 1\n    authorities: [{name: ci, key: {publicKey: "
            "policies/ci.pub}}]\n",
            '  signatures: {mode: "off"}\n',
        )
    )
    assert 'mode: "off"' in policies.read_text()


def test_a_head_that_switches_signatures_off_for_its_own_unsigned_artifact_gets_no_plan(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack of issue 32, item 1: a pull request sets its VerificationPolicy to
    ``signatures: {mode: off}`` and points the declaration at an unsigned artifact it
    commits. Judged with the base's policy, it is refused, and no runner observes or plans
    it: not on the target, not in the dev sandbox."""
    layout = _declare_with_dev(world, monkeypatch)
    open_branch(world)
    _no_signatures(world)
    _point_orders_at(world, layout, _unsigned_in_repository(world))
    commit(world, "an artifact of my own, no signatures needed")

    report, executor = preview_recorded(world)

    [orders] = report.resources
    assert (orders.outcome.value, orders.reason) == ("Blocked", "ArtifactRefused")
    assert orders.plan is None
    assert report.exit_status == 1
    assert executor.operations <= {"resolve", "verify"}  # no drift, no plan: nothing ran
    assert not executor.credentials & {"ORDERS_URL", "ORDERS_DEV_URL"}
    assert "VerificationPolicy ci changed" in " ".join(orders.change.reasons)
    assert "VerificationPolicy shop/ci changed" in report.trust_changes
    # The command a user runs says the same, and shows the policy change for review.
    status, document, _ = preview(world)
    assert status == 1
    assert document["resources"][0]["reason"] == "ArtifactRefused"
    assert "VerificationPolicy shop/ci changed" in document["trustChanges"]


def test_a_verification_policy_only_the_head_declares_judges_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = _declare_with_dev(world, monkeypatch)
    open_branch(world)
    policies = world.remote.work_dir / "policies" / "shop.yaml"
    policies.write_text(policies.read_text() + LAX)
    _point_orders_at(world, layout, _unsigned_in_repository(world), policy="lax")
    commit(world, "a policy of my own")

    report, executor = preview_recorded(world)

    [orders] = report.resources
    assert (orders.outcome.value, orders.reason) == ("Blocked", "ArtifactRefused")
    assert orders.message.startswith("unknown_policy: ") and "'lax'" in orders.message
    assert orders.plan is None
    assert executor.operations <= {"resolve"}  # not even verified: no policy may judge it
    assert "VerificationPolicy shop/lax is new (only the head declares it)" in (
        report.trust_changes
    )


def test_a_head_that_swaps_the_key_is_judged_with_the_base_key(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head replaces the public key its policy names with its own and signs its artifact
    with that key: the base's key is the one that verifies, and refuses it."""
    layout = _declare_with_dev(world, monkeypatch)
    open_branch(world)
    mallory = ec.generate_private_key(ec.SECP256R1())
    key = world.tmp / "mallory.pem"
    key.write_bytes(
        mallory.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    world.remote.write_file(
        "policies/ci.pub",
        mallory.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    ref = _unsigned_in_repository(world)
    signed = world.seshat(
        "artifact",
        "sign",
        f"oci-layout://{world.remote.work_dir}/artifacts/evil:v1",
        "--key",
        key,
    )
    assert signed.returncode == 0, signed.stderr
    _point_orders_at(world, layout, ref)
    commit(world, "my key, my artifact")

    report, executor = preview_recorded(world)

    [orders] = report.resources
    assert (orders.outcome.value, orders.reason) == ("Blocked", "ArtifactRefused")
    assert orders.plan is None
    assert executor.operations <= {"resolve", "verify"}
    assert "policies/ci.pub, named by VerificationPolicy shop/ci, changed" in (report.trust_changes)


def test_a_key_rotation_in_the_head_still_plans_with_the_base_key(world: World) -> None:
    """The other side of the rule: the base's key verifies the artifact the base's CI signed,
    whatever key file the head puts in its place; the rotation is shown for review."""
    declare_orders(world)
    open_branch(world)
    world.remote.write_file(
        "policies/ci.pub",
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    commit(world, "rotate the CI key")

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert (orders["outcome"], orders["reason"]) == ("Plan", "AwaitingApproval")
    assert document["trustChanges"] == [
        "policies/ci.pub, named by VerificationPolicy shop/ci, changed"
    ]


def test_the_approvals_a_plan_needs_come_from_the_base_policy(world: World) -> None:
    declare_orders(world)
    open_branch(world)
    policies = world.remote.work_dir / "policies" / "shop.yaml"
    policies.write_text(
        policies.read_text().replace(
            "    - approvers: {allowedSigners: policies/allowed_signers}",
            "    - approvers: {allowedSigners: policies/allowed_signers}\n      count: 3",
        )
    )
    commit(world, "three approvers")

    status, document, _ = preview(world)

    assert status == 0
    [orders] = document["resources"]
    assert orders["plan"]["approvals"] == 1  # the base's rule, not the head's three
    assert "needs 1 approval(s)" in orders["message"]
    assert document["trustChanges"] == ["ApprovalPolicy shop/approvers changed"]


def test_the_dev_sandbox_reference_is_the_base_one(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = _declare_with_dev(world, monkeypatch)
    monkeypatch.setenv("ELSEWHERE_URL", f"sqlite:///{world.tmp / 'elsewhere.db'}")
    open_branch(world)
    text = schema_yaml("orders", layout, dev_env="ELSEWHERE_URL", extra=", lockTimeout: 7s")
    world.remote.write_file("databases/orders/schema.yaml", text)
    commit(world, "another dev sandbox")

    report, executor = preview_recorded(world)

    [orders] = report.resources
    assert orders.outcome.value == "Plan"
    assert "ORDERS_DEV_URL" in executor.credentials  # the base's dev reference, planned with
    assert "ELSEWHERE_URL" not in executor.credentials


STEPWISE = {
    "1_items.sql": (
        "-- seshat:no-transaction\n"
        "CREATE TABLE items (id INTEGER);\n"
        "INSERT INTO nowhere VALUES (1);\n"
    ),
}


def _unresolved_run(world: World) -> str:
    """shop/ledger on main, whose migration run ended Partial: Blocked until a person the
    base's ApprovalPolicy allows acknowledges it. The run's id."""
    world.database("ledger")
    layout = world.migrations("ledger-v1", STEPWISE)
    world.remote.write_file(
        "databases/ledger/migrations.yaml", migration_yaml("ledger", layout, apply="Always")
    )
    world.remote.commit_all("declare ledger")
    assert world.reconcile() == {"shop/ledger": "Blocked/RunUnresolved"}
    run = world.status("ledger")["status"]["unresolvedRun"]  # type: ignore[index]
    return str(run["operationId"])


def _acknowledge(world: World, operation: str, key: Path) -> None:
    done = world.seshat(
        "acknowledge",
        "shop/ledger",
        "--operation",
        operation,
        "--repo",
        world.remote.work_dir,
        "--key",
        key,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("signer", ["mallory", "alice"])
def test_an_acknowledgment_counts_only_by_the_base_allowed_signers(
    world: World, ssh_key_factory: SSHKeyFactory, signer: str
) -> None:
    """The head adds its author to the allowed-signers file and acknowledges the unresolved
    run: the base's file does not list them, so the run still blocks. Alice, whom the base
    lists, settles it the same way (the control)."""
    operation = _unresolved_run(world)
    open_branch(world)
    if signer == "mallory":
        mallory = ssh_key_factory("mallory@example.com")
        signers = world.remote.work_dir / "policies" / "allowed_signers"
        line = mallory.allowed_signers_line("seshat-approval,seshat-acknowledgment")
        signers.write_text(signers.read_text() + line + "\n")
        key = mallory.private_key
    else:
        key = world.alice.private_key
    _acknowledge(world, operation, key)
    commit(world, "acknowledge the run")

    status, document, _ = preview(world)

    [ledger] = document["resources"]
    if signer == "mallory":
        assert (status, ledger["reason"]) == (1, "RunUnresolved")
        assert document["trustChanges"] == [
            "policies/allowed_signers, named by ApprovalPolicy shop/approvers, changed"
        ]
    else:
        assert ledger["reason"] != "RunUnresolved"
        assert document["trustChanges"] == []


def test_the_head_seshat_yaml_is_shown_not_used(world: World) -> None:
    """The head's seshat.yaml points the status branch elsewhere (where no unresolved run is
    recorded) and adds a declarations folder: the preview reads the base's status branch
    and the base's folders."""
    _unresolved_run(world)
    open_branch(world)
    world.remote.write_file(
        "seshat.yaml",
        "apiVersion: seshat.dev/v1alpha1\nkind: Config\n"
        "spec:\n  statusBranch: elsewhere/status\n"
        "  paths: [databases, policies, approvals, acknowledgments, more]\n",
    )
    world.database("audit")
    layout = world.artifact("audit-v1", ORDERS_V1)
    world.remote.write_file(
        "more/audit.yaml", schema_yaml("audit", layout).replace("AUDIT_URL", "LEDGER_URL")
    )
    commit(world, "my settings")

    status, document, _ = preview(world)

    assert [r["name"] for r in document["resources"]] == ["ledger"]  # more/ is not read
    [ledger] = document["resources"]
    assert (status, ledger["reason"]) == (1, "RunUnresolved")  # the base's status branch
    assert ledger["changes"] == ["seshat.yaml changed, which concerns every resource"]
    assert document["trustChanges"] == ["seshat.yaml changed"]


def test_the_rule_is_one_table_in_both_documents() -> None:
    """docs/preview.md and docs/security.md state the same rule, word for word."""
    docs = Path(__file__).resolve().parents[3] / "docs"
    tables = []
    for name in ("preview.md", "security.md"):
        text = (docs / name).read_text()
        start = text.index("<!-- preview-trust-rule -->")
        tables.append(text[start : text.index("<!-- /preview-trust-rule -->", start)])
    assert tables[0] == tables[1]
    rows = [line for line in tables[0].splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 13  # the header and one row per input
