"""SSH signatures over a file's bytes, through OpenSSH's ``ssh-keygen -Y``.

A signature file (``<statement>.yaml.sig``) holds one or more armored SSH signatures, one
per signer, so a quorum is several people signing the same bytes. Each signature is checked
three ways, which tells the failures apart:

1. ``check-novalidate``: is it a valid signature of these bytes in this namespace at all
   (no: ``bad_signature``)? It also names the key's fingerprint.
2. ``find-principals``: which principals of the allowed-signers file hold that key
   (none: ``signer_not_allowed``)?
3. ``verify``: does the allowed-signers file let that principal sign in this namespace
   (``namespaces="..."``, validity dates)? (no: ``signer_not_allowed``)

Three ``ssh-keygen`` processes a signature: a fleet of a thousand members judging the one
approval of their shared plan would start three thousand a pass. So an answer is remembered
for :data:`REMEMBERED_SECONDS`, keyed by the bytes signed, the signature, the namespace and
the allowed-signers file's path and bytes: anything that changes the answer changes the
key, except the clock against a key's ``valid-before`` date, which may be read up to that
long late.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from runner.errors import CanNotRunError
from runner.files import NotReadable, read_regular_file

__all__ = [
    "ACKNOWLEDGMENT_NAMESPACE",
    "APPROVAL_NAMESPACE",
    "REMEMBERED_SECONDS",
    "Checked",
    "check",
    "fingerprint",
    "sign",
    "split_signatures",
]

APPROVAL_NAMESPACE = "seshat-approval"
ACKNOWLEDGMENT_NAMESPACE = "seshat-acknowledgment"
_BEGIN, _END = "-----BEGIN SSH SIGNATURE-----", "-----END SSH SIGNATURE-----"
_FINGERPRINT = re.compile(r"key (SHA256:[A-Za-z0-9+/=]+)")


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise CanNotRunError("ssh-keygen is not installed (Debian: openssh-client)")
    return found


def _run(args: list[str], data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [_ssh_keygen(), *args], input=data, capture_output=True, timeout=30, check=False
    )


def sign(data: bytes, key: Path, namespace: str) -> str:
    """One armored signature of ``data`` with the private ``key`` (or its public half
    when the private key is in ssh-agent)."""
    done = _run(["-Y", "sign", "-q", "-f", str(key), "-n", namespace], data)
    if done.returncode != 0 or _BEGIN.encode() not in done.stdout:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise CanNotRunError(f"ssh-keygen could not sign with {key}: {' '.join(reason)[:300]}")
    return done.stdout.decode("ascii").strip() + "\n"


MAX_SIGNATURES = 32
"""Signature blocks read from one ``.sig`` file: more signers than any quorum needs."""


def fingerprint(key: Path) -> str | None:
    """The ``SHA256:...`` fingerprint of a key file (private or public)."""
    done = _run(["-l", "-E", "sha256", "-f", str(key)], b"")
    match = re.search(r"(SHA256:[A-Za-z0-9+/=]+)", done.stdout.decode(errors="replace"))
    return match.group(1) if done.returncode == 0 and match else None


def split_signatures(text: str) -> list[str]:
    """The armored signatures in a signature file, in order (at most
    :data:`MAX_SIGNATURES`: each one costs a few ``ssh-keygen`` runs)."""
    blocks: list[str] = []
    for part in text.split(_BEGIN)[1:]:
        body, end, _ = part.partition(_END)
        if end:
            blocks.append(f"{_BEGIN}{body}{_END}\n")
    return blocks[:MAX_SIGNATURES]


@dataclass(frozen=True, slots=True)
class Checked:
    """What one signature proved: valid or not, its key, and the allowed principal."""

    valid: bool
    fingerprint: str | None
    principal: str | None


REMEMBERED_SECONDS = 60.0
"""How long :func:`check` remembers an answer (see the module's documentation)."""
_REMEMBERED_MAX = 4096
_MAX_ALLOWED_SIGNERS = 1024 * 1024
_remembered: dict[tuple[str, ...], tuple[float, Checked]] = {}
_remembered_lock = threading.Lock()
_clock = time.monotonic


def check(data: bytes, signature: str, namespace: str, allowed_signers: Path | None) -> Checked:
    """Check one armored signature of ``data`` (see the module docstring). Armor that is
    not ASCII is no signature at all."""
    if not signature.isascii():
        return Checked(False, None, None)
    try:
        listed = (
            read_regular_file(allowed_signers, _MAX_ALLOWED_SIGNERS)
            if allowed_signers is not None
            else b""
        )
    except (NotReadable, OSError):
        listed = None
    if listed is None:  # not a regular file of bounded size: ssh-keygen says what it says
        return _check(data, signature, namespace, allowed_signers)
    key = (
        hashlib.sha256(data).hexdigest(),
        hashlib.sha256(signature.encode("ascii")).hexdigest(),
        namespace,
        str(allowed_signers),
        hashlib.sha256(listed).hexdigest(),
    )
    now = _clock()
    with _remembered_lock:
        found = _remembered.get(key)
    if found is not None and now - found[0] < REMEMBERED_SECONDS:
        return found[1]
    checked = _check(data, signature, namespace, allowed_signers)
    with _remembered_lock:
        if len(_remembered) >= _REMEMBERED_MAX:
            _remembered.clear()
        _remembered[key] = (now, checked)
    return checked


def _check(data: bytes, signature: str, namespace: str, allowed_signers: Path | None) -> Checked:
    with tempfile.TemporaryDirectory(prefix="seshat-ssh-") as folder:
        sig = Path(folder) / "statement.sig"
        sig.write_text(signature, encoding="ascii")
        novalidate = _run(["-Y", "check-novalidate", "-n", namespace, "-s", str(sig)], data)
        if novalidate.returncode != 0:
            return Checked(False, None, None)
        output = (novalidate.stdout + novalidate.stderr).decode(errors="replace")
        match = _FINGERPRINT.search(output)
        fingerprint = match.group(1) if match else None
        if allowed_signers is None:
            return Checked(True, fingerprint, None)
        found = _run(["-Y", "find-principals", "-s", str(sig), "-f", str(allowed_signers)], b"")
        principals = (
            sorted(
                line.strip()
                for line in found.stdout.decode(errors="replace").splitlines()
                if line.strip()
            )
            if found.returncode == 0
            else []
        )
        for principal in principals:
            verified = _run(
                [
                    "-Y",
                    "verify",
                    "-f",
                    str(allowed_signers),
                    "-I",
                    principal,
                    "-n",
                    namespace,
                    "-s",
                    str(sig),
                ],
                data,
            )
            if verified.returncode == 0:
                return Checked(True, fingerprint, principal)
        return Checked(True, fingerprint, None)
