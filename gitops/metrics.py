"""The controller's Prometheus metrics: every one named ``seshat_…``, defined here once.

They live in their own registry (:data:`REGISTRY`), which ``seshat run --listen`` serves at
``/metrics``; the code that observes something calls the helpers below rather than touching
the metric objects, so the names and label sets stay in this one module.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = [
    "REGISTRY",
    "approval_judged",
    "fleet_phases",
    "listener_connections",
    "listener_refused",
    "operation_finished",
    "pass_finished",
    "resource_phases",
    "webhook_received",
]

REGISTRY = CollectorRegistry(auto_describe=True)

_DURATIONS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600)

PASSES = Counter(
    "seshat_passes",
    "Reconciliation passes, by outcome (ok: the pass ran; error: it could not run).",
    ["outcome"],
    registry=REGISTRY,
)
PASS_SECONDS = Histogram(
    "seshat_pass_duration_seconds",
    "Wall time of a reconciliation pass.",
    buckets=_DURATIONS,
    registry=REGISTRY,
)
LAST_SUCCESS = Gauge(
    "seshat_last_successful_pass_timestamp_seconds",
    "Unix time at which the last pass that ran ended.",
    registry=REGISTRY,
)
OPERATIONS = Counter(
    "seshat_operations",
    "Runner operations, by kind (resolve, verify, observe, plan, apply, history, migrate...) "
    "and outcome (answered, error, refused, lost...).",
    ["kind", "outcome"],
    registry=REGISTRY,
)
OPERATION_SECONDS = Histogram(
    "seshat_operation_duration_seconds",
    "Wall time of a runner operation, by kind.",
    ["kind"],
    buckets=_DURATIONS,
    registry=REGISTRY,
)
RESOURCES = Gauge(
    "seshat_resources",
    "Resources by the phase and Ready reason the last pass gave them.",
    ["kind", "phase", "reason"],
    registry=REGISTRY,
)
FLEET_MEMBERS = Gauge(
    "seshat_fleet_members",
    "Members of each fleet by the phase the last pass left them in.",
    ["namespace", "fleet", "phase"],
    registry=REGISTRY,
)
APPROVALS = Counter(
    "seshat_approvals",
    "Approval files judged, by outcome (accepted, rejected) and reason.",
    ["outcome", "reason"],
    registry=REGISTRY,
)
WEBHOOKS = Counter(
    "seshat_webhooks",
    "Webhook requests, by outcome (accepted, refused, ignored).",
    ["outcome"],
    registry=REGISTRY,
)

LISTENER_REFUSALS = Counter(
    "seshat_listener_refusals",
    "Connections and requests the listener refused before any route: capacity, "
    "client_capacity, evicted, deadline, malformed, length, busy, internal.",
    ["reason"],
    registry=REGISTRY,
)
LISTENER_CONNECTIONS = Gauge(
    "seshat_listener_connections",
    "Connections open on the listener now (refused ones are never counted).",
    registry=REGISTRY,
)


def pass_finished(outcome: str, seconds: float, ended_at: float) -> None:
    PASSES.labels(outcome=outcome).inc()
    PASS_SECONDS.observe(seconds)
    if outcome == "ok":
        LAST_SUCCESS.set(ended_at)


def operation_finished(kind: str, outcome: str, seconds: float) -> None:
    OPERATIONS.labels(kind=kind, outcome=outcome).inc()
    OPERATION_SECONDS.labels(kind=kind).observe(seconds)


def resource_phases(counts: dict[tuple[str, str, str], int]) -> None:
    """Replace the resources gauge with ``(kind, phase, reason) -> count``."""
    RESOURCES.clear()
    for (kind, phase, reason), count in sorted(counts.items()):
        RESOURCES.labels(kind=kind, phase=phase, reason=reason).set(count)


def fleet_phases(namespace: str, fleet: str, counts: dict[str, int]) -> None:
    """Replace one fleet's member counts with ``phase -> count`` (a phase no member is in
    any more reads 0)."""
    for labels in [s.labels for m in FLEET_MEMBERS.collect() for s in m.samples]:
        if (labels["namespace"], labels["fleet"]) == (namespace, fleet):
            FLEET_MEMBERS.labels(**labels).set(counts.get(labels["phase"], 0))
    for phase, count in sorted(counts.items()):
        FLEET_MEMBERS.labels(namespace=namespace, fleet=fleet, phase=phase).set(count)


def approval_judged(outcome: str, reason: str) -> None:
    APPROVALS.labels(outcome=outcome, reason=reason).inc()


def webhook_received(outcome: str) -> None:
    WEBHOOKS.labels(outcome=outcome).inc()


def listener_refused(reason: str) -> None:
    LISTENER_REFUSALS.labels(reason=reason).inc()


def listener_connections(count: int) -> None:
    LISTENER_CONNECTIONS.set(count)
