"""Character classes of SQL names, spelled so that they compile fast.

A name starts with an ASCII letter, ``_`` or any character beyond ASCII, and goes on with
those, ASCII digits and (in most dialects) ``$``. Written as ``[A-Za-z_\\u0080-\\U0010ffff]``
such a class takes Python's regular-expression compiler about 5 ms, and the runner compiles a
dozen of them at import, a fifth of a plan's start-up. The classes below say the same as a
*negated* set of the ASCII characters a name cannot hold (the same characters match, as
``tests/runner/sql/test_charsets.py`` checks over every code point), which compiles in
microseconds.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "DOLLAR_QUOTE",
    "NAME",
    "NAME_PART",
    "NAME_PART_NO_DOLLAR",
    "NAME_START",
    "VARIABLE_PART",
]

NAME_START: Final = r"[^\x00-\x40\x5b-\x5e\x60\x7b-\x7f]"
"""``[A-Za-z_\\u0080-\\U0010ffff]``: a letter, ``_`` or any character beyond ASCII."""
NAME_PART: Final = r"[^\x00-\x23\x25-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]"
"""``[A-Za-z0-9_$\\u0080-\\U0010ffff]``: what may follow, ``$`` included."""
NAME_PART_NO_DOLLAR: Final = r"[^\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]"
"""``[A-Za-z0-9_\\u0080-\\U0010ffff]``: what may follow in a dollar-quote tag."""
VARIABLE_PART: Final = r"[^\x00-\x23\x25-\x2d\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]"
"""``[A-Za-z0-9_$.\\u0080-\\U0010ffff]``: a MySQL variable name's characters (``.`` too)."""

NAME: Final = re.compile(rf"{NAME_START}{NAME_PART}*")
"""An unquoted name or keyword, as the server reads one, read whole: in PostgreSQL
``a$E'...'`` is the name ``a$E`` and a plain string (not an escape string), and ``x$$`` is a
name (not the start of a dollar quote); in MySQL ``größe`` is one word."""
DOLLAR_QUOTE: Final = re.compile(rf"\$({NAME_START}{NAME_PART_NO_DOLLAR}*)?\$")
"""A PostgreSQL dollar-quote delimiter (``$$``, ``$fn$``); group 1 is its tag."""
