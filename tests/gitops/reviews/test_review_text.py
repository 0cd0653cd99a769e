"""Review texts carry artifact text inertly (the hardening issue, part two, item 5).

The body is parsed with markdown-it (CommonMark, what forges start from): whatever the
artifact's SQL or a server's message holds, it must stay inside fenced code blocks, where
mentions, images, links and HTML are not rendered.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from gitops.resources.status import (
    Condition,
    ConditionType,
    DatabaseSchemaStatus,
    PlanSummary,
    SchemaPhase,
)
from gitops.reviews.markdown import MAX_BODY, code, fence
from gitops.reviews.review import review_body

PLAN = "sha256:" + "cd" * 32
REVISION = "a" * 40
HOSTILE = (
    "CREATE TABLE t (note text DEFAULT 'x\n```\n@everyone look ![p](https://evil.test/p.png) "
    "[click](https://evil.test) <!-- DROP TABLE important; --> <img src=x>\n````\n');\n"
)


def _status(message: str, statements: int = 3) -> DatabaseSchemaStatus:
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
        plan=PlanSummary(id=PLAN, statements=statements),
    )


def _live(body: str) -> list[Token]:
    """Every token a forge would render as something other than code."""
    found: list[Token] = []

    def walk(tokens: list[Token]) -> None:
        for token in tokens:
            if token.type in ("fence", "code_block", "code_inline"):
                continue
            found.append(token)
            if token.children:
                walk(token.children)

    walk(MarkdownIt("commonmark").parse(body))
    return found


@pytest.mark.parametrize("message", ["plain", "server said: `x` @someone ![i](https://e.test/i)"])
def test_artifact_text_stays_inside_fences(message: str) -> None:
    body = review_body("shop/orders", _status(message), HOSTILE, REVISION)
    assert f"Declarations at {code(REVISION)}." in body  # the commit the pass read
    live = _live(body)
    assert not [t for t in live if t.type in ("image", "link_open", "html_inline", "html_block")]
    text = " ".join(t.content for t in live if t.type == "text")
    for word in ("@everyone", "@someone", "evil.test", "DROP TABLE", "e.test"):
        assert word not in text, word
    # The SQL is all there, unchanged, inside one fence.
    fences = [t for t in MarkdownIt("commonmark").parse(body) if t.type == "fence"]
    assert any(t.content == HOSTILE.rstrip() + "\n" for t in fences)


def test_a_long_plan_is_cut_with_a_pointer_to_the_whole_of_it() -> None:
    sql = "".join(f"ALTER TABLE t ADD COLUMN c{i} integer;\n" for i in range(20_000))
    body = review_body("shop/orders", _status("plan", 20_000), sql, REVISION)
    assert len(body) <= MAX_BODY + 1
    assert f"plans/shop/orders/{PLAN.removeprefix('sha256:')}.sql" in body
    assert "seshat approve shop/orders --plan" in body  # the command survives the cut
    assert not [t for t in _live(body) if t.type in ("image", "link_open", "html_inline")]


def test_fences_and_code_spans_cannot_be_closed_from_inside() -> None:
    for text in ("```", "a ```` b", "`", "x\n~~~\n"):
        tokens = MarkdownIt("commonmark").parse(fence(text) + "\nafter")
        assert tokens[0].type == "fence" and tokens[0].content.rstrip("\n") == text.rstrip()
        inline = MarkdownIt("commonmark").parseInline(f"a {code(text)} b")[0].children
        assert inline is not None
        assert [t.type for t in inline] == ["text", "code_inline", "text"]
