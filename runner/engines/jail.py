"""The OS jail around every private sandbox server: bubblewrap, so that a superuser inside it
still reaches nothing.

Desired SQL is hostile code that may one day become superuser inside its sandbox server
(DESIGN.md, "Engines": the third wall). A jailed server, and every program it starts, runs

* in its **own network namespace** (loopback only): no TCP to the target or anywhere else;
  the runner reaches it through the Unix socket in the jail's private folder, by the path
  ``/proc/<pid>/root/...`` that only the jail's owner can follow;
* in its **own mount view**: ``/usr`` (and the ``/bin``, ``/lib`` links into it) read-only, a
  minimal ``/dev``, an ``/etc`` holding only a made-up ``passwd``, ``group`` and ``hosts``,
  no ``/proc``,
  and one writable folder, :data:`RUN`, a size-bounded tmpfs that dies with the jail. Nothing
  of the runner's home, temporary, cache or work folders is visible; a template reaches it
  as an archive on its standard input, extracted into the tmpfs, so no jail can write one;
* in its **own PID, IPC, UTS and user namespaces**, with an empty environment (``PATH``,
  ``LANG``, ``TZ`` only), host name ``sandbox``, no capabilities and no further user
  namespaces (``--disable-userns``);
* as a **user that owns nothing else**: when the runner is root, a fresh uid with no account
  on the host (:func:`jail_user`), never ``postgres`` or ``mysql`` whose files are real
  servers' data; otherwise the runner's own uid, which the namespaces leave nothing of
  the runner's to see;
* under **resource limits** set inside the jail, where no process in it can raise them:
  address space per process, processes, file size, open files, no core files;
* and it **dies with the runner**, SIGKILL included (``--die-with-parent``; the PID
  namespace's first process takes every other with it). Its data was only ever in the
  jail's tmpfs, so nothing is left behind.

Where no jail can be made (bubblewrap missing, user namespaces refused), :func:`check`
raises :class:`~runner.engines.servers.SandboxUnavailable` naming what is missing; planning
with a private sandbox is then refused unless an operator accepts the risk
(``--sandbox-isolation none``, :mod:`runner.engines.servers`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from runner.engines.planner import PlanRefused

__all__ = [
    "BUILD",
    "LIMITS",
    "RUN",
    "Jailed",
    "Limits",
    "SandboxUnavailable",
    "check",
    "jail_user",
    "jailed",
    "run_jailed",
]

RUN: Final = "/run/sandbox"
"""The jail's one writable folder (a tmpfs): the server's data, socket and log."""
BUILD: Final = "/build"
"""Where a template being built is bound, writable (only initdb-like programs run there)."""

_ENVIRONMENT: Final = (("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), ("LANG", "C"), ("TZ", "UTC"))
_TOP_LEVEL: Final = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_UID_RANGE: Final = (1_800_000_000, 1_999_999_999)
"""Where a root runner picks a jail's uid: far above any account or subordinate-id range."""
_USER_NAME: Final = "seshat-sandbox"


class SandboxUnavailable(PlanRefused):
    """No sandbox can be had (``sandbox_unavailable``): no jail can be made here, no local
    server binaries for this version and no dev URL, or a sandbox server failed to start."""

    def __init__(self, message: str) -> None:
        super().__init__("sandbox_unavailable", message)


@dataclass(frozen=True, slots=True)
class Limits:
    """What one jail may use. Memory is per process (``RLIMIT_AS``); ``disk`` bounds the
    tmpfs, which is memory too."""

    memory: int = 2 << 30
    processes: int = 64
    file_size: int = 1 << 30
    open_files: int = 1024
    disk: int = 1 << 30

    def prlimit(self) -> list[str]:
        return [
            "/usr/bin/prlimit",
            f"--as={self.memory}",
            f"--nproc={self.processes}",
            f"--fsize={self.file_size}",
            f"--nofile={self.open_files}",
            "--core=0",
            "--",
        ]


LIMITS: Final = Limits()
"""What a sandbox server's jail may use."""


@dataclass(frozen=True, slots=True)
class JailUser:
    """Who a jail runs as: ``uid``/``gid`` on the host and inside."""

    uid: int
    gid: int
    switch: bool
    """Whether the runner (root) must become this user to start the jail."""


