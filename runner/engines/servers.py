"""Private database servers the runner starts from local binaries, as sandboxes.

What the dialect sandboxes share (:mod:`runner.engines.postgresql.sandbox`,
:mod:`runner.engines.mysql.sandbox`):

* **An unprivileged owner.** Database servers refuse to run as root, and a sandbox should
  not run as the runner's user either when that user is root: the server runs as
  ``SESHAT_SANDBOX_USER`` if set, else the engine's usual system user (``postgres``,
  ``mysql``), else ``nobody``. A runner that is not root runs its sandboxes as itself.
* **A private directory.** Each server lives in a fresh ``0700`` directory owned by that
  user (data, Unix socket, log); no TCP port is opened; the directory is removed afterwards.
* **A cached template.** Initializing a data directory is the slow part (about a second),
  so it is done once per server version and settings into the cache
  (:func:`cache_root`, ``SESHAT_CACHE_DIR``) and copied for each use. A template is
  published by an atomic rename, so a reader never sees half of one; it is safe to delete.
* **A clean environment.** The server's processes get ``PATH`` and ``LANG`` only: no
  database password and nothing else of the runner's environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from runner.engines.planner import PlanRefused

__all__ = [
    "Owner",
    "SandboxRefusal",
    "SandboxUnavailable",
    "cache_root",
    "cached_template",
    "copy_tree",
    "owner_for",
    "private_data",
    "private_dir",
    "run_as",
]

_ENVIRONMENT: Final = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C", "LC_ALL": "C"}


class SandboxRefusal(Exception):
    """The sandbox will not do this: an explicit sandbox that may not be used (the target
    itself, or not empty), or a statement it will not run (an extension not on the list)."""


class SandboxUnavailable(PlanRefused):
    """No sandbox can be had: no local server binaries for this version, and no dev URL."""

    def __init__(self, message: str) -> None:
        super().__init__("sandbox_unavailable", message)


@dataclass(frozen=True, slots=True)
class Owner:
    """Who a private server runs as (None: the runner's own user)."""

    uid: int | None
    gid: int | None
    name: str


def owner_for(usual: str) -> Owner:
    """The unprivileged user a private server runs as (see the module docstring)."""
    if os.geteuid() != 0:
        return Owner(None, None, pwd.getpwuid(os.geteuid()).pw_name)
    for name in (os.environ.get("SESHAT_SANDBOX_USER"), usual, "nobody"):
        if not name:
            continue
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0:
            return Owner(entry.pw_uid, entry.pw_gid, name)
    raise SandboxUnavailable("no unprivileged user to run a sandbox server as")


def run_as(
    owner: Owner,
    args: Sequence[str],
    *,
    timeout: float = 120,
    what: str = "",
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` as ``owner`` with a clean environment; :class:`SandboxUnavailable` with
    the tail of its output when it fails."""
    try:
        done = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            env=dict(_ENVIRONMENT),
            timeout=timeout,
            check=False,
            cwd="/",
            user=owner.uid,
            group=owner.gid,
            extra_groups=[] if owner.uid is not None else None,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SandboxUnavailable(f"{what or args[0]} could not run: {error}") from None
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:400]
        raise SandboxUnavailable(f"{what or Path(args[0]).name} failed: {tail}")
    return done


def _give(path: Path, owner: Owner) -> None:
    if owner.uid is not None and owner.gid is not None:
        os.chown(path, owner.uid, owner.gid)


MAX_SOCKET_DIR: Final = 80
"""A Unix socket's path must fit 107 bytes; its directory is kept shorter than this."""


def _bases() -> list[str]:
    """Where private directories may go, best first: memory (a data directory is copied and
    removed for every use, which a disk makes slow), then the temporary folder, then /tmp."""
    found = []
    for base in ("/dev/shm", tempfile.gettempdir(), "/tmp"):
        if base not in found and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            found.append(base)
    return found


def private_dir(owner: Owner, prefix: str) -> Path:
    """A fresh ``0700`` directory owned by ``owner``, in memory where possible, with a path
    short enough for a Unix socket inside it."""
    for base in _bases():
        if len(base) + len(prefix) + 9 > MAX_SOCKET_DIR:
            continue
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        path.chmod(0o700)
        _give(path, owner)
        return path
    raise SandboxUnavailable("no writable temporary folder with a short enough path")


def cache_root() -> Path:
    """The runner's cache: ``SESHAT_CACHE_DIR``, else ``$XDG_CACHE_HOME/seshat/runner``."""
    configured = os.environ.get("SESHAT_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "seshat" / "runner"


def private_folder(folder: Path) -> Path:
    """``folder``, created ``0700`` if missing; :class:`SandboxUnavailable` unless it is a
    real folder of this user that no one else may write.

    What is in the cache decides what a plan says (a sandbox's initial data, a dry run's
    verdict), so a cache another user can write is a way to forge plans.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.geteuid()
        or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        raise SandboxUnavailable(
            f"the runner's cache {folder} must be a folder (not a symbolic link) owned by "
            "this user that no other user can write; fix it or set SESHAT_CACHE_DIR"
        )
    return folder


def copy_tree(source: Path, destination: Path) -> None:
    """``cp -a``: a data directory copied with its modes and owner."""
    subprocess.run(
        ["cp", "-a", str(source), str(destination)],
        check=True,
        capture_output=True,
        env=dict(_ENVIRONMENT),
    )


@contextlib.contextmanager
def cached_template(
    key: str, owner: Owner, build: Callable[[Path], None], *, cache: bool = True
) -> Iterator[Path]:
    """A data directory template for ``key``: from the cache, or built by ``build(folder)``
    in a private folder of ``owner``'s and published to the cache (see the module
    docstring). Yields a directory to copy from; with ``cache=False`` it is built fresh
    and removed afterwards."""
    if not cache:
        folder = private_dir(owner, "seshat-template-")
        try:
            build(folder / "data")
            yield folder / "data"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    root = private_folder(private_folder(cache_root()) / "sandbox")
    published = root / key
    if not published.is_dir():
        with (root / f".{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the others wait and reuse it
            if not published.is_dir():
                folder = private_dir(owner, "seshat-template-")
                try:
                    build(folder / "data")
                    partial = root / f".{key}.partial"
                    shutil.rmtree(partial, ignore_errors=True)
                    copy_tree(folder / "data", partial)
                    partial.rename(published)
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
    yield published


@contextlib.contextmanager
def private_data(
    name: str,
    settings: str,
    user: str,
    build: Callable[[Owner], Callable[[Path], None]],
    *,
    prefix: str,
    cache: bool = True,
) -> Iterator[tuple[Owner, Path]]:
    """The data directory one private server runs on, and the owner it runs as
    (:func:`owner_for` ``user``): a copy of the template for ``name`` and ``settings``
    (:func:`cached_template`, built by ``build(owner)``) in a fresh private directory
    (:func:`private_dir`, named ``prefix``), removed afterwards: data in which a desired
    schema ran is never reused."""
    owner = owner_for(user)
    key = f"{name}-{hashlib.sha256(settings.encode()).hexdigest()[:16]}"
    with cached_template(key, owner, build(owner), cache=cache) as template:
        work = private_dir(owner, prefix)
        try:
            copy_tree(template, work / "data")
            yield owner, work / "data"
        finally:
            shutil.rmtree(work, ignore_errors=True)
