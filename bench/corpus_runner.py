"""Calling ``seshat-runner`` as a user would: a process of its own per call, with a clean env.

By default each call is forked from a server that imported the runner once, one server per
hash seed (``tests/harness/forkserver.py`` says what a forked call keeps and changes: its own
process, environment, folder, streams and exit status; the imports already done). About a
third of a second of CPU per call is importing, and the corpus makes four calls per case.
``Runner(fork=False)`` (``bench/corpus.py --no-fork``) starts the console script every time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "PlanOutcome", "RunOutcome", "Runner", "default_runner"]

ROOT = Path(__file__).resolve().parent.parent


def default_runner() -> Path:
    """``seshat-runner`` next to this interpreter (the venv), else the repository's venv."""
    beside = Path(sys.executable).parent / "seshat-runner"
    return beside if beside.exists() else ROOT / ".venv" / "bin" / "seshat-runner"


@dataclass
class RunOutcome:
    """One runner process: exit status, output, wall time."""

    rc: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def error_text(self) -> str:
        """The runner's message: the last non-empty stderr line, without the program prefix."""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f}s"
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        if not lines:
            return f"exit {self.rc} without a message"
        text = lines[-1]
        if text.startswith("seshat-runner: "):
            text = text.removeprefix("seshat-runner: ")
        elif len(lines) > 1:  # a traceback: name the exception
            text = "crashed: " + text
        return text


@dataclass
class PlanOutcome(RunOutcome):
    """A ``schema plan`` run: the plan bytes and document (exit 0) or the refusal (exit 1)."""

    raw: bytes = b""
    document: dict[str, Any] | None = None
    refusal_code: str | None = None
    refusal_message: str | None = None
    statements: list[dict[str, Any]] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """What the plan said, in one line (for failure messages)."""
        if self.rc == 0:
            return f"{len(self.statements)} statements"
        if self.rc == 1:
            return f"refused {self.refusal_code}: {self.refusal_message}"
        return f"exit {self.rc}: {self.error_text}"

    def same_as(self, other: PlanOutcome) -> bool | None:
        """Byte-identical plans (or refusals)? ``None`` when neither could run (exit 2)."""
        if self.rc != other.rc:
            return False
        if self.rc == 0:
            return self.raw == other.raw
        if self.rc == 1:
            return self.stdout == other.stdout
        return None


class Runner:
    """Invokes one ``seshat-runner`` binary with a per-call environment and timeout."""

    def __init__(self, binary: Path, timeout: float = 240.0, *, fork: bool = True) -> None:
        self.binary = binary
        self.timeout = timeout
        self.fork = fork
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "PYTHONHASH"))}
        base.pop("MYSQL_PWD", None)
        self.base_env = base

    def stop(self) -> None:
        """End the fork servers this runner started, if any."""
        if "harness.forkserver" in sys.modules:
            sys.modules["harness.forkserver"].servers.stop()

    def run(self, args: list[str], *, env: dict[str, str] | None = None) -> RunOutcome:
        """Run the binary; on timeout SIGTERM it (it drops its scratch databases), then kill."""
        merged = {**self.base_env, **(env or {})}
        start = time.monotonic()
        if self.fork and "PYTHONHASHSEED" in merged and self.binary == default_runner():
            forked = _forked(self.binary, args, merged, self.timeout)
            if forked is not None:
                rc, out, err, timed_out = forked
                return RunOutcome(rc, out, err, time.monotonic() - start, timed_out)
        process = subprocess.Popen(
            [str(self.binary), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=merged,
            cwd=ROOT,
        )
        try:
            out, err = process.communicate(timeout=self.timeout)
            return RunOutcome(process.returncode, out, err, time.monotonic() - start)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            try:
                out, err = process.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                out, err = process.communicate()
            return RunOutcome(process.returncode, out, err, time.monotonic() - start, True)

    def plan(self, url: str, desired: Path, output: Path, *, allow_destructive: bool,
             seed: int, env: dict[str, str] | None = None,
             extra: list[str] | None = None, cold: bool = False,
             skip_drops: bool = False) -> PlanOutcome:  # fmt: skip
        """``schema plan --format json --output FILE`` with ``PYTHONHASHSEED=seed`` (and
        the case's ``extra`` arguments); ``cold``: with ``--no-cache`` (nothing read from or
        written to the planning cache), else with the cache a controller's runner keeps;
        ``skip_drops``: with ``--skip-drops`` (sqldef's ``enable_drop: false``)."""
        args = ["schema", "plan", "--url", url, "--desired", str(desired), "--format", "json"]
        args += ["--output", str(output), *(extra or [])]
        if allow_destructive:
            args.append("--allow-destructive")
        if skip_drops:
            args.append("--skip-drops")
        if cold:
            args.append("--no-cache")
        output.unlink(missing_ok=True)
        run = self.run(args, env={**(env or {}), "PYTHONHASHSEED": str(seed)})
        outcome = PlanOutcome(run.rc, run.stdout, run.stderr, run.seconds, run.timed_out)
        if run.rc == 0 and not run.timed_out:
            try:
                outcome.raw = output.read_bytes()
                outcome.document = json.loads(outcome.raw)
                outcome.statements = list(outcome.document.get("statements") or [])
            except (OSError, ValueError) as error:
                outcome.rc = 2
                outcome.stderr += f"\nseshat-runner: plan exited 0 without a readable plan: {error}"
        elif run.rc == 1 and not run.timed_out:
            try:
                refusal = json.loads(run.stdout)["refusal"]
                outcome.refusal_code = str(refusal.get("code"))
                outcome.refusal_message = str(refusal.get("message"))
            except (ValueError, KeyError, TypeError):
                outcome.refusal_code = "unreadable"
                outcome.refusal_message = run.stdout.strip()[:300]
        elif run.timed_out and run.rc in (0, 1):
            outcome.rc = 2
        return outcome

    def apply(self, url: str, plan: Path, *, env: dict[str, str] | None = None) -> RunOutcome:
        """``schema apply --plan FILE`` (hash seed 1: an Apply runs the plan's statements in
        their order, whatever the seed)."""
        env = {"PYTHONHASHSEED": "1", **(env or {})}
        return self.run(["schema", "apply", "--url", url, "--plan", str(plan)], env=env)


def _forked(
    binary: Path, args: list[str], env: dict[str, str], timeout: float
) -> tuple[int, str, str, bool] | None:
    """``binary args`` forked from the runner's fork server for ``env``'s hash seed; ``None``
    when it must be a real process (a seed no server can take)."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from harness.forkserver import servers

    argv = [str(binary), *args]
    try:
        done = servers.run("seshat-runner", argv, env=env, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        return 2, "", f"timed out: {expired}", True
    if done is None:
        return None
    return done.returncode, done.stdout, done.stderr, False
