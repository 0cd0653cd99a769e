"""The runner's result protocol: exactly one framed JSON result on stdout.

``frame.py`` writes and finds frames. The control plane imports this package (and only
pure modules like it) to read what a runner printed.
"""

from runner.protocol.frame import (
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    Found,
    FrameStatus,
    NotFound,
    encode_frame,
    find_last_frame,
)

__all__ = [
    "MAX_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "Found",
    "FrameStatus",
    "NotFound",
    "encode_frame",
    "find_last_frame",
]
