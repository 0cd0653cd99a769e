"""What a forge renders is inert (gitops/reviews/markdown.py, issue 32 item 2).

A corpus of hostile strings goes through the one escaping module into every place text can
land (a table cell, an inline code span in a paragraph, a list item and a heading, a fenced
block) and through every writer of forge text (the preview comment, the review body, the
rejection comment), and the result is rendered by GitHub's own renderer, cmark-gfm (with
raw HTML let through, as GitHub's renderer does before its sanitizer, so any HTML that got
out shows). Nothing may come out live: no ``<a>``, no ``<img>``, no tag but the ones plain
Markdown makes, no HTML comment but Seshat's markers. GitHub links ``@mentions`` and
``#123`` references after rendering, in text outside code; cmark-gfm does not, so the test
asserts that no text outside ``<code>`` holds one (nor a URL, a bidi control or a
zero-width character): hostile text is neutralized by staying inside code, which
docs/security.md states as the rule.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from html.parser import HTMLParser

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from gitops.preview.changes import FieldChange, ResourceChange
from gitops.preview.lifecycles import PlanPreview
from gitops.preview.render import render_markdown
from gitops.preview.run import Outcome, PreviewReport, ResourcePreview
from gitops.repo.problems import ResourceKey
from gitops.resources.status import (
    Condition,
    ConditionType,
    DatabaseSchemaStatus,
    PlanSummary,
    RejectedApproval,
    RejectionReason,
    SchemaPhase,
)
from gitops.reviews.markdown import code, cut, fence, visible
from gitops.reviews.review import rejection_comment, review_body

CORPUS = [
    "a | b",
    "|",
    "||",
    "a\\|b",
    "\\",
    "ends with a backslash\\",
    "`",
    "``x``",
    "|`|`|",
    "a ` | ` b ``` c",
    "[x](http://e.test/x)",
    "[x][y]\n\n[y]: http://e.test/y",
    "[y]: http://e.test/ref",
    "![x](http://e/x.png)",
    "<img src=x onerror=alert(1)>",
    '<a href="http://e.test">click</a>',
    "<script>alert(1)</script>",
    "<!-- hidden -->",
    "&lt;img src=x&gt; &#60;b&#62;",
    "@mention",
    "hi @someone and @org/team",
    "#123",
    "org/repo#1",
    "GH-7 and acme/shop@abcdef1",
    "www.example.com",
    "http://example.com/x",
    "see https://e.test/a?b=c#d",
    "mailto:a@b.test and a@b.test",
    "x\u202ey reversed",
    "\u2066isolate\u2069 \u2067rtl\u2069 \u2068first\u2069",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u2060word",
    "line\nbreak | ![i](http://e/i.png)",
    "\r\n```\n| x |\n~~~\n",
    "*em* **strong** _u_ ~~s~~",
    "> quote",
    "# heading",
    "- item",
    "1. item",
    "---",
    "=====",
    "\x00\x07\x1b[31mred\x7f",
    "\u2028\u2029",
    "x" * 5000,
    ("word " * 100) + "@tail",
]

INVISIBLE = re.compile(r"[\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\x00-\x08\x0b-\x1f\x7f]")
LIVE_TEXT = re.compile(r"@\w|#\d|://|www\.|\]\(|<|mailto:")
TAGS = {"p", "code", "pre", "h2", "h3", "ul", "li", "table", "thead", "tbody", "tr", "th", "td"}
TAGS |= {"strong", "em", "blockquote", "hr"}


class _Rendered(HTMLParser):
    """An HTML rendering taken apart: tags, comments, text inside and outside ``<code>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.comments: list[str] = []
        self.codes: list[str] = []
        self.outside: list[str] = []
        self.cells: list[int] = []  # cells per table row
        self.data_cells: list[tuple[int, str]] = []  # per <td>: its code spans, text outside
        self._in_code = 0
        self._in_td = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "code":
            self._in_code += 1
            self.codes.append("")
            if self._in_td:
                spans, text = self.data_cells[-1]
                self.data_cells[-1] = (spans + 1, text)
        elif tag == "tr":
            self.cells.append(0)
        elif tag in ("td", "th"):
            self.cells[-1] += 1
            if tag == "td":
                self._in_td = True
                self.data_cells.append((0, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "code":
            self._in_code -= 1
        elif tag == "td":
            self._in_td = False

    def handle_data(self, data: str) -> None:
        if self._in_code:
            self.codes[-1] += data
        else:
            self.outside.append(data)
            if self._in_td:
                spans, text = self.data_cells[-1]
                self.data_cells[-1] = (spans, text + data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def _render(markdown: str, markers: tuple[str, ...] = ()) -> _Rendered:
    """``markdown`` through cmark-gfm (GitHub's extensions, raw HTML let through), checked
    inert: the parts, for more checks."""
    html = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    parsed = _Rendered()
    parsed.feed(html)
    parsed.close()
    assert not {"a", "img"} & set(parsed.tags), html
    assert set(parsed.tags) <= TAGS, set(parsed.tags) - TAGS
    assert all(f"<!--{c}-->" in markers for c in parsed.comments), parsed.comments
    outside = "".join(parsed.outside)
    assert not LIVE_TEXT.search(outside), LIVE_TEXT.search(outside)
    assert not INVISIBLE.search(outside)
    assert not INVISIBLE.search("".join(parsed.codes))  # shown as <U+XXXX>, never hidden
    return parsed


def _unescaped(shown: str) -> str:
    """The visible ``<U+XXXX>`` escapes of :func:`visible` turned back into characters."""
    return re.sub(r"<U\+([0-9A-F]{4,6})>", lambda m: chr(int(m.group(1), 16)), shown)


@pytest.mark.parametrize("value", CORPUS, ids=range(len(CORPUS)))
def test_every_place_keeps_a_hostile_value_inside_code(value: str) -> None:
    flat = " ".join(value.split())
    limit = 10_000
    places = {
        "paragraph": f"Said: {code(value, limit)} and nothing else.",
        "list item": f"- **Why**: {code(value, limit)}",
        "heading": f"### DatabaseSchema {code(value, limit)}: Blocked",
        "table cell": (
            "| field | base | head |\n| --- | --- | --- |\n"
            f"| {code(value, limit, cell=True)} | (absent) | {code(value, limit, cell=True)} |"
        ),
    }
    for place, markdown in places.items():
        parsed = _render(markdown)
        assert parsed.codes, place
        for span in parsed.codes:  # the whole value in one span, unchanged but for what is shown
            assert _unescaped(span) == (flat or "  "), (place, span)
        if place == "table cell":
            assert parsed.cells == [3, 3], parsed.cells  # no pipe of the value ends a cell
    block = _render(f"Before.\n\n{fence(value, 'text')}\n\nAfter.")
    [inside] = block.codes
    assert _unescaped(inside) == value.replace("\r\n", "\n").rstrip() + "\n"
    assert "".join(block.outside).split() == ["Before.", "After."]


def test_a_long_value_is_cut_inside_its_span_and_says_so() -> None:
    value = "x" * 300 + " ![i](http://e/i.png) @you"
    shown = code(value)
    parsed = _render(f"- {shown}")
    [span] = parsed.codes
    assert span.endswith(" …") and len(span) == 202
    assert "@you" not in shown


def test_invisible_characters_are_shown_by_their_code_point() -> None:
    assert visible("a\u202eb\u200bc\td", keep="\t") == "a<U+202E>b<U+200B>c\td"
    assert code("x\u2066y") == "`x<U+2066>y`"
    assert all(
        unicodedata.category(ch) not in ("Cf", "Cc")
        for ch in fence("\u202e\x1b\r\n\u2029", "text")
        if ch != "\n"
    )


def _hostile_report() -> PreviewReport:
    def change(name: str) -> ResourceChange:
        return ResourceChange(
            key=ResourceKey("DatabaseSchema", "shop", name),
            reasons=tuple(CORPUS[:12]),
            fields=(
                *(
                    FieldChange(f"spec.policy.f{i}", v, CORPUS[-i - 1])
                    for i, v in enumerate(CORPUS)
                ),
                FieldChange("spec.a|b", None, "| ![i](http://e/i.png) |"),
            ),
        )

    sql = "\n".join(CORPUS) + "\n```\n````sql\n"
    plan = PlanPreview(
        id="sha256:" + "ab" * 32,
        statements=2,
        destructive=True,
        privilege_changes=("GRANT | @admins",),
        hazards=(("DROP_TABLE`|", 1),),
        sql=sql,
        approvals=1,
    )
    migration = PlanPreview(
        id="sha256:" + "cd" * 32,
        files=tuple((v, v, v) for v in CORPUS),
        history="ready | @x",
    )
    return PreviewReport(
        base="b" * 40,
        head="h" * 40,
        resources=(
            ResourcePreview(change("a|b"), Outcome.PLAN, "AwaitingApproval", "x|y", CORPUS[5]),
            ResourcePreview(change("c"), Outcome.BLOCKED, "Blocked", "@r", "\n".join(CORPUS), plan),
            ResourcePreview(change("d"), Outcome.PLAN, "Planning", "#1", CORPUS[15], migration),
        ),
        problems=tuple(CORPUS),
        trust_changes=tuple(CORPUS),
    )


@pytest.mark.parametrize("limit", [None, 60_000, 12_000, 3_000])
def test_the_preview_comment_is_inert_whole_and_cut(limit: int | None) -> None:
    markdown = render_markdown(_hostile_report(), limit=limit)
    if limit is not None:
        assert len(markdown) <= limit
    parsed = _render(markdown)
    assert "### DatabaseSchema `shop/c`: Blocked" in markdown  # the urgent one, never cut
    assert bool(parsed.data_cells) is (limit != 3_000)  # a field table, where one fits
    # Every cell of a field table, whole or cut, is one code span.
    assert all((spans, text) in ((1, ""), (0, "(absent)")) for spans, text in parsed.data_cells), [
        cell for cell in parsed.data_cells if cell[0] != 1
    ]


def _status(message: str) -> DatabaseSchemaStatus:
    message = message[:1024]
    return DatabaseSchemaStatus(
        phase=SchemaPhase.AWAITING_APPROVAL,
        conditions=[
            Condition(
                type=ConditionType.READY,
                status="False",
                reason="AwaitingApproval",
                message=message,
                last_transition_time=datetime(2026, 12, 3, tzinfo=UTC),
            )
        ],
        plan=PlanSummary(id="sha256:" + "cd" * 32, statements=3, destructive=True),
        rejected_approvals=[
            RejectedApproval(
                file=value[:300], reason=RejectionReason.UNTRUSTED_SIGNER, detail=value[:1024]
            )
            for value in CORPUS[:32]
        ],
    )


@pytest.mark.parametrize("limit", [60_000, 8_000])
def test_the_review_body_is_inert_whole_and_cut(limit: int) -> None:
    body = review_body(
        "shop/a|b", _status("\n".join(CORPUS)), "\n".join(CORPUS), "a" * 40, limit=limit
    )
    assert len(body) <= limit
    _render(body)
    assert "; **destructive**" in body  # the plan's line comes before anything a cut takes


@pytest.mark.parametrize("value", CORPUS, ids=range(len(CORPUS)))
def test_a_rejection_comment_is_inert(value: str) -> None:
    entry = RejectedApproval(
        file=value[:300], reason=RejectionReason.STALE_PLAN, detail=value[:1024]
    )
    marker, text = rejection_comment(f"shop/{value[:50]}", "sha256:" + "ef" * 32, entry)
    _render(text, markers=(marker,))


def test_a_cut_never_leaves_a_fence_or_a_span_open() -> None:
    text = "intro `a | b`\n\n" + fence("x\n" * 500 + "![i](http://e/i.png)\n@you\n", "sql")
    for limit in range(40, len(text), 97):
        shortened = cut(text, limit, "*cut*")
        assert len(shortened) <= limit or shortened.endswith("*cut*")
        _render(shortened)
