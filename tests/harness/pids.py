"""Look at and signal processes by PID, safely.

Why separate: both the harness (in pytest) and the watchdog (a separate
process, see :mod:`harness.watchdog`) need these, and the watchdog must import
nothing but the standard library.

Safety rule: a PID is only signalled if its command line still contains a
string that identifies the process we started (usually its data directory),
because PIDs are reused and the machine runs a system PostgreSQL and MariaDB
that must never be touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


class StubbornProcessError(RuntimeError):
    """A process survived SIGKILL (should not happen; reported, never ignored)."""


def pid_alive(pid: int) -> bool:
    """Tell whether *pid* is a live process (zombies count as dead).

    Why not just ``os.kill(pid, 0)``: a daemonised server (the postmaster) is
    re-parented to PID 1, which in containers may reap it late or never, so
    after it exits it can linger as a zombie that ``kill(0)`` still reports.
    """
    if Path("/proc/self/stat").exists():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return False
        state = stat.rsplit(")", 1)[-1].split()[0]
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_cmdline(pid: int) -> str:
    """The command line of *pid* joined by spaces, or "" if it is gone or unreadable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def wait_for_pid_exit(pid: int, timeout: float) -> bool:
    """Poll until *pid* is dead; True if it died within *timeout* seconds."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def terminate_pid(
    pid: int, *, expect_in_cmdline: str, sig: signal.Signals = signal.SIGTERM, timeout: float = 10.0
) -> None:
    """Stop a process that is not our child, by PID: *sig*, wait, then SIGKILL.

    Does nothing if the PID is gone or now belongs to another program (its
    command line no longer contains *expect_in_cmdline*).
    """
    if not pid_alive(pid) or expect_in_cmdline not in pid_cmdline(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    if wait_for_pid_exit(pid, timeout):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if not wait_for_pid_exit(pid, 5.0):
        raise StubbornProcessError(f"process {pid} ({expect_in_cmdline}) survived SIGKILL")


def kill_processes_in(folder: Path) -> int:
    """SIGKILL every process whose working directory is ``folder`` (the runners a test
    caused: the local executor starts each one there); how many."""
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) == folder.resolve():
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            continue
    return killed
