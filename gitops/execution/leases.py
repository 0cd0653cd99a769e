"""Leases: one writer per coordination digest, and what an uninterrupted holding is.

A :class:`Lease` is one holding: who holds it and a random epoch, new each time it is
acquired. A result produced while :meth:`Leases.holds` stopped being true (the epoch
changed, or the holding lapsed) is discarded and ``LeaseContinuityLost`` recorded. Local
mode keeps leases in the state file (:class:`~gitops.reconcile.state.StateFile`);
Kubernetes mode in ``coordination.k8s.io`` Leases
(:class:`~gitops.kubernetes.leases.KubernetesLeases`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Leader", "Lease", "Leases"]


@dataclass(frozen=True, slots=True)
class Lease:
    coordination: str  # the coordination digest, or a name such as the controller's
    holder: str
    epoch: str


class Leases(Protocol):
    def acquire(self, coordination: str, holder: str) -> Lease | None:
        """A new holding (new epoch), or None while someone else holds it."""
        ...

    def holds(self, lease: Lease) -> bool:
        """Whether ``lease``'s holding is still uninterrupted."""
        ...

    def release(self, lease: Lease) -> None: ...


class Leader:
    """Leader election over the Lease named ``controller``: only its holder runs passes
    (``seshat run`` in Kubernetes mode); with no lease store (local mode), always leading."""

    NAME = "controller"

    def __init__(self, leases: Leases | None, holder: str, say: Callable[[str], None]) -> None:
        self.leases, self.holder, self.say = leases, holder, say
        self.lease: Lease | None = None

    def leading(self) -> bool:
        if self.leases is None:
            return True
        if self.lease is not None and self.leases.holds(self.lease):
            return True
        if self.lease is not None:
            self.say("seshat: the controller Lease was lost; not reconciling")
        self.lease = self.leases.acquire(self.NAME, self.holder)
        if self.lease is None:
            self.say("seshat: another replica holds the controller Lease; standing by")
        return self.lease is not None

    def step_down(self) -> None:
        if self.leases is not None and self.lease is not None:
            self.leases.release(self.lease)
