"""Sigstore-signed approvals: bundles minted by a private Sigstore instance, verified by the
unmodified sigstore-python verifier against the repository's trusted root, every refusal
from a real case; SSH and keyless signers counted together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness.gitrepo import GitRemote
from harness.seshat_cli import Run, SeshatRunner
from harness.sigstore_root import PrivateSigstore
from harness.sshkeys import SSHIdentity, SSHKeyFactory

from gitops.approvals.ssh import APPROVAL_NAMESPACE
from gitops.approvals.verify import MAX_BUNDLES, StatementVerdict, load_bundles, verify_statement
from gitops.repo.loader import load_repository
from gitops.repo.single import load_one
from gitops.resources.approvals import Approval, RunAcknowledgment
from gitops.resources.policies import ApprovalPolicy
from gitops.yamlout import dump_all
from runner.errors import ConfigurationError

PLAN = "sha256:" + "ab" * 32
ISSUER = "https://token.actions.githubusercontent.com"
WORKFLOW = "https://github.com/acme/db/.github/workflows/approve.yml@refs/heads/main"
OTHER_WORKFLOW = "https://github.com/acme/web/.github/workflows/approve.yml@refs/heads/main"
ROOT = "policies/sigstore/trusted_root.json"

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

POLICY = f"""\
apiVersion: seshat.dev/v1alpha1
kind: ApprovalPolicy
metadata: {{name: approvers, namespace: shop}}
spec:
  rules:
    - match: {{namespaces: [shop], names: [orders]}}
      approvers:
        allowedSigners: policies/allowed_signers
        keyless:
          - issuerRegExp: 'https://token\\.actions\\.githubusercontent\\.com'
            subjectRegExp: 'https://github.com/acme/.*'
            trustedRoot: {ROOT}
          - issuer: https://accounts.example.com
            subject: carol@example.com
            trustedRoot: {ROOT}
      count: 1
      destructiveCount: 2
"""


@pytest.fixture
def alice(ssh_key_factory: SSHKeyFactory) -> SSHIdentity:
    return ssh_key_factory("alice@example.com")


@pytest.fixture
def repo(git_remote: GitRemote, alice: SSHIdentity, sigstore_instance: PrivateSigstore) -> Path:
    git_remote.write_file("databases/orders/schema.yaml", SCHEMA)
    git_remote.write_file("policies/approval.yaml", POLICY)
    git_remote.write_file(
        "policies/allowed_signers", alice.allowed_signers_line(APPROVAL_NAMESPACE) + "\n"
    )
    sigstore_instance.write_trusted_root(git_remote.work_dir / ROOT)
    git_remote.commit_all("declare orders, approvers and the private Sigstore root")
    return git_remote.work_dir


def _approval_file(repo: Path) -> Path:
    return repo / "approvals/shop/orders" / f"{'ab' * 32}.yaml"


def _ssh_approve(seshat: SeshatRunner, repo: Path, who: SSHIdentity) -> Path:
    done = seshat(
        "approve", "shop/orders", "--plan", PLAN, "--repo", repo, "--key", who.private_key
    )
    assert done.returncode == 0, done.stderr
    return _approval_file(repo)


def _add_bundle(seshat: SeshatRunner, repo: Path, bundle: bytes, tmp_path: Path) -> Run:
    path = tmp_path / f"bundle-{len(list(tmp_path.glob('bundle-*')))}.json"
    path.write_bytes(bundle)
    return seshat(
        "approve", "shop/orders", "--plan", PLAN, "--repo", repo, "--sigstore-bundle", path
    )


def _verify_cli(seshat: SeshatRunner, repo: Path, *extra: str) -> dict[str, object]:
    done = seshat(
        "verify-approval", _approval_file(repo), "--repo", repo, "--format", "json", *extra
    )
    assert done.returncode in (0, 1), done.stderr
    verdict: dict[str, object] = json.loads(done.stdout)
    assert (done.returncode == 0) == (verdict["reason"] is None)
    return verdict


def _judge(
    repo: Path, data: bytes, bundles: list[bytes], destructive: bool = False
) -> StatementVerdict:
    """Judge ``data`` as the approval file's bytes with only keyless signatures."""
    loaded = load_repository(repo)
    assert not loaded.problems, loaded.problems
    policies = [r.resource for r in loaded.resources if isinstance(r.resource, ApprovalPolicy)]
    statement = load_one(_approval_file(repo), Approval)
    return verify_statement(
        statement,
        data,
        "",
        policies,
        repo,
        namespace=APPROVAL_NAMESPACE,
        expected=statement.spec.resource,
        current_plan=PLAN,
        bundles=bundles,
        destructive=destructive,
    )


