"""A preview comment cut to a forge's size never hides a Blocked or destructive resource
(gitops/preview/render.py; issue 32, the comment cut): they are listed first, the SQL of the
others is shortened first, and whatever is left out is the least urgent, named in one line.

Rendering is a pure function of the report, so the report is built in memory here; the
verdicts themselves are tested against real components in the other preview tests.
"""

from __future__ import annotations

import re

import pytest

from gitops.preview.changes import FieldChange, ResourceChange
from gitops.preview.forges import COMMENT_LIMIT
from gitops.preview.lifecycles import PlanPreview
from gitops.preview.render import CUT_NOTE, render_markdown
from gitops.preview.run import Outcome, PreviewReport, ResourcePreview
from gitops.repo.problems import ResourceKey

SQL = "".join(f"ALTER TABLE t{i} ADD COLUMN c integer;\n" for i in range(120))  # ~4,500 chars


def _one(
    name: str, outcome: Outcome = Outcome.PLAN, *, destructive: bool = False, grants: bool = False
) -> ResourcePreview:
    change = ResourceChange(
        key=ResourceKey("DatabaseSchema", "shop", name),
        reasons=("declaration changed (1 field(s))",),
        fields=(FieldChange("spec.policy.lockTimeout", '"30s"', '"7s"'),),
    )
    plan = PlanPreview(
        id="sha256:" + "ab" * 32,
        statements=120,
        destructive=destructive,
        privilege_changes=("grant",) if grants else (),
        sql=SQL,
        approvals=1,
    )
    if outcome is Outcome.BLOCKED:
        return ResourcePreview(
            change, outcome, "Blocked", "DestructiveChangesDisallowed", "drops a table"
        )
    return ResourcePreview(change, outcome, "AwaitingApproval", "AwaitingApproval", "plan", plan)


def _report(count: int) -> PreviewReport:
    """``count`` harmless plans, then (last in resource order) a Blocked resource, a
    destructive plan and a plan that changes privileges."""
    resources = [_one(f"r{i:03}") for i in range(count)]
    resources += [
        _one("zz-blocked", Outcome.BLOCKED),
        _one("zz-drops", destructive=True),
        _one("zz-grants", grants=True),
    ]
    return PreviewReport("b" * 40, "h" * 40, tuple(resources))


def _headings(markdown: str) -> list[str]:
    return re.findall(r"^### DatabaseSchema `shop/([^`]+)`", markdown, flags=re.MULTILINE)


URGENT = ["zz-blocked", "zz-drops", "zz-grants"]


def test_a_short_preview_is_whole_with_the_urgent_resources_first() -> None:
    markdown = render_markdown(_report(2), limit=COMMENT_LIMIT)
    assert _headings(markdown) == [*URGENT, "r000", "r001"]
    assert markdown == render_markdown(_report(2))  # nothing cut
    assert markdown.count("```sql") == 4 and CUT_NOTE not in markdown  # Blocked: no plan


@pytest.mark.parametrize("count", [20, 200, 2_000])
def test_the_cut_keeps_every_blocked_and_destructive_resource(count: int) -> None:
    report = _report(count)
    whole = render_markdown(report)

    markdown = render_markdown(report, limit=COMMENT_LIMIT)

    assert len(whole) > COMMENT_LIMIT >= len(markdown)
    shown = _headings(markdown)
    assert shown[:3] == URGENT
    assert "; **destructive**;" in markdown and "privilege changes: `grant`" in markdown
    assert markdown.rstrip().endswith(CUT_NOTE)
    named = re.search(r"\*\*(\d+) more changed resource\(s\), not shown here\*\*: (.*)", markdown)
    if named is None:
        assert len(shown) == count + 3  # all of them, the later ones without their SQL
        assert markdown.count("```sql") < count + 2
    else:
        assert int(named.group(1)) == count + 3 - len(shown)
        assert not set(URGENT) & set(re.findall(r"`shop/([^`]+)`", named.group(2)))
    # The urgent resources' own SQL is the last to be shortened: here it is whole.
    drops = markdown.index("### DatabaseSchema `shop/zz-drops`")
    assert "ALTER TABLE t119" in markdown[drops : markdown.index("### ", drops + 4)]


def test_a_plan_shows_its_impact_figures_as_inert_text() -> None:
    change = ResourceChange(key=ResourceKey("DatabaseSchema", "shop", "orders"), reasons=("x",))
    figure = "DROP COLUMN orders.`legacy`: 3 non-NULL values (exact)"  # a name quotes nothing
    plan = PlanPreview(id="sha256:" + "ab" * 32, statements=1, sql="x;", impact=(figure,))
    one = ResourcePreview(change, Outcome.PLAN, "AwaitingApproval", "AwaitingApproval", "p", plan)
    markdown = render_markdown(PreviewReport("b" * 40, "h" * 40, (one,)))
    assert "- **Impact** (measured read-only on the base's database):" in markdown
    # In a code span the name's backquote cannot end (a longer run of backquotes fences it).
    assert f"  - `` {figure} ``" in markdown or f"  - ``{figure}``" in markdown, markdown
