"""Executors run one runner operation and return its framed result, or why there is none.

The control plane asks the executor to :meth:`~Executor.bind` each URL reference of a
declaration (how the runner will find the URL, and the environment that carries it: a value,
or in Kubernetes mode a Secret key the kubelet resolves, so the control plane never reads
it), then hands it an :class:`~runner.protocol.messages.OperationInput` and that
environment (the one credential). The local executor starts
``seshat-runner op --input FILE`` as a subprocess with *only* those variables plus a minimal
base (``PATH``, locale, ``HOME``), so a Git, forge or Kubernetes credential in the control
plane's environment never reaches the runner; reads the last valid frame of its stdout
(bounded); and enforces a deadline by killing the runner's process group. The runner dies
with its controller (``setpriv --pdeathsig KILL``) and is recorded while it runs
(:mod:`gitops.execution.runners`), so that a restarted controller finds one that did not.

``Outcome.kind``:

* ``done``: a frame with a result (exit 0);
* ``refused``: a frame with ``plan_refused`` (exit 1);
* ``failed``: a frame with another error code (exit 2);
* ``lost``: no valid frame (killed, crashed, deadline exceeded, output damaged). For an
  Apply this is an *uncertain* outcome: the caller must not start it again, and settles it
  by observing and planning afresh.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from gitops.execution.forks import ForkUncertain, RunnerForks
from gitops.execution.forks import enabled as forks_enabled
from gitops.execution.forks import forks as shared_forks
from gitops.execution.runners import RunnerBook
from gitops.resources.approvals import ResourceRef
from gitops.resources.database import UrlReference
from runner.protocol.frame import Found, find_frames, find_last_frame
from runner.protocol.messages import BatchInput, OperationInput, OperationResult
from runner.protocol.messages import UrlReference as RunnerUrl
from runner.protocol.results import ErrorCode

__all__ = [
    "Asked",
    "CredentialUnavailable",
    "Dispatch",
    "EnvValue",
    "Executor",
    "LocalExecutor",
    "Outcome",
    "RunOptions",
    "SecretEnv",
    "Started",
    "input_document",
    "outcome_from_output",
    "outcomes_from_output",
]

_BASE_ENVIRONMENT = (
    "PATH",
    "LANG",
    "LC_ALL",
    "HOME",
    "TMPDIR",
    "PGPASSFILE",
    "PGSERVICEFILE",
    # Where the runner's own code is, when it is not the installed one (a checkout).
    "PYTHONPATH",
    # Where sandboxes come from (docs/engine.md): the runner's cache, the user a private
    # server runs as, PostgreSQL binaries in an unusual place.
    "SESHAT_CACHE_DIR",
    "SESHAT_SANDBOX_USER",
    "SESHAT_PG_BINDIR",
    "SESHAT_MARIADB_BINDIR",
)
# Where a runner that reads an artifact finds its registry credential (docs/security.md).
_REGISTRY_ENVIRONMENT = (
    "DOCKER_CONFIG",
    "SESHAT_REGISTRY_TOKEN",
    "SESHAT_REGISTRY_USERNAME",
    "SESHAT_REGISTRY_PASSWORD",
)
_MAX_OUTPUT = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: Literal["done", "refused", "failed", "lost"]
    result: OperationResult | None
    detail: str
    exit_code: int | None


@dataclass(frozen=True, slots=True)
class SecretEnv:
    """An environment variable the runner's pod takes from a key of a Secret in the
    resource's namespace (Kubernetes mode); its value never passes through the control
    plane."""

    secret: str
    key: str


EnvValue = str | SecretEnv


class Asked(Protocol):
    """What a frame is matched to: the operation and its id."""

    @property
    def operation(self) -> str: ...

    @property
    def id(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Dispatch:
    """What makes a dispatched run (an Apply, a migration run) recognisable as the one this
    controller started, when a restarted controller looks for it (:meth:`Executor.adopt`):
    the plan it runs, and a nonce drawn for this dispatch alone and kept in the dispatch
    record of the controller's state file. The nonce is never published (not on the status
    branch, where the operation id is): whoever can create a Job labelled with that id cannot
    give it the nonce before the controller's own Job exists."""

    plan_id: str
    nonce: str | None  # None: not known (the state file that held it was lost)

    def __repr__(self) -> str:
        return f"Dispatch(plan_id={self.plan_id!r}, nonce=<hidden>)"


@dataclass(frozen=True, slots=True)
class Started:
    """An operation a previous controller started: its name and id, and, to tell it from
    an impostor, whose it is and what its dispatch record says."""

    operation: str
    id: str
    resource: ResourceRef | None = None
    dispatch: Dispatch | None = None


