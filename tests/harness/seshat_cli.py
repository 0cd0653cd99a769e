"""Running the ``seshat`` control-plane CLI as a user would, checking nothing secret leaks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

SESHAT = str(Path(sys.executable).parent / "seshat")


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


SeshatRunner = Callable[..., Run]


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
        done = subprocess.run(
            [SESHAT, *map(str, args)],
            capture_output=True,
            text=True,
            env=environment,
            cwd=cwd or home,
            timeout=120,
            check=False,
        )
        for secret in secrets:
            assert secret not in done.stdout and secret not in done.stderr
        return Run(done.returncode, done.stdout, done.stderr)

    return run
