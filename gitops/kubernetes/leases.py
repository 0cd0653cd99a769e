"""Leases in ``coordination.k8s.io/v1``: one per coordination digest, plus the controller's.

A holding writes ``spec.holderIdentity`` and a random epoch (annotation
``seshat.dev/epoch``) with the Lease's ``resourceVersion`` as precondition, so of two
controllers racing for it exactly one wins (the other gets 409 Conflict and does not hold
it). A thread renews ``spec.renewTime`` every third of ``leaseDurationSeconds`` while the
holding lasts; a Lease whose renewal is older than its duration has lapsed and may be
taken. :meth:`KubernetesLeases.holds` is true only while the Lease still names this holder
and epoch, is not lapsed, and no renewal found it taken: a result produced across a change
is discarded by the lifecycles (``LeaseContinuityLost``).
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from gitops.execution.leases import Lease
from gitops.kubernetes.api import Conflict, KubeApi, KubeError, NotFound

__all__ = ["KubernetesLeases", "lease_name"]

_EPOCH = "seshat.dev/epoch"
_COORDINATION = "seshat.dev/coordination"


def lease_name(coordination: str) -> str:
    """The Lease's name: ``seshat-`` and the digest's hex (or the sanitized name)."""
    if coordination.startswith("sha256:"):
        return "seshat-" + coordination.removeprefix("sha256:")[:56]
    return "seshat-" + re.sub(r"[^a-z0-9-]", "-", coordination.lower())[:56]


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KubernetesLeases:
    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        duration: int = 60,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.duration = duration
        self.now = now
        self._lost: set[Lease] = set()
        self._renewers: dict[Lease, threading.Event] = {}

    def _path(self, coordination: str | None = None) -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"
        return base if coordination is None else f"{base}/{lease_name(coordination)}"

    def _lapsed(self, spec: dict[str, Any]) -> bool:
        renewed = spec.get("renewTime") or spec.get("acquireTime")
        if not spec.get("holderIdentity") or not renewed:
            return True
        seconds = int(spec.get("leaseDurationSeconds") or self.duration)
        return datetime.fromisoformat(renewed) + timedelta(seconds=seconds) < self.now()

    def _ours(self, found: dict[str, Any], lease: Lease) -> bool:
        annotations = found.get("metadata", {}).get("annotations") or {}
        spec = found.get("spec") or {}
        return (
            spec.get("holderIdentity") == lease.holder
            and annotations.get(_EPOCH) == lease.epoch
            and not self._lapsed(spec)
        )

    # -- the Leases protocol -------------------------------------------------------------

    def acquire(self, coordination: str, holder: str) -> Lease | None:
        lease = Lease(coordination, holder, secrets.token_hex(16))
        now = _micro(self.now())
        spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": self.duration,
            "acquireTime": now,
            "renewTime": now,
        }
        annotations = {_EPOCH: lease.epoch, _COORDINATION: coordination}
        try:
            found = self.api.get(self._path(coordination))
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": lease_name(coordination),
                    "namespace": self.namespace,
                    "annotations": annotations,
                },
                "spec": {**spec, "leaseTransitions": 0},
            }
            try:
                self.api.create(self._path(), body)
            except Conflict:
                return None  # created by another controller a moment ago
        else:
            current = found.get("spec") or {}
            other = current.get("holderIdentity") not in (None, "", holder)
            if other and not self._lapsed(current):
                return None
            transitions = int(current.get("leaseTransitions") or 0) + (1 if other else 0)
            metadata = found["metadata"]
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
            found["spec"] = {**current, **spec, "leaseTransitions": transitions}
            try:
                self.api.replace(self._path(coordination), found)
            except Conflict:
                return None
        self._renew_in_background(lease)
        return lease

    def holds(self, lease: Lease) -> bool:
        if lease in self._lost:
            return False
        try:
            found = self.api.get(self._path(lease.coordination))
        except KubeError:
            return False  # unproven is not held
        return self._ours(found, lease)

    def release(self, lease: Lease) -> None:
        stop = self._renewers.pop(lease, None)
        if stop is not None:
            stop.set()
        try:
            found = self.api.get(self._path(lease.coordination))
            if not self._ours(found, lease):
                return
            found["spec"] = {
                k: v for k, v in found["spec"].items() if k not in ("holderIdentity", "renewTime")
            }
            found["metadata"]["annotations"].pop(_EPOCH, None)
            self.api.replace(self._path(lease.coordination), found)
        except KubeError:
            pass  # it lapses on its own

    # -- renewal -------------------------------------------------------------------------

    def _renew_in_background(self, lease: Lease) -> None:
        stop = threading.Event()
        self._renewers[lease] = stop
        thread = threading.Thread(
            target=self._renew, args=(lease, stop), name=f"lease {lease.coordination}", daemon=True
        )
        thread.start()

    def _renew(self, lease: Lease, stop: threading.Event) -> None:
        while not stop.wait(self.duration / 3):
            try:
                found = self.api.get(self._path(lease.coordination))
                if not self._ours(found, lease):
                    self._lost.add(lease)
                    return
                found["spec"]["renewTime"] = _micro(self.now())
                self.api.replace(self._path(lease.coordination), found)
            except KubeError:
                continue  # retried; the holding lapses (and holds() says so) if it keeps failing