def test_ssh_and_keyless_signers_make_a_quorum_together(
    seshat: SeshatRunner,
    repo: Path,
    alice: SSHIdentity,
    sigstore_instance: PrivateSigstore,
    tmp_path: Path,
) -> None:
    path = _ssh_approve(seshat, repo, alice)
    assert _verify_cli(seshat, repo, "--destructive")["reason"] == "quorum_not_met"
    bundle = sigstore_instance.mint_bundle(path.read_bytes(), WORKFLOW, ISSUER)
    added = _add_bundle(seshat, repo, bundle, tmp_path)
    assert added.returncode == 0, added.stderr
    assert "orders/" + "ab" * 32 + ".yaml.sigstore.json: 1 bundle(s)" in added.stdout
    stored = json.loads(path.with_name(path.name + ".sigstore.json").read_text())
    assert isinstance(stored, list) and len(stored) == 1
    verdict = _verify_cli(seshat, repo, "--destructive", "--plan", PLAN)
    assert verdict["reason"] is None
    signers = verdict["signers"]
    assert isinstance(signers, list)
    assert [s["principal"] for s in signers] == ["alice@example.com", WORKFLOW]
    assert signers[1]["key"] == f"sigstore:{ISSUER}"
    text = seshat("verify-approval", path, "--repo", repo, "--destructive")
    assert f"signed by {WORKFLOW} (sigstore:{ISSUER})" in text.stdout
    assert text.returncode == 0


def test_keyless_only_approval_is_accepted(
    seshat: SeshatRunner, repo: Path, alice: SSHIdentity, sigstore_instance: PrivateSigstore
) -> None:
    data = _ssh_approve(seshat, repo, alice).read_bytes()
    verdict = _judge(repo, data, [sigstore_instance.mint_bundle(data, WORKFLOW, ISSUER)])
    assert verdict.accepted, verdict.message
    assert [s.principal for s in verdict.signers] == [WORKFLOW]
    exact = sigstore_instance.mint_bundle(data, "carol@example.com", "https://accounts.example.com")
    assert _judge(repo, data, [exact]).accepted


def test_tampered_file_is_a_bad_signature(
    seshat: SeshatRunner, repo: Path, alice: SSHIdentity, sigstore_instance: PrivateSigstore
) -> None:
    data = _ssh_approve(seshat, repo, alice).read_bytes()
    bundle = sigstore_instance.mint_bundle(data, WORKFLOW, ISSUER)
    edited = data.replace(b"comment: ''", b"comment: edited")
    assert edited != data
    verdict = _judge(repo, edited, [bundle])
    assert verdict.reason == "bad_signature", verdict.message


def test_bundle_from_a_ca_outside_the_trusted_root_is_a_bad_signature(
    seshat: SeshatRunner,
    repo: Path,
    alice: SSHIdentity,
    untrusted_sigstore: PrivateSigstore,
) -> None:
    data = _ssh_approve(seshat, repo, alice).read_bytes()
    verdict = _judge(repo, data, [untrusted_sigstore.mint_bundle(data, WORKFLOW, ISSUER)])
    assert verdict.reason == "bad_signature", verdict.message


@pytest.mark.parametrize(
    ("subject", "issuer"),
    [
        # another organisation
        ("https://github.com/evil/db/.github/workflows/approve.yml@refs/heads/main", ISSUER),
        # the allowed pattern inside a longer subject: only a whole-value match counts
        ("https://github.com/evil/x?https://github.com/acme/db", ISSUER),
        # the issuer pattern as a prefix of another issuer (re.match would accept it)
        (WORKFLOW, ISSUER + ".evil.example"),
        # an exact identity with another issuer
        ("carol@example.com", ISSUER),
    ],
)
def test_identity_not_allowed(
    seshat: SeshatRunner,
    repo: Path,
    alice: SSHIdentity,
    sigstore_instance: PrivateSigstore,
    subject: str,
    issuer: str,
) -> None:
    data = _ssh_approve(seshat, repo, alice).read_bytes()
    verdict = _judge(repo, data, [sigstore_instance.mint_bundle(data, subject, issuer)])
    assert verdict.reason == "signer_not_allowed", verdict.message


