"""The per-case scoring procedure every dialect shares (README, "How to score an engine").

A dialect supplies the case's databases as a :class:`CaseDatabases`: it loads A and A2 from
``current`` verbatim and B (the oracle) from ``desired``, dumps them, and says how two dumps
compare. The procedure here is the same for all: plan A (and a fresh A2 under another hash
seed), check a refusal, drops withheld, apply, compare with the oracle, plan again.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from corpus_cases import Case
from corpus_result import CaseResult
from corpus_runner import PlanOutcome, Runner

__all__ = ["CaseDatabases", "run_case"]


class CaseDatabases(Protocol):
    """One case's databases A, A2 (both ``current``) and B (``desired``, the oracle)."""

    url_a: str
    url_a2: str
    env: dict[str, str]  # what the runner needs besides the URL (a password)

    def load(self, case: Case, result: CaseResult) -> bool:
        """Load A, A2 and B; set ``result.oracle``. False (``result`` failed) when
        ``current`` does not load."""

    def desired_for_a2(self, text: str) -> str:
        """The desired schema as A2 reads it (names rewritten where a case names its
        database)."""

    def dump_a(self) -> Any: ...
    def dump_b(self) -> Any: ...

    def same(self, one: Any, other: Any) -> bool:
        """Whether two dumps of A show the same schema."""

    def converged(self, after: Any, oracle: Any, before: Any) -> tuple[str, str]:
        """A summary and a diff of what differs from the oracle ("" when nothing does)."""

    def missing(self, after: Any, oracle: Any) -> list[str]:
        """What of the oracle is not in A (extra objects allowed)."""

    def lost(self, before: Any, after: Any, oracle: Any | None) -> list[str]:
        """Objects only in ``current`` that the apply removed."""

    def destructive(self, statement: dict[str, Any]) -> bool:
        """Whether a planned statement destroys data (its hazards, or its SQL)."""


