"""The apply journal: what a non-transactional apply did, durably, statement by statement.

MySQL commits every DDL statement on its own, so an apply that is interrupted leaves the
statements before it done and the running one in an unknown state. The journal is an
append-only JSON-lines file, flushed and fsync'd after every line:

    {"event": "begin", "plan": "sha256:...", "statements": 3}
    {"event": "started", "plan": "sha256:...", "index": 0}
    {"event": "finished", "plan": "sha256:...", "index": 0}
    ...
    {"event": "end", "plan": "sha256:...", "converged": true}   (or "failed" with "index")

A run of a plan that has a ``begin`` but neither ``end`` nor ``failed`` was interrupted:
:func:`interrupted` reads which statements finished and which one had started.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["Interrupted", "Journal", "interrupted"]


@dataclass(frozen=True, slots=True)
class Interrupted:
    """An interrupted run: statements that finished, and the one whose outcome is unknown."""

    finished: list[int] = field(default_factory=list)
    unknown: int | None = None


def interrupted(path: Path, plan: str) -> Interrupted | None:
    """The last run of ``plan`` recorded in ``path`` if it never ended, else ``None``."""
    if not path.exists():
        return None
    state: Interrupted | None = None
    started: int | None = None
    finished: list[int] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by the kill
        if not isinstance(record, dict) or record.get("plan") != plan:
            continue
        event = record.get("event")
        if event == "begin":
            state, started, finished = Interrupted(), None, []
        elif event == "started":
            started = int(record["index"])
        elif event == "finished":
            finished.append(int(record["index"]))
            started = None
        elif event in ("end", "failed"):
            state = None
            started, finished = None, []
            continue
        if event in ("begin", "started", "finished"):
            state = Interrupted(list(finished), started)
    return state


class Journal:
    """Appends records for one run of one plan (a no-op without a path)."""

    def __init__(self, path: Path | None, plan: str) -> None:
        self.plan = plan
        self.file: IO[str] | None = None
        if path is not None:
            self.file = path.open("a", encoding="utf-8")

    def write(self, event: str, **fields: Any) -> None:
        if self.file is None:
            return
        record = {"event": event, "plan": self.plan, **fields}
        self.file.write(json.dumps(record, sort_keys=True) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