def test_one_identity_signing_twice_is_one_signer(
    seshat: SeshatRunner, repo: Path, alice: SSHIdentity, sigstore_instance: PrivateSigstore
) -> None:
    data = _ssh_approve(seshat, repo, alice).read_bytes()
    twice = [sigstore_instance.mint_bundle(data, WORKFLOW, ISSUER) for _ in range(2)]
    assert twice[0] != twice[1]  # two certificates, two log entries
    verdict = _judge(repo, data, twice, destructive=True)
    assert verdict.reason == "quorum_not_met", verdict.message
    assert len(verdict.signers) == 1
    another = sigstore_instance.mint_bundle(data, OTHER_WORKFLOW, ISSUER)
    assert _judge(repo, data, [*twice, another], destructive=True).accepted


def test_a_bundle_over_other_bytes_is_not_added(
    seshat: SeshatRunner,
    repo: Path,
    alice: SSHIdentity,
    sigstore_instance: PrivateSigstore,
    tmp_path: Path,
) -> None:
    path = _ssh_approve(seshat, repo, alice)
    bundle = sigstore_instance.mint_bundle(b"something else", WORKFLOW, ISSUER)
    refused = _add_bundle(seshat, repo, bundle, tmp_path)
    assert refused.returncode == 2
    assert "signs other bytes" in refused.stderr
    assert not path.with_name(path.name + ".sigstore.json").exists()


def test_run_acknowledgment_signed_with_sigstore(
    seshat: SeshatRunner, repo: Path, sigstore_instance: PrivateSigstore
) -> None:
    loaded = load_repository(repo)
    schema = loaded.find("DatabaseSchema", "shop", "orders")
    assert schema is not None
    acknowledgment = RunAcknowledgment.model_validate(
        {
            "metadata": {"name": "orders-run", "namespace": "shop"},
            "spec": {
                "resource": {
                    "kind": "DatabaseSchema",
                    "namespace": "shop",
                    "name": "orders",
                    "uid": str(schema.resource.metadata.uid),
                },
                "operationId": "0123456789abcdef",
                "comment": "settled by hand",
            },
        }
    )
    path = repo / "acknowledgments/shop/orders/0123456789abcdef.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(
        dump_all([acknowledgment.model_dump(mode="json", by_alias=True, exclude_none=True)])
    )
    bundles = path.with_name(path.name + ".sigstore.json")

    def verdict() -> dict[str, object]:
        done = seshat("verify-approval", path, "--repo", repo, "--format", "json")
        assert done.returncode in (0, 1), done.stderr
        result: dict[str, object] = json.loads(done.stdout)
        assert (done.returncode == 0) == (result["reason"] is None)
        return result

    stranger = sigstore_instance.mint_bundle(path.read_bytes(), "mallory@example.com", ISSUER)
    bundles.write_text(json.dumps([json.loads(stranger)]))
    assert verdict()["reason"] == "signer_not_allowed"
    carol = sigstore_instance.mint_bundle(
        path.read_bytes(), "carol@example.com", "https://accounts.example.com"
    )
    bundles.write_text(json.dumps([json.loads(stranger), json.loads(carol)]))
    accepted = verdict()
    assert accepted["reason"] is None
    assert accepted["signers"] == [
        {"principal": "carol@example.com", "key": "sigstore:https://accounts.example.com"}
    ]


def test_bundle_files_are_bounded_and_must_be_lists_of_bundles() -> None:
    one = {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}
    assert len(load_bundles(json.dumps([one] * MAX_BUNDLES))) == MAX_BUNDLES
    assert len(load_bundles(json.dumps(one))) == 1
    for text in (json.dumps([one] * (MAX_BUNDLES + 1)), "[1, 2]", "{not json"):
        with pytest.raises(ConfigurationError):
            load_bundles(text)
