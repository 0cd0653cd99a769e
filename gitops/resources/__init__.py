"""The typed resources a repository declares, as frozen pydantic models.

One module per kind (``schema.py``, ``migration.py``, ``policies.py``, ``approvals.py``,
``config.py``), the shared spec parts in ``database.py``, status and conditions in
``status.py`` and the kind table in ``kinds.py``. To add a kind: write its model, add it to
``KINDS`` and regenerate the CRDs (``seshat render --crds --write deploy/crds``).
"""

from gitops.resources.approvals import Approval, RunAcknowledgment
from gitops.resources.base import API_VERSION, ObjectMeta
from gitops.resources.config import Config
from gitops.resources.kinds import KINDS, Kind, Resource
from gitops.resources.migration import DatabaseMigration
from gitops.resources.policies import ApprovalPolicy, VerificationPolicy
from gitops.resources.schema import DatabaseSchema
from gitops.resources.status import Condition, MigrationPhase, Reason, SchemaPhase

__all__ = [
    "API_VERSION",
    "KINDS",
    "Approval",
    "ApprovalPolicy",
    "Condition",
    "Config",
    "DatabaseMigration",
    "DatabaseSchema",
    "Kind",
    "MigrationPhase",
    "ObjectMeta",
    "Reason",
    "Resource",
    "RunAcknowledgment",
    "SchemaPhase",
    "VerificationPolicy",
]
