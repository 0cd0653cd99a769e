"""The known-failures list: reading it, checking a run against it, and writing a new one.

Format (one case per line; ``#`` starts a comment; blank lines are ignored)::

    # <group comment: what goes wrong>
    file/case  category  reason

``category`` is one of :data:`corpus_result.CATEGORIES`; ``reason`` is free text. A run
*regresses* when a case fails that is not listed. A listed case that now passes is
reported so the list can be shrunk; a listed case failing in another category is reported
but is not a regression (the engine is being worked on).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from corpus_result import CATEGORIES, CaseResult

__all__ = [
    "GateReport",
    "KnownFailure",
    "check",
    "group_of",
    "read_known",
    "reason_of",
    "write_known",
]


@dataclass(frozen=True, slots=True)
class KnownFailure:
    id: str
    category: str
    reason: str
    line: int


@dataclass
class GateReport:
    regressions: list[CaseResult] = field(default_factory=list)
    now_passing: list[KnownFailure] = field(default_factory=list)
    recategorized: list[tuple[KnownFailure, CaseResult]] = field(default_factory=list)
    unknown_ids: list[KnownFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.regressions


def read_known(path: Path) -> dict[str, KnownFailure]:
    """Parse a known-failures file; raises ``ValueError`` naming the bad line."""
    known: dict[str, KnownFailure] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = "" if raw.lstrip().startswith("#") else raw.strip()
        if not line:
            continue
        parts = line.split(None, 2)
        if len(parts) < 2 or parts[1] not in CATEGORIES:
            raise ValueError(f"{path}:{number}: expected 'file/case  category  reason'")
        if parts[0] in known:
            raise ValueError(f"{path}:{number}: {parts[0]} is listed twice")
        known[parts[0]] = KnownFailure(
            parts[0], parts[1], parts[2] if len(parts) > 2 else "", number
        )
    return known


def check(results: Iterable[CaseResult], known: dict[str, KnownFailure],
          all_ids: set[str]) -> GateReport:  # fmt: skip
    """Compare the run's failures with the list (only cases that were run count)."""
    report = GateReport()
    for result in results:
        if result.status == "skip":
            continue
        entry = known.get(result.id)
        if result.status == "fail" and entry is None:
            report.regressions.append(result)
        elif result.status == "pass" and entry is not None:
            report.now_passing.append(entry)
        elif result.status == "fail" and entry is not None and entry.category != result.category:
            report.recategorized.append((entry, result))
    report.unknown_ids = [k for i, k in known.items() if i not in all_ids]
    return report


_QUOTED = re.compile(r'"(?:[^"]|"")*"|\'(?:[^\']|\'\')*\'')
_NUMBER = re.compile(r"\b\d+\b")


_QUALIFIED = re.compile(r"\b\w+\.\w+\b")
_VERB = re.compile(
    r"^(DROP \w+( VIEW)?|REVOKE|TRUNCATE|ALTER TABLE .*?(DISABLE ROW LEVEL SECURITY"
    r"|DROP (COLUMN|CONSTRAINT)?))",
)


def reason_of(result: CaseResult) -> str:
    """A short, instance-free description of why a case fails (used to group the list)."""
    message = result.message.replace("\n", " ")
    hint = " (with rename hints)" if result.renamed_hints else ""
    if result.category == "not_converged":
        kinds = sorted(set(re.findall(r"(missing|extra|differs) ([A-Z][A-Z ]*[A-Z])\b", message)))
        text = ", ".join(f"{word} {kind}" for word, kind in kinds) or message
        order = re.search(r"\(column order only(: [a-z ]+)?\)", message)
        if order:
            text += f" {order.group(0)}"
        return text + hint
    if result.category == "drop_not_held" and "statement planned: " in message:
        statement = message.split("statement planned: ", 1)[1]
        verb = _VERB.match(statement)
        label = verb.group(0) if verb else statement.split(" ", 1)[0]
        label = re.sub(r"^ALTER TABLE \S+ ", "ALTER TABLE ... ", label)
        return f"planned with --skip-drops: {label}"
    if result.category == "not_idempotent":
        match = re.search(r"first: (\S+)", message)
        if match:
            return f"second plan not empty: {match.group(1)}"
    if result.category == "not_deterministic":
        return "plans differ between two fresh copies"
    message = re.sub(r"^(desired|current): line \d+: ", r"\1: ", message)
    message = _QUOTED.sub("X", message)
    message = _QUALIFIED.sub("X", message)
    message = _NUMBER.sub("N", message)
    return message[:140] + hint


def group_of(reason: str) -> str:
    """The group a reason is filed under: all planned-drop reasons share one group."""
    return reason.split(": ", 1)[0] if reason.startswith("planned without") else reason


