"""The fast-compiling name classes match exactly what the plain ones they replace match."""

from __future__ import annotations

import re

import pytest

from runner.sql.charsets import NAME_PART, NAME_PART_NO_DOLLAR, NAME_START, VARIABLE_PART

PLAIN = {
    NAME_START: r"[A-Za-z_\u0080-\U0010ffff]",
    NAME_PART: r"[A-Za-z0-9_$\u0080-\U0010ffff]",
    NAME_PART_NO_DOLLAR: r"[A-Za-z0-9_\u0080-\U0010ffff]",
    VARIABLE_PART: r"[A-Za-z0-9_$.\u0080-\U0010ffff]",
    r"[^\x00-\x40\x5b-\x5e\x60\x7b-\x7f\U00010000-\U0010ffff]": r"[A-Za-z_\u0080-\uffff]",
}


@pytest.mark.parametrize("fast", sorted(PLAIN))
def test_every_code_point_is_judged_alike(fast: str) -> None:
    quick, plain = re.compile(fast), re.compile(PLAIN[fast])
    differ = [
        hex(point)
        for point in range(0x110000)
        if (quick.fullmatch(chr(point)) is None) != (plain.fullmatch(chr(point)) is None)
    ]
    assert differ == []
