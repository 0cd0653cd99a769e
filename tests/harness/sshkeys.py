"""Throw-away SSH signing identities (ed25519), for approval-signature tests.

Why real ``ssh-keygen`` keys: Seshat verifies approvals with ``ssh-keygen -Y
verify`` against an allowed_signers file, so tests need real keys and real
allowed_signers lines, and several distinct identities per test (approver,
impostor, ...).  Keys have no passphrase and live in a per-test directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .processes import require_binary, run_captured

DEFAULT_NAMESPACE = "seshat-approval"


@dataclass(frozen=True)
class SSHIdentity:
    """One key pair: ``private_key``/``public_key`` paths and the parsed public key."""

    email: str
    private_key: Path
    public_key: Path
    key_type: str
    key_base64: str

    @property
    def public_key_text(self) -> str:
        """``<type> <base64>``, the key as it appears in allowed_signers."""
        return f"{self.key_type} {self.key_base64}"

    def allowed_signers_line(self, namespaces: str = DEFAULT_NAMESPACE) -> str:
        """``EMAIL namespaces="NS" <type> <key>`` (no trailing newline)."""
        return f'{self.email} namespaces="{namespaces}" {self.public_key_text}'


def write_allowed_signers(
    path: Path, identities: Iterable[SSHIdentity], namespaces: str = DEFAULT_NAMESPACE
) -> Path:
    """Write an allowed_signers file trusting *identities* for *namespaces*; return *path*."""
    path.write_text("".join(i.allowed_signers_line(namespaces) + "\n" for i in identities))
    return path


class SSHKeyFactory:
    """Makes any number of identities in one directory: ``factory("alice@example.com")``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._count = 0
        self._ssh_keygen = require_binary("ssh-keygen", "openssh-client")

    def __call__(self, email: str) -> SSHIdentity:
        """Generate a new ed25519 key pair commented with *email*."""
        self._count += 1
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", email)
        private_key = self.directory / f"id_ed25519_{self._count}_{stem}"
        run_captured(
            [
                self._ssh_keygen,
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                email,
                "-f",
                str(private_key),
            ],
            what="ssh-keygen",
        )
        public_key = private_key.with_name(private_key.name + ".pub")
        key_type, key_base64, *_comment = public_key.read_text().split()
        return SSHIdentity(
            email=email,
            private_key=private_key,
            public_key=public_key,
            key_type=key_type,
            key_base64=key_base64,
        )
