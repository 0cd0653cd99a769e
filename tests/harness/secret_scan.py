"""The suite's secret scan: every credential the harness creates, looked for in every byte
the suite wrote.

Why: Seshat's rule is that a credential appears only where the design allows (the runner's
environment), never in an output, a status file, a commit, a review text, a log or a plan.
Single tests check the outputs they look at; this scan checks everything, at the end of the
session, so an output nobody thought of cannot leak unnoticed.

What is scanned, for each credential and each fragment of it a parser might split out (the
pieces between ``@ : / ? #``, and the percent-encoded form):

- the stdout and stderr of every process the suite runs through :mod:`subprocess` (scanned
  as each process ends, see :func:`watch_processes`);
- what pytest captured from each test (printed output and log records);
- at the end, every file under the pytest temporary folder and the harness folder (status
  and review branches, state files, logs, plan files, caches), and every object of every Git
  repository there, decompressed (commits, trees and blobs of every branch).

Files a test writes on purpose with a credential in them (a client option file, say) are
declared with :func:`input_file` and skipped; the credentials' own homes (server data
folders) with :func:`skip_folder`.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = [
    "credentials",
    "fragments",
    "hits",
    "input_file",
    "new_password",
    "remember",
    "scan_bytes",
    "scan_tree",
    "skip_folder",
    "watch_processes",
]

MIN_FRAGMENT = 8
"""Shorter pieces of a credential are too common to mean anything when found."""
MAX_FILE_BYTES = 256 * 1024 * 1024

_credentials: list[str] = []
_needles: dict[bytes, str] = {}  # what to look for -> which credential (shown masked)
_inputs: set[Path] = set()
_skipped: set[Path] = set()
hits: list[str] = []
summary = ""  # set by the scan at the end of the session, printed in pytest's summary


def credentials() -> list[str]:
    """Every credential recorded so far."""
    return list(_credentials)


def fragments(credential: str) -> set[str]:
    """The credential, its percent-encoded form, and the pieces a URL parser may split out."""
    found = {credential, quote(credential, safe="")}
    piece = ""
    for char in credential + "@":
        if char in "@:/?#":
            if len(piece) >= MIN_FRAGMENT:
                found.add(piece)
            piece = ""
        else:
            piece += char
    return {value for value in found if len(value) >= MIN_FRAGMENT}


def remember(credential: str) -> str:
    """Record a credential the harness created; returns it."""
    if credential and credential not in _credentials:
        _credentials.append(credential)
        shown = f"credential #{len(_credentials)} ({credential[:3]}…)"
        for value in fragments(credential):
            _needles[value.encode("utf-8")] = shown
    return credential


def new_password() -> str:
    """A random password holding every URL delimiter (``@ : / ? #``), recorded for the scan.

    Such a password is what a URL parser gets wrong; each piece between delimiters is long
    enough to be looked for on its own.
    """
    pieces = [secrets.token_urlsafe(9) for _ in range(6)]
    return remember("{}@{}:{}/{}?{}#{}".format(*pieces))


def input_file(path: Path) -> Path:
    """A file a test writes with a credential in it on purpose (an input, not an output)."""
    _inputs.add(path.resolve())
    return path


def skip_folder(path: Path) -> Path:
    """A folder that holds credentials by design (a server's data), never scanned."""
    _skipped.add(path.resolve())
    return path


def scan_bytes(data: bytes | str | None, where: str) -> None:
    """Record a hit for every credential fragment in ``data``."""
    if not data or not _needles:
        return
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    for needle, shown in _needles.items():
        if needle in raw:
            hits.append(f"{where}: {shown}")


def watch_processes() -> None:
    """Scan the output of every process run through :mod:`subprocess` as it ends."""
    original = subprocess.Popen.communicate
    if getattr(original, "_seshat_scanned", False):
        return

    def communicate(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> Any:
        out, err = original(self, *args, **kwargs)
        program = self.args[0] if isinstance(self.args, (list, tuple)) else self.args
        name = Path(str(program)).name
        scan_bytes(out, f"stdout of {name}")
        scan_bytes(err, f"stderr of {name}")
        return out, err

    communicate._seshat_scanned = True  # type: ignore[attr-defined]
    subprocess.Popen.communicate = communicate  # type: ignore[method-assign]


def _files(root: Path) -> Iterator[Path]:
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if (here / d).resolve() not in _skipped]
        for name in names:
            path = here / name
            if path.is_symlink() or not path.is_file():
                continue
            if path.resolve() in _inputs:
                continue
            yield path


def _repositories(root: Path) -> Iterator[Path]:
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if (here / d).resolve() not in _skipped]
        if "HEAD" in names and "objects" in dirs and "refs" in dirs:
            yield here


def scan_tree(roots: Iterable[Path]) -> int:
    """Scan every file and every Git object under ``roots``; returns the bytes scanned."""
    scanned = 0
    for root in roots:
        if not root.is_dir():
            continue
        for path in _files(root):
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            scanned += len(data)
            scan_bytes(data, str(path))
        for repository in _repositories(root):
            # Git stores objects compressed (loose and packed): read them back through Git.
            command = ["git", "--git-dir", str(repository), "cat-file", "--batch-all-objects"]
            with subprocess.Popen([*command, "--batch"], stdout=subprocess.PIPE) as process:
                assert process.stdout is not None
                data = process.stdout.read()
            scanned += len(data)
            scan_bytes(data, f"Git objects of {repository}")
    return scanned
