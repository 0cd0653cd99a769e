"""Verdict changes as ``events.k8s.io/v1`` Events on the custom resource.

When a pass leaves a ``DatabaseSchema`` / ``DatabaseMigration`` with another verdict than
the one its custom resource showed (its Ready condition's reason: ``InSync``,
``AwaitingApproval``, ``ProtectedTable``, ``OperationFailed``...), one Event says so, in the
resource's namespace, ``regarding`` the object: ``kubectl describe`` and ``kubectl events``
show it beside the resource. The Event's ``reason`` is the verdict's phase (``InSync``,
``AwaitingApproval``, ``Blocked``, ``Failed``, ``Suspended``), its ``type`` Warning for
Blocked and Failed, and its ``note`` the Ready reason and message. A verdict that stays the
same makes no Event. Events are a courtesy: one that cannot be written is logged, and the
pass and the status are not affected.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Any

from gitops.kubernetes.api import KubeApi, KubeError
from gitops.resources.status import (
    ConditionType,
    DatabaseMigrationStatus,
    DatabaseSchemaStatus,
    SharedPhase,
)

__all__ = [
    "REPORTING_CONTROLLER",
    "TAMPERING",
    "emit_verdict_event",
    "ready_reason",
    "tampering_event",
    "verdict_event",
]

REPORTING_CONTROLLER = "seshat.dev/controller"
_WARNING = frozenset({SharedPhase.BLOCKED.value, SharedPhase.FAILED.value})
_API_VERSION = "seshat.dev/v1alpha1"
MAX_NOTE = 1024  # the API server's limit on an Event's note
TAMPERING = "Tampering"
"""The reason of the Event that reports a Job or pod made to pass for one of Seshat's."""


def ready_reason(status: Any) -> str | None:
    """The Ready condition's reason in a custom resource's status (JSON), if it has one."""
    if not isinstance(status, dict):
        return None
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == ConditionType.READY.value:
            reason = condition.get("reason")
            return str(reason) if reason is not None else None
    return None


def verdict_event(
    kind: str,
    found: dict[str, Any],
    status: DatabaseSchemaStatus | DatabaseMigrationStatus,
    now: datetime,
    instance: str,
) -> dict[str, Any]:
    """The Event saying that the object ``found`` (as the API server returned it) now has
    the verdict ``status``."""
    meta = found.get("metadata", {})
    ready = next((c for c in status.conditions if c.type == ConditionType.READY), None)
    reason = ready.reason if ready is not None else status.phase.value
    message = ready.message if ready is not None else ""
    phase = status.phase.value
    note = f"{phase} ({reason})" + (f": {message}" if message else "")
    regarding = {
        "apiVersion": _API_VERSION,
        "kind": kind,
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
    }
    if meta.get("uid"):
        regarding["uid"] = meta["uid"]
    if meta.get("resourceVersion"):
        regarding["resourceVersion"] = meta["resourceVersion"]
    name = str(meta.get("name", "resource"))[:200]
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{secrets.token_hex(8)}", "namespace": meta.get("namespace")},
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance[:128],
        "action": "Reconcile",
        "reason": phase,
        "type": "Warning" if phase in _WARNING else "Normal",
        "regarding": regarding,
        # The limit counts bytes: a message quoting non-ASCII repository text is cut on a
        # character boundary below it, not refused by the API server.
        "note": note.encode()[:MAX_NOTE].decode("utf-8", "ignore"),
    }


def tampering_event(
    suspect: dict[str, Any],
    resource: tuple[str, str] | None,
    note: str,
    now: datetime,
    instance: str,
) -> dict[str, Any]:
    """The Warning Event saying that ``suspect`` (a Job or pod as the API server returned
    it) passes for one of Seshat's and is not: ``regarding`` the custom resource it claims
    to work for (``resource``: its kind and name, in the suspect's namespace), so that
    ``kubectl events --for`` that resource shows it, with the suspect as ``related``; or
    ``regarding`` the suspect itself when it names no resource."""
    meta = suspect.get("metadata", {})
    namespace = meta.get("namespace")
    named = {
        "apiVersion": suspect.get("apiVersion", "v1"),
        "kind": suspect.get("kind", ""),
        "namespace": namespace,
        "name": meta.get("name"),
    }
    if meta.get("uid"):
        named["uid"] = meta["uid"]
    event: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": f"{str(meta.get('name', 'object'))[:200]}.{secrets.token_hex(8)}",
            "namespace": namespace,
        },
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance[:128],
        "action": "Adopt",
        "reason": TAMPERING,
        "type": "Warning",
        "regarding": named,
        "note": note.encode()[:MAX_NOTE].decode("utf-8", "ignore"),
    }
    if resource is not None:
        kind, name = resource
        event["regarding"] = {
            "apiVersion": _API_VERSION,
            "kind": kind,
            "namespace": namespace,
            "name": name,
        }
        event["related"] = named
    return event


def emit_verdict_event(
    api: KubeApi,
    kind: str,
    found: dict[str, Any],
    status: DatabaseSchemaStatus | DatabaseMigrationStatus,
    now: datetime,
    log: Callable[[str], None] = lambda _: None,
) -> bool:
    """Create the Event for a verdict change when the object's published Ready reason (in
    ``found``, read before this pass's status was patched) differs from ``status``'s;
    returns whether one was created."""
    ready = next((c for c in status.conditions if c.type == ConditionType.READY), None)
    if ready is not None and ready_reason(found.get("status")) == ready.reason:
        return False
    event = verdict_event(kind, found, status, now, socket.gethostname())
    namespace = event["metadata"]["namespace"]
    try:
        api.create(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event)
    except KubeError as error:
        log(f"{namespace}/{event['regarding']['name']}: event not recorded: {error}")
        return False
    return True
