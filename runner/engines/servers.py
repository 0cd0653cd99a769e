"""Private database servers the runner starts from local binaries, as sandboxes.

What the dialect sandboxes share (:mod:`runner.engines.postgresql.sandbox`,
:mod:`runner.engines.mysql.sandbox`):

* **A jail** (:mod:`runner.engines.jail`, the default, ``isolation="jail"``): every
  program of a sandbox server, its template build included, runs inside bubblewrap: its own
  network, mount, PID, IPC and user namespaces, a size-bounded tmpfs as its only writable
  folder, resource limits, a uid that owns nothing, and it dies with the runner. Where no
  jail can be made, planning is refused (``sandbox_unavailable``).
* **No jail, by explicit choice** (``isolation="none"``, ``--sandbox-isolation none``,
  ``spec.dev.isolation: none``): for trusted artifacts where namespaces are not allowed.
  The server runs as ``SESHAT_SANDBOX_USER`` or ``nobody`` when the runner is root (never
  ``postgres`` or ``mysql``, whose files are real servers' data), else as the runner's
  user, in a fresh ``0700`` folder in memory, with a clean environment; it is sent SIGKILL
  when the runner dies. The plan records the choice.
* **A cached template.** Initializing a data directory is the slow part (about a second),
  so it is done once per server version and settings, archived into the cache
  (:func:`cache_root`, ``SESHAT_CACHE_DIR``, ``0600``, the runner's) by an atomic rename.
  Each server reads the archive from its standard input, opened by the runner, and
  extracts its own copy: a jail into its tmpfs, never seeing where the archive lives, so no
  template is ever written by a server that ran desired SQL.
* **Nothing left behind.** A jail's data lives in the jail. A folder on the host (a template
  being built, a server without a jail) holds a lock its runner keeps; a later runner
  removes every such folder whose lock is free (its runner died).
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
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from runner.engines import jail
from runner.engines.jail import SandboxUnavailable

__all__ = [
    "ISOLATIONS",
    "Isolation",
    "Place",
    "SandboxRefusal",
    "SandboxUnavailable",
    "cache_folder",
    "cache_root",
    "private_folder",
    "template",
]

Isolation = Literal["jail", "none"]
ISOLATIONS: Final = ("jail", "none")
"""How a private sandbox server is isolated: ``jail`` (the default: an OS jail around it) or
``none`` (an operator's explicit acceptance of the risk, for trusted artifacts; recorded in
the plan)."""

_ENVIRONMENT: Final = {
    "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C",
    "LC_ALL": "C",
    "TZ": "UTC",
}
_PREFIX: Final = "seshat-"
_LOCK: Final = ".runner.lock"
_SPARSE_FROM: Final = 1 << 20
"""Files of a template at least this large have their zero-filled blocks made holes."""
_BLOCK: Final = 4096


class SandboxRefusal(Exception):
    """The sandbox will not do this: an explicit sandbox that may not be used (the target
    itself, or not empty), or a statement it will not run (an extension not on the list)."""


def cache_root() -> Path:
    """The runner's cache: ``SESHAT_CACHE_DIR``, else ``$XDG_CACHE_HOME/seshat/runner``."""
    configured = os.environ.get("SESHAT_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "seshat" / "runner"


def cache_folder(name: str) -> Path:
    """The runner cache's folder ``name`` (``sandbox``, ``artifacts``), both checked with
    :func:`private_folder`."""
    return private_folder(private_folder(cache_root()) / name)


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


# -- folders on the host, and what a dead runner left --------------------------------------


def _bases() -> list[str]:
    """Where host folders may go, best first: memory (a data directory is copied for every
    use, which a disk makes slow), then the temporary folder, then /tmp."""
    found = []
    for base in ("/dev/shm", tempfile.gettempdir(), "/tmp"):
        if base not in found and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            found.append(base)
    return found


MAX_SOCKET_DIR: Final = 80
"""A Unix socket's path must fit 107 bytes; a host folder's path is kept shorter than this."""


def sweep() -> None:
    """Remove the host folders of runners that died (their lock is free)."""
    for base in _bases():
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if not name.startswith(_PREFIX):
                continue
            folder = Path(base) / name
            lock = folder / _LOCK
            try:
                info = folder.lstat()
                if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                    continue
                fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its runner is alive
            finally:
                os.close(fd)
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _host_folder(kind: str) -> Iterator[Path]:
    """A fresh ``0711`` folder of the runner's in memory, locked while it is in use, with a
    path short enough for a Unix socket inside it; removed afterwards."""
    sweep()
    for base in _bases():
        if len(base) + len(_PREFIX) + len(kind) + 12 > MAX_SOCKET_DIR:
            continue
        folder = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{kind}-", dir=base))
        break
    else:
        raise SandboxUnavailable("no writable temporary folder with a short enough path")
    try:
        folder.chmod(0o711)
        fd = os.open(folder / _LOCK, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield folder
        finally:
            os.close(fd)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _owned(path: Path, uid: int | None, gid: int | None) -> Path:
    path.mkdir(mode=0o700, exist_ok=True)
    if uid is not None and gid is not None and os.geteuid() == 0:
        os.chown(path, uid, gid)
    return path


def _archive(data: Path, destination: Path) -> None:
    """The data directory ``data`` as an uncompressed tar archive ``destination`` (what a
    server's copy is extracted from, by the server's user, in its own folder).

    The zero-filled stretches of its large files become holes first and stay holes in the
    archive (``--sparse``): InnoDB's system tablespace and redo log are three quarters of a
    MariaDB template and mostly zeros, which every server would otherwise write into its
    memory-backed folder again."""
    large = []
    for folder, _, names in os.walk(data):  # links to folders are not followed
        for name in names:
            found = os.lstat(os.path.join(folder, name))
            if stat.S_ISREG(found.st_mode) and found.st_size >= _SPARSE_FROM:
                large.append(Path(folder) / name)
    for path in large:  # listed first: each is replaced in place
        _dig_holes(path)
    subprocess.run(
        ["tar", "--sparse", "-cf", str(destination), "-C", str(data), "."],
        check=True,
        capture_output=True,
        env=dict(_ENVIRONMENT),
    )
    destination.chmod(0o600)


def _dig_holes(path: Path) -> None:
    """Rewrite ``path`` with its zero-filled blocks as holes: the same bytes, owner, mode and
    times. (``fallocate --dig-holes`` is no help here: a tmpfs reports the blocks InnoDB
    preallocated as holes already, and they still take their memory and archive as data.)
    The build's programs ran as another user in this folder: no link is followed, and the
    new file is made afresh beside the old one."""
    partial = path.with_name(path.name + ".sparse")
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    with (
        open(os.open(path, os.O_RDONLY | nofollow), "rb") as source,
        open(
            os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | nofollow, 0o600), "wb"
        ) as target,
    ):
        found = os.fstat(source.fileno())
        while block := source.read(_BLOCK):
            if block.count(0) == len(block):
                target.seek(len(block), os.SEEK_CUR)
            else:
                target.write(block)
        target.truncate(found.st_size)
        with contextlib.suppress(PermissionError):  # a runner that is not root owns both
            os.fchown(target.fileno(), found.st_uid, found.st_gid)
        os.fchmod(target.fileno(), stat.S_IMODE(found.st_mode))
        target.flush()
        os.utime(target.fileno(), ns=(found.st_atime_ns, found.st_mtime_ns))
    partial.replace(path)


# -- where a server runs: a jail, or bare -----------------------------------------------


@dataclass(frozen=True, slots=True)
class _Bare:
    """Who a server without a jail runs as (None: the runner's own user)."""

    uid: int | None
    gid: int | None


def _bare_user() -> _Bare:
    if os.geteuid() != 0:
        return _Bare(None, None)
    for name in (os.environ.get("SESHAT_SANDBOX_USER"), "nobody"):
        if not name:
            continue
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0 and entry.pw_name not in ("postgres", "mysql"):
            return _Bare(entry.pw_uid, entry.pw_gid)
    raise SandboxUnavailable("no unprivileged user to run a sandbox server as")


class Place:
    """Where a sandbox server's programs run: in a jail, or (isolation ``none``) bare.

    Both take the same programs, written against a folder (:meth:`run` for a template
    build, :meth:`serve` for a server) whose path they are given: inside a jail it is
    :data:`~runner.engines.jail.BUILD` or :data:`~runner.engines.jail.RUN`, bare it is a
    folder on the host.
    """

    def __init__(self, isolation: str, limits: jail.Limits = jail.LIMITS) -> None:
        if isolation not in ISOLATIONS:
            raise SandboxUnavailable(f"unknown sandbox isolation {isolation!r}")
        self.isolation = isolation
        self.limits = limits
        self.user = jail.jail_user()  # one per place: a template's programs share their files
        if isolation == "jail":
            jail.check(self.user)

    def run(
        self,
        argv: Callable[[str], Sequence[str]],
        folder: Path,
        *,
        stdin: str | None = None,
        what: str = "",
        timeout: float = 300,
    ) -> str:
        """Run ``argv(path)`` to the end, the host ``folder`` (made writable for it) at
        ``path``; its output."""
        if self.isolation == "jail":
            _owned(folder, self.user.uid, self.user.gid)
            return jail.run_jailed(
                list(argv(jail.BUILD)),
                self.user,
                build=folder,
                stdin=stdin,
                timeout=timeout,
                limits=self.limits,
                what=what,
            )
        bare = _bare_user()
        _owned(folder, bare.uid, bare.gid)
        return _run_bare(list(argv(str(folder))), bare, stdin=stdin, what=what, timeout=timeout)

    @contextlib.contextmanager
    def serve(
        self,
        argv: Callable[[str], Sequence[str]],
        template: Path,
        ready: Callable[[Path], bool],
        *,
        what: str,
        folders: Sequence[str] = (),
        timeout: float = 60,
    ) -> Iterator[Path]:
        """``argv(folder)`` serving on a copy of the archive ``template`` extracted at
        ``folder/data`` (and empty ``folders`` beside it), until the block ends; yields the
        host path of ``folder`` once ``ready(path)`` says so."""
        with contextlib.ExitStack() as stack:
            log = Path(stack.enter_context(_log_file()))

            def extracted(inner: str) -> list[str]:
                data = f"{inner}/data"
                made = " ".join(f"{inner}/{name}" for name in ("data", *folders))
                unpack = f'mkdir -m 700 {made} && tar -xf - -C {data} && exec "$@" </dev/null'
                return ["/bin/sh", "-c", unpack, "sandbox", *argv(inner)]

            if self.isolation == "jail":
                running = stack.enter_context(
                    jail.jailed(
                        extracted(jail.RUN),
                        self.user,
                        stdin=template,
                        log=log,
                        limits=self.limits,
                    )
                )
                folder, alive = running.path(jail.RUN), running.alive
            else:
                bare = _bare_user()
                host = stack.enter_context(_host_folder("server"))
                folder = _owned(host / "run", bare.uid, bare.gid)
                process = stack.enter_context(
                    _bare_server(extracted(str(folder)), bare, log, template)
                )
                alive = lambda: process.poll() is None  # noqa: E731
            deadline = time.monotonic() + timeout
            while not ready(folder):
                if not alive():
                    tail = log.read_text(errors="replace")[-600:].strip()
                    raise SandboxUnavailable(f"the sandbox {what} exited: {tail}")
                if time.monotonic() > deadline:
                    raise SandboxUnavailable(f"the sandbox {what} did not start in {timeout:.0f} s")
                time.sleep(0.02)
            yield folder


@contextlib.contextmanager
def _log_file() -> Iterator[str]:
    fd, name = tempfile.mkstemp(prefix="seshat-server-", suffix=".log")
    os.close(fd)
    try:
        yield name
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def _run_bare(argv: list[str], bare: _Bare, *, stdin: str | None, what: str, timeout: float) -> str:
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            env=dict(_ENVIRONMENT),
            timeout=timeout,
            check=False,
            cwd="/",
            user=bare.uid,
            group=bare.gid,
            extra_groups=[] if bare.uid is not None else None,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SandboxUnavailable(f"{what or argv[0]} could not run: {error}") from None
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:400]
        raise SandboxUnavailable(f"{what or Path(argv[0]).name} failed: {tail}")
    return done.stdout


