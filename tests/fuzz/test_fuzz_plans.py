"""Fuzzing plan documents: ``read_plan`` and what is made from a plan that reads.

A plan file is read back by ``seshat-runner schema apply``, by the apply operation and by
``seshat plan show`` from the status branch, where anyone with push access can write it.
``read_plan`` must return a document or raise ``ValueError`` (pydantic's
``ValidationError`` is one); a document that reads must give its canonical bytes, its
digest and its ``plan.sql``, and read back as itself from those bytes. Every comment line
of ``plan.sql`` stays one line.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from fuzz.fuzzkit import budget, hostile_json, hostile_strings, hostile_text, mutated_bytes
from runner.engines.plan import (
    MAX_PLAN_BYTES,
    PlanDocument,
    comment_text,
    plan_bytes,
    plan_digest,
    plan_sql,
    read_plan,
)

PLAN: dict[str, Any] = {
    "contract_version": 1,
    "format_version": 1,
    "dialect": "postgresql",
    "server_major": 16,
    "observed": "sha256:" + "1" * 64,
    "desired": "sha256:" + "2" * 64,
    "expected": "sha256:" + "3" * 64,
    "options": "sha256:" + "4" * 64,
    "exclude": ["audit.*"],
    "statements": [
        {
            "op": "create_table",
            "key": "table:public.orders",
            "sql": "CREATE TABLE public.orders (id bigint PRIMARY KEY)",
            "transactional": True,
            "hazards": [],
        },
        {
            "op": "drop_column",
            "key": "column:public.users.age",
            "sql": "ALTER TABLE public.users DROP COLUMN age",
            "transactional": True,
            "hazards": [{"kind": "destructive", "code": "drop_column"}],
        },
    ],
    "summary": {
        "statements": 2,
        "destructive": True,
        "privilege_changes": [],
        "hazards": {"destructive": 1},
    },
}
SEED = json.dumps(PLAN).encode()


def _plans() -> st.SearchStrategy[bytes]:
    return st.one_of(
        hostile_json(PLAN).map(lambda d: json.dumps(d).encode("utf-8", "surrogatepass")),
        hostile_strings(PLAN).map(
            lambda d: json.dumps(d, ensure_ascii=False).encode("utf-8", "surrogatepass")
        ),
        mutated_bytes([SEED]),
        st.binary(max_size=64),
        st.sampled_from(
            [
                b"[" * 100_000,
                SEED.replace(b'"server_major": 16', b'"server_major": ' + b"9" * 5000),
                SEED.replace(b'"server_major": 16', b'"server_major": 16.0'),
                SEED.replace(b'"server_major": 16', b'"server_major": NaN'),
                SEED.replace(b'"destructive": 1', b'"destructive": 1.5'),
                SEED.replace(b'"destructive": 1}', b'"destructive": 1, "\\ud800": 1}'),
                SEED.replace(b"table:public.orders", b"x\\n-- [0002] DROP \\u2028\\ud800"),
                SEED.replace(b'"exclude": ["audit.*"]', b'"exclude": ["\\udfff"]'),
                b" " * (MAX_PLAN_BYTES + 1),
            ]
        ),
    )


@given(_plans())
@budget(400)
@example(SEED.replace(b'"destructive": 1}', b'"destructive": 1, "\\ud800": 1}'))
def test_plans_read_or_refused(raw: bytes) -> None:
    try:
        document = read_plan(raw)
    except ValueError as error:
        event(f"refused: {type(error).__name__}")
        return
    event("read")
    data = plan_bytes(document)
    digest = plan_digest(document)
    assert digest.startswith("sha256:")
    again = read_plan(data)
    assert again == document and plan_bytes(again) == data
    text = plan_sql(document)
    assert text.startswith(f"-- Seshat plan (not recorded); content {digest}\n")
    assert isinstance(document, PlanDocument)


@given(st.one_of(hostile_text, st.text()))
@budget(300)
@example("a\nDROP TABLE important; --")
@example("\r\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e")
@example("\ud800")
def test_comment_text_is_one_printable_line(text: str) -> None:
    shown = comment_text(text)
    assert shown.isprintable(), repr(shown)
    assert len(shown.splitlines()) <= 1
    shown.encode("utf-8")


# -- found by fuzzing ---------------------------------------------------------------------


def test_a_deeply_nested_plan_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        read_plan(b"[" * 100_000)


@pytest.mark.parametrize(
    "old, new",
    [
        (b'"destructive": 1}', b'"destructive": 1, "\\ud800": 1}'),
        (b"table:public.orders", b"table:\\ud800"),
    ],
)
def test_a_plan_reads_back_as_itself(old: bytes, new: bytes) -> None:
    try:
        document = read_plan(SEED.replace(old, new))
    except ValueError:
        return  # refused: fine
    assert read_plan(plan_bytes(document)) == document
