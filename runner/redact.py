"""Removing every credential the runner holds from everything it prints.

A secret can leak in more than one spelling: raw, JSON-escaped (inside an error payload),
or percent-encoded (inside a URL a driver echoes). :class:`Redactor` replaces all of them,
longest first so a secret that contains another is removed whole. Short secrets are
redacted too: a short password is no less secret. What a database URL holds (its password,
secret parameters and their fragments) is listed by :meth:`runner.url.DatabaseURL.secrets`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote, quote_plus

__all__ = ["MASK", "Redactor"]

MASK: Final = "[REDACTED]"


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
        # One pass, longest spelling first at each position: a mask is never re-read, so a
        # fragment cannot match inside an earlier mask or inside a longer secret's spelling.
        ordered = sorted(spellings, key=lambda s: (-len(s), s))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)
