"""A fleet's rollout in one pass: which members may apply, and the fleet's status.

Every member is reconciled every pass it is due, whatever its step: it observes, plans and
records what it would do. Only applying waits for its step. A pass reconciles the steps in
order (step 1 of every fleet, then step 2, ...), so what a step's members decided this pass
is what the next step's gate reads; within a step, at most ``maxParallel`` members apply at
once (a member waiting for a place lets the pass's other workers go on).

Step ``k`` is reached when every member of the earlier steps is done (InSync or
Suspended; Failed or Blocked ones too when tolerated) and no pause after them is running.
A Failed or Blocked member halts its own step and every later one under ``onFailure: Halt``
(under ``Continue``, only past ``maxFailures``), until the failure clears or a person
commits the token the fleet status names as ``spec.rollout.resume``. A pause
``untilResumed`` is lifted the same way; a timed pause ends that long after the step's last
Apply. Members that match no step never apply. The fleet's own status file
(``status/<ns>/<fleet>.yaml``) holds aggregates only: docs/fleets.md.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from gitops.metrics import fleet_phases
from gitops.reconcile.conditions import summary_conditions
from gitops.repo.loader import LoadedResource, Repository
from gitops.repo.problems import ResourceKey
from gitops.repo.yamlfile import FileError, read_documents
from gitops.resources.approvals import ResourceRef
from gitops.resources.fleet import UNTIL_RESUMED, DatabaseFleet, OnFailure, parallel_limit
from gitops.resources.status import (
    MAX_FLEET_LIST,
    Condition,
    DatabaseMigrationStatus,
    DatabaseSchemaStatus,
    FleetAttention,
    FleetPlan,
    FleetStatus,
    FleetStep,
    PlanSummary,
    Reason,
    SharedPhase,
)
from gitops.writeback.batch import Batch, Change, shown, status_change
from gitops.writeback.status_branch import StatusBranch
from gitops.writeback.status_files import (
    fleet_status_bytes,
    read_fleet_status,
    read_status,
    status_bytes,
    status_path,
)
from runner.digests import digest

__all__ = ["Fleets", "Rollout", "fleet_conditions"]

Status = DatabaseSchemaStatus | DatabaseMigrationStatus
_FAILING = (SharedPhase.FAILED.value, SharedPhase.BLOCKED.value)
_DONE = (SharedPhase.IN_SYNC.value, SharedPhase.SUSPENDED.value)
_VERDICTS: dict[str, tuple[str, str]] = {
    # A fleet's phase -> the member phase its conditions read as, and their reason: a halt
    # is Stalled (nothing goes on until a fix or a resume commit), a pause and progress
    # are Reconciling, like a member under way or awaiting its approval.
    "InSync": (SharedPhase.IN_SYNC.value, Reason.IN_SYNC.value),
    "AwaitingApproval": (SharedPhase.AWAITING_APPROVAL.value, Reason.AWAITING_APPROVAL.value),
    "Halted": (SharedPhase.BLOCKED.value, Reason.ROLLOUT_HALTED.value),
    "Paused": (SharedPhase.PENDING.value, Reason.ROLLOUT_PAUSED.value),
    "Progressing": (SharedPhase.PENDING.value, Reason.PROGRESSING.value),
}


def fleet_conditions(
    phase: str, message: str, now: datetime, previous: Sequence[Condition] = ()
) -> list[Condition]:
    """The Ready / Reconciling / Stalled conditions of a fleet in ``phase`` (what Argo CD's
    and Flux's health checks read, as for the other kinds)."""
    verdict, reason = _VERDICTS[phase]
    return summary_conditions(verdict, reason, message, now, previous)


def _phase(status: Status | None) -> str:
    return status.phase.value if status is not None else SharedPhase.PENDING.value


def _reason(status: Status | None) -> str:
    ready = next((c for c in status.conditions if c.type == "Ready"), None) if status else None
    return ready.reason if ready is not None else ""


def _message(status: Status | None) -> str:
    ready = next((c for c in status.conditions if c.type == "Ready"), None) if status else None
    return ready.message if ready is not None else ""


def _token(kind: str, parts: Iterable[object]) -> str:
    return f"{kind}-{digest('fleet-resume', {'parts': [str(p) for p in parts]})[7:19]}"


class Rollout:
    """One fleet's rollout during one pass (thread-safe: members of one step run side by
    side on the pass's workers)."""

    def __init__(
        self,
        loaded: LoadedResource,
        members: Sequence[LoadedResource],
        previous: Callable[[LoadedResource], Status | None],
        now: Callable[[], datetime],
    ) -> None:
        fleet = loaded.resource
        assert isinstance(fleet, DatabaseFleet)
        self.loaded, self.fleet, self.now = loaded, fleet, now
        self.spec = fleet.spec.rollout
        self.names = [m.key.name for m in members]
        self.members = {m.key.name: m for m in members}
        self.previous = previous
        # Each member's status: what it recorded this pass, else its previous one, read
        # only when a gate or the fleet's status first needs them all (a quiet pass, where
        # no member asks to apply, reads each member's status once: in its own lifecycle).
        self.statuses: dict[str, Status | None] = {}
        self.complete = False
        self.step_of: dict[str, int | None] = {}
        steps = self.spec.steps
        self.steps: list[list[str]] = [[] for _ in steps] if steps else [[]]
        for member in members:
            labels = member.member.label_map if member.member is not None else {}
            if not steps:
                index: int | None = 0
            else:
                index = next(
                    (
                        i
                        for i, step in enumerate(steps)
                        if all(labels.get(k) == v for k, v in step.match.items())
                    ),
                    None,
                )
            self.step_of[member.key.name] = index
            if index is not None:
                self.steps[index].append(member.key.name)
        self.limits = [
            parallel_limit(steps[i].max_parallel, len(names)) if steps else len(names) or 1
            for i, names in enumerate(self.steps)
        ]
        self.active = [0] * len(self.steps)
        self.cond = threading.Condition()
        # Kept as statuses are recorded, so that a member's gate costs the same in a fleet
        # of ten members as in one of thousands: the failing members, and each step's
        # members done and failing.
        self.failing: set[str] = set()
        self.done_in = [0] * len(self.steps)
        self.failing_in = [0] * len(self.steps)

    def _set(self, name: str, status: Status | None) -> None:
        if name in self.statuses:
            self._count(name, _phase(self.statuses[name]), -1)
        self.statuses[name] = status
        self._count(name, _phase(status), 1)

    def _complete(self) -> None:
        """Every member's status known: the previous one of those not recorded yet."""
        if not self.complete:
            for name in self.names:
                if name not in self.statuses:
                    self._set(name, self.previous(self.members[name]))
            self.complete = True

    def _count(self, name: str, phase: str, delta: int) -> None:
        index = self.step_of.get(name)
        if phase in _FAILING:
            if delta > 0:
                self.failing.add(name)
            else:
                self.failing.discard(name)
        if index is None:
            return
        if phase in _DONE:
            self.done_in[index] += delta
        elif phase in _FAILING:
            self.failing_in[index] += delta

    @property
    def key(self) -> str:
        meta = self.fleet.metadata
        return f"{meta.namespace}/{meta.name}"

    # -- what decides a gate -------------------------------------------------------------

    def _failing(self) -> list[str]:
        return [n for n in self.names if n in self.failing]

    def _halt(self) -> tuple[int, str, str] | None:
        """Where the rollout is halted: (the first step it holds, why, the resume token)."""
        failing = [n for n in self.failing if self.step_of.get(n) is not None]
        if not failing:
            return None
        if self.spec.on_failure is OnFailure.CONTINUE and len(failing) <= self.spec.max_failures:
            return None
        parts = []
        for name in sorted(failing):
            status = self.statuses.get(name)
            last = status.last_applied if status is not None else None
            plan = status.plan.id if status is not None and status.plan else None
            parts.append((name, _phase(status), _reason(status), plan, last and last.operation_id))
        token = _token("halt", parts)
        if self.spec.resume == token:
            return None
        first = sorted(failing)[0]
        status = self.statuses.get(first)
        step = min(i for n in failing if (i := self.step_of.get(n)) is not None)
        why = (
            f"the rollout of fleet {self.key} is halted at step {step + 1}: {self._ns}/{first} "
            f"is {shown(_phase(status), _reason(status))}: {_message(status)[:300]}; fix it, or "
            f"commit spec.rollout.resume: {token} to go on without it"
        )
        return step, why, token

    @property
    def _ns(self) -> str:
        return self.fleet.metadata.namespace

    def _done(self, index: int, tolerated: bool) -> bool:
        done = self.done_in[index] + (self.failing_in[index] if tolerated else 0)
        return done == len(self.steps[index])

    def _paused(self, index: int) -> tuple[str, str | None] | None:
        """Why the steps after ``index`` (done) still wait: its pause; with the token that
        lifts an ``untilResumed`` one."""
        if not self.spec.steps:
            return None
        pause = self.spec.steps[index].pause
        if pause is None:
            return None
        applied = [
            last
            for n in self.steps[index]
            if (status := self.statuses.get(n)) is not None
            and (last := status.last_applied) is not None
        ]
        if not applied:
            return None
        if pause == UNTIL_RESUMED:
            token = _token(f"step{index + 1}", sorted((a.operation_id, a.plan_id) for a in applied))
            if self.spec.resume == token:
                return None
            return (
                f"the rollout of fleet {self.key} pauses after step {index + 1} until resumed: "
                f"commit spec.rollout.resume: {token}",
                token,
            )
        assert isinstance(pause, int)
        until = max(a.recorded_at for a in applied) + timedelta(seconds=pause)
        if self.now() >= until:
            return None
        return f"step {index + 1} is followed by a pause until {until.isoformat()}", None

    def gates(self) -> list[tuple[str | None, str]]:
        """For each step: why its members may not apply now (None: they may), and its
        state for the status (Done, Rolling, Waiting, Halted, Paused)."""
        self._complete()
        halt = self._halt()
        tolerated = halt is None
        found: list[tuple[str | None, str]] = []
        blocked: str | None = None
        for index in range(len(self.steps)):
            if blocked is None and halt is not None and halt[0] <= index:
                found.append((halt[1], "Halted"))
                blocked = halt[1]
                continue
            done = self._done(index, tolerated)
            if blocked is not None:
                found.append((blocked, "Waiting"))
                continue
            found.append((None, "Done" if done else "Rolling"))
            if not done:
                names = self.steps[index]
                in_sync = self.done_in[index]
                blocked = f"step {index + 1} is not done ({in_sync} of {len(names)} members InSync)"
            elif (paused := self._paused(index)) is not None:
                blocked = paused[0]
                found[-1] = (None, "Paused")
        return found

    def why_not(self, name: str) -> str | None:
        index = self.step_of.get(name)
        if index is None:
            return f"it matches no step of fleet {self.key}'s spec.rollout.steps"
        return self.gates()[index][0]

    # -- the gate members pass through --------------------------------------------------

    def enter(self, name: str) -> str | None:
        index = self.step_of.get(name)
        with self.cond:
            while True:
                why = self.why_not(name)
                if why is not None or index is None:
                    return why
                if self.active[index] < self.limits[index]:
                    self.active[index] += 1
                    return None
                self.cond.wait(timeout=1.0)

    def leave(self, name: str) -> None:
        index = self.step_of.get(name)
        with self.cond:
            if index is not None:
                self.active[index] -= 1
            self.cond.notify_all()

    def record(self, name: str, status: Status) -> None:
        with self.cond:
            self._set(name, status)
            self.cond.notify_all()

    # -- the fleet's status ---------------------------------------------------------------

    def status(self, left: Sequence[str], previous: Sequence[Condition] = ()) -> FleetStatus:
        """The fleet's aggregates, with the Ready / Reconciling / Stalled conditions of its
        phase (their transition times kept from ``previous`` while they stay the same)."""
        self._complete()
        phases = Counter(_phase(self.statuses.get(n)) for n in self.names)
        plans: dict[str, list[str]] = {}
        waiting: dict[str, bool] = {}
        summaries: dict[str, PlanSummary] = {}
        for name in self.names:
            status = self.statuses.get(name)
            plan = status.plan if status is not None else None
            if plan is None or plan.fleet_plan is None or _phase(status) in _DONE:
                continue
            plans.setdefault(plan.fleet_plan, []).append(name)
            summaries[plan.fleet_plan] = plan
            waiting[plan.fleet_plan] = waiting.get(plan.fleet_plan, False) or (
                _phase(status) == SharedPhase.AWAITING_APPROVAL.value
            )
        listed = [
            FleetPlan(
                id=fleet_plan,
                members=len(names),
                names=[n.rpartition("/")[2] for n in names[:MAX_FLEET_LIST]],
                approved=not waiting[fleet_plan],
                statements=summaries[fleet_plan].statements,
                destructive=summaries[fleet_plan].destructive,
            )
            for fleet_plan, names in sorted(plans.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        ][:MAX_FLEET_LIST]
        gates = self.gates()
        steps = [
            FleetStep(
                index=index + 1,
                match=self.spec.steps[index].match if self.spec.steps else {},
                members=len(names),
                in_sync=sum(
                    _phase(self.statuses.get(n)) == SharedPhase.IN_SYNC.value for n in names
                ),
                state=state,
                message=(why or "")[:1024],
            )
            for index, (names, (why, state)) in enumerate(zip(self.steps, gates, strict=True))
        ]
        attention = [
            FleetAttention(
                member=name.rpartition("/")[2],
                phase=_phase(self.statuses.get(name)),
                reason=_reason(self.statuses.get(name)),
                message=_message(self.statuses.get(name))[:1024],
            )
            for name in self._failing()
        ][:MAX_FLEET_LIST]
        halt = self._halt()
        paused = next(
            (
                self._paused(i)
                for i, (_, state) in enumerate(gates)
                if state == "Paused" and self._later_waiting(i)
            ),
            None,
        )
        resume: str | None
        if halt is not None:
            phase, message, resume = "Halted", halt[1], halt[2]
        elif paused is not None:
            phase, message, resume = "Paused", paused[0], paused[1]
        elif any(not p.approved for p in listed):
            waits = sum(1 for p in listed if not p.approved)
            phase, message, resume = (
                "AwaitingApproval",
                f"{waits} distinct plan(s) wait for an approval: seshat approve {self.key}",
                None,
            )
        elif self.names and phases.get(SharedPhase.IN_SYNC.value, 0) == len(self.names):
            phase, message, resume = "InSync", "every member is InSync", None
        else:
            in_sync = phases.get(SharedPhase.IN_SYNC.value, 0)
            phase, resume = "Progressing", None
            message = f"{in_sync} of {len(self.names)} members InSync"
        return FleetStatus(
            phase=phase,
            message=message[:1024],
            conditions=fleet_conditions(phase, message, self.now(), previous),
            members=len(self.names),
            phases=dict(sorted(phases.items())),
            distinct_plans=len(plans),
            plans=listed,
            steps=steps,
            attention=attention,
            resume=resume,
            left=[n.rpartition("/")[2] for n in left][:MAX_FLEET_LIST],
        )

    def _later_waiting(self, index: int) -> bool:
        """Whether a member of a step after ``index`` has a plan that waits."""
        later = [n for names in self.steps[index + 1 :] for n in names]
        return any(_phase(self.statuses.get(n)) not in _DONE for n in later)


class Fleets:
    """Every fleet of a pass: the step each member is reconciled in, its gate, and what the
    pass stages for each fleet when it ends (its status, the members that left it)."""

    def __init__(
        self,
        repository: Repository,
        previous: Callable[[LoadedResource], Status | None],
        now: Callable[[], datetime],
    ) -> None:
        self.repository = repository
        self.rollouts: dict[tuple[str, str], Rollout] = {}
        for loaded in repository.resources:
            if not isinstance(loaded.resource, DatabaseFleet):
                continue
            meta = loaded.resource.metadata
            members = repository.members(meta.namespace, meta.name)
            self.rollouts[(meta.namespace, meta.name)] = Rollout(loaded, members, previous, now)

    def rollout(self, loaded: LoadedResource) -> Rollout | None:
        member = loaded.member
        if member is None:
            return None
        return self.rollouts.get((loaded.key.namespace, member.fleet))

    def round_of(self, loaded: LoadedResource) -> int:
        """The round of the pass a resource is reconciled in: its step (0 otherwise)."""
        rollout = self.rollout(loaded)
        return (rollout.step_of.get(loaded.key.name) or 0) if rollout is not None else 0

    def gate(self, loaded: LoadedResource) -> _MemberGate | None:
        rollout = self.rollout(loaded)
        return _MemberGate(rollout, loaded.key.name) if rollout is not None else None

    def record(self, loaded: LoadedResource, status: Status) -> None:
        rollout = self.rollout(loaded)
        if rollout is not None:
            rollout.record(loaded.key.name, status)

    def finish(
        self, branch: StatusBranch, batch: Batch, log: Callable[[str], None]
    ) -> dict[str, FleetStatus]:
        """Stage each fleet's status, and mark the status of each member that left it."""
        found: dict[str, FleetStatus] = {}
        for (namespace, name), rollout in sorted(self.rollouts.items()):
            complete = not any(
                p.resource == ResourceKey("DatabaseFleet", namespace, name)
                for p in self.repository.problems
            )
            left = _left(branch, batch, rollout, log) if complete else []
            path = status_path(namespace, name)
            before = read_fleet_status(branch.read(path))
            status = rollout.status(left, before.conditions if before is not None else ())
            found[rollout.key] = status
            fleet_phases(namespace, name, status.phases)
            ref = ResourceRef(
                kind="DatabaseFleet",
                namespace=namespace,
                name=name,
                uid=str(rollout.fleet.metadata.uid),
            )
            batch.stage(
                Change(
                    resource=f"DatabaseFleet {rollout.key}",
                    phase=status.phase,
                    before=before.phase if before is not None else None,
                    after=status.phase,
                    files={path: fleet_status_bytes(ref, status)},
                )
            )
        return found


class _MemberGate:
    def __init__(self, rollout: Rollout, name: str) -> None:
        self.rollout, self.name = rollout, name

    def enter(self) -> str | None:
        return self.rollout.enter(self.name)

    def leave(self) -> None:
        self.rollout.leave(self.name)


def _left(
    branch: StatusBranch, batch: Batch, rollout: Rollout, log: Callable[[str], None]
) -> list[str]:
    """The members whose status files are still under the fleet's folder but who are no
    longer listed: each status is marked Suspended/LeftFleet once (never their database:
    nothing runs for them any more)."""
    namespace, fleet = rollout.fleet.metadata.namespace, rollout.fleet.metadata.name
    listed = set(rollout.names)
    left: list[str] = []
    for path in branch.files(f"status/{namespace}/{fleet}"):
        member = path.rpartition("/")[2].removesuffix(".yaml")
        name = f"{fleet}/{member}"
        if name in listed or path != status_path(namespace, name):
            continue
        left.append(name)
        data = branch.read(path)
        try:
            document = read_documents(data or b"")[0].data
            assert isinstance(document, dict)
            ref = ResourceRef.model_validate(document["resource"])
        except (FileError, IndexError, KeyError, ValueError, AssertionError):
            continue
        previous = read_status(data or b"", ref.kind)
        if previous is None or _reason(previous) == Reason.LEFT_FLEET.value:
            continue
        message = (
            f"{namespace}/{name} is no longer a member of fleet {namespace}/{fleet}: it is not "
            "reconciled, and nothing was done to its database"
        )
        status = previous.model_copy(
            update={
                "phase": type(previous.phase)(SharedPhase.SUSPENDED.value),
                "conditions": summary_conditions(
                    SharedPhase.SUSPENDED.value,
                    Reason.LEFT_FLEET.value,
                    message,
                    rollout.now(),
                    previous.conditions,
                ),
            }
        )
        log(f"{namespace}/{name}: left fleet {namespace}/{fleet}")
        batch.stage(
            status_change(
                f"{ref.kind} {namespace}/{name}",
                previous,
                status,
                {path: status_bytes(ref, status)},
            )
        )
    return left
