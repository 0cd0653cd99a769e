"""Markdown that carries untrusted text inertly: preview comments and check summaries, review
files, pull request bodies and comments.

What these show comes partly from a repository, an artifact or a database (a declaration's
values, the plan's SQL, a server's message quoting it, a file name): text whose author is not
the reader. On a forge, markdown outside code is live: ``@mentions`` notify people, ``#123``
and ``org/repo#1`` link elsewhere, images fetch addresses, links, autolinked URLs and HTML can
hide or fake what is said. So every piece of such text goes through this module, and
nowhere else, as one of

* :func:`code`: a value inline (in a paragraph, a list item, a heading, link text, or, with
  ``cell=True``, a table cell): one line, bounded, in a code span whose delimiters are longer
  than any backtick run inside it, so it cannot be closed early. In a table cell every ``|``
  is escaped (``\\|``): GFM splits a row at its pipes before it reads code spans, so a bare
  ``|`` would end the cell, and the span with it; inside the span the table unescapes it.
* :func:`fence`: text of many lines, in a fenced block whose fence is longer than any
  backtick run inside it.

Inside code, a forge renders no link, image, HTML tag or autolink, and GitHub and GitLab
link no ``@mention`` or ``#reference``: mentions are neutralized by never leaving code, not
by altering them (a zero-width joiner would change what a reviewer copies). Both functions
also show what would change how text looks without being seen (Unicode bidi controls such
as U+202E and U+2066..U+2069, zero-width characters, other format and control characters)
as a visible ``<U+XXXX>`` (:func:`visible`): a reviewer reads what is there, in its order.

A text longer than a forge accepts is cut by :func:`cut`: at a line, never inside a code
span, and a fence the cut falls in is closed, so nothing after the cut becomes live.
"""

from __future__ import annotations

import functools
import re

__all__ = ["MAX_BODY", "code", "cut", "fence", "fenced_length", "visible"]

MAX_BODY = 60_000
"""Forge texts are cut to this many characters (GitHub refuses pull request bodies and
comments over 65,536, check-run summaries over 65,535), with a pointer to the whole text."""

_BACKTICKS = re.compile(r"`+")
_OPENING_FENCE = re.compile(r"(`{3,})[A-Za-z0-9_-]*")


def visible(text: str, keep: str = "") -> str:
    """``text`` with every character that prints as nothing or moves other characters (what
    :meth:`str.isprintable` refuses: control and format characters, bidi controls,
    zero-width characters, separators other than the space), except those in ``keep``,
    written as ``<U+XXXX>``."""
    if text.isprintable():
        return text
    if not keep:
        return _escaped(text)
    # Split at the kept characters (a line break, say: then a text of printable lines is
    # never looked at character by character); each piece between them is printable, as
    # almost every line is, or escaped.
    pieces = _splitter(keep).split(text)
    return "".join(
        piece if odd % 2 or piece.isprintable() else _escaped(piece)
        for odd, piece in enumerate(pieces)
    )


def _escaped(text: str) -> str:
    return "".join(ch if ch.isprintable() else f"<U+{ord(ch):04X}>" for ch in text)


@functools.cache
def _splitter(keep: str) -> re.Pattern[str]:
    """Splits at each character of ``keep``, keeping it (at the odd places of the list)."""
    return re.compile(f"([{re.escape(keep)}])")


def _fence_for(text: str) -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def fence(text: str, info: str = "") -> str:
    """``text`` in a fenced code block nothing inside it can close (line breaks and tabs
    kept, every other invisible character shown)."""
    shown = visible(text.replace("\r\n", "\n").rstrip(), keep="\n\t")
    marker = _fence_for(shown)
    return f"{marker}{info}\n{shown}\n{marker}"


def fenced_length(text: str, info: str = "") -> int:
    return len(fence(text, info))


def code(value: str, limit: int = 200, *, cell: bool = False) -> str:
    """A value as an inline code span: one line (whitespace runs become one space), at most
    ``limit`` characters of it (``…`` marks a cut), invisible characters shown, delimiters
    that fit; ``cell``: for a table cell (each ``|`` escaped)."""
    flat = " ".join(value.split())
    if len(flat) > limit:
        flat = flat[:limit].rstrip() + " …"
    flat = visible(flat)
    longest = max((len(run) for run in _BACKTICKS.findall(flat)), default=0)
    ticks = "`" * (longest + 1)
    if cell:
        flat = flat.replace("|", "\\|")
    padded = f" {flat} " if flat.startswith("`") or flat.endswith("`") or not flat else flat
    return f"{ticks}{padded}{ticks}"


def cut(text: str, limit: int, note: str) -> str:
    """``text`` as it is when it has at most ``limit`` characters; else the whole lines of it
    that fit, a fence the cut falls inside closed, then ``note`` (Seshat's words: where the
    whole text is). Lines are the unit because nothing in these texts spans lines but the
    fences :func:`fence` makes."""
    if len(text) <= limit:
        return text
    budget = limit - len(note) - 2
    kept: list[str] = []
    used = 0
    inside: str | None = None  # the marker of the fence the kept lines leave open
    for line in text.split("\n"):
        after = inside
        if inside is None:
            opening = _OPENING_FENCE.fullmatch(line)
            after = opening.group(1) if opening else None
        elif line == inside:
            after = None
        closing = len(after) + 1 if after else 0
        if used + len(line) + 1 + closing > budget:
            break
        kept.append(line)
        used += len(line) + 1
        inside = after
    if inside is not None:
        kept.append(inside)
    return "\n".join(kept).rstrip("\n") + "\n\n" + note
