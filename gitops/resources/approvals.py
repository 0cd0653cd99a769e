"""``Approval`` and ``RunAcknowledgment``: signed statements people add to the repository.

Only their shape is checked here. Whether a signature verifies and the policy accepts it is
decided when the reconciler evaluates them; an approval for a plan that is not current
authorizes nothing and is reported as stale.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from gitops.resources.base import DNS_LABEL, DNS_SUBDOMAIN, STORED_NAME_MAX, Declaration, Model
from runner.digests import Sha256

__all__ = ["Approval", "ApprovalSpec", "PlanRef", "ResourceRef", "RunAcknowledgment"]

MEMBER_OR_NAME = DNS_SUBDOMAIN[:-1] + r"(/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$"
"""A resource's name, or a fleet member's ``<fleet>/<member>``."""
UID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
Digest = Sha256
HexId = Annotated[str, Field(pattern=r"^[0-9a-f]{16,64}$")]
"""A nonce or an operation id: 16 to 64 lowercase hex digits."""
Comment = Annotated[str, Field(max_length=1024)]
"""What the signer wants kept in the statement, for the people who read it later."""


class ResourceRef(Model):
    """The exact resource a statement is about, including the uid of its current lifetime."""

    kind: Literal["DatabaseSchema", "DatabaseMigration", "DatabaseFleet"]
    namespace: Annotated[str, Field(pattern=DNS_LABEL)] = "default"
    # A fleet member's name is ``<fleet>/<member>`` (gitops/resources/fleet.py).
    name: Annotated[str, Field(pattern=MEMBER_OR_NAME, max_length=STORED_NAME_MAX)]
    uid: Annotated[str, Field(pattern=UID)]


class PlanRef(Model):
    """The plan id an approval names (the plan fingerprint, ``sha256:<hex>``)."""

    id: Digest


class ApprovalSpec(Model):
    """One approval of one plan of one resource."""

    resource: ResourceRef
    plan: PlanRef
    approved_at: datetime | None = None  # written by `seshat approve`; maxAge counts from it
    expires_at: datetime | None = None
    # Written by `seshat approve`: a fresh statement each time, so an approval of a plan id
    # that comes back after its earlier approval was consumed is a new statement.
    nonce: HexId | None = None
    comment: Comment = ""


class Approval(Declaration):
    """A signed approval file under ``approvals/<namespace>/<name>/<plan-id-hex>.yaml``."""

    kind: Literal["Approval"] = "Approval"
    spec: ApprovalSpec


class RunAcknowledgmentSpec(Model):
    """A person's statement that they settled an uncertain migration run."""

    resource: ResourceRef
    operation_id: HexId
    comment: Comment = ""


class RunAcknowledgment(Declaration):
    """A signed file under ``acknowledgments/<namespace>/<name>/<operation-id-hex>.yaml``."""

    kind: Literal["RunAcknowledgment"] = "RunAcknowledgment"
    spec: RunAcknowledgmentSpec
