"""Where Seshat's files live on the status branch, and their exact bytes.

```
status/<namespace>/<name>.yaml                     one status file per resource
plans/<namespace>/<name>/<plan-id-hex>.json, .sql  the plan document and its SQL rendering
plans/<namespace>/<name>/<plan-id-hex>.binding.json  what the plan id is the digest of
plans/<namespace>/<name>/<plan-id-hex>.impact.json   the plan's impact figures (observations
                                                     beside the plan, not covered by its id)
```

A plan's files are found from its id alone (:func:`plan_paths`); the id is the digest of the
binding, which names the plan document's digest, so a reader can check all three.

Status files are YAML with keys in a fixed order and no volatile values beyond the
condition transition times, so writing the same status twice gives the same bytes and
makes no commit.
"""

from __future__ import annotations

import json

from gitops.repo.yamlfile import FileError, read_documents
from gitops.resources.approvals import ResourceRef
from gitops.resources.status import DatabaseMigrationStatus, DatabaseSchemaStatus, FleetStatus
from gitops.yamlout import dump_all
from runner.digests import canonical_json, digest_hex
from runner.engines.impact import ImpactReport, describe

__all__ = [
    "binding_path",
    "impact_bytes",
    "impact_lines",
    "impact_path",
    "plan_paths",
    "read_status",
    "status_bytes",
    "status_path",
]


def status_path(namespace: str, name: str) -> str:
    return f"status/{namespace}/{name}.yaml"


def plan_paths(namespace: str, name: str, plan_id: str) -> tuple[str, str]:
    base = f"plans/{namespace}/{name}/{digest_hex(plan_id)}"
    return f"{base}.json", f"{base}.sql"


def binding_path(namespace: str, name: str, plan_id: str) -> str:
    return f"plans/{namespace}/{name}/{digest_hex(plan_id)}.binding.json"


def impact_path(namespace: str, name: str, plan_id: str) -> str:
    return f"plans/{namespace}/{name}/{digest_hex(plan_id)}.impact.json"


def impact_bytes(plan_id: str, report: ImpactReport) -> bytes:
    """The impact figures of plan ``plan_id``, each also worded for people (``lines``):
    observations beside the plan, which its id does not cover."""
    document = {
        "plan": plan_id,
        "impact": report.model_dump(mode="json", by_alias=True, exclude_none=True),
        "lines": [describe(figure) for figure in report.figures],
    }
    return canonical_json(document) + b"\n"


def impact_lines(data: bytes | None, limit: int = 50) -> list[str]:
    """The figures of an impact file, worded again from its figures (never its ``lines``,
    which only a person reads in Git), at most ``limit`` of them; nothing for a file that
    is not one."""
    if data is None:
        return []
    try:
        report = ImpactReport.model_validate(json.loads(data)["impact"])
    except (ValueError, KeyError, TypeError):
        return []
    lines = [describe(figure) for figure in report.figures[:limit]]
    more = len(report.figures) - len(lines) + report.left_out
    return lines + ([f"... and {more} more"] if more else [])


def status_bytes(
    resource: ResourceRef, status: DatabaseSchemaStatus | DatabaseMigrationStatus
) -> bytes:
    """The status file of ``resource``: which resource (with its uid) and its status."""
    document = {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": f"{resource.kind}Status",
        "resource": resource.model_dump(mode="json", by_alias=True),
        "status": status.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    return dump_all([document]).encode("utf-8")


def fleet_status_bytes(fleet: ResourceRef, status: FleetStatus) -> bytes:
    """The status file of a fleet (``status/<ns>/<fleet>.yaml``): aggregates of its
    members, whose own files are ``status/<ns>/<fleet>/<member>.yaml``."""
    document = {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "DatabaseFleetStatus",
        "resource": fleet.model_dump(mode="json", by_alias=True),
        "status": status.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    return dump_all([document]).encode("utf-8")


def read_status(data: bytes, kind: str) -> DatabaseSchemaStatus | DatabaseMigrationStatus | None:
    """The status a status file's bytes record for a resource of ``kind`` (None when it is
    unreadable or another kind's: the caller treats that as unknown)."""
    model = DatabaseMigrationStatus if kind == "DatabaseMigration" else DatabaseSchemaStatus
    try:
        document = read_documents(data)[0].data
        if not isinstance(document, dict) or document.get("kind") != f"{kind}Status":
            return None
        return model.model_validate(document["status"])
    except (FileError, ValueError, KeyError, IndexError, RecursionError):
        return None


def read_fleet_status(data: bytes | None) -> FleetStatus | None:
    """The status a fleet's status file records (None when there is none, or it cannot be
    read: the caller starts anew or reads the members' own files)."""
    if data is None:
        return None
    try:
        document = read_documents(data)[0].data
        state = document.get("status", {}) if isinstance(document, dict) else {}
        return FleetStatus.model_validate(state)
    except (FileError, IndexError, AttributeError, ValueError, RecursionError):
        return None
