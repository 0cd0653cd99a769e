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
import tempfile
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
_GREP_CHUNK = 2000
"""Files per ``grep`` call: well under the kernel's limit on a command line."""

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


def _walk(root: Path) -> tuple[dict[Path, int], list[Path]]:
    """The regular files under ``root`` (not symbolic links, not inputs, not under a skipped
    folder) with their sizes, and the Git repositories, in one walk. The root is resolved
    once and no link is followed, so every path met is already resolved: no ``realpath``
    per file (that was most of the scan's time at a worker's end)."""
    files: dict[Path, int] = {}
    repositories: list[Path] = []
    stack = [root.resolve()]
    while stack:
        folder = stack.pop()
        if folder in _skipped:
            continue
        try:
            with os.scandir(folder) as listed:
                entries = list(listed)
        except OSError:
            continue
        folders = {entry.name for entry in entries if entry.is_dir(follow_symlinks=False)}
        if {"objects", "refs"} <= folders and any(e.name == "HEAD" for e in entries):
            repositories.append(folder)
        for entry in entries:
            path = folder / entry.name
            if entry.name in folders:
                stack.append(path)
            elif entry.is_file(follow_symlinks=False) and path not in _inputs:
                try:
                    files[path] = entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
    return files, repositories


def scan_tree(roots: Iterable[Path]) -> int:
    """Scan every file and every Git object under ``roots``; returns the bytes scanned.

    Files are searched by ``grep -F`` (one pass for every needle at once; a Python loop takes
    one pass per needle), and the files it names are read again here to say which credential
    is in them. Git objects are read once per object id: the suite's repositories are mostly
    clones of one another, and an id names the same bytes wherever it is.
    """
    scanned = 0
    seen_objects: set[bytes] = set()
    for root in roots:
        if not root.is_dir():
            continue
        files, repositories = _walk(root)
        scanned += _scan_files(files)
        for repository in repositories:
            scanned += _scan_objects(repository, seen_objects)
    return scanned


def _scan_files(sizes: dict[Path, int]) -> int:
    wanted = [path for path, size in sizes.items() if size <= MAX_FILE_BYTES]
    scanned = sum(sizes[path] for path in wanted)
    if not _needles:
        return scanned
    for path in _files_grep_names(wanted):
        try:
            scan_bytes(path.read_bytes(), str(path))
        except OSError:
            continue
    return scanned


def _files_grep_names(files: list[Path]) -> Iterator[Path]:
    """The files holding any needle, by ``grep -F -l`` (chunks of files, C locale: bytes)."""
    with tempfile.NamedTemporaryFile(prefix="needles-") as patterns:
        patterns.write(b"".join(needle + b"\n" for needle in _needles))
        patterns.flush()
        command = ["grep", "-a", "-l", "-Z", "-F", "-f", patterns.name, "--"]
        environment = {**os.environ, "LC_ALL": "C"}
        for start in range(0, len(files), _GREP_CHUNK):
            chunk = files[start : start + _GREP_CHUNK]
            found = subprocess.run(
                [*command, *map(str, chunk)], capture_output=True, env=environment
            )
            if found.returncode > 1:  # a file went away or could not be read: read them here
                yield from chunk
                continue
            yield from (Path(os.fsdecode(name)) for name in found.stdout.split(b"\0") if name)


def _scan_objects(repository: Path, seen: set[bytes]) -> int:
    """Every object of one repository not scanned before (Git stores them compressed, loose
    and packed: read them back through Git)."""
    git = ["git", "--git-dir", str(repository), "cat-file"]
    listed = subprocess.run(
        [*git, "--batch-all-objects", "--batch-check=%(objectname)"],
        capture_output=True,
    ).stdout.split()
    fresh = [object_id for object_id in listed if object_id not in seen]
    if not fresh:
        return 0
    seen.update(fresh)
    with tempfile.TemporaryFile() as wanted:
        wanted.write(b"".join(object_id + b"\n" for object_id in fresh))
        wanted.seek(0)
        with subprocess.Popen([*git, "--batch"], stdin=wanted, stdout=subprocess.PIPE) as process:
            assert process.stdout is not None
            data = process.stdout.read()
    scan_bytes(data, f"Git objects of {repository}")
    return len(data)
