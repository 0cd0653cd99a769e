"""Coordination digests and plan ids (DESIGN.md, "Identities, digests, plans").

Both are digests over canonical JSON made by :func:`runner.digests.digest`, so a changed
input always makes a different id, never a changed one.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitops.resources.database import Target
from gitops.writeback.recorded import (
    MIGRATION_PLAN_CONTRACT,
    SCHEMA_PLAN_CONTRACT,
    fleet_plan_of,
)
from runner.digests import digest

__all__ = [
    "MIGRATION_PLAN_CONTRACT",
    "SCHEMA_PLAN_CONTRACT",
    "MigrationPlanBinding",
    "PlanBinding",
    "coordination_digest",
    "fleet_approval_use",
    "fleet_plan_id",
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

    def document(self) -> dict[str, object]:
        """What the plan id is the digest of; committed beside the plan as
        ``plans/<ns>/<name>/<id-hex>.binding.json`` so anyone can recompute the id."""
        return {
            "resourceUid": self.resource_uid,
            "planDigest": self.plan_digest,
            "artifactDigest": self.artifact_digest,
            "coordinationDigest": self.coordination_digest,
            "targetIdentity": self.target_identity,
            "observed": self.observed,
            "desired": self.desired,
            "policy": self.policy,
            "verificationPolicy": self.verification_policy,
            "executionBinding": {"engine": self.engine, "protocol": self.runner_protocol},
            "destructive": self.destructive,
            "privilegeChanges": sorted(self.privilege_changes),
            "statements": self.statements,
        }


# The contract names live with the status branch's reader, which checks recorded plans
# against their ids (gitops.writeback.recorded); the ids are computed here.


def plan_id(binding: PlanBinding) -> str:
    return digest(SCHEMA_PLAN_CONTRACT, binding.document())


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
    return digest(MIGRATION_PLAN_CONTRACT, binding.document())


def fleet_plan_id(binding: PlanBinding | MigrationPlanBinding) -> str:
    """The fleet plan id: the digest of a member's plan without what is the member's own
    (its uid, coordination and target identity, the history fingerprint; the observed and
    desired fingerprints are inside the plan digest). Members whose plans do the same thing
    from the same artifact under the same policies share it, so one approval of the fleet
    naming it authorizes each of them; a member that drifted plans other statements (or
    from another observed schema) and gets an id of its own (docs/fleets.md)."""
    return fleet_plan_of(binding.document())


def fleet_approval_use(statement: str, member_uid: str) -> str:
    """What one member spends of a fleet approval (statement identity ``statement``): each
    member applies once with it, and its spending never counts for another member."""
    return digest("fleet-approval-use", {"statement": statement, "member": member_uid})
