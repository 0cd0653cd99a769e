"""``gitops.reviews.markdown.visible`` splits a text at the characters it keeps and looks at
a piece character by character only when the piece is not printable (a text of printable
lines is never walked). It must write exactly what the one-character-at-a-time definition
writes, for any text and any set of kept characters."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fuzz.fuzzkit import budget
from gitops.reviews.markdown import visible

# Line breaks, tabs, bidi and zero-width controls, NUL, the line separator, backticks and
# what a regular expression's character class treats specially.
_TRICKY = "ab \n\t\r\u200b\u202e\x00\u2028\u0085`]\\-^["


def _one_by_one(text: str, keep: str) -> str:
    return "".join(ch if ch.isprintable() or ch in keep else f"<U+{ord(ch):04X}>" for ch in text)


@budget(300)
@given(
    text=st.text(alphabet=st.sampled_from(_TRICKY) | st.characters(), max_size=60),
    keep=st.text(alphabet=st.sampled_from(_TRICKY), max_size=4),
)
def test_visible_writes_what_the_character_by_character_definition_writes(
    text: str, keep: str
) -> None:
    assert visible(text, keep) == _one_by_one(text, keep)