def jail_user() -> JailUser:
    """A fresh uid with no account on the host when the runner is root (it owns nothing and
    no other process runs as it, so its process limit is the jail's alone); else the
    runner's own uid, mapped into the jail's user namespace."""
    if os.geteuid() != 0:
        return JailUser(os.geteuid(), os.getegid(), False)
    low, high = _UID_RANGE
    while True:
        uid = low + secrets.randbelow(high - low)
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return JailUser(uid, uid, True)


def _bwrap() -> str | None:
    """The bubblewrap to use: ``SESHAT_BWRAP`` (a path), else ``bwrap`` from the system."""
    configured = os.environ.get("SESHAT_BWRAP")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")


@functools.cache
def _probe(bwrap: str | None, uid: int, gid: int, switch: bool) -> str | None:
    """Why no jail can be made here, or None: one jailed ``true``, as the jail runs."""
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed where the runner runs"
    if not Path("/usr/bin/prlimit").is_file():
        return "prlimit (util-linux) is not installed where the runner runs"
    user = JailUser(uid, gid, switch)
    try:
        done = subprocess.run(
            [*_arguments(bwrap, user, [], LIMITS), "/usr/bin/true"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            user=_uid(user),
            group=_gid(user),
            extra_groups=_groups(user),
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not run: {error}"
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-2:])[:300]
        return f"bubblewrap cannot make a jail here ({tail or f'exit {done.returncode}'})"
    return None


def check(user: JailUser) -> None:
    """:class:`SandboxUnavailable` unless a jail can be made for ``user`` (probed once per
    process and user kind)."""
    why = _probe_for(user)
    if why is not None:
        raise SandboxUnavailable(
            f"{why}. A private sandbox server runs only inside an OS jail (bubblewrap with "
            "user and network namespaces: Debian/Ubuntu `apt-get install bubblewrap`; in a "
            "container, a seccomp profile that allows user namespaces, see docs/kubernetes.md)."
            " Instead, give an explicit sandbox on another server (--dev-url, spec.dev.url), or "
            "accept the risk for trusted artifacts with --sandbox-isolation none "
            "(spec.dev.isolation: none), which the plan records"
        )


def _probe_for(user: JailUser) -> str | None:
    # A root runner's jails each get a fresh uid; any one of them answers for all.
    if user.switch:
        return _probe(_bwrap(), _UID_RANGE[0] - 1, _UID_RANGE[0] - 1, True)
    return _probe(_bwrap(), user.uid, user.gid, False)


def _uid(user: JailUser) -> int | None:
    """Who Popen runs bubblewrap as: the jail's user when the runner is root, else itself."""
    return user.uid if user.switch else None


def _gid(user: JailUser) -> int | None:
    return user.gid if user.switch else None


def _groups(user: JailUser) -> list[int] | None:
    return [] if user.switch else None


def _root_view() -> list[str]:
    """``/usr`` read-only, and ``/bin``, ``/lib``, ... as the host has them (links into
    ``/usr`` on a merged system, read-only folders otherwise)."""
    view = ["--ro-bind", "/usr", "/usr"]
    for name in _TOP_LEVEL:
        path = Path("/") / name
        if path.is_symlink():
            view += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            view += ["--ro-bind", str(path), str(path)]
    return view


def _arguments(
    bwrap: str, user: JailUser, extra: Sequence[str], limits: Limits, *, info: int | None = None
) -> list[str]:
    arguments = [
        bwrap,
        "--unshare-user",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--uid",
        str(user.uid),
        "--gid",
        str(user.gid),
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    for name, value in _ENVIRONMENT:
        arguments += ["--setenv", name, value]
    arguments += ["--setenv", "TMPDIR", BUILD if BUILD in extra else RUN]
    arguments += [*_root_view(), "--dev", "/dev", "--chdir", "/"]
    arguments += ["--perms", "0700", "--size", str(limits.disk), "--tmpfs", RUN]
    arguments += list(extra)
    # Read-only from here on: the root (a tmpfs of bubblewrap's, with /etc) and /dev; only
    # RUN (and a template build's BUILD) can be written.
    arguments += ["--remount-ro", "/dev", "--remount-ro", "/"]
    if info is not None:
        arguments += ["--info-fd", str(info)]
    return [*arguments, "--", *limits.prlimit()]


@dataclass
class _Files:
    """File descriptors handed to bubblewrap: ``/etc/passwd`` and ``/etc/group`` as data,
    folders by descriptor (a root runner's folders need not be reachable by the jail's
    uid), all closed once the jail has started."""

    arguments: list[str] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)

    def data(self, text: str, destination: str) -> None:
        read, write = os.pipe()
        os.write(write, text.encode())  # far below a pipe's buffer
        os.close(write)
        self.fds.append(read)
        self.arguments += ["--ro-bind-data", str(read), destination]

    def folder(self, path: Path, destination: str) -> None:
        """``path`` bound writable (its path must be reachable by the jail's user)."""
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self.fds.append(fd)
        self.arguments += ["--bind-fd", str(fd), destination]

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()


