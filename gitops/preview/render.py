"""A preview for people (markdown, as a pull request comment shows it) and for programs
(JSON). Both are byte-identical for the same inputs.

Text from an artifact or a server (plan SQL, an operation's message), values and names from
the declarations and every other piece of repository text are put in code blocks and spans
by :mod:`gitops.reviews.markdown`, the one place that escapes: on a forge, markdown outside
them is live. A comment cut to a forge's size keeps the Blocked and destructive resources
(:func:`render_markdown`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gitops.preview.run import Outcome, PreviewReport, ResourcePreview
from gitops.reviews.markdown import code, cut, fence

__all__ = [
    "CUT_NOTE",
    "NEW_RESOURCE",
    "NON_BINDING",
    "TRUST_NOTE",
    "render_json",
    "render_markdown",
    "title",
]

NON_BINDING = (
    "This preview is not binding. A plan id shown here becomes the id to approve "
    "(`seshat approve --plan`) only if the database and every input (artifact, policies, "
    "declaration) are unchanged when the pull request is merged; otherwise the reconciler "
    "records a different plan after the merge, and that is the one to approve."
)
NEW_RESOURCE = (
    "This pull request introduces the resource: its uid comes from the merge commit, so this "
    "preview's plan id never carries over. Approve the plan the reconciler records after "
    "the merge."
)

TRUST_NOTE = (
    "This preview judges the pull request with the base branch's policies and seshat.yaml, "
    "never its own: the changes below take effect only once it is merged. Review them."
)

_HEADLINE = {
    0: "every changed resource would plan or converge",
    1: "a changed resource would be Blocked",
    2: "the preview could not run for every changed resource",
}


def title(report: PreviewReport) -> str:
    """One line: how many resources, and the overall verdict (a check's title)."""
    count = len(report.resources)
    return f"Seshat preview: {count} changed resource(s); {_HEADLINE[report.exit_status]}"


def _plan_json(one: ResourcePreview) -> dict[str, Any] | None:
    plan = one.plan
    if plan is None:
        return None
    return {
        "id": plan.id,
        "carriesOver": not one.change.introduced,
        "statements": plan.statements,
        "destructive": plan.destructive,
        "privilegeChanges": list(plan.privilege_changes),
        "hazards": dict(plan.hazards),
        "sql": plan.sql,
        "files": [{"version": v, "name": n, "checksum": c} for v, n, c in plan.files],
        "history": plan.history,
        "approvals": plan.approvals,
        "automatic": plan.automatic,
        "impact": list(plan.impact),
    }


def render_json(report: PreviewReport) -> str:
    document = {
        "base": report.base,
        "head": report.head,
        "exitStatus": report.exit_status,
        "nonBinding": NON_BINDING,
        "problems": list(report.problems),
        "trustChanges": list(report.trust_changes),
        "resources": [
            {
                "kind": one.change.key.kind,
                "namespace": one.change.key.namespace,
                "name": one.change.key.name,
                "outcome": one.outcome.value,
                "phase": one.phase,
                "reason": one.reason,
                "message": one.message,
                "changes": list(one.change.reasons),
                "fields": [
                    {"field": f.field, "base": f.base, "head": f.head} for f in one.change.fields
                ],
                "introduced": one.change.introduced,
                "recordedDigest": one.change.recorded_digest,
                "resolvedDigest": one.change.resolved_digest,
                "plan": _plan_json(one),
            }
            for one in report.resources
        ],
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_markdown(report: PreviewReport, limit: int | None = None) -> str:
    """The preview as a comment shows it. Resources that would be Blocked, or whose plan is
    destructive or changes privileges, come first, then those that could not be previewed,
    then the rest (each group in resource order).

    With ``limit`` (a forge's size), a longer preview is cut so that what matters most stays:
    every Blocked, destructive or privilege-changing resource keeps at least its heading,
    verdict, why and plan counts (the destructive flag among them), then its field table and
    SQL (within half the limit); the other resources follow, in order, as briefly, while they
    fit (those that do not are named in one line), then whole while there is room, the last
    SQL shown shortened. So a Blocked or destructive resource is never the one cut. Lists of
    trust-anchor changes and problems are capped. The whole preview is always on stdout and
    in ``--format json``."""
    ordered = sorted(report.resources, key=_urgency)
    header = _header(report)
    parts = [_resource(one) for one in ordered]
    full = _join(
        [
            header,
            _listed(_TRUST_HEADING, report.trust_changes, 300, note=TRUST_NOTE),
            *(part.whole() for part in parts),
            _listed(_PROBLEMS_HEADING, report.problems, 500),
        ]
    )
    if limit is None or len(full) <= limit:
        return full
    return _fitted(report, ordered, parts, header, limit)


_TRUST_HEADING = "### Trust anchors this pull request changes"
_PROBLEMS_HEADING = "### Problems in the changed declarations"
CUT_NOTE = (
    "*This comment is cut to the forge's size limit. The whole preview is in the CI job's "
    "output; `seshat preview --format json` has every field.*"
)
_CAPPED = 20  # items of a list kept when the comment is cut
_ROOM_FOR_NOTES = 1_000  # the cut's own lines: what was left out, and where the rest is
_ROOM_FOR_A_DETAIL = 400  # less than this, and a plan's SQL is not shown at all


def _urgency(one: ResourcePreview) -> int:
    """0: Blocked, or a destructive or privilege-changing plan; 1: could not be previewed;
    2: the rest."""
    plan = one.plan
    if one.outcome is Outcome.BLOCKED or (
        plan is not None and (plan.destructive or plan.privilege_changes)
    ):
        return 0
    return 1 if one.outcome is Outcome.FAILED else 2


@dataclass(frozen=True, slots=True)
class _Detail:
    """The long part of a resource: its plan's SQL (a fence) or its migration files (list
    items), shortened to fit when the comment is cut."""

    lines: tuple[str, ...]  # SQL lines, or one list item per file
    sql: bool

    def whole(self) -> str:
        if self.sql:
            return "\n" + fence("\n".join(self.lines), "sql")
        return "\n".join(self.lines)

    def fit(self, room: int) -> str:
        """The detail in at most ``room`` characters: whole, shortened with a note saying
        so, or nothing when not even the note fits (the comment's last line says it is cut)."""
        whole = self.whole()
        if len(whole) <= room:
            return whole
        if room < _ROOM_FOR_A_DETAIL:
            return ""
        kept: list[str] = []
        used = 0
        for line in self.lines:
            if used + len(line) + 1 > room - _ROOM_FOR_A_DETAIL:
                break
            kept.append(line)
            used += len(line) + 1
        left = len(self.lines) - len(kept)
        if self.sql:
            total = sum(len(line) + 1 for line in self.lines)
            shown = fence("\n".join(kept), "sql") + "\n\n" if kept else ""
            return f"\n{shown}*The plan's SQL is cut here: {used} of {total} characters shown.*"
        return "\n".join([*kept, f"  - *... and {left} more file(s), not shown here*"])


@dataclass(frozen=True, slots=True)
class _Part:
    summary: str
    brief: str  # the heading, the verdict and the plan's counts: when the summary is too long
    detail: _Detail | None = None

    def whole(self) -> str:
        return self.summary + ("\n" + self.detail.whole() if self.detail else "")


def _join(blocks: list[str]) -> str:
    return "\n\n".join(block for block in blocks if block).rstrip() + "\n"


def _header(report: PreviewReport) -> str:
    lines = [
        "## Seshat plan preview",
        "",
        f"Base {code(report.base[:12])}, head {code(report.head[:12])}: "
        f"{len(report.resources)} changed resource(s); **{_HEADLINE[report.exit_status]}**.",
        "",
        f"> {NON_BINDING}",
    ]
    if not report.resources and not report.problems:
        lines += ["", "The pull request changes no database resource."]
    return "\n".join(lines)


def _listed(
    heading: str, items: tuple[str, ...], limit: int, note: str = "", cap: int | None = None
) -> str:
    if not items:
        return ""
    lines = [heading, ""] + ([note, ""] if note else [])
    lines += [f"- {code(item, limit)}" for item in items[:cap]]
    if cap is not None and len(items) > cap:
        lines.append(f"- *... and {len(items) - cap} more, not shown here*")
    return "\n".join(lines)


def _fitted(
    report: PreviewReport,
    ordered: list[ResourcePreview],
    parts: list[_Part],
    header: str,
    limit: int,
) -> str:
    """The preview cut to ``limit`` characters (see :func:`render_markdown`). Room is given
    in this order: the urgent resources' brief forms; the problems (capped); the urgent
    resources whole, with their SQL, within half the limit; the other resources' brief forms,
    while they fit (those after are named); the others whole, while there is room."""
    trust = _listed(_TRUST_HEADING, report.trust_changes, 300, note=TRUST_NOTE, cap=_CAPPED)
    room = limit - len(header) - len(trust) - _ROOM_FOR_NOTES
    urgent = sum(1 for one in ordered if _urgency(one) == 0)  # a prefix: ordered by urgency
    texts: list[str | None] = [None] * len(parts)

    def briefs(indexes: range) -> None:
        nonlocal room
        for index in indexes:
            if len(parts[index].brief) + 2 > room:
                return  # the rest are left out, named at the end
            texts[index] = parts[index].brief
            room -= len(parts[index].brief) + 2

    def wholes(indexes: range, budget: int) -> None:
        nonlocal room
        for index in indexes:
            part = parts[index]
            more = len(part.summary) - len(part.brief)
            if texts[index] is None or more > min(room, budget):
                continue
            detail = part.detail.fit(min(room, budget) - more) if part.detail else ""
            text = part.summary + ("\n" + detail if detail else "")
            spent = len(text) - len(part.brief)
            room, budget = room - spent, budget - spent
            texts[index] = text

    briefs(range(urgent))
    problems = _listed(_PROBLEMS_HEADING, report.problems, 500, cap=_CAPPED)
    if len(problems) + 2 > room:
        problems = (
            f"{_PROBLEMS_HEADING}\n\n- *{len(report.problems)} problem(s), not shown here*"
            if report.problems
            else ""
        )
    room -= len(problems) + 2
    wholes(range(urgent), limit // 2)
    if all(text is not None for text in texts[:urgent]):
        briefs(range(urgent, len(parts)))
    wholes(range(urgent, len(parts)), room)
    blocks = [header, trust, *(text for text in texts if text is not None)]
    left = [one for one, text in zip(ordered, texts, strict=True) if text is None]
    if left:
        names: list[str] = []
        for other in left:
            name = code(f"{other.change.key.namespace}/{other.change.key.name}", 100)
            if sum(len(n) + 2 for n in names) + len(name) > 600:
                names.append("...")
                break
            names.append(name)
        blocks.append(
            f"**{len(left)} more changed resource(s), not shown here**: {', '.join(names)}"
        )
    blocks += [problems, CUT_NOTE]
    return cut(_join(blocks), limit, CUT_NOTE)


def _resource(one: ResourcePreview) -> _Part:
    key = one.change.key
    lines = [
        f"### {key.kind} {code(f'{key.namespace}/{key.name}')}: {one.outcome.value}",
        "",
        f"- **Verdict**: {code(one.reason)}"
        + (f" ({code(one.phase)})" if one.phase and one.phase != one.reason else ""),
        f"- **Why**: {code(one.message, 1000)}",
        "- **Changed**: " + "; ".join(code(r, 300) for r in one.change.reasons),
    ]
    if one.change.fields:
        lines += ["", "| field | base | head |", "| --- | --- | --- |"]
        for item in one.change.fields:
            old = code(item.base, cell=True) if item.base is not None else "(absent)"
            new = code(item.head, cell=True) if item.head is not None else "(absent)"
            lines.append(f"| {code(item.field, cell=True)} | {old} | {new} |")
    brief = lines[:4]
    plan = one.plan
    detail: _Detail | None = None
    if plan is not None:
        lines += ["", f"- **Plan id** (preview, not binding): {code(plan.id)}"]
        if one.change.introduced:
            lines.append(f"- {NEW_RESOURCE}")
        if plan.automatic:
            lines.append("- **Approvals**: none (apply: Always)")
        elif plan.approvals is None:
            lines.append("- **Approvals**: no ApprovalPolicy rule matches; none can be accepted")
        else:
            lines.append(f"- **Approvals**: {plan.approvals} needed")
        if plan.files:
            lines += [f"- **History**: {code(plan.history)}", "- **Would run**:"]
            files = tuple(f"  - {code(v)} {code(n)} {code(c)}" for v, n, c in plan.files)
            detail = _Detail(files, sql=False)
        else:
            hazards = ", ".join(f"{kind}: {count}" for kind, count in plan.hazards) or "none"
            destructive = " **destructive**;" if plan.destructive else ""
            privileges = ", ".join(plan.privilege_changes)
            lines.append(
                f"- **Statements**: {plan.statements};{destructive} hazards: {code(hazards)}"
                + (f"; privilege changes: {code(privileges)}" if privileges else "")
            )
            brief.append(lines[-1])
            if plan.impact:
                lines.append("- **Impact** (measured read-only on the base's database):")
                lines += [f"  - {code(line, 300)}" for line in plan.impact[:20]]
                if len(plan.impact) > 20:
                    lines.append(f"  - *... and {len(plan.impact) - 20} more*")
            detail = _Detail(tuple(plan.sql.rstrip("\n").split("\n")), sql=True)
    elif one.change.introduced and one.outcome is not Outcome.NOT_PREVIEWED:
        lines.append(f"- {NEW_RESOURCE}")
    brief[3] = f"- **Why**: {code(one.message, 300)}"
    return _Part("\n".join(lines), "\n".join(brief), detail)
