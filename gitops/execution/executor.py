"""Executors run one runner operation and return its framed result, or why there is none.

The control plane hands an executor an :class:`~runner.protocol.messages.OperationInput`
(the database URL named by reference, never resolved here) and the environment variables
that operation needs (the one credential). The local executor starts
``seshat-runner op --input FILE`` as a subprocess with *only* those variables plus a minimal
base (``PATH``, locale, ``HOME``), so a Git, forge or Kubernetes credential in the control
plane's environment never reaches the runner; reads the last valid frame of its stdout
(bounded); and enforces a deadline by killing the runner's process group.

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
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from runner.protocol.frame import Found, find_last_frame
from runner.protocol.messages import OperationInput, OperationResult

__all__ = ["Executor", "LocalExecutor", "Outcome"]

_BASE_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PGPASSFILE", "PGSERVICEFILE")
_MAX_OUTPUT = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: Literal["done", "refused", "failed", "lost"]
    result: OperationResult | None
    detail: str
    exit_code: int | None


class Executor(Protocol):
    def run(
        self, request: OperationInput, environment: Mapping[str, str], deadline: float
    ) -> Outcome: ...


def _runner_command() -> list[str]:
    beside = Path(sys.executable).parent / "seshat-runner"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "runner.cli"]


class LocalExecutor:
    """Runs each operation as a ``seshat-runner`` child process."""

    def __init__(self, work_dir: Path, command: Sequence[str] | None = None) -> None:
        self.work_dir = work_dir
        self.command = list(command) if command is not None else _runner_command()

    def run(
        self, request: OperationInput, environment: Mapping[str, str], deadline: float
    ) -> Outcome:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        child_env = {k: os.environ[k] for k in _BASE_ENVIRONMENT if k in os.environ}
        child_env.update(environment)
        with tempfile.NamedTemporaryFile(
            "w", dir=self.work_dir, prefix=f"op-{request.id}-", suffix=".json", delete=False
        ) as handle:
            handle.write(request.model_dump_json(exclude_none=True))
            input_path = Path(handle.name)
        try:
            return self._run(input_path, request, child_env, deadline)
        finally:
            input_path.unlink(missing_ok=True)

    def _run(
        self, input_path: Path, request: OperationInput, env: dict[str, str], deadline: float
    ) -> Outcome:
        process = subprocess.Popen(
            [*self.command, "op", "--input", str(input_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=self.work_dir,
            start_new_session=True,  # its own process group, so the deadline kills it all
        )
        try:
            stdout, _ = process.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return Outcome("lost", None, f"deadline of {deadline:g} s exceeded; killed", None)
        frame = find_last_frame(stdout[-_MAX_OUTPUT:])
        if not isinstance(frame, Found):
            return Outcome(
                "lost",
                None,
                f"no result ({frame.status.value}: {frame.detail}; exit {process.returncode})",
                process.returncode,
            )
        try:
            result = OperationResult.model_validate(frame.payload)
        except ValueError:
            return Outcome("lost", None, "the result frame is not an operation result", None)
        if result.id != request.id or result.operation != request.operation:
            return Outcome("lost", None, "the result answers another operation", None)
        if result.error is None:
            return Outcome("done", result, "", process.returncode)
        kind: Literal["refused", "failed"] = (
            "refused" if result.error.code == "plan_refused" else "failed"
        )
        return Outcome(
            kind, result, f"{result.error.code}: {result.error.message}", process.returncode
        )
