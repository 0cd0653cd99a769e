"""Removing every credential the runner holds from everything it prints.

A secret can leak in more than one spelling: raw, JSON-escaped (inside an error payload),
or percent-encoded (inside a URL a driver echoes). :class:`Redactor` replaces all of them,
longest first so a secret that contains another is removed whole. Short secrets are
redacted too: a short password is no less secret.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Final
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

__all__ = ["MASK", "Redactor", "secrets_in_url"]

MASK: Final = "[REDACTED]"
SECRET_PARAMETERS: Final = frozenset({"password", "sslpassword", "passfile", "token", "secret"})
"""Query parameters of a database URL whose values are credentials."""


def _spellings(secret: str) -> set[str]:
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
        quote(secret),
    }


class Redactor:
    """Replaces each spelling of each secret with :data:`MASK`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        spellings: set[str] = set()
        for secret in secrets:
            if secret:
                spellings |= _spellings(secret)
        self._spellings = sorted(spellings, key=lambda s: (-len(s), s))

    def __call__(self, text: str) -> str:
        for spelling in self._spellings:
            text = text.replace(spelling, MASK)
        return text


def secrets_in_url(url: str) -> list[str]:
    """The credentials a database URL carries: its password and secret query parameters.

    The password is returned both as written and percent-decoded, since either may be
    echoed by a driver.
    """
    parts = urlsplit(url)
    found: list[str] = []
    if parts.password:
        decoded = unquote(parts.password)
        found += [decoded] if decoded == parts.password else [decoded, parts.password]
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if name.lower() in SECRET_PARAMETERS and value:
            found.append(value)
    return found
