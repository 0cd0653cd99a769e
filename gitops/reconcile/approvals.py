"""Judging every approval file that names a resource, in one pass: the one that authorizes
the current plan (if any), and each that does not, with why.

Nothing is skipped silently: an approval of another plan is ``stale_plan``, one whose
signatures the policy does not accept carries :func:`~gitops.approvals.verify.verify_statement`'s
reason (worded as a :class:`~gitops.resources.status.RejectionReason`), one that was accepted
and already spent on an Apply of this plan is ``consumed``, and a file under the resource's
approvals folder that is not a valid Approval is ``malformed``. The rejected ones go to the
status (``rejectedApprovals``), the review and the ``seshat_approvals`` metric.

Two kinds of file are left out on purpose: an approval of an *earlier* plan that was
spent on that plan's Apply (it did its job; listing it would grow the status with every
Apply), and files of other resources.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath

from gitops.approvals.files import read_signature_file, read_statement
from gitops.approvals.ssh import APPROVAL_NAMESPACE
from gitops.approvals.verify import (
    load_bundles,
    sigstore_path,
    statement_identity,
    verify_statement,
)
from gitops.metrics import approval_judged
from gitops.repo.loader import Repository
from gitops.resources.approvals import Approval, ResourceRef
from gitops.resources.policies import ApprovalPolicy
from gitops.resources.status import MAX_REJECTED, RejectedApproval, RejectionReason
from runner.digests import sha256_digest
from runner.errors import SeshatError

__all__ = ["REJECTION_BY_VERDICT", "ApprovalJudgement", "judge_approvals"]

REJECTION_BY_VERDICT: dict[str, RejectionReason] = {
    "wrong_plan": RejectionReason.STALE_PLAN,
    "wrong_resource": RejectionReason.WRONG_RESOURCE,
    "expired": RejectionReason.EXPIRED,
    "dated_in_future": RejectionReason.DATED_IN_FUTURE,
    "bad_signature": RejectionReason.BAD_SIGNATURE,
    "signer_not_allowed": RejectionReason.UNTRUSTED_SIGNER,
    "quorum_not_met": RejectionReason.QUORUM_NOT_MET,
}
"""A statement verdict's reason (:data:`gitops.approvals.verify.REASONS`) -> the rejection
reason a status shows."""


@dataclass(frozen=True, slots=True)
class ApprovalJudgement:
    """What the approval files of one resource say about its current plan."""

    accepted: str | None  # the statement identity of an accepted, unspent approval
    rejected: tuple[RejectedApproval, ...]


def judge_approvals(
    repository: Repository,
    resource: ResourceRef,
    current: str,
    *,
    destructive: bool,
    privilege: bool,
    spent: Callable[[str], bool],
    now: datetime,
    log: Callable[[str], None] = lambda _: None,
    trust: Repository | None = None,
) -> ApprovalJudgement:
    """Judge each approval naming ``resource`` (by namespace and name) against plan
    ``current``. ``spent(key)`` says whether an approval statement (by its identity, or by
    the legacy digest of its file and signature bytes) was consumed by an earlier Apply.
    The statements are ``repository``'s; the ApprovalPolicy and the allowed-signers files
    it names are ``trust``'s (default: ``repository``'s own)."""
    key = f"{resource.namespace}/{resource.name}"
    anchors = trust if trust is not None else repository
    policies = [r.resource for r in anchors.resources if isinstance(r.resource, ApprovalPolicy)]
    accepted: str | None = None
    rejected: dict[str, RejectedApproval] = {}

    def reject(path: str, reason: RejectionReason, detail: str) -> None:
        approval_judged("rejected", reason.value)
        log(f"{key}: approval {path} not accepted: {reason.value}: {detail}")
        rejected.setdefault(path, RejectedApproval(file=path, reason=reason, detail=detail[:1024]))

    loaded_approvals = sorted(
        (
            loaded
            for loaded in repository.resources
            if isinstance(loaded.resource, Approval)
            and (loaded.resource.spec.resource.namespace, loaded.resource.spec.resource.name)
            == (resource.namespace, resource.name)
        ),
        key=lambda loaded: str(loaded.path),
    )
    for loaded in loaded_approvals:
        approval = loaded.resource
        assert isinstance(approval, Approval)
        shown = PurePosixPath(loaded.path).as_posix()
        path = repository.root / loaded.path
        try:
            data = read_statement(repository.root, path)
            ssh_bytes = read_signature_file(repository.root, path.with_name(path.name + ".sig"))
            keyless = read_signature_file(repository.root, sigstore_path(path))
        except SeshatError as error:
            reject(shown, RejectionReason.MALFORMED, str(error))
            continue
        try:  # unreadable bundles count for nothing; the SSH signatures still may
            bundles = load_bundles(keyless.decode("utf-8"), shown) if keyless else []
        except (SeshatError, UnicodeDecodeError) as error:
            log(f"{key}: approval {shown}: unreadable bundles: {error}")
            bundles = []
        identity = statement_identity(approval)
        # Before statement identities, consumption was keyed by the file and signature
        # bytes; what was consumed under that key stays consumed.
        legacy = sha256_digest(data + b"\0" + ssh_bytes + b"\0" + keyless)
        consumed = spent(identity) or spent(legacy)
        if approval.spec.plan.id != current and consumed:
            continue  # an earlier plan's approval, spent on its Apply: history, not news
        verdict = verify_statement(
            approval,
            data,
            ssh_bytes.decode("ascii", errors="replace"),
            policies,
            anchors.root,
            namespace=APPROVAL_NAMESPACE,
            expected=resource,
            current_plan=current,
            destructive=destructive,
            privilege=privilege,
            bundles=bundles,
            now=now,
        )
        if not verdict.accepted:
            reason = REJECTION_BY_VERDICT.get(verdict.reason or "", RejectionReason.MALFORMED)
            reject(shown, reason, verdict.message)
        elif consumed:
            reject(
                shown,
                RejectionReason.CONSUMED,
                "accepted once and spent on an earlier Apply of this plan; a new approval "
                "(seshat approve --fresh) is needed",
            )
        else:
            approval_judged("accepted", "")
            if accepted is None:
                accepted = identity
    folder = f"approvals/{resource.namespace}/{resource.name}/"
    for problem in sorted(repository.problems, key=lambda p: (p.path, p.line or 0)):
        inside = problem.path.startswith(folder) and "/" not in problem.path[len(folder) :]
        if inside and problem.path not in rejected:  # a fleet's members have folders below
            reject(problem.path, RejectionReason.MALFORMED, problem.message)
    listed = tuple(rejected[path] for path in sorted(rejected))[:MAX_REJECTED]
    return ApprovalJudgement(accepted, listed)