@dataclass(frozen=True)
class RunOptions:
    """How one runner invocation runs, whatever the executor: the one credential, the
    deadline for all its operations, and where and for whom it runs."""

    environment: Mapping[str, EnvValue]
    """The variables that carry the one credential (:meth:`Executor.bind`)."""
    deadline: float
    """Seconds for all the operations of the invocation together."""
    namespace: str = "default"
    """The Kubernetes namespace of the resource (where a Job runs)."""
    resource: ResourceRef | None = None
    """Whose operations they are, and ``dispatch`` an Apply's dispatch record: the executor
    keeps them (a Job's labels, annotations and owner; a local runner's record), so that a
    restarted controller can find the run again and know it for its own."""
    dispatch: Dispatch | None = None


class CredentialUnavailable(Exception):
    """This executor cannot hand the runner a URL given this way (a configuration error)."""


class Executor(ABC):
    """Runs operations in a runner: a subprocess, or a Kubernetes Job."""

    local_files: bool
    """Whether the runner sees the controller's filesystem (an ``oci-layout`` folder)."""
    adopts: bool = False
    """Whether an operation outlives the controller that started it, so that a restarted
    controller can follow it (:meth:`adopt`): Kubernetes Jobs do."""

    @abstractmethod
    def bind(
        self, reference: UrlReference, slot: Literal["url", "dev_url"]
    ) -> tuple[RunnerUrl, dict[str, EnvValue]]:
        """How the runner finds the URL ``reference`` names, and the environment carrying
        it; raises :class:`CredentialUnavailable`."""

    @abstractmethod
    def run_batch(self, requests: Sequence[OperationInput], options: RunOptions) -> list[Outcome]:
        """Run ``requests`` in one runner invocation with one credential
        (``options.environment``), in order, within ``options.deadline`` seconds in all; one
        outcome per request."""

    def run(
        self,
        request: OperationInput,
        environment: Mapping[str, EnvValue],
        deadline: float,
        *,
        namespace: str = "default",
        resource: ResourceRef | None = None,
        dispatch: Dispatch | None = None,
    ) -> Outcome:
        """Run the one operation ``request``."""
        return self.run_batch(
            [request], RunOptions(environment, deadline, namespace, resource, dispatch)
        )[0]

    def adopt(self, started: Started, deadline: float, *, namespace: str) -> Outcome | None:
        """Follow ``started``, an operation a previous controller started and did not see
        end, to its outcome, if it still runs or its result is still there (Kubernetes: its
        Job, known by its identity, never by a label alone); None when there is nothing to
        follow. A local runner process is its controller's child: there is nothing to adopt
        after a restart."""
        return None


def outcomes_from_output(
    stdout: bytes, requests: Sequence[Asked], exit_code: int | None
) -> list[Outcome]:
    """The outcome of each of ``requests`` that the runner's output (its stdout, or a pod
    log) states: the last valid frame answering that operation, or ``lost`` without one."""
    output = stdout[-_MAX_OUTPUT:]
    answers: dict[tuple[str, str], OperationResult] = {}
    for frame in find_frames(output):
        try:
            answer = OperationResult.model_validate(frame.payload)
        except ValueError:
            continue  # a frame, but not an answer: as if it were damaged
        answers[(answer.operation, answer.id)] = answer
    outcomes = []
    for request in requests:
        result = answers.get((request.operation, request.id))
        if result is None:
            outcomes.append(Outcome("lost", None, _why_lost(output, exit_code), exit_code))
        elif result.error is None:
            outcomes.append(Outcome("done", result, "", exit_code))
        else:
            code = result.error.code
            kind: Literal["refused", "failed"] = (
                "refused" if code is ErrorCode.PLAN_REFUSED else "failed"
            )
            outcomes.append(Outcome(kind, result, f"{code}: {result.error.message}", exit_code))
    return outcomes


def outcome_from_output(stdout: bytes, request: OperationInput, exit_code: int | None) -> Outcome:
    """The outcome of the one operation ``request`` (see :func:`outcomes_from_output`)."""
    return outcomes_from_output(stdout, [request], exit_code)[0]


def _why_lost(output: bytes, exit_code: int | None) -> str:
    frame = find_last_frame(output)
    if isinstance(frame, Found):
        return f"no frame answers this operation (exit {exit_code})"
    return f"no result ({frame.status.value}: {frame.detail}; exit {exit_code})"


def input_document(requests: Sequence[OperationInput]) -> str:
    """The runner's input: one operation as itself, several as a :class:`BatchInput`."""
    if len(requests) == 1:
        return requests[0].model_dump_json(exclude_none=True)
    return BatchInput(batch=list(requests)).model_dump_json(exclude_none=True)


def _runner_command() -> list[str]:
    beside = Path(sys.executable).parent / "seshat-runner"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "runner.cli"]


