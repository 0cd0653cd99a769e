"""Writing and signing statements at their canonical paths (``seshat approve``).

An approval lives at ``approvals/<namespace>/<name>/<plan-id-hex>.yaml`` and its SSH
signatures beside it in ``<same>.yaml.sig``, one armored block per signer. A second approver
signs the same bytes: the file is kept, so earlier signatures stay valid.

Each statement carries a fresh ``nonce`` and its ``approvedAt``: an approval is consumed
once, by its content, so a plan id that comes back after its approval was spent needs a new
statement. ``seshat approve`` writes one when asked (``fresh``) or when the signer has
already signed the existing statement (signing twice adds nothing to a quorum, so it can only
mean "approve again"); the old statement and its signatures are replaced.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gitops.approvals.ssh import (
    ACKNOWLEDGMENT_NAMESPACE,
    APPROVAL_NAMESPACE,
    check,
    fingerprint,
    sign,
    split_signatures,
)
from gitops.repo.single import load_one
from gitops.resources.approvals import Approval, ResourceRef, RunAcknowledgment
from gitops.yamlout import dump_all
from runner.digests import digest_hex
from runner.errors import ConfigurationError
from runner.models import Model

__all__ = ["Signed", "approval_path", "approve"]


@dataclass(frozen=True, slots=True)
class Signed:
    path: Path
    signature_path: Path
    signatures: int
    created: bool


def approval_path(repo: Path, resource: ResourceRef, plan_id: str) -> Path:
    return repo / "approvals" / resource.namespace / resource.name / f"{digest_hex(plan_id)}.yaml"


def signature_path(path: Path) -> Path:
    return path.with_name(path.name + ".sig")


def approve(
    repo: Path,
    resource: ResourceRef,
    plan_id: str,
    key: Path,
    *,
    expires_in: timedelta | None = None,
    comment: str = "",
    now: datetime | None = None,
    fresh: bool = False,
) -> Signed:
    """Write (or reuse) the approval of ``plan_id`` for ``resource`` and add a signature."""
    path = approval_path(repo, resource, plan_id)
    if path.exists() and (fresh or _signed_by(path, key, APPROVAL_NAMESPACE)):
        path.unlink()
        signature_path(path).unlink(missing_ok=True)
    created = not path.exists()
    if created:
        moment = (now or datetime.now(UTC)).replace(microsecond=0)
        _write_statement(
            path,
            Approval,
            resource,
            f"{resource.name}-{digest_hex(plan_id)[:12]}",
            {
                "plan": {"id": plan_id},
                "approvedAt": moment,
                "expiresAt": moment + expires_in if expires_in else None,
                "comment": comment,
                "nonce": secrets.token_hex(16),
            },
        )
    else:
        existing = load_one(path, Approval)
        if existing.spec.resource != resource or existing.spec.plan.id != plan_id:
            raise ConfigurationError(
                f"{path} exists and approves something else; it is never rewritten"
            )
    return _add_signature(path, key, APPROVAL_NAMESPACE, created)


def acknowledgment_path(repo: Path, resource: ResourceRef, operation_id: str) -> Path:
    return repo / "acknowledgments" / resource.namespace / resource.name / f"{operation_id}.yaml"


def acknowledge(
    repo: Path, resource: ResourceRef, operation_id: str, key: Path, *, comment: str = ""
) -> Signed:
    """Write (or reuse) the acknowledgment of run ``operation_id`` and add an SSH signature
    (namespace ``seshat-acknowledgment``)."""
    path = acknowledgment_path(repo, resource, operation_id)
    created = not path.exists()
    if created:
        _write_statement(
            path,
            RunAcknowledgment,
            resource,
            f"{resource.name}-{operation_id[:12]}",
            {"operationId": operation_id, "comment": comment},
        )
    else:
        existing = load_one(path, RunAcknowledgment)
        if existing.spec.resource != resource or existing.spec.operation_id != operation_id:
            raise ConfigurationError(
                f"{path} exists and acknowledges something else; it is never rewritten"
            )
    return _add_signature(path, key, ACKNOWLEDGMENT_NAMESPACE, created)


def _write_statement(
    path: Path, kind: type[Model], resource: ResourceRef, name: str, spec: dict[str, object]
) -> None:
    """Write a new statement about ``resource`` to ``path``: a ``kind`` named ``name`` in the
    resource's namespace, whose spec names the resource and says ``spec``."""
    statement = kind.model_validate(
        {
            "metadata": {"name": name, "namespace": resource.namespace},
            "spec": {"resource": resource.model_dump(by_alias=True), **spec},
        }
    )
    text = dump_all([statement.model_dump(mode="json", by_alias=True, exclude_none=True)])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _signed_by(path: Path, key: Path, namespace: str) -> bool:
    """Whether ``key`` already made one of the signatures of the statement at ``path``."""
    sig = signature_path(path)
    if not sig.exists():
        return False
    mine = fingerprint(key)
    data = path.read_bytes()
    return any(
        check(data, block, namespace, None).fingerprint == mine
        for block in split_signatures(sig.read_text(encoding="ascii", errors="replace"))
    )


def _add_signature(path: Path, key: Path, namespace: str, created: bool) -> Signed:
    """Sign the statement's bytes and append the signature to ``<file>.sig``."""
    block = sign(path.read_bytes(), key, namespace)
    sig = signature_path(path)
    current = sig.read_text(encoding="ascii", errors="replace") if sig.exists() else ""
    with sig.open("a", encoding="ascii") as out:
        out.write(block)
    return Signed(path, sig, len(split_signatures(current + block)), created)
