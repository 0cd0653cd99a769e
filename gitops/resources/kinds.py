"""The table of resource kinds: one place that knows every kind and its CRD names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gitops.resources.approvals import Approval, RunAcknowledgment
from gitops.resources.fleet import DatabaseFleet
from gitops.resources.migration import DatabaseMigration
from gitops.resources.policies import ApprovalPolicy, VerificationPolicy
from gitops.resources.schema import DatabaseSchema

__all__ = ["KINDS", "Kind", "Resource"]

Resource = (
    DatabaseSchema
    | DatabaseMigration
    | DatabaseFleet
    | VerificationPolicy
    | ApprovalPolicy
    | Approval
    | RunAcknowledgment
)
"""Any namespaced resource a repository declares (``Config`` is repository-level)."""


@dataclass(frozen=True, slots=True)
class Kind:
    """A resource kind and how it is published as a Kubernetes CRD."""

    name: str
    model: type[Resource]
    plural: str
    short_names: tuple[str, ...]
    has_status: bool


KINDS: Final[dict[str, Kind]] = {
    kind.name: kind
    for kind in (
        Kind("DatabaseSchema", DatabaseSchema, "databaseschemas", ("dbschema",), True),
        Kind("DatabaseMigration", DatabaseMigration, "databasemigrations", ("dbmigration",), True),
        Kind("DatabaseFleet", DatabaseFleet, "databasefleets", ("dbfleet",), True),
        Kind("VerificationPolicy", VerificationPolicy, "verificationpolicies", ("vpol",), False),
        Kind("ApprovalPolicy", ApprovalPolicy, "approvalpolicies", ("apol",), False),
        Kind("Approval", Approval, "approvals", (), False),
        Kind("RunAcknowledgment", RunAcknowledgment, "runacknowledgments", ("runack",), False),
    )
}
