"""The local runners a controller start began: recorded while they run, found after a crash.

A local runner dies with its controller (the executor starts it under
``setpriv --pdeathsig KILL``), but not always: the controller may die between the fork and
the moment the signal is armed, or ``setpriv`` may be missing. So each runner is also
*recorded* before the controller waits for it: a small file in ``operations/runners/``
naming its pid, the process's start time (``/proc/<pid>/stat``, so a reused pid is never
taken for it), the controller start (lease holder) that began it, the resource, and the
files it reads (its input, an Apply's plan). The record and those files are removed when
the runner ends and its outcome is in the controller's hands.

After a crash, a new start reads the records: a runner still alive is *followed* (waited
for) before the realm's lease is taken over and anything else is dispatched there
(:meth:`RunnerBook.follow`); the records and files of runners that are gone are removed
(:meth:`RunnerBook.sweep`). A record is the controller's own working state, like the state
file: it is never read from anywhere a person or a runner writes.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["RunnerBook", "RunnerRecord", "process_start", "same_controller"]


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if it is gone or a
    zombie: with the pid, what tells a process from a later one given the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])  # field 22 of proc(5), counted after the command's name


def same_controller(holder: str, other: str) -> bool:
    """Whether two lease holders are starts of one controller (host and work folder):
    ``host:/work#start``; a holder written before starts had epochs has no ``#start``."""
    return holder.split("#", 1)[0] == other.split("#", 1)[0]


@dataclass(frozen=True)
class RunnerRecord:
    op_id: str  # the id of its first operation
    pid: int
    started: int  # process_start(pid) when it was recorded
    holder: str  # the controller start that began it
    resource: str  # "DatabaseSchema ns/name", or "" when it names none
    operations: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # what it reads, removed when it ends

    def alive(self) -> bool:
        return process_start(self.pid) == self.started


class RunnerBook:
    """The records of one work folder's local runners (``folder``), for the controller
    start ``holder``."""

    def __init__(self, folder: Path, holder: str) -> None:
        self.folder, self.holder = folder, holder

    def _path(self, op_id: str) -> Path:
        return self.folder / f"{op_id}.json"

    def started(
        self, op_id: str, pid: int, resource: str, operations: list[str], files: Iterable[Path]
    ) -> None:
        """Record the runner ``pid`` just started (written whole, then renamed in place)."""
        started = process_start(pid)
        if started is None:
            return  # it is already gone: nothing will ever need to find it
        record = RunnerRecord(
            op_id, pid, started, self.holder, resource, operations, [str(f) for f in files]
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(op_id)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(asdict(record), sort_keys=True), encoding="utf-8")
        partial.replace(path)

    def ended(self, op_id: str) -> None:
        """The runner ``op_id`` ended and its outcome was read: its record and the files it
        read are removed."""
        record = self._read(self._path(op_id))
        if record is not None:
            _remove(Path(f) for f in record.files)
        self._path(op_id).unlink(missing_ok=True)

    def records(self) -> list[RunnerRecord]:
        if not self.folder.is_dir():
            return []
        found = (self._read(p) for p in sorted(self.folder.glob("*.json")))
        return [r for r in found if r is not None]

    def live_of_earlier_starts(self) -> list[RunnerRecord]:
        """The runners of earlier starts of this controller that still run."""
        return [
            r
            for r in self.records()
            if r.holder != self.holder and same_controller(r.holder, self.holder) and r.alive()
        ]

    def sweep(self, leftovers: Iterable[Path], log: Callable[[str], None]) -> None:
        """Remove the records of runners that are gone (with the files they read), and every
        file of ``leftovers`` that no live runner reads: what a controller killed before it
        could clean up left behind. Called when a pass starts, when none of this start's
        runners runs."""
        keep: set[str] = set()
        for record in self.records():
            if record.alive():
                keep.update(record.files)
                continue
            _remove(Path(f) for f in record.files)
            self._path(record.op_id).unlink(missing_ok=True)
            log(f"runner {record.op_id} (pid {record.pid}) is gone: its record and files removed")
        for path in leftovers:
            if str(path) not in keep and path.is_file():
                path.unlink(missing_ok=True)
                log(f"removed {path}: a runner's input no runner reads any more")

    def follow(
        self,
        records: list[RunnerRecord],
        deadline: float,
        log: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[float], None] = time.sleep,
    ) -> list[RunnerRecord]:
        """Wait for the runners ``records`` to end, up to ``deadline`` seconds; those still
        running then (none: all were followed to their end)."""
        until = clock() + deadline
        waiting = [r for r in records if r.alive()]
        for record in waiting:
            log(f"following runner {record.op_id} (pid {record.pid}) of an earlier start")
        while waiting and clock() < until:
            pause(0.1)
            waiting = [r for r in waiting if r.alive()]
        for record in records:
            if record not in waiting:
                self.ended(record.op_id)
        return waiting

    @staticmethod
    def _read(path: Path) -> RunnerRecord | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return RunnerRecord(**data)
        except (OSError, ValueError, TypeError):
            return None


def _remove(paths: Iterable[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
