"""Framing one result so it survives being mixed into a child's log output.

A frame is three lines::

    <<<SESHAT-RESULT v1 length=<payload bytes> sha256=<hex of the payload>>>>
    {"compact":"json",...}
    <<<SESHAT-RESULT END>>>

The runner prints one per operation (a batch prints several, in order). Drivers, libraries
and the runner's own logging may print around them, so the reader looks for the *last*
frame whose length, digest and footer all check out (or, for a batch, every such frame),
tolerating interleaved lines before and after. When there is none it says why,
because the cases mean different things to the control plane: nothing was printed
(``not_found``: the runner died early), output stopped inside a frame (``incomplete``: it
was killed while writing), a frame is damaged (``malformed``), or a frame declares more
than the reader accepts (``too_large``). Lengths are of the UTF-8 payload line without
its newline.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from runner.digests import canonical_json

__all__ = [
    "MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "Found",
    "FrameStatus",
    "NotFound",
    "encode_frame",
    "find_frames",
    "find_last_frame",
]

PROTOCOL_VERSION: Final = 1
MAX_FRAME_BYTES: Final = 12 * 1024 * 1024
"""A payload larger than this is refused (a plan is at most 8 MiB, plus its envelope)."""

# ASCII digits only (``\d`` takes any Unicode digit), and few enough that int() is cheap and
# never refuses: a length of 5,000 digits is a damaged header, not a ValueError.
_HEADER = re.compile(
    r"^<<<SESHAT-RESULT v([0-9]{1,9}) length=([0-9]{1,15}) sha256=([0-9a-f]{64})>>>$"
)
_HEADER_START = "<<<SESHAT-RESULT v"
_FOOTER: Final = "<<<SESHAT-RESULT END>>>"


class FrameStatus(StrEnum):
    """Why no frame could be read."""

    NOT_FOUND = "not_found"
    INCOMPLETE = "incomplete"
    MALFORMED = "malformed"
    TOO_LARGE = "too_large"


@dataclass(frozen=True, slots=True)
class Found:
    """The payload of the last valid frame."""

    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NotFound:
    """No valid frame; ``status`` says what was seen instead."""

    status: FrameStatus
    detail: str


def encode_frame(payload: Mapping[str, Any]) -> str:
    """The frame for ``payload`` (canonical JSON, so equal payloads frame identically)."""
    body = canonical_json(payload)
    if len(body) > MAX_FRAME_BYTES:
        raise ValueError(f"payload of {len(body)} bytes exceeds {MAX_FRAME_BYTES}")
    digest = hashlib.sha256(body).hexdigest()
    header = f"<<<SESHAT-RESULT v{PROTOCOL_VERSION} length={len(body)} sha256={digest}>>>"
    return f"{header}\n{body.decode('utf-8')}\n{_FOOTER}\n"


def _check(lines: list[str], index: int, max_bytes: int) -> Found | NotFound:
    match = _HEADER.match(lines[index])
    if match is None:
        return NotFound(FrameStatus.MALFORMED, f"line {index + 1}: unreadable frame header")
    version, length, digest = int(match[1]), int(match[2]), match[3]
    if version != PROTOCOL_VERSION:
        return NotFound(FrameStatus.MALFORMED, f"protocol v{version}, expected v{PROTOCOL_VERSION}")
    if length > max_bytes:
        return NotFound(FrameStatus.TOO_LARGE, f"frame declares {length} bytes, limit {max_bytes}")
    if index + 1 >= len(lines):
        return NotFound(FrameStatus.INCOMPLETE, "output ends after a frame header")
    body = lines[index + 1].encode("utf-8", "surrogatepass")  # str output may hold them
    if len(body) < length and index + 2 >= len(lines):
        return NotFound(FrameStatus.INCOMPLETE, "output ends inside a frame")
    if len(body) != length or hashlib.sha256(body).hexdigest() != digest:
        return NotFound(FrameStatus.MALFORMED, "frame payload does not match its length and digest")
    if index + 2 >= len(lines):
        return NotFound(FrameStatus.INCOMPLETE, "output ends before the frame footer")
    if lines[index + 2] != _FOOTER:
        return NotFound(FrameStatus.MALFORMED, "frame footer missing")
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json reads
        return NotFound(FrameStatus.MALFORMED, "frame payload is not JSON")
    if not isinstance(payload, dict):
        return NotFound(FrameStatus.MALFORMED, "frame payload is not a JSON object")
    return Found(payload)


def find_last_frame(output: str | bytes, max_bytes: int = MAX_FRAME_BYTES) -> Found | NotFound:
    """The last valid frame in ``output``, or why there is none (see the module docstring).

    When several frames fail, the reason reported is the one of the last frame attempted,
    since that is the one the runner was writing when it stopped.
    """
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    lines = text.split("\n")
    failure: NotFound | None = None
    for index in range(len(lines) - 1, -1, -1):
        if not lines[index].startswith(_HEADER_START):
            continue
        result = _check(lines, index, max_bytes)
        if isinstance(result, Found):
            return result
        failure = failure or result
    return failure or NotFound(FrameStatus.NOT_FOUND, "no result frame in the output")


def find_frames(output: str | bytes, max_bytes: int = MAX_FRAME_BYTES) -> list[Found]:
    """Every valid frame in ``output``, in order (a batch's answers); damaged ones are
    left out, so an operation whose frame is damaged has no answer."""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    lines = text.split("\n")
    found = []
    for index, line in enumerate(lines):
        if line.startswith(_HEADER_START):
            result = _check(lines, index, max_bytes)
            if isinstance(result, Found):
                found.append(result)
    return found
