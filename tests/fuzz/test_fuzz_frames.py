"""Fuzzing the runner's result frame: ``find_last_frame`` and the executor reading it.

The runner's stdout is mixed with whatever drivers and libraries print, and a runner that
is killed stops anywhere. Whatever the output: the reader says ``Found`` or ``NotFound``
with a status (never an exception, never a hang), ``outcome_from_output`` turns it into an
``Outcome``, and a frame written by ``encode_frame`` is found again whatever surrounds it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import event, example, given
from hypothesis import strategies as st

from fuzz.fuzzkit import budget, hostile_text
from gitops.execution.executor import outcome_from_output
from runner.protocol.frame import (
    MAX_FRAME_BYTES,
    Found,
    FrameStatus,
    NotFound,
    encode_frame,
    find_last_frame,
)
from runner.protocol.messages import OperationInput

HEADER = "<<<SESHAT-RESULT v"
FOOTER = "<<<SESHAT-RESULT END>>>"
REQUEST = OperationInput.model_validate(
    {"operation": "plan", "id": "op-1", "url": {"from_env": "DB_URL"}, "desired": "/tmp/d"}
)
RESULT = {"protocol": 1, "operation": "plan", "id": "op-1", "result": {"planDigest": "x"}}


def _header(body: bytes, *, version: str = "1", length: str | None = None) -> str:
    size = str(len(body)) if length is None else length
    return f"{HEADER}{version} length={size} sha256={hashlib.sha256(body).hexdigest()}>>>"


def _frame_like(body: bytes, draw: st.DrawFn) -> str:
    """A frame for ``body`` as written, or with one of its parts wrong."""
    text = body.decode("utf-8", "surrogateescape")
    wrong = draw(st.sampled_from(["none", "length", "version", "digest", "footer", "cut"]))
    length = None
    if wrong == "length":
        length = draw(
            st.sampled_from(["0", "9" * 5000, "١٢", "+1", "-1", str(MAX_FRAME_BYTES + 1)])
        )
    header = _header(body, version="2" if wrong == "version" else "1", length=length)
    if wrong == "digest":
        header = header.replace("sha256=", "sha256=0" + "0" * 63 + ">>>#", 1)
    lines = [header, text, "" if wrong == "footer" else FOOTER]
    written = "\n".join(lines) + "\n"
    if wrong == "cut":
        written = written[: draw(st.integers(0, len(written)))]
    return written


@st.composite
def _outputs(draw: st.DrawFn) -> bytes:
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["noise", "header", "footer", "frame", "payload"]))
        if kind == "noise":
            parts.append(draw(hostile_text) + "\n")
        elif kind == "header":
            parts.append(HEADER + draw(st.text(max_size=100)) + "\n")
        elif kind == "footer":
            parts.append(FOOTER + draw(st.sampled_from(["", "\n", "\r\n", " "])))
        else:
            payload: Any = RESULT if kind == "frame" else draw(_json_payloads)
            body = json.dumps(payload).encode("utf-8", "surrogatepass")
            parts.append(_frame_like(body, draw))
    return "".join(parts).encode("utf-8", "surrogatepass")


_json_payloads = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
) | st.sampled_from([[], 1, "x", {"protocol": "1"}, {**RESULT, "id": "op-2"}])


@given(st.one_of(_outputs(), st.binary(max_size=512)))
@budget(500)
@example((_header(b"{}", length="9" * 5000) + "\n{}\n" + FOOTER + "\n").encode())
@example((_header(b"[" * 100_000) + "\n" + "[" * 100_000 + "\n" + FOOTER + "\n").encode())
def test_any_output_is_found_or_not_found(output: bytes) -> None:
    forms = (output, output.decode("utf-8", "replace"), output.decode("utf-8", "surrogateescape"))
    for form in forms:
        found = find_last_frame(form)
        if isinstance(found, NotFound):
            assert isinstance(found.status, FrameStatus) and found.detail
            event(f"not found: {found.status.value}")
        else:
            assert isinstance(found, Found) and isinstance(found.payload, dict)
            event("found")
    outcome = outcome_from_output(output, REQUEST, 0)
    assert outcome.kind in ("done", "refused", "failed", "lost")
    assert outcome.detail or outcome.kind == "done"


_payloads = st.dictionaries(
    st.text(st.characters(codec="utf-8"), max_size=10),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(st.characters(codec="utf-8")),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=5), inner)
        ),
        max_leaves=10,
    ),
    max_size=5,
)


@given(
    payload=_payloads,
    before=st.lists(hostile_text | st.sampled_from([HEADER + "1 length=2", FOOTER])),
    after=st.lists(hostile_text.filter(lambda line: HEADER not in line)),
)
@budget(300)
def test_an_encoded_frame_is_found_whatever_surrounds_it(
    payload: dict[str, Any], before: list[str], after: list[str]
) -> None:
    frame = encode_frame(payload)
    output = "\n".join([*before, frame.rstrip("\n"), *after]) + "\n"
    found = find_last_frame(output.encode("utf-8", "surrogatepass"))
    assert isinstance(found, Found), found
    assert found.payload == json.loads(json.dumps(payload))
