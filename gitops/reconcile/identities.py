"""Coordination digests and plan ids (DESIGN.md, "Identities, digests, plans").

Both are digests over canonical JSON made by :func:`runner.digests.digest`, so a changed
input always makes a different id, never a changed one.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitops.resources.database import Target
from runner.digests import digest

__all__ = ["PlanBinding", "coordination_digest", "plan_id"]


def coordination_digest(namespace: str, target: Target) -> str:
    """One physical database, one writer: engine plus (namespace, coordinationKey) or realm."""
    if target.realm is not None:
        place: dict[str, str] = {"realm": target.realm}
    else:
        place = {"namespace": namespace, "coordinationKey": target.coordination_key or ""}
    return digest("coordination", {"engine": target.engine, **place})


@dataclass(frozen=True, slots=True)
class PlanBinding:
    """Everything that decided a schema plan; its digest is the plan id approvals name."""

    resource_uid: str
    plan_digest: str  # sha256 of the canonical plan document bytes
    artifact_digest: str
    coordination_digest: str
    target_identity: str
    observed: str
    desired: str
    policy: str  # the schema policy's fingerprint
    verification_policy: str
    engine: str  # dialect and server major, from the plan
    runner_protocol: int
    destructive: bool
    privilege_changes: tuple[str, ...]
    statements: int


def plan_id(binding: PlanBinding) -> str:
    return digest(
        "schema-plan-id",
        {
            "resourceUid": binding.resource_uid,
            "planDigest": binding.plan_digest,
            "artifactDigest": binding.artifact_digest,
            "coordinationDigest": binding.coordination_digest,
            "targetIdentity": binding.target_identity,
            "observed": binding.observed,
            "desired": binding.desired,
            "policy": binding.policy,
            "verificationPolicy": binding.verification_policy,
            "executionBinding": {"engine": binding.engine, "protocol": binding.runner_protocol},
            "destructive": binding.destructive,
            "privilegeChanges": sorted(binding.privilege_changes),
            "statements": binding.statements,
        },
    )
