"""Publishing each verdict on the custom resource's ``status``, for Argo CD and Flux.

The status branch stays the record; this is a copy for the cluster's readers (Argo CD's
health check in ``deploy/argocd``, Flux's kstatus health checks). After a pass, each
``DatabaseSchema`` / ``DatabaseMigration`` object that exists in the cluster gets the status
the pass committed, by a merge patch of its ``status`` subresource. ``observedGeneration``
is set to the object's ``metadata.generation`` only when its ``spec`` is the declaration
the pass read (so a newer spec applied by Argo CD or Flux than the commit Seshat saw reads
as "not yet observed"). An object that is not in the cluster is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from gitops.kubernetes.api import KubeApi, KubeError, NotFound
from gitops.kubernetes.events import emit_verdict_event
from gitops.repo.loader import Repository
from gitops.resources.kinds import KINDS
from gitops.resources.status import DatabaseMigrationStatus, DatabaseSchemaStatus

__all__ = ["publish_phase", "publish_statuses"]

_GROUP = "/apis/seshat.dev/v1alpha1"


def publish_statuses(
    api: KubeApi,
    statuses: Mapping[str, tuple[str, DatabaseSchemaStatus | DatabaseMigrationStatus]],
    repository: Repository | None,
    log: Callable[[str], None] = lambda _: None,
    *,
    events: bool = False,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Patch each resource's status in the cluster (``statuses``: "ns/name" -> its kind and
    the status a pass gave it; ``repository``: the declarations the pass read); returns how
    many were published. With ``events``, a changed verdict is also an Event
    (:mod:`gitops.kubernetes.events`)."""
    published = 0
    for key, (kind, status) in sorted(statuses.items()):
        namespace, name = key.split("/", 1)
        path = f"{_GROUP}/namespaces/{namespace}/{KINDS[kind].plural}/{name}"
        try:
            found = api.get(path)
        except NotFound:
            log(f"{key}: no {kind} in the cluster; its status is not published there")
            continue
        except KubeError as error:
            log(f"{key}: status not published: {error}")
            continue
        body: dict[str, Any] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        for field, value in status.model_dump(mode="json", by_alias=True).items():
            if value is None and field != "observedGeneration":
                body[field] = None  # a merge patch removes what this status no longer has
        declared = repository.find(kind, namespace, name) if repository else None
        if declared is not None and found.get("spec") == _spec(declared.resource):
            body["observedGeneration"] = found.get("metadata", {}).get("generation")
        try:
            api.merge_patch(f"{path}/status", {"status": body})
        except KubeError as error:
            log(f"{key}: status not published: {error}")
            continue
        published += 1
        if events:
            emit_verdict_event(api, kind, found, status, now(), log)
    return published


def publish_phase(
    api: KubeApi, kind: str, key: str, phase: str, log: Callable[[str], None] = lambda _: None
) -> bool:
    """Show a step under way (``Resolving``, ``Planning``, ``Applying``, ``Migrating``...) as
    the custom resource's ``status.phase`` while a pass runs; only the phase changes (the
    conditions and the rest are the last verdict's until the pass publishes its own). The
    status branch never records these: they are progress, not verdicts."""
    namespace, name = key.split("/", 1)
    path = f"{_GROUP}/namespaces/{namespace}/{KINDS[kind].plural}/{name}/status"
    try:
        api.merge_patch(path, {"status": {"phase": phase}})
    except NotFound:
        return False
    except KubeError as error:
        log(f"{key}: phase {phase} not published: {error}")
        return False
    return True


def _spec(resource: Any) -> Any:
    return resource.model_dump(mode="json", by_alias=True, exclude_none=True).get("spec")
