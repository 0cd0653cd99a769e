"""Resources of different realms reconciled side by side within one pass.

A pass hands each realm (the resources on one coordination digest) to a worker thread;
resources of one realm run one after another, so this controller never runs two operations
on one database, and realm leases keep other controllers off it. What the workers share (the
state file, the status branch, the review branch, the pass's Resolve and Verify answers) is
guarded by one lock, :class:`Books`: a worker holds it while it decides and records, and lets
go of it only while a runner works (a subprocess or a Job), which is where a pass spends its
time. So the bookkeeping stays single-threaded and simple, and the runners run in parallel.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["Books", "in_parallel"]

T = TypeVar("T")


class Books:
    """The lock over a pass's shared records; see the module's documentation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._keys: dict[Hashable, threading.Lock] = {}

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the books (a worker's whole turn with one resource)."""
        self._lock.acquire()
        self._owner = threading.get_ident()
        try:
            yield
        finally:
            self._owner = None
            self._lock.release()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Let other workers use the books while this one waits for a runner; a thread that
        does not hold them (a caller outside a pass) waits as it is."""
        if self._owner != threading.get_ident():
            yield
            return
        self._owner = None
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()
            self._owner = threading.get_ident()

    @contextmanager
    def one_at_a_time(self, key: Hashable) -> Iterator[None]:
        """Only one worker at a time does the work named ``key`` (Resolve of one reference,
        say), so a second one finds the first one's answer instead of asking again."""
        lock = self._keys.setdefault(key, threading.Lock())
        with self.released():
            lock.acquire()
        try:
            yield
        finally:
            lock.release()


def in_parallel(
    groups: Sequence[Sequence[T]],
    work: Callable[[T], None],
    workers: int,
    tick: Callable[[], None] | None = None,
    every: float = 0.5,
) -> None:
    """``work`` on every item, the items of one group in order, groups on up to ``workers``
    threads. ``work`` handles its own errors; one raised here stops nothing else and is
    raised again once every group is done. ``tick`` is called every ``every`` seconds
    while threads work (a held verdict's commit, say)."""

    def one_group(items: Sequence[T]) -> None:
        for item in items:
            work(item)

    if workers <= 1 or len(groups) <= 1:
        for group in groups:
            one_group(group)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="seshat-pass") as pool:
        futures = [pool.submit(one_group, group) for group in groups]
        while tick is not None and wait(futures, timeout=every).not_done:
            tick()
    for future in futures:
        future.result()
