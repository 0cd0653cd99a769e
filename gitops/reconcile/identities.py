"""Coordination digests and plan ids (DESIGN.md, "Identities, digests, plans").

Both are digests over canonical JSON made by :func:`runner.digests.digest`, so a changed
input always makes a different id, never a changed one.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitops.resources.database import Target
from runner.digests import digest

__all__ = [
    "MigrationPlanBinding",
    "PlanBinding",
    "coordination_digest",
    "migration_plan_id",
    "plan_id",
]


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


@dataclass(frozen=True, slots=True)
class MigrationPlanBinding:
    """Everything that decided a migration plan: the ordered files instead of SQL."""

    resource_uid: str
    versions: tuple[tuple[str, str, str], ...]  # (version, file name, checksum), in order
    history_fingerprint: str
    artifact_digest: str
    coordination_digest: str
    target_identity: str
    policy: str  # the migration policy's fingerprint
    verification_policy: str
    engine: str
    runner_protocol: int

    def document(self) -> dict[str, object]:
        """The plan document committed as ``plans/<ns>/<name>/<id-hex>.json`` (no SQL)."""
        return {
            "kind": "MigrationPlan",
            "resourceUid": self.resource_uid,
            "files": [
                {"version": version, "name": name, "checksum": checksum}
                for version, name, checksum in self.versions
            ],
            "historyFingerprint": self.history_fingerprint,
            "artifactDigest": self.artifact_digest,
            "coordinationDigest": self.coordination_digest,
            "targetIdentity": self.target_identity,
            "policy": self.policy,
            "verificationPolicy": self.verification_policy,
            "executionBinding": {"engine": self.engine, "protocol": self.runner_protocol},
        }


def migration_plan_id(binding: MigrationPlanBinding) -> str:
    return digest("migration-plan-id", binding.document())
