"""``seshat-runner``: the data plane's command line (the console script's entry point).

The control plane starts a runner process for every operation or batch of them, always as
``seshat-runner op --input FILE``, so that command line is served here without the
command-line framework: the process imports only what the operation needs
(:mod:`runner.operations` and, from there, one engine). Every other command line, including
``op`` spelled otherwise or with a file click would refuse, goes to the click commands of
:mod:`runner.commands`, which parse it, explain what is wrong with it, and run ``op`` with
the same :func:`run_op`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import stat
import sys
from pathlib import Path
from typing import NoReturn

__all__ = ["main", "run_op", "start"]


def start(cache_dir: Path | None) -> None:
    """What every command does first: the cache folder (``--cache-dir``, else
    ``SESHAT_CACHE_DIR``) into ``SESHAT_CACHE_DIR``, absolute, where
    :func:`runner.engines.servers.cache_root` reads it; and SIGTERM unwinding through
    ``finally`` blocks, so scratch databases are dropped when the runner is told to stop."""
    if cache_dir is not None:
        os.environ["SESHAT_CACHE_DIR"] = str(cache_dir.absolute())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def run_op(input_path: Path) -> NoReturn:
    """Run the operation (or the batch of them) ``input_path`` describes and print a frame
    per operation as each ends; exit status 0 all done, 1 refused by policy, 2 failed (the
    first failure's). After an operation of a batch fails, the rest are not started."""
    from runner.operations import run_operations

    exit_status = 0
    for frame, status in run_operations(input_path):
        sys.stdout.write(frame)
        sys.stdout.flush()
        exit_status = exit_status or status
    sys.exit(exit_status)


def _click_takes(path: str, *, folder: bool) -> bool:
    """Whether click's ``Path`` type takes ``path`` as :mod:`runner.commands` declares it:
    the input file must exist and be no folder, the cache folder may be missing but must be
    no regular file; what exists must be readable."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return folder
    refused = stat.S_ISREG(mode) if folder else stat.S_ISDIR(mode)
    return not refused and os.access(path, os.R_OK)


def _plain_op(args: list[str]) -> Path | None:
    """The input file of ``op --input FILE`` (or ``--input=FILE``) when click would take the
    command line as it is; else None."""
    if len(args) == 3 and args[:2] == ["op", "--input"]:
        name = args[2]
    elif len(args) == 2 and args[0] == "op" and args[1].startswith("--input="):
        name = args[1].removeprefix("--input=")
    else:
        return None
    cache_dir = os.environ.get("SESHAT_CACHE_DIR")
    if not _click_takes(name, folder=False) or (
        cache_dir and not _click_takes(cache_dir, folder=True)
    ):
        return None
    return Path(name)


def _fork_server(args: list[str]) -> int | None:
    """The socket of ``serve-forks --fd N``: a local controller's runner fork server
    (:mod:`runner.forks`); a command for the controller alone, so not one of click's."""
    if len(args) == 3 and args[:2] == ["serve-forks", "--fd"] and args[2].isdigit():
        return int(args[2])
    return None


def main() -> None:
    """Entry point of the ``seshat-runner`` console script."""
    # One operation, then exit: a plan builds a few schema models (hundreds of thousands of
    # small objects, almost no cycles), which the cyclic collector's default thresholds
    # would scan again and again (a third of a warm plan's CPU time). Collect rarely instead.
    gc.freeze()
    gc.set_threshold(200_000, 100, 100)
    server = _fork_server(sys.argv[1:])
    if server is not None:
        from runner.forks import serve

        serve(server)
    try:
        input_path = _plain_op(sys.argv[1:])
        if input_path is None:
            from runner.commands import cli

            cli.main()  # click ends every run with SystemExit
        else:
            cache_dir = os.environ.get("SESHAT_CACHE_DIR")
            start(Path(cache_dir) if cache_dir else None)
            run_op(input_path)
        status: object = 0
    except SystemExit as stop:
        status = stop.code
    # `op` without click ends as click would end it: interrupted, or nobody reading stdout.
    except KeyboardInterrupt:
        print("\nAborted!", file=sys.stderr)
        status = 1
    except BrokenPipeError:
        status = 1
    if status is not None and not isinstance(status, int):
        print(status, file=sys.stderr)
        status = 1
    # Every connection, sandbox and temporary folder was closed by its own `with` block
    # before this point; what is left is freeing a process's worth of objects one by one
    # (a quarter of a second for a large schema). Flush what was written and leave.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status or 0)


if __name__ == "__main__":  # python -m runner.cli, where no console script is installed
    main()
