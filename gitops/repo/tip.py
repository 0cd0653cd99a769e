"""The remote branch's tip, looked at cheaply: ``git ls-remote``, no fetch, no object.

``seshat run`` asks every ``--poll`` seconds (and at once when a webhook wakes it) and fetches
only when the answer differs from the revision its last pass read.
"""

from __future__ import annotations

import os
import re
import subprocess

from runner.errors import CanNotRunError

__all__ = ["LS_REMOTE_TIMEOUT", "complaint", "remote_tip"]

LS_REMOTE_TIMEOUT = 30.0
_LINE = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})\t(\S+)$")
_USERINFO = re.compile(r"(?<=://)[^/@\s']+@")


def remote_tip(source: str, branch: str, timeout: float = LS_REMOTE_TIMEOUT) -> str | None:
    """The commit ``refs/heads/<branch>`` of ``source`` (a path or URL) names; None when
    there is no such branch. Raises :class:`CanNotRunError` when the remote cannot be read
    (Git's last fatal line, without the user and password of a URL that has them)."""
    ref = f"refs/heads/{branch}"
    env = os.environ | {"GIT_TERMINAL_PROMPT": "0"}  # never wait for a password
    try:
        done = subprocess.run(
            ["git", "ls-remote", "--quiet", source, ref],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise CanNotRunError(f"git ls-remote did not answer within {timeout:g} s") from None
    except OSError as error:
        raise CanNotRunError(f"git ls-remote could not start: {error.strerror}") from None
    if done.returncode != 0:
        said = complaint(done.stderr) or f"exit {done.returncode}"
        raise CanNotRunError(f"cannot look at branch {branch}: {said}")
    for line in done.stdout.splitlines():
        found = _LINE.match(line)
        if found is not None and found.group(2) == ref:
            return found.group(1)
    return None


def complaint(stderr: str) -> str:
    """What Git's ``stderr`` says went wrong, in one line: its last ``fatal:`` or ``error:``
    line (the lines after it are hints), else its last line; a URL's user and password are
    left out."""
    # GitPython quotes the stream: "stderr: 'fatal: ...", a last line of "'".
    lines = [x.strip().removeprefix("stderr: '").strip() for x in stderr.splitlines()]
    lines = [x for x in lines if x and x != "'"]
    fatal = [x for x in lines if x.startswith(("fatal:", "error:"))]
    return _USERINFO.sub("***@", (fatal or lines)[-1]) if lines else ""