def _dies_with_parent() -> list[str]:
    """The prefix that makes the runner die with the controller that started it (Linux's
    parent-death signal, armed by ``setpriv`` before it executes the runner; kept across
    that exec). Without ``setpriv`` there is none, and a runner that outlives its
    controller is found from its record instead."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


class LocalExecutor(Executor):
    """Runs each operation as a ``seshat-runner`` child process."""

    local_files = True

    def __init__(
        self,
        work_dir: Path,
        command: Sequence[str] | None = None,
        cache_dir: Path | None = None,
        book: RunnerBook | None = None,
        forks: RunnerForks | None = None,
    ) -> None:
        self.work_dir = work_dir
        self.command = list(command) if command is not None else _runner_command()
        # The installed runner is forked from a fork server (gitops.execution.forks), unless
        # SESHAT_RUNNER_FORKS=0; another command (a test's, a wrapper) is started afresh.
        if forks is None and command is None and forks_enabled():
            forks = shared_forks
        self.forks = forks
        self.book = book  # where running runners are recorded (None: they are not)
        # The runner's cache (sandbox templates), kept beside the operations, unless the
        # controller's environment names one.
        self.cache_dir = cache_dir or work_dir.parent / "runner-cache"

    def bind(
        self, reference: UrlReference, slot: Literal["url", "dev_url"]
    ) -> tuple[RunnerUrl, dict[str, EnvValue]]:
        if reference.from_env is not None:
            value = os.environ.get(reference.from_env)
            return RunnerUrl(from_env=reference.from_env), (
                {reference.from_env: value} if value else {}
            )
        if reference.from_file is not None:
            return RunnerUrl(from_file=reference.from_file), {}
        raise CredentialUnavailable(
            "secretKeyRef needs the Kubernetes executor (seshat run --executor kubernetes); "
            "the local executor takes fromEnv or fromFile"
        )

    def run_batch(self, requests: Sequence[OperationInput], options: RunOptions) -> list[Outcome]:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        child_env = {k: os.environ[k] for k in _BASE_ENVIRONMENT if k in os.environ}
        child_env.setdefault("SESHAT_CACHE_DIR", str(self.cache_dir))
        if any(r.artifact is not None for r in requests):  # the registry credential, for it
            child_env |= {k: os.environ[k] for k in _REGISTRY_ENVIRONMENT if k in os.environ}
        for name, value in options.environment.items():
            if not isinstance(value, str):
                raise CredentialUnavailable(f"{name}: a Secret key needs the Kubernetes executor")
            child_env[name] = value
        with tempfile.NamedTemporaryFile(
            "w", dir=self.work_dir, prefix=f"op-{requests[0].id}-", suffix=".json", delete=False
        ) as handle:
            handle.write(input_document(requests))
            input_path = Path(handle.name)
        try:
            return self._run(input_path, requests, child_env, options.deadline, options.resource)
        finally:
            input_path.unlink(missing_ok=True)
            if self.book is not None:
                self.book.ended(requests[0].id)

    def _run(
        self,
        input_path: Path,
        requests: Sequence[OperationInput],
        env: dict[str, str],
        deadline: float,
        resource: ResourceRef | None,
    ) -> list[Outcome]:
        argv = ["op", "--input", str(input_path)]
        try:
            forked = self.forks.fork(self.command, argv, env, self.work_dir) if self.forks else None
        except ForkUncertain as error:  # it may have run: never started again here
            return [Outcome("lost", None, str(error), None) for _ in requests]
        if forked is not None:
            self._record(forked.pid, input_path, requests, resource)
            try:
                stdout = forked.communicate(timeout=deadline)
            except subprocess.TimeoutExpired:
                forked.kill()
                return _after_deadline(forked.communicate(None), requests, deadline)
            return outcomes_from_output(stdout, requests, forked.returncode)
        process = subprocess.Popen(
            [*_dies_with_parent(), *self.command, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=self.work_dir,
            start_new_session=True,  # its own process group, so the deadline kills it all
        )
        self._record(process.pid, input_path, requests, resource)
        try:
            stdout, _ = process.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, _ = process.communicate()
            return _after_deadline(stdout, requests, deadline)
        return outcomes_from_output(stdout, requests, process.returncode)

    def _record(
        self,
        pid: int,
        input_path: Path,
        requests: Sequence[OperationInput],
        resource: ResourceRef | None,
    ) -> None:
        """Record the runner ``pid`` in the book, with the files it reads."""
        if self.book is None:
            return
        named = f"{resource.kind} {resource.namespace}/{resource.name}" if resource else ""
        reads = [input_path, *(Path(r.plan) for r in requests if r.plan)]
        self.book.started(requests[0].id, pid, named, [r.operation for r in requests], reads)


def _after_deadline(
    stdout: bytes, requests: Sequence[OperationInput], deadline: float
) -> list[Outcome]:
    """The outcomes of a runner killed at its deadline: what finished before it stands;
    the rest is lost."""
    killed = f"deadline of {deadline:g} s exceeded; killed"
    return [
        outcome if outcome.kind != "lost" else Outcome("lost", None, killed, None)
        for outcome in outcomes_from_output(stdout, requests, None)
    ]
