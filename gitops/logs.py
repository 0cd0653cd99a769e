"""``seshat run``'s log lines, through stdlib logging: text as people read it, or one JSON
object per line for a log pipeline (``--log-format json``).

Text keeps the command's historical shape: verdict lines (``<revision> ns/name: Phase
(Reason)``) on stdout, everything else on stderr. JSON puts every record on stdout, one
object per line with ``time`` (UTC, RFC 3339), ``level``, ``message`` and, when the record is
about one resource, ``resource`` (``ns/name``): given by the caller, or read from a message
that starts with ``ns/name:`` (how the passes' progress lines are worded).

Messages are written by Seshat's own code; nothing here echoes a request body, a URL with a
credential, or a secret, and no record carries one.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Literal

__all__ = ["LOGGER", "LogFormat", "configure", "resource_of"]

LOGGER = logging.getLogger("seshat")
LogFormat = Literal["text", "json"]

_RESOURCE = re.compile(r"^([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9][-a-z0-9.]{0,252}): ")


def resource_of(record: logging.LogRecord) -> str | None:
    """The ``ns/name`` a record is about: its ``resource`` extra, else its message's prefix."""
    given = getattr(record, "resource", None)
    if isinstance(given, str):
        return given
    found = _RESOURCE.match(record.getMessage())
    return found.group(1) if found else None


class JsonLines(logging.Formatter):
    """One JSON object per record, keys sorted, no newline inside."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "message": record.getMessage(),
        }
        resource = resource_of(record)
        if resource is not None:
            document["resource"] = resource
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, sort_keys=True, ensure_ascii=False)


def _verdicts(record: logging.LogRecord) -> bool:
    return bool(getattr(record, "verdict", False))


def _others(record: logging.LogRecord) -> bool:
    return not _verdicts(record)


def configure(log_format: LogFormat, verbose: bool) -> logging.Logger:
    """Set up :data:`LOGGER` for this process (``verbose``: progress lines at DEBUG too).
    Records marked ``extra={"verdict": True}`` are the command's output in text mode."""
    for handler in list(LOGGER.handlers):
        LOGGER.removeHandler(handler)
    LOGGER.setLevel(logging.DEBUG if verbose else logging.INFO)
    LOGGER.propagate = False
    if log_format == "json":
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(JsonLines())
        LOGGER.addHandler(handler)
        return LOGGER
    out = logging.StreamHandler(sys.stdout)
    out.addFilter(_verdicts)
    err = logging.StreamHandler(sys.stderr)
    err.addFilter(_others)
    for handler in (out, err):
        handler.setFormatter(logging.Formatter("%(message)s"))
        LOGGER.addHandler(handler)
    return LOGGER