@contextlib.contextmanager
def _bare_server(
    argv: list[str], bare: _Bare, log: Path, stdin: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as output, stdin.open("rb") as source:
        process = subprocess.Popen(
            ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--", *argv],  # dies with the runner
            stdin=source,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(_ENVIRONMENT),
            cwd="/",
            user=bare.uid,
            group=bare.gid,
            extra_groups=[] if bare.uid is not None else None,
        )
    try:
        yield process
    finally:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)


# -- templates -----------------------------------------------------------------------------


@contextlib.contextmanager
def template(
    name: str,
    settings: str,
    build: Callable[[Path], None],
    *,
    cache: bool = True,
) -> Iterator[Path]:
    """The template for ``name`` and ``settings``, an archive of a data directory: from the
    cache, or made by ``build(folder)`` (which leaves a data directory at ``folder/data``)
    and published to it, the runner's own, by an atomic rename (see the module docstring).
    With ``cache=False`` it is built fresh and removed afterwards."""
    key = f"{name}-{hashlib.sha256(settings.encode()).hexdigest()[:16]}"
    if not cache:
        with _host_folder("template") as folder:
            build(folder / "build")
            _archive(folder / "build" / "data", folder / "template.tar")
            yield folder / "template.tar"
        return
    root = cache_folder("sandbox")
    published = root / f"{key}.tar"
    if not published.is_file():
        with (root / f".{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the others wait and reuse it
            if not published.is_file():
                with _host_folder("template") as folder:
                    build(folder / "build")
                    partial = root / f".{key}.partial"
                    _archive(folder / "build" / "data", partial)
                    partial.rename(published)
    yield published
