"""Publishing each verdict on the custom resource's ``status``, for Argo CD and Flux.

The status branch stays the record; this is a copy for the cluster's readers (Argo CD's
health check in ``deploy/argocd``, Flux's kstatus health checks). After a pass, each
``DatabaseSchema`` / ``DatabaseMigration`` object that exists in the cluster gets the status
the pass committed, by a merge patch of its ``status`` subresource. ``observedGeneration``
is set to the object's ``metadata.generation`` only when its ``spec`` is the declaration
the pass read (so a newer spec applied by Argo CD or Flux than the commit Seshat saw reads
as "not yet observed"). An object that is not in the cluster is skipped.

A ``DatabaseFleet`` gets its aggregates (counts per phase, distinct plans, steps, the few
members needing attention, its conditions), cut to a bounded size: a fleet of thousands of
members keeps a small object. Its members are no objects of the cluster (their names hold a
``/``), so nothing is published for them on their own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from gitops.kubernetes.api import KubeApi, KubeError, NotFound
from gitops.kubernetes.events import emit_verdict_event
from gitops.repo.loader import Repository
from gitops.resources.kinds import KINDS
from gitops.resources.status import DatabaseMigrationStatus, DatabaseSchemaStatus, FleetStatus

__all__ = [
    "FLEET_LIST",
    "MAX_FLEET_STATUS",
    "fleet_resource_status",
    "is_member",
    "publish_fleets",
    "publish_phase",
    "publish_statuses",
    "status_bytes",
]

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
    (:mod:`gitops.kubernetes.events`). A fleet's members (``ns/fleet/member``) are no
    objects of the cluster: their fleet's status (:func:`publish_fleets`) counts them."""
    published = 0
    for key, (kind, status) in sorted(statuses.items()):
        if is_member(key):
            continue
        found = _publish(api, kind, key, status, repository, log)
        if found is None:
            continue
        published += 1
        if events:
            emit_verdict_event(api, kind, found, status, now(), log)
    return published


def publish_fleets(
    api: KubeApi,
    fleets: Mapping[str, FleetStatus],
    repository: Repository | None,
    log: Callable[[str], None] = lambda _: None,
) -> int:
    """Patch each ``DatabaseFleet``'s status in the cluster (``fleets``: "ns/fleet" -> the
    aggregates a pass gave it), bounded by :func:`fleet_resource_status`; returns how many
    were published. The ``observedGeneration`` rule is every kind's."""
    published = 0
    for key, status in sorted(fleets.items()):
        bounded = fleet_resource_status(status)
        if _publish(api, "DatabaseFleet", key, bounded, repository, log) is not None:
            published += 1
    return published


MAX_FLEET_STATUS = 64 * 1024
"""The most bytes a fleet's status takes on its custom resource (as compact JSON): far below
what the API server holds of one object (about 1.5 MiB, spec included), whatever the
fleet's size."""
FLEET_LIST = 10
"""The most entries each list of a fleet's status keeps on its custom resource (distinct
plans, the member names of each, members needing attention, members that left); every
count (``members``, ``phases``, ``distinctPlans``, each plan's ``members``) stays whole."""
LIST_MESSAGE = 256
"""The longest message of a listed member or step on the custom resource (the status
branch keeps 1024 characters)."""


def fleet_resource_status(status: FleetStatus) -> FleetStatus:
    """A fleet's status as its custom resource shows it: the status branch's aggregates with
    each list cut to :data:`FLEET_LIST` entries and their messages to :data:`LIST_MESSAGE`
    characters, then, should it still exceed :data:`MAX_FLEET_STATUS` bytes (only steps
    matching very long labels could), entries dropped from the end of the lists until it
    fits. Members have no objects of their own: ``kubectl get`` shows the aggregates, and
    ``seshat status NS/FLEET`` each member (docs/kubernetes.md)."""
    bounded = status.model_copy(
        update={
            "plans": [
                p.model_copy(update={"names": p.names[:FLEET_LIST]})
                for p in status.plans[:FLEET_LIST]
            ],
            "attention": [
                a.model_copy(update={"message": a.message[:LIST_MESSAGE]})
                for a in status.attention[:FLEET_LIST]
            ],
            "steps": [
                s.model_copy(update={"message": s.message[:LIST_MESSAGE]}) for s in status.steps
            ],
            "left": status.left[:FLEET_LIST],
        }
    )
    for field in ("left", "attention", "plans", "steps"):
        entries = list(getattr(bounded, field))
        while entries and status_bytes(bounded) > MAX_FLEET_STATUS:
            entries.pop()
            bounded = bounded.model_copy(update={field: list(entries)})
    return bounded


def status_bytes(status: FleetStatus | DatabaseSchemaStatus | DatabaseMigrationStatus) -> int:
    """How many bytes ``status`` takes on a custom resource (compact JSON)."""
    body = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    return len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())


def is_member(key: str) -> bool:
    """Whether ``key`` ("ns/name") names a fleet's member (``ns/fleet/member``): no object
    of the cluster (a name there holds no ``/``)."""
    return key.count("/") > 1


def _publish(
    api: KubeApi,
    kind: str,
    key: str,
    status: FleetStatus | DatabaseSchemaStatus | DatabaseMigrationStatus,
    repository: Repository | None,
    log: Callable[[str], None],
) -> dict[str, Any] | None:
    """Merge ``status`` into the status of ``key``'s custom resource of ``kind``; the object
    as it was before (None when it is not in the cluster or could not be patched)."""
    namespace, name = key.split("/", 1)
    path = f"{_GROUP}/namespaces/{namespace}/{KINDS[kind].plural}/{name}"
    try:
        found = api.get(path)
    except NotFound:
        log(f"{key}: no {kind} in the cluster; its status is not published there")
        return None
    except KubeError as error:
        log(f"{key}: status not published: {error}")
        return None
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
        return None
    return found


def publish_phase(
    api: KubeApi, kind: str, key: str, phase: str, log: Callable[[str], None] = lambda _: None
) -> bool:
    """Show a step under way (``Resolving``, ``Planning``, ``Applying``, ``Migrating``...) as
    the custom resource's ``status.phase`` while a pass runs; only the phase changes (the
    conditions and the rest are the last verdict's until the pass publishes its own). The
    status branch never records these: they are progress, not verdicts."""
    if is_member(key):
        return False
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
