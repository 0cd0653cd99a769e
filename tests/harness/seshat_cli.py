"""Running the ``seshat`` control-plane CLI as a user would, checking nothing secret leaks.

Each call is a process of its own with the call's environment, folder and arguments; by
default it is forked from a server that imported the CLI once (:mod:`harness.forkserver`,
which says what that keeps and what it changes). ``SESHAT_TEST_FORK=0`` starts the console
script afresh for every call instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .forkserver import Forked, servers
from .secret_scan import scan_bytes

SESHAT = str(Path(sys.executable).parent / "seshat")


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


SeshatRunner = Callable[..., Run]

FORK = os.environ.get("SESHAT_TEST_FORK", "1") != "0"
"""Whether calls are forked from a fork server (:mod:`harness.forkserver`)."""


def stop_fork_servers() -> None:
    """End this worker's fork servers (the session's end)."""
    servers.stop()


def seshat_runner(home: Path) -> SeshatRunner:
    """Run ``seshat`` in a subprocess; ``secrets`` must not appear in anything it prints."""

    def run(
        *args: str | Path,
        env: dict[str, str] | None = None,
        secrets: Sequence[str] = (),
        cwd: Path | None = None,
    ) -> Run:
        environment = {
            k: v for k, v in os.environ.items() if not k.startswith(("SESHAT_", "DOCKER_"))
        }
        environment["XDG_CACHE_HOME"] = str(home / "xdg-cache")
        environment["SOURCE_DATE_EPOCH"] = "1767225600"
        environment.update(env or {})
        argv = [SESHAT, *map(str, args)]
        forked = (
            servers.run("seshat", argv, env=environment, cwd=cwd or home, timeout=120)
            if FORK
            else None
        )
        if forked is not None:
            scan_bytes(forked.stdout, f"the output of {argv}")
            scan_bytes(forked.stderr, f"the output of {argv}")
            done: Forked | subprocess.CompletedProcess[str] = forked
        else:
            done = subprocess.run(
                argv, capture_output=True, text=True, env=environment, cwd=cwd or home,
                timeout=120, check=False,
            )  # fmt: skip
        for secret in secrets:
            assert secret not in done.stdout and secret not in done.stderr
        return Run(done.returncode, done.stdout, done.stderr)

    return run
