"""SSH-signed approvals end to end: ``seshat approve`` and ``seshat verify-approval`` on a
real Git repository, with keys made by ssh-keygen; every refusal reason from a real case."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from harness.gitrepo import GitRemote
from harness.seshat_cli import Run, SeshatRunner
from harness.sshkeys import SSHIdentity, SSHKeyFactory

from gitops.approvals.ssh import APPROVAL_NAMESPACE, sign
from gitops.approvals.verify import statement_identity, verify_statement
from gitops.repo.loader import load_repository
from gitops.repo.single import load_one
from gitops.resources.approvals import Approval, ResourceRef
from gitops.resources.policies import ApprovalPolicy

PLAN = "sha256:" + "ab" * 32
OTHER_PLAN = "sha256:" + "cd" * 32

SCHEMA = """\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseSchema
metadata: {name: orders, namespace: shop}
spec:
  target: {engine: sqlite, url: {fromEnv: ORDERS_URL}, coordinationKey: orders}
  artifact: {ref: "oci://registry.invalid/shop/orders:v1", verification: {policy: any}}
---
apiVersion: seshat.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: any, namespace: shop}
spec:
  artifactTypes: [application/vnd.seshat.schema.v1]
  signatures: {mode: "off"}
"""

POLICY = """\
apiVersion: seshat.dev/v1alpha1
kind: ApprovalPolicy
metadata: {name: approvers, namespace: shop}
spec:
  rules:
    - match: {namespaces: [shop], names: [orders]}
      approvers: {allowedSigners: policies/allowed_signers}
      count: 1
      destructiveCount: 2
      maxAge: 7d