def _files(user: JailUser, build: Path | None) -> _Files:
    files = _Files()
    files.data(
        f"root:x:0:0::/:/usr/sbin/nologin\n"
        f"{_USER_NAME}:x:{user.uid}:{user.gid}::/nonexistent:/usr/sbin/nologin\n",
        "/etc/passwd",
    )
    files.data(f"root:x:0:\n{_USER_NAME}:x:{user.gid}:\n", "/etc/group")
    files.data("127.0.0.1 localhost sandbox\n::1 localhost\n", "/etc/hosts")
    files.data("passwd: files\ngroup: files\nhosts: files\n", "/etc/nsswitch.conf")
    if build is not None:
        files.folder(build, BUILD)
    return files


def run_jailed(
    argv: Sequence[str],
    user: JailUser,
    *,
    build: Path | None = None,
    stdin: str | None = None,
    timeout: float = 300,
    limits: Limits = LIMITS,
    what: str = "",
) -> str:
    """Run ``argv`` in a jail to the end (``build`` bound writable at :data:`BUILD`); its
    output, or :class:`SandboxUnavailable` with the output's tail when it fails."""
    check(user)
    bwrap = _bwrap()
    assert bwrap is not None
    files = _files(user, build)
    try:
        done = subprocess.run(
            [*_arguments(bwrap, user, files.arguments, limits), *argv],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            pass_fds=files.fds,
            cwd="/",
            env={},
            user=_uid(user),
            group=_gid(user),
            extra_groups=_groups(user),
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SandboxUnavailable(f"{what or argv[0]} could not run in its jail: {error}") from None
    finally:
        files.close()
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:400]
        raise SandboxUnavailable(f"{what or Path(argv[0]).name} failed in its jail: {tail}")
    return str(done.stdout)


class Jailed:
    """A program running in a jail: the host path of its view (:meth:`path`) and its end."""

    def __init__(self, process: subprocess.Popen[bytes], pid: int) -> None:
        self.process = process
        self.pid = pid  # the jail's first process, on the host

    def path(self, inner: str) -> Path:
        """The host path of ``inner`` in the jail's view (only the jail's owner may use it)."""
        return Path(f"/proc/{self.pid}/root") / inner.lstrip("/")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """End the jail and everything in it at once: its data was never anywhere else."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(30)


def _read_info(fd: int, deadline: float) -> int | None:
    """The jail's first process from bubblewrap's ``--info-fd`` (None: it ended first)."""
    data = b""
    os.set_blocking(fd, True)
    while time.monotonic() < deadline:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


@contextlib.contextmanager
def jailed(
    argv: Sequence[str],
    user: JailUser,
    *,
    stdin: Path | None = None,
    log: Path | None = None,
    limits: Limits = LIMITS,
) -> Iterator[Jailed]:
    """``argv`` running in a jail until the block ends, reading the file ``stdin`` (opened
    by the runner: the jail needs no path to it); its output goes to ``log`` (a runner's
    file, outside)."""
    check(user)
    bwrap = _bwrap()
    assert bwrap is not None
    files = _files(user, None)
    read, write = os.pipe()
    output = log.open("wb") if log is not None else None
    source = stdin.open("rb") if stdin is not None else None
    try:
        process = subprocess.Popen(
            [*_arguments(bwrap, user, files.arguments, limits, info=write), *argv],
            stdin=source or subprocess.DEVNULL,
            stdout=output or subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            pass_fds=[*files.fds, write],
            cwd="/",
            env={},
            user=_uid(user),
            group=_gid(user),
            extra_groups=_groups(user),
        )
    except OSError as error:
        raise SandboxUnavailable(f"{argv[0]} could not start in its jail: {error}") from None
    finally:
        os.close(write)
        files.close()
        if output is not None:
            output.close()
        if source is not None:
            source.close()
    try:
        pid = _read_info(read, time.monotonic() + 30)
    finally:
        os.close(read)
    jail = Jailed(process, pid or 0)
    try:
        if pid is None:
            jail.stop()
            raise SandboxUnavailable(f"{Path(argv[0]).name} did not start in its jail")
        yield jail
    finally:
        jail.stop()
