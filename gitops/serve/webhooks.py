"""Push webhooks: who may wake the controller, and how each forge proves it.

A webhook carries no instruction: a verified push only makes ``seshat run`` look at the
remote branch at once (the same look ``--poll`` takes every few seconds), so a forged or
replayed request can at worst cause one cheap ``git ls-remote``. Still, nothing is believed
before it verifies:

* GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>``;
* GitLab: ``X-Gitlab-Token: <secret>`` (GitLab sends the secret itself; compared in
  constant time);
* generic (any CI or script): ``X-Seshat-Signature-256`` spelled like GitHub's.

A request without a proof, or with a GitLab token that is not the secret, is refused on its
headers (:func:`verify_head`) before a byte of its body is read. The body is read only up to
:data:`MAX_BODY`, must be JSON, and is never logged or echoed; the secret is never logged
either.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from runner.files import NotReadable, read_regular_file

__all__ = [
    "FORGES",
    "MAX_BODY",
    "Check",
    "Forge",
    "WebhookSecret",
    "load_secret",
    "signature",
    "verify",
    "verify_head",
    "wakes",
]

MAX_BODY = 4 * 1024 * 1024
"""The largest body read (GitHub caps push payloads at 25 MB but a push of 20 commits is a
few hundred KB); a larger request is refused, and the next ``--poll`` sees the push."""
MAX_SECRET_FILE = 4096


class Forge(StrEnum):
    GITHUB = "github"
    GITLAB = "gitlab"
    GENERIC = "generic"


FORGES = tuple(Forge)


class Check(StrEnum):
    """How a request's proof compares with the secret."""

    VERIFIED = "verified"
    MISSING = "missing"  # no proof at all: 401
    WRONG = "wrong"  # a proof that does not verify: 403


@dataclass(frozen=True, slots=True)
class WebhookSecret:
    """The shared secret; its repr never shows it."""

    value: bytes

    def __repr__(self) -> str:
        return "WebhookSecret(<hidden>)"


def load_secret(file: Path | None, env: str | None) -> WebhookSecret | None:
    """The secret ``--webhook-secret-file`` or ``--webhook-secret-env`` names (one of them);
    a trailing newline in the file is not part of it. Raises ValueError saying why it cannot
    be used, never showing it."""
    if file is not None and env is not None:
        raise ValueError("give --webhook-secret-file or --webhook-secret-env, not both")
    if file is not None:
        try:
            data = read_regular_file(file, MAX_SECRET_FILE)
        except NotReadable as error:
            raise ValueError(f"{file}: {error.detail}") from None
        if data is None:
            raise ValueError(f"{file}: no such file")
        value = data.rstrip(b"\r\n")
        where = str(file)
    elif env is not None:
        value = os.environ.get(env, "").encode("utf-8")
        where = f"${env}"
    else:
        return None
    if len(value) < 16:
        raise ValueError(f"{where}: the webhook secret must be at least 16 bytes")
    return WebhookSecret(value)


def signature(secret: WebhookSecret, body: bytes) -> str:
    """``sha256=<hex>``: the HMAC GitHub (and the generic endpoint) expect."""
    return "sha256=" + hmac.new(secret.value, body, hashlib.sha256).hexdigest()


_SIGNATURE_HEADERS = {Forge.GITHUB: "x-hub-signature-256", Forge.GENERIC: "x-seshat-signature-256"}


def verify_head(forge: Forge, secret: WebhookSecret, headers: Mapping[str, str]) -> Check | None:
    """What the headers alone decide, before the body is read: MISSING without a proof,
    WRONG for a GitLab token that is not the secret (GitLab's proof is no signature of the
    body); None when only the body can tell (a signature)."""
    if forge is Forge.GITLAB:
        return verify(forge, secret, headers, b"")
    return Check.MISSING if headers.get(_SIGNATURE_HEADERS[forge]) is None else None


def verify(forge: Forge, secret: WebhookSecret, headers: Mapping[str, str], body: bytes) -> Check:
    """Whether the request proves it knows the secret, the way ``forge`` proves it
    (``headers`` by lowercase name)."""
    if forge is Forge.GITLAB:
        token = headers.get("x-gitlab-token")
        if token is None:
            return Check.MISSING
        given = token.encode("utf-8", errors="replace")
        return Check.VERIFIED if hmac.compare_digest(given, secret.value) else Check.WRONG
    found = headers.get(_SIGNATURE_HEADERS[forge])
    if found is None:
        return Check.MISSING
    expected = signature(secret, body).encode("ascii")
    given = found.strip().encode("utf-8", errors="replace")
    return Check.VERIFIED if hmac.compare_digest(given, expected) else Check.WRONG


_EVENTS: dict[Forge, Callable[[Mapping[str, str]], bool]] = {
    Forge.GITHUB: lambda headers: headers.get("x-github-event", "push") == "push",
    Forge.GITLAB: lambda headers: headers.get("x-gitlab-event", "Push Hook") == "Push Hook",
    Forge.GENERIC: lambda headers: True,
}


def wakes(forge: Forge, headers: Mapping[str, str]) -> bool:
    """Whether a verified request is a push (others, such as GitHub's ``ping``, are
    acknowledged and ignored); ``headers`` by lowercase name."""
    return _EVENTS[forge](headers)
