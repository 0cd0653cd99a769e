"""A preview for people (markdown, as a pull request comment shows it) and for programs
(JSON). Both are byte-identical for the same inputs.

Text from an artifact or a server (plan SQL, an operation's message) and values from the
declarations are put in code blocks and spans (:mod:`gitops.reviews.markdown`): on a forge,
markdown outside them is live.
"""

from __future__ import annotations

import json
from typing import Any

from gitops.preview.run import Outcome, PreviewReport, ResourcePreview
from gitops.reviews.markdown import code, fence

__all__ = [
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


def render_markdown(report: PreviewReport) -> str:
    lines = [
        "## Seshat plan preview",
        "",
        f"Base {code(report.base[:12])}, head {code(report.head[:12])}: "
        f"{len(report.resources)} changed resource(s); **{_HEADLINE[report.exit_status]}**.",
        "",
        f"> {NON_BINDING}",
        "",
    ]
    if not report.resources and not report.problems:
        lines += ["The pull request changes no database resource.", ""]
    if report.trust_changes:
        lines += ["### Trust anchors this pull request changes", "", TRUST_NOTE, ""]
        lines += [f"- {code(change, 300)}" for change in report.trust_changes]
        lines.append("")
    if report.problems:
        lines += ["### Problems in the changed declarations", ""]
        lines += [f"- {code(p, 500)}" for p in report.problems]
        lines.append("")
    for one in report.resources:
        lines += _resource(one)
    return "\n".join(lines).rstrip() + "\n"


def _resource(one: ResourcePreview) -> list[str]:
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
            old = code(item.base) if item.base is not None else "(absent)"
            new = code(item.head) if item.head is not None else "(absent)"
            lines.append(f"| {code(item.field)} | {old} | {new} |")
    plan = one.plan
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
            lines += [f"  - {code(v)} {code(n)} {code(c)}" for v, n, c in plan.files]
        else:
            hazards = ", ".join(f"{kind}: {count}" for kind, count in plan.hazards) or "none"
            destructive = " **destructive**;" if plan.destructive else ""
            privileges = ", ".join(plan.privilege_changes)
            lines.append(
                f"- **Statements**: {plan.statements};{destructive} hazards: {code(hazards)}"
                + (f"; privilege changes: {code(privileges)}" if privileges else "")
            )
            lines += ["", fence(plan.sql, "sql")]
    elif one.change.introduced and one.outcome is not Outcome.NOT_PREVIEWED:
        lines.append(f"- {NEW_RESOURCE}")
    lines.append("")
    return lines