EXPLANATIONS: tuple[tuple[str, str, str], ...] = (
    # (category, regex on the group, why) -- the comment written above a group.
    (
        "no_oracle",
        r"syntax error",
        "PostgreSQL rejects the desired SQL (bare AT TIME ZONE); "
        "sqldef's parser accepts it. No oracle; the engine refuses it too (exit 2).",
    ),
    (
        "no_oracle",
        r"collation",
        'the collation "en_US" does not exist in this cluster '
        "(initdb --no-locale): environment, not the engine.",
    ),
    (
        "no_oracle",
        r"no schema has been selected",
        "desired starts with SET search_path TO a "
        "schema that never exists; sqldef ignores the SET.",
    ),
    (
        "no_oracle",
        r"relation X does not exist",
        "circular inline foreign keys: no statement "
        "order loads desired; the engine's own loader fails the same way (exit 2).",
    ),
    (
        "plan_refused",
        r"cannot drop type",
        "ENGINE BUG: changing a column from one enum type to another (or to text, or renaming "
        "the type) drops the old type while a column still uses it.",
    ),
    (
        "plan_refused",
        r"cannot be cast automatically",
        "ENGINE BUG: text column with a DEFAULT changed to an enum: the default must be dropped "
        "before ALTER COLUMN TYPE and set again afterwards.",
    ),
    (
        "plan_refused",
        r"RESTART value",
        "ENGINE BUG: changing identity sequence options restarts the sequence outside the new "
        "bounds (sqldef leaves identity options alone here, per the case's name).",
    ),
    (
        "plan_refused",
        r"",
        "the engine's own dry run caught a bad plan (wrong statement order "
        "or a missing step) and refused it.",
    ),
    (
        "not_refused",
        r"",
        "the engine planned a case sqldef refuses (a desired schema that contradicts itself, "
        "or a change sqldef cannot make).",
    ),
    (
        "apply_error",
        r"permission denied for schema public",
        "ENGINE BUG: user: psqldef_user cases "
        "(search_path foo, public): the engine loads desired in a scratch database where "
        "schema foo does not exist, so unqualified objects land in public and the plan moves "
        "them there.",
    ),
    (
        "drop_not_held",
        r"planned with --skip-drops",
        "enable_drop: false (run with --skip-drops, without --allow-destructive): a DROP or "
        "REVOKE was planned anyway, or something only in current was lost; README step 7 "
        "forbids any DROP/REVOKE.",
    ),
    (
        "not_converged",
        r"appended\) \(with rename",
        "a @renamed hint the engine did not apply: drop + add moves the column to the end of "
        "the table (the end schema is otherwise right, but the column's data is lost).",
    ),
    (
        "not_converged",
        r"appended",
        "desired puts a new column before existing ones; ADD COLUMN can only append, so "
        "only a table rebuild could match (sqldef appends too). Oracle strictness, not a bug.",
    ),
    (
        "not_converged",
        r"new columns reordered",
        "ENGINE BUG: several new columns are added in another order than desired lists them "
        "(apparently sorted by name).",
    ),
    (
        "not_converged",
        r"SEQUENCE",
        "ENGINE BUG: identity columns: desired's sequence options (START, INCREMENT, "
        "MIN/MAXVALUE, CACHE) are not applied.",
    ),
)


def _explanation(category: str, group: str) -> str | None:
    for wanted, pattern, why in EXPLANATIONS:
        if wanted == category and re.search(pattern, group):
            return why
    return None


def write_known(path: Path, results: Iterable[CaseResult], header: str) -> int:
    """Write a known-failures file grouping failing cases by (category, reason group)."""
    groups: dict[tuple[str, str], list[tuple[CaseResult, str]]] = defaultdict(list)
    for result in results:
        if result.status == "fail" and result.category:
            reason = reason_of(result)
            groups[(result.category, group_of(reason))].append((result, reason))
    order = sorted(groups, key=lambda g: (CATEGORIES.index(g[0]), -len(groups[g]), g[1]))
    width = max((len(r.id) for rs in groups.values() for r, _ in rs), default=20) + 2
    lines = [*(f"# {line}".rstrip() for line in header.splitlines()), ""]
    count = 0
    for category, group in order:
        members = sorted(groups[(category, group)], key=lambda m: m[0].id)
        lines.append(f"# {category}: {group} ({len(members)})")
        why = _explanation(category, group)
        if why:
            lines.append(f"#   {why}")
        example = members[0][0].message.replace("\n", " ")
        if example and example != group:
            lines.append(f"#   e.g. {members[0][0].id}: {example[:200]}")
        for member, reason in members:
            lines.append(f"{member.id:<{width}}{category:<18}{reason}")
            count += 1
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return count