def run_case(
    case: Case,
    runner: Runner,
    work: Path,
    databases: Callable[[Path], AbstractContextManager[CaseDatabases]],
) -> CaseResult:
    """Score ``case`` with the databases ``databases(folder)`` makes (and drops)."""
    started = time.monotonic()
    result = CaseResult(case.id, case.file, case.name, renamed_hints=case.renamed_hints)
    result.kind = "error" if case.error else ("nodrop" if not case.enable_drop else "normal")
    folder = Path(tempfile.mkdtemp(prefix="case-", dir=work))
    try:
        with databases(folder) as db:
            _score(case, result, db, folder, runner)
    except Exception as error:  # the scorer's own trouble, not the engine's
        result.fail("scorer_error", f"{type(error).__name__}: {error}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if result.category is None:
        result.status = "pass"
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _score(case: Case, result: CaseResult, db: CaseDatabases, folder: Path, runner: Runner) -> None:
    # 1. Load: A and A2 from `current` verbatim, B from `desired`.
    if not db.load(case, result):
        return
    desired = folder / "desired.sql"
    desired.write_text(case.desired, encoding="utf-8")
    desired2 = folder / "desired2.sql"
    desired2.write_text(db.desired_for_a2(case.desired), encoding="utf-8")
    before = db.dump_a()
    oracle = db.dump_b() if result.oracle else None
    allow, env = case.enable_drop, db.env
    skip = not case.enable_drop  # sqldef's enable_drop: false is the runner's --skip-drops
    extra = case.plan_arguments
    plan1 = runner.plan(db.url_a, desired, folder / "plan1.json", allow_destructive=allow,
                        seed=1, env=env, extra=extra, skip_drops=skip)  # fmt: skip
    result.details["plan"] = plan1.summary
    result.details["plan_seconds"] = round(plan1.seconds, 2)

    # 3. Refusal: an `error` case must be refused, with nothing applied.
    if case.error:
        result.refused = plan1.rc in (1, 2)
        if not result.refused:
            result.fail("not_refused", f"planned {len(plan1.statements)} statements; "
                        f"sqldef says: {case.error}")  # fmt: skip
        elif not db.same(db.dump_a(), before):
            result.fail("not_refused", "refused, but the database changed")
        return

    # 6. Determinism: a second fresh copy of A, another hash seed. (A plan that could not
    # run at all, exit 2, is not compared: its message may name the database.)
    if plan1.rc == 2:
        result.planned = False
        result.fail("plan_error", plan1.error_text)
        return
    plan2 = runner.plan(db.url_a2, desired2, folder / "plan2.json", allow_destructive=allow,
                        seed=2, env=env, extra=extra, cold=True, skip_drops=skip)  # fmt: skip
    result.deterministic = plan1.same_as(plan2)
    if result.deterministic is False:
        result.details["plan2"] = plan2.summary
    try:
        _plan_apply_and_compare(case, result, db, folder, runner, plan1, before, oracle)
    finally:
        if result.deterministic is False:
            result.fail("not_deterministic", f"plan 1: {plan1.summary}; plan 2: {plan2.summary}"
                        + _first_difference(plan1, plan2))  # fmt: skip


def _plan_apply_and_compare(
    case: Case,
    result: CaseResult,
    db: CaseDatabases,
    folder: Path,
    runner: Runner,
    plan1: PlanOutcome,
    before: Any,
    oracle: Any | None,
) -> None:
    allow = case.enable_drop
    if plan1.rc == 1 and not allow and plan1.refusal_code == "destructive_disallowed":
        # 7. enable_drop: false, refused as destructive: A must be untouched.
        result.planned, result.refused = False, True
        result.drops_held = db.same(db.dump_a(), before)
        if not result.drops_held:
            result.fail("drop_not_held", "refused, but the database changed")
        return
    if plan1.rc == 1:
        result.planned = False
        result.fail("plan_refused", f"{plan1.refusal_code}: {plan1.refusal_message}")
        return
    result.planned = True
    result.statements = len(plan1.statements)
    result.destructive = any(db.destructive(s) for s in plan1.statements)
    result.details["statements_sql"] = [str(s.get("sql", ""))[:300] for s in plan1.statements]
    if not allow and result.destructive:
        first = next(s for s in plan1.statements if db.destructive(s))
        result.drops_held = False
        result.fail("drop_not_held", f"destructive statement planned: {first.get('sql')}")
        return

    # 4. Apply and compare.
    if plan1.statements:
        applied = runner.apply(db.url_a, folder / "plan1.json", env=db.env)
        result.details["apply_seconds"] = round(applied.seconds, 2)
        result.applied = applied.rc == 0
        if applied.rc != 0:
            result.fail("apply_error", _apply_message(applied.rc, applied.stdout,
                                                      applied.error_text))  # fmt: skip
            return
    else:
        result.applied = True
    after = db.dump_a()
    if oracle is not None and allow:
        summary, diff = db.converged(after, oracle, before)
        result.converged = not summary
        if summary:
            result.diff = diff
            result.fail("not_converged", summary)
    elif oracle is not None:
        problems = db.missing(after, oracle)
        result.converged = not problems
        if problems:
            result.fail("not_converged", "not everything desired is there: " + problems[0])
    if not allow:
        lost = db.lost(before, after, oracle)
        result.drops_held = not lost
        if lost:
            result.fail("drop_not_held", "objects only in current were lost: " + lost[0])

    # 5. Idempotence: plan again; empty (or, without drops, only the withheld drops).
    if not plan1.statements:  # nothing was applied: plan 1 was already the second plan
        result.idempotent = True
        return
    # Without drops, the second plan is made as the first (--skip-drops, no
    # --allow-destructive) and must be empty: what was skipped stays skipped.
    plan3 = runner.plan(db.url_a, folder / "desired.sql", folder / "plan3.json",
                        allow_destructive=allow, seed=3, env=db.env,
                        extra=case.plan_arguments, skip_drops=not allow)  # fmt: skip
    if plan3.rc != 0:
        result.idempotent = False
        result.fail("not_idempotent", f"second plan {plan3.summary}")
        return
    left = list(plan3.statements)
    result.idempotent = not left
    if left:
        result.details["second_plan"] = [str(s.get("sql", ""))[:300] for s in left]
        result.fail("not_idempotent", f"second plan has {len(left)} statements, first: "
                    f"{left[0].get('op')} {left[0].get('key')}")  # fmt: skip


def _first_difference(plan1: PlanOutcome, plan2: PlanOutcome) -> str:
    if plan1.rc != 0 or plan2.rc != 0:
        return ""
    for index, (s1, s2) in enumerate(zip(plan1.statements, plan2.statements, strict=False)):
        if s1 != s2:
            return f"; statement {index + 1}: {s1.get('sql')!r} vs {s2.get('sql')!r}"
    if len(plan1.statements) == len(plan2.statements):
        one, two = plan1.document or {}, plan2.document or {}
        return f"; differing fields: {', '.join(k for k in one if one.get(k) != two.get(k))}"
    return ""


def _apply_message(rc: int, stdout: str, error: str) -> str:
    try:
        report = json.loads(stdout)
    except ValueError:
        return f"exit {rc}: {error}"
    if isinstance(report, dict) and "refusal" in report:
        refusal = report["refusal"]
        return f"refused {refusal.get('code')}: {refusal.get('message')}"
    if isinstance(report, dict):
        if report.get("failed") is not None:
            return f"statement {int(report['failed']) + 1} failed: {report.get('error')}"
        if not report.get("converged"):
            return "applied, but the runner reports it did not converge"
    return f"exit {rc}: {error}"
