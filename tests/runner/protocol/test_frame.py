"""The frame parser tells found, not found, incomplete, malformed and too large apart."""

from __future__ import annotations

import hashlib

import pytest

from runner.protocol.frame import (
    Found,
    FrameStatus,
    NotFound,
    encode_frame,
    find_last_frame,
)

PAYLOAD = {"protocol": 1, "operation": "plan", "id": "op-1", "result": {"statements": 2}}


def status_of(output: str, **kwargs: int) -> FrameStatus:
    result = find_last_frame(output, **kwargs)
    assert isinstance(result, NotFound), result
    return result.status


def test_a_frame_round_trips_and_is_byte_stable() -> None:
    frame = encode_frame(PAYLOAD)
    assert frame == encode_frame(dict(reversed(PAYLOAD.items())))
    header, body, footer, end = frame.split("\n")
    assert header == (
        f"<<<SESHAT-RESULT v1 length={len(body.encode())} "
        f"sha256={hashlib.sha256(body.encode()).hexdigest()}>>>"
    )
    assert (footer, end) == ("<<<SESHAT-RESULT END>>>", "")
    assert find_last_frame(frame) == Found(PAYLOAD)


def test_the_last_valid_frame_wins_among_interleaved_log_lines() -> None:
    first = encode_frame({**PAYLOAD, "id": "old"})
    output = f"starting\n{first}WARNING: driver says hi\n{encode_frame(PAYLOAD)}bye\n"
    assert find_last_frame(output) == Found(PAYLOAD)
    assert find_last_frame(output.encode()) == Found(PAYLOAD)


def test_a_damaged_last_frame_falls_back_to_an_earlier_valid_one() -> None:
    good = encode_frame(PAYLOAD)
    damaged = encode_frame({"id": "new"}).replace('"new"', '"wen"')
    assert find_last_frame(good + damaged) == Found(PAYLOAD)


def test_no_frame_at_all_is_not_found() -> None:
    assert status_of("just logs\nand more logs\n") is FrameStatus.NOT_FOUND
    assert status_of("") is FrameStatus.NOT_FOUND


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_output_cut_inside_a_frame_is_incomplete(cut: int) -> None:
    frame = encode_frame(PAYLOAD)
    header, body, _footer, _ = frame.split("\n")
    truncated = ["logs", header, body[: len(body) // 2], ""][: cut + 1]
    if cut == 3:
        truncated = ["logs", header, body]  # footer never written
    assert status_of("\n".join(truncated)) is FrameStatus.INCOMPLETE


@pytest.mark.parametrize(
    "mangle",
    [
        lambda f: f.replace('"op-1"', '"op-2"'),  # payload changed, digest no longer matches
        lambda f: f.replace("<<<SESHAT-RESULT END>>>", "<<<END>>>"),  # footer damaged
        lambda f: f.replace("length=", "length=x"),  # unreadable header
        lambda f: f.replace("v1 ", "v9 "),  # another protocol version
    ],
)
def test_damaged_frames_are_malformed(mangle: object) -> None:
    assert callable(mangle)
    assert status_of(mangle(encode_frame(PAYLOAD))) is FrameStatus.MALFORMED


def test_a_payload_that_is_not_an_object_is_malformed() -> None:
    body = b"[1,2]"
    frame = (
        f"<<<SESHAT-RESULT v1 length={len(body)} sha256={hashlib.sha256(body).hexdigest()}>>>\n"
        "[1,2]\n<<<SESHAT-RESULT END>>>\n"
    )
    assert status_of(frame) is FrameStatus.MALFORMED


def test_a_frame_over_the_limit_is_too_large() -> None:
    frame = encode_frame({"blob": "x" * 2000})
    assert status_of(frame, max_bytes=1000) is FrameStatus.TOO_LARGE
    assert isinstance(find_last_frame(frame, max_bytes=4000), Found)


def test_encoding_refuses_an_oversized_payload() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        encode_frame({"blob": "x" * (13 * 1024 * 1024)})
