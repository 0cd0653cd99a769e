"""Judging a signed ``Approval`` or ``RunAcknowledgment`` against the ``ApprovalPolicy``.

A typed verdict: accepted, or refused with one stable reason, checked in this order:

* ``wrong_resource``: the statement names another resource, or another lifetime of it (uid);
* ``wrong_plan``: an approval naming a plan other than the current one;
* ``expired``: past ``expiresAt``, or older than the rule's ``maxAge`` (from ``approvedAt``);
* ``dated_in_future``: ``approvedAt`` later than now plus :data:`CLOCK_SKEW` (it would
  otherwise outlive ``maxAge``);
* ``bad_signature``: no signature is a valid signature of the file's bytes;
* ``signer_not_allowed``: valid signatures, but by nobody the matching rule allows (or no
  rule of the resource's namespace matches it);
* ``quorum_not_met``: fewer distinct allowed signers than the rule requires (``count``, or
  ``destructiveCount`` / ``privilegeCount`` for such plans; the highest applicable).

Signers are distinct by principal and by key: one person signing twice, or one key listed
under two names, counts once.

Sigstore keyless signatures live beside the file in ``<file>.sigstore.json``: a JSON list of
bundles, each a message signature over the file's bytes. A bundle counts for the rule's
``approvers.keyless`` identities when it verifies against the identity's ``trustedRoot``
(``runner.artifacts.sigstore``): a bundle that does not verify is a bad signature, one by an
identity the rule does not list is a signer not allowed. Keyless signers are distinct by
their certificate's subject, like SSH signers by principal, so one identity signing twice
(two certificates) counts once, and so does one person signing with SSH and with Sigstore.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path

from gitops.approvals.ssh import check, split_signatures
from gitops.resources.approvals import Approval, ResourceRef, RunAcknowledgment
from gitops.resources.policies import ApprovalPolicy, ApprovalRule
from runner.artifacts.sigstore import BAD_SIGNATURE, verify_bundle
from runner.digests import Digest, digest
from runner.errors import ConfigurationError
from runner.models import wire_fields

__all__ = [
    "REASONS",
    "Signer",
    "StatementVerdict",
    "load_bundles",
    "matching_rule",
    "required_approvals",
    "sigstore_path",
    "statement_identity",
    "verify_statement",
]

CLOCK_SKEW = timedelta(minutes=5)
"""How far in the future an ``approvedAt`` may lie (clocks of approvers' machines differ)."""

REASONS = (
    "dated_in_future",
    "bad_signature",
    "signer_not_allowed",
    "quorum_not_met",
    "expired",
    "wrong_resource",
    "wrong_plan",
)


@dataclass(frozen=True, slots=True)
class Signer:
    principal: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class StatementVerdict:
    accepted: bool
    reason: str | None
    message: str
    signers: tuple[Signer, ...] = ()
    required: int = 0

    def to_json(self) -> dict[str, object]:
        signers = [{"principal": s.principal, "key": s.fingerprint} for s in self.signers]
        return wire_fields(self) | {"signers": signers}


MAX_BUNDLES = 32  # per statement file: more signers than any quorum needs


def sigstore_path(path: Path) -> Path:
    """Where a statement's Sigstore bundles live: ``<file>.sigstore.json``."""
    return path.with_name(path.name + ".sigstore.json")


def load_bundles(text: str, where: str = "bundles") -> list[bytes]:
    """The bundles of a ``.sigstore.json`` file (a JSON list, or one bundle), each as JSON."""
    try:
        document = json.loads(text) if text.strip() else []
    except ValueError as error:
        raise ConfigurationError(f"{where}: not JSON ({error})") from None
    except RecursionError:
        raise ConfigurationError(f"{where}: not JSON (nested too deeply)") from None
    items = document if isinstance(document, list) else [document]
    if not all(isinstance(item, dict) for item in items):
        raise ConfigurationError(f"{where}: expected a JSON list of Sigstore bundles")
    if len(items) > MAX_BUNDLES:
        raise ConfigurationError(f"{where}: more than {MAX_BUNDLES} bundles")
    return [json.dumps(item, sort_keys=True).encode() for item in items]


def statement_identity(statement: Approval | RunAcknowledgment) -> Digest:
    """What an approval *is*, for consumption: the digest of the signed statement's content
    (its kind and spec, canonical JSON), not of the file's bytes. Signatures cover the
    bytes, so no byte outside them (a newline after a ``.sig`` block, a reordered bundle
    list) and no re-spelling of the same statement can make a consumed approval count
    again; ``seshat approve`` writes a fresh statement (a nonce and a timestamp) instead."""
    return digest(
        "approval-statement",
        {"kind": statement.kind, "spec": statement.spec.model_dump(mode="json", by_alias=True)},
    )


def matching_rule(
    policies: Sequence[ApprovalPolicy], resource: ResourceRef
) -> tuple[ApprovalPolicy, ApprovalRule] | None:
    """The first rule (policies of the resource's namespace by name, rules in order)."""
    ordered = sorted(
        (p for p in policies if p.metadata.namespace == resource.namespace),
        key=lambda p: p.metadata.name,
    )
    for policy in ordered:
        for rule in policy.spec.rules:
            namespaces, names = rule.match.namespaces, rule.match.names
            if namespaces and not any(fnmatchcase(resource.namespace, p) for p in namespaces):
                continue
            if names and not any(fnmatchcase(resource.name, p) for p in names):
                continue
            return policy, rule
    return None


def required_approvals(rule: ApprovalRule, *, destructive: bool, privilege: bool) -> int:
    """How many distinct allowed signers a plan needs under ``rule``: ``count``, or the
    highest of ``destructiveCount`` / ``privilegeCount`` that applies to the plan."""
    required = rule.count
    if destructive and rule.destructive_count:
        required = max(required, rule.destructive_count)
    if privilege and rule.privilege_count:
        required = max(required, rule.privilege_count)
    return required


def _refused(
    reason: str, message: str, signers: tuple[Signer, ...] = (), required: int = 0
) -> StatementVerdict:
    return StatementVerdict(False, reason, message, signers, required)


def verify_statement(
    statement: Approval | RunAcknowledgment,
    data: bytes,
    signatures: str,
    policies: Sequence[ApprovalPolicy],
    repo: Path,
    *,
    namespace: str,
    expected: ResourceRef | None,
    current_plan: str | None = None,
    bundles: Sequence[bytes] = (),
    destructive: bool = False,
    privilege: bool = False,
    now: datetime | None = None,
) -> StatementVerdict:
    """Judge ``statement`` (whose file bytes are ``data``); see the module docstring.

    ``signatures`` is the text of the ``.sig`` file, ``bundles`` the Sigstore bundles of the
    ``.sigstore.json`` file (see :func:`load_bundles`).
    """
    now = now or datetime.now(UTC)
    named = statement.spec.resource
    if expected is not None and named != expected:
        differs = [
            f
            for f in ("kind", "namespace", "name", "uid")
            if getattr(named, f) != getattr(expected, f)
        ]
        return _refused(
            "wrong_resource",
            f"it names {named.kind} {named.namespace}/{named.name} (uid {named.uid}); "
            f"the resource's {', '.join(differs)} differ",
        )
    if (
        isinstance(statement, Approval)
        and current_plan is not None
        and statement.spec.plan.id != current_plan
    ):
        return _refused(
            "wrong_plan",
            f"it approves plan {statement.spec.plan.id}; the current plan is {current_plan}",
        )
    found = matching_rule(policies, named)
    if isinstance(statement, Approval):
        approved_at = statement.spec.approved_at
        if approved_at is not None and _aware(approved_at) > now + CLOCK_SKEW:
            return _refused(
                "dated_in_future",
                f"approvedAt {approved_at.isoformat()} is in the future (more than "
                f"{int(CLOCK_SKEW.total_seconds() // 60)} minutes ahead of this clock)",
            )
        if statement.spec.expires_at is not None and _aware(statement.spec.expires_at) <= now:
            return _refused("expired", f"it expired at {statement.spec.expires_at.isoformat()}")
        if found is not None and found[1].max_age is not None:
            approved = statement.spec.approved_at
            limit = timedelta(seconds=found[1].max_age)
            if approved is None:
                return _refused("expired", "the policy sets maxAge and it has no approvedAt")
            if now - _aware(approved) > limit:
                return _refused(
                    "expired", f"approved at {approved.isoformat()}, longer ago than maxAge"
                )
    blocks = split_signatures(signatures)
    if found is None:
        return _refused(
            "signer_not_allowed",
            f"no ApprovalPolicy rule in namespace {named.namespace} covers {named.name}",
        )
    policy, rule = found
    allowed = repo / rule.approvers.allowed_signers if rule.approvers.allowed_signers else None
    required = required_approvals(rule, destructive=destructive, privilege=privilege)
    signers: dict[str, Signer] = {}
    keys: set[str] = set()
    bad = unlisted = 0
    for block in blocks:
        checked = check(data, block, namespace, allowed)
        if not checked.valid:
            bad += 1
        elif checked.principal is None or checked.fingerprint is None:
            unlisted += 1
        elif checked.principal not in signers and checked.fingerprint not in keys:
            signers[checked.principal] = Signer(checked.principal, checked.fingerprint)
            keys.add(checked.fingerprint)
    for bundle in bundles:
        if not rule.approvers.keyless:
            unlisted += 1
            continue
        judged = verify_bundle(data, bundle, rule.approvers.keyless, repo)
        if judged.signer is None or judged.reason == BAD_SIGNATURE:
            bad += 1
        elif not judged.ok:
            unlisted += 1
        elif (principal := judged.signer.subjects[0]) not in signers:
            # Keyed by subject like SSH principals: one person signing both ways counts once.
            signers[principal] = Signer(principal, f"sigstore:{judged.signer.issuer}")
    distinct = tuple(sorted(signers.values(), key=lambda s: s.principal))
    if len(distinct) >= required:
        names = ", ".join(s.principal for s in distinct)
        return StatementVerdict(
            True, None, f"signed by {names} ({policy.metadata.name})", distinct, required
        )
    if not distinct and bad:
        return _refused(
            "bad_signature",
            f"{bad} of {len(blocks) + len(bundles)} signatures do not verify over this file",
            required=required,
        )
    if not distinct and unlisted:
        return _refused(
            "signer_not_allowed",
            f"signed by keys that {policy.metadata.name}'s allowed signers do not list",
            required=required,
        )
    return _refused(
        "quorum_not_met",
        f"{len(distinct)} distinct allowed signers of {required} required",
        signers=distinct,
        required=required,
    )


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
