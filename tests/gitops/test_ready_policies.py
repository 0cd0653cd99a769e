"""The ready policies in policies/ are valid documents of the kind their README says."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitops.repo.single import load_one
from gitops.resources.policies import ApprovalPolicy, SignatureMode, VerificationPolicy

POLICIES = Path(__file__).resolve().parents[2] / "policies"


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("keyless-ci.yaml", VerificationPolicy),
        ("static-key.yaml", VerificationPolicy),
        ("warn-only.yaml", VerificationPolicy),
        ("approvals.yaml", ApprovalPolicy),
    ],
)
def test_ready_policy_loads(name: str, model: type[VerificationPolicy | ApprovalPolicy]) -> None:
    assert name in (POLICIES / "README.md").read_text()
    load_one(POLICIES / name, model)


def test_the_ready_policies_say_what_their_names_promise() -> None:
    keyless = load_one(POLICIES / "keyless-ci.yaml", VerificationPolicy).spec
    assert keyless.require_digest_pin and keyless.signatures.authorities[0].keyless is not None
    assert load_one(POLICIES / "warn-only.yaml", VerificationPolicy).spec.signatures.mode is (
        SignatureMode.WARN
    )
    rule = load_one(POLICIES / "approvals.yaml", ApprovalPolicy).spec.rules[0]
    assert (rule.count, rule.destructive_count, rule.privilege_count) == (1, 2, 2)