"""


@pytest.fixture
def people(ssh_key_factory: SSHKeyFactory) -> dict[str, SSHIdentity]:
    return {name: ssh_key_factory(f"{name}@example.com") for name in ("alice", "bob", "eve")}


@pytest.fixture
def repo(git_remote: GitRemote, people: dict[str, SSHIdentity]) -> Path:
    git_remote.write_file("databases/orders/schema.yaml", SCHEMA)
    git_remote.write_file("policies/approval.yaml", POLICY)
    lines = [
        people["alice"].allowed_signers_line(APPROVAL_NAMESPACE),
        people["bob"].allowed_signers_line(APPROVAL_NAMESPACE),
        # eve may sign acknowledgments only: an approval signature by her is not allowed
        people["eve"].allowed_signers_line("seshat-acknowledgment"),
    ]
    git_remote.write_file("policies/allowed_signers", "\n".join(lines) + "\n")
    git_remote.commit_all("declare orders")
    return git_remote.work_dir


def _approve(seshat: SeshatRunner, repo: Path, who: SSHIdentity, *extra: str) -> Run:
    return seshat(
        "approve",
        "shop/orders",
        "--plan",
        PLAN,
        "--repo",
        repo,
        "--key",
        who.private_key,
        *extra,
    )


def _verify(seshat: SeshatRunner, repo: Path, *extra: str) -> Run:
    path = repo / "approvals" / "shop" / "orders" / f"{PLAN.removeprefix('sha256:')}.yaml"
    return seshat("verify-approval", path, "--repo", repo, "--format", "json", *extra)


def _reason(run: Run) -> str | None:
    reason = json.loads(run.stdout)["reason"]
    assert (run.returncode == 0) == (reason is None)
    return reason  # type: ignore[no-any-return]


def test_approve_writes_the_canonical_file_and_the_policy_accepts_it(
    seshat: SeshatRunner, repo: Path, people: dict[str, SSHIdentity]
) -> None:
    done = _approve(seshat, repo, people["alice"], "--comment", "reviewed in #42")
    assert done.returncode == 0, done.stderr
    approval_file = repo / "approvals/shop/orders" / f"{'ab' * 32}.yaml"
    assert f"wrote approvals/shop/orders/{'ab' * 32}.yaml" in done.stdout
    assert approval_file.with_name(approval_file.name + ".sig").is_file()

    # The file is a valid Approval naming the resource's uid, and the repository loads it.
    loaded = load_repository(repo)
    assert not loaded.problems, loaded.problems
    approval = next(r.resource for r in loaded.resources if isinstance(r.resource, Approval))
    schema = loaded.find("DatabaseSchema", "shop", "orders")
    assert schema is not None and approval.spec.resource.uid == schema.resource.metadata.uid
    assert approval.spec.plan.id == PLAN and approval.spec.comment == "reviewed in #42"

    text = seshat("verify-approval", approval_file, "--repo", repo, "--plan", PLAN)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "signed by alice@example.com (SHA256:" in text.stdout
    assert text.stdout.splitlines()[-1].startswith("accepted: signed by alice@example.com")
    assert _reason(_verify(seshat, repo, "--plan", PLAN)) is None


def test_quorum_for_destructive_plans_needs_two_distinct_signers(
    seshat: SeshatRunner, repo: Path, people: dict[str, SSHIdentity]
) -> None:
    assert _approve(seshat, repo, people["alice"]).returncode == 0
    assert _reason(_verify(seshat, repo, "--destructive")) == "quorum_not_met"
    # The same person twice adds nothing to a quorum: it is a new approval, a fresh
    # statement (see the next test), still one signer.
    again = _approve(seshat, repo, people["alice"])
    assert "wrote" in again.stdout and "1 signature(s)" in again.stdout
    assert _reason(_verify(seshat, repo, "--destructive")) == "quorum_not_met"
    assert _approve(seshat, repo, people["bob"]).returncode == 0
    verdict = _verify(seshat, repo, "--destructive")
    assert _reason(verdict) is None
    assert [s["principal"] for s in json.loads(verdict.stdout)["signers"]] == [
        "alice@example.com",
        "bob@example.com",
    ]


def test_each_approval_is_a_fresh_statement_consumed_by_its_content(
    seshat: SeshatRunner, repo: Path, people: dict[str, SSHIdentity]
) -> None:
    """Consumption is keyed by what was signed, so bytes outside the signatures change
    nothing, and approving a returning plan id again takes a new statement."""
    assert _approve(seshat, repo, people["alice"]).returncode == 0
    path = repo / "approvals/shop/orders" / f"{'ab' * 32}.yaml"
    sig = path.with_name(path.name + ".sig")
    first = load_one(path, Approval)
    assert first.spec.nonce is not None and first.spec.approved_at is not None
    # A newline after the armour, a second copy of the block: still the same statement.
    sig.write_text(sig.read_text() + "\n" + sig.read_text())
    assert _reason(_verify(seshat, repo, "--plan", PLAN)) is None
    assert statement_identity(load_one(path, Approval)) == statement_identity(first)
    # Bob co-signs the same statement; Alice approving again writes a fresh one.
    assert "signed existing" in _approve(seshat, repo, people["bob"]).stdout
    assert statement_identity(load_one(path, Approval)) == statement_identity(first)
    assert "wrote" in _approve(seshat, repo, people["alice"]).stdout
    fresh = load_one(path, Approval)
    assert fresh.spec.nonce != first.spec.nonce
    assert statement_identity(fresh) != statement_identity(first)
    assert "wrote" in _approve(seshat, repo, people["bob"], "--fresh").stdout


def test_an_approval_dated_in_the_future_is_refused(
    seshat: SeshatRunner, repo: Path, people: dict[str, SSHIdentity]
) -> None:
    policy = load_repository(repo).resources
    approvals = [r.resource for r in policy if isinstance(r.resource, ApprovalPolicy)]
    schema = load_repository(repo).find("DatabaseSchema", "shop", "orders")
    assert schema is not None
    ref = ResourceRef(
        kind="DatabaseSchema",
        namespace="shop",
        name="orders",
        uid=str(schema.resource.metadata.uid),
    )
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    for ahead, accepted in ((timedelta(minutes=4), True), (timedelta(days=365 * 70), False)):
        statement = Approval.model_validate(
            {
                "metadata": {"name": "x", "namespace": "shop"},
                "spec": {
                    "resource": ref.model_dump(by_alias=True),
                    "plan": {"id": PLAN},
                    "approvedAt": (now + ahead).isoformat(),
                },
            }
        )
        verdict = verify_statement(
            statement,
            b"x",
            "",
            approvals,
            repo,
            namespace=APPROVAL_NAMESPACE,
            expected=ref,
            current_plan=PLAN,
            now=now,
        )
        assert (verdict.reason != "dated_in_future") is accepted, verdict


def test_refusals(
    seshat: SeshatRunner, repo: Path, people: dict[str, SSHIdentity], tmp_path: Path
) -> None:
    # Signer not allowed: eve's key is listed for acknowledgments only; a stranger not at all.
    assert _approve(seshat, repo, people["eve"]).returncode == 0
    assert _reason(_verify(seshat, repo)) == "signer_not_allowed"

    # Wrong plan: a valid approval of another plan authorizes nothing.
    assert _approve(seshat, repo, people["alice"]).returncode == 0
    assert _reason(_verify(seshat, repo, "--plan", PLAN)) is None
    assert _reason(_verify(seshat, repo, "--plan", OTHER_PLAN)) == "wrong_plan"

    # Bad signature: the file edited after signing.
    path = repo / "approvals/shop/orders" / f"{'ab' * 32}.yaml"
    original = path.read_text()
    path.write_text(original.replace("comment: ''", "comment: edited"))
    assert _reason(_verify(seshat, repo)) == "bad_signature"
    path.write_text(original)


def test_expired_and_wrong_resource(
    repo: Path, people: dict[str, SSHIdentity], tmp_path: Path
) -> None:
    loaded = load_repository(repo)
    schema = loaded.find("DatabaseSchema", "shop", "orders")
    assert schema is not None
    policies = [r.resource for r in loaded.resources if isinstance(r.resource, ApprovalPolicy)]
    resource = ResourceRef(
        kind="DatabaseSchema",
        namespace="shop",
        name="orders",
        uid=str(schema.resource.metadata.uid),
    )

    def judged(spec: dict[str, object], expected: ResourceRef = resource) -> str | None:
        approval = Approval.model_validate(
            {"metadata": {"name": "a", "namespace": "shop"}, "spec": spec}
        )
        data = json.dumps(spec).encode()
        signature = sign(data, people["alice"].private_key, APPROVAL_NAMESPACE)
        return verify_statement(
            approval,
            data,
            signature,
            policies,
            repo,
            namespace=APPROVAL_NAMESPACE,
            expected=expected,
        ).reason

    now = datetime.now(UTC)
    base: dict[str, object] = {"resource": resource.model_dump(by_alias=True), "plan": {"id": PLAN}}
    assert judged(base | {"approvedAt": now.isoformat()}) is None
    assert judged(base | {"approvedAt": (now - timedelta(days=8)).isoformat()}) == "expired"
    assert judged(base) == "expired"  # maxAge is set and the approval has no approvedAt
    expired_at = (now - timedelta(minutes=1)).isoformat()
    assert judged(base | {"approvedAt": now.isoformat(), "expiresAt": expired_at}) == "expired"
    # An approval for the same name in an earlier lifetime (another uid) is not this resource's.
    old = resource.model_copy(update={"uid": "00000000-0000-4000-8000-000000000000"})
    stale = base | {"resource": old.model_dump(by_alias=True), "approvedAt": now.isoformat()}
    assert judged(stale) == "wrong_resource"


def test_run_acknowledgments_are_signed_in_their_own_namespace(
    seshat: SeshatRunner, repo: Path, people: dict[str, SSHIdentity]
) -> None:
    operation = "0123456789abcdef0123"
    path = repo / "acknowledgments/shop/orders" / f"{operation}.yaml"

    def acknowledged_by(who: str) -> Run:
        done = seshat(
            "acknowledge",
            "shop/orders",
            "--operation",
            operation,
            "--repo",
            repo,
            "--key",
            people[who].private_key,
            "--comment",
            "checked by hand",
        )
        assert done.returncode == 0, done.stderr
        return seshat("verify-approval", path, "--repo", repo, "--format", "json")

    # alice's key is listed for approvals only: it cannot acknowledge a run.
    assert _reason(acknowledged_by("alice")) == "signer_not_allowed"
    # eve's key is listed for acknowledgments: her signature is accepted.
    verdict = acknowledged_by("eve")
    assert _reason(verdict) is None
    assert [s["principal"] for s in json.loads(verdict.stdout)["signers"]] == ["eve@example.com"]
    assert not load_repository(repo).problems  # the file is at its canonical path


def test_hostile_signature_files_are_problems_not_crashes(
    seshat: SeshatRunner, repo: Path, people: dict[str, SSHIdentity]
) -> None:
    """A byte that is not ASCII in a .sig is not a signature (and no crash); a .sig that
    is a link to a device or a FIFO is never read: validate names it, verify exits 2."""
    assert _approve(seshat, repo, people["alice"]).returncode == 0
    path = repo / "approvals/shop/orders" / f"{'ab' * 32}.yaml"
    sig = path.with_name(path.name + ".sig")
    sig.write_bytes(sig.read_bytes() + "\u00e9\n".encode("latin-1"))
    assert _reason(_verify(seshat, repo, "--plan", PLAN)) is None
    assert seshat("validate", repo).returncode == 0

    sig.unlink()
    sig.symlink_to("/dev/zero")
    bundles = path.with_name(path.name + ".sigstore.json")
    os.mkfifo(bundles)
    listed = seshat("validate", repo)
    assert listed.returncode == 1
    assert listed.stdout.splitlines() == [
        f"{sig.relative_to(repo)}: is a symbolic link that leads outside the repository",
        f"{bundles.relative_to(repo)}: is not a regular file",
    ]
    refused = seshat("verify-approval", path, "--repo", repo)
    assert refused.returncode == 2
    assert "is not a regular file" in refused.stderr or "symbolic link" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_signature_check_is_remembered_until_anything_it_read_changes(
    tmp_path: Path, people: dict[str, SSHIdentity], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same signature over the same bytes against the same allowed-signers file is
    checked once (a fleet's members judge one approval each), and any change to what the
    answer depends on is checked afresh: the file's bytes, the namespace, the data."""
    from gitops.approvals import ssh

    calls: list[str] = []
    real_run = ssh._run

    def counted(args: list[str], data: bytes) -> Any:
        calls.append(args[1])
        return real_run(args, data)

    data = b"kind: Approval\nunique: " + os.urandom(8).hex().encode() + b"\n"
    signature = sign(data, people["alice"].private_key, APPROVAL_NAMESPACE)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(people["alice"].allowed_signers_line(APPROVAL_NAMESPACE) + "\n")
    monkeypatch.setattr(ssh, "_run", counted)

    first = ssh.check(data, signature, APPROVAL_NAMESPACE, allowed)
    assert (first.valid, first.principal) == (True, "alice@example.com")
    assert calls == ["check-novalidate", "find-principals", "verify"]
    assert ssh.check(data, signature, APPROVAL_NAMESPACE, allowed) == first
    assert len(calls) == 3  # remembered
    # Alice is taken out of the allowed signers: checked again, and no longer allowed.
    allowed.write_text(people["bob"].allowed_signers_line(APPROVAL_NAMESPACE) + "\n")
    assert ssh.check(data, signature, APPROVAL_NAMESPACE, allowed).principal is None
    assert len(calls) > 3
    # Another namespace, other bytes: checked again, and refused.
    before = len(calls)
    assert not ssh.check(data, signature, "seshat-acknowledgment", allowed).valid
    assert not ssh.check(data + b"#", signature, APPROVAL_NAMESPACE, allowed).valid
    assert len(calls) == before + 2
    # An answer is not remembered longer than REMEMBERED_SECONDS.
    allowed.write_text(people["alice"].allowed_signers_line(APPROVAL_NAMESPACE) + "\n")
    later = ssh._clock() + ssh.REMEMBERED_SECONDS + 1
    monkeypatch.setattr(ssh, "_clock", lambda: later)
    before = len(calls)
    assert ssh.check(data, signature, APPROVAL_NAMESPACE, allowed) == first
    assert len(calls) == before + 3
