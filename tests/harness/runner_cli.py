"""Running ``seshat-runner`` as a user would, and checking what it prints for secrets.

Every invocation goes through :class:`RunnerCLI`, which records stdout and stderr; the
fixture that hands it out fails the test if any recorded output contains a secret it was
told about, in raw, JSON-escaped or URL-escaped spelling.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, quote_plus

from .forkserver import servers
from .secret_scan import scan_bytes
from .seshat_cli import FORK

RUNNER = [sys.executable, "-c", "from runner.cli import main; main()"]
SCRIPT = str(Path(sys.executable).parent / "seshat-runner")


@dataclass
class RunnerCLI:
    secrets: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def __call__(
        self, *args: str, env: dict[str, str] | None = None, seed: str = "0", timeout: int = 120
    ) -> subprocess.CompletedProcess[str]:
        environment = {**os.environ, "PYTHONHASHSEED": seed, **(env or {})}
        # Forked from a runner that imported everything once (harness/forkserver.py), or,
        # with SESHAT_TEST_FORK=0 or an unusual environment, started afresh.
        argv = [SCRIPT, *args]
        forked = (
            servers.run("seshat-runner", argv, env=environment, cwd=Path.cwd(), timeout=timeout)
            if FORK
            else None
        )
        if forked is None:
            result = subprocess.run(
                [*RUNNER, *args], capture_output=True, text=True, env=environment, timeout=timeout
            )
        else:
            for output in (forked.stdout, forked.stderr):
                scan_bytes(output, f"the output of {argv}")
            result = subprocess.CompletedProcess(
                argv, forked.returncode, forked.stdout, forked.stderr
            )
        self.outputs.append(result.stdout + result.stderr)
        return result

    def leaks(self) -> list[str]:
        spellings = set()
        for secret in self.secrets:
            spellings |= {
                secret,
                json.dumps(secret)[1:-1],
                quote(secret, safe=""),
                quote_plus(secret),
            }
        return [s for s in sorted(spellings) for out in self.outputs if s in out]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
