"""Which database resources a pull request changes, and what changed for each.

The paths the head changes are attributed to resources by
:func:`gitops.reconcile.touched.touched_by` (the reconciler's own rules: a declaration, a
policy it uses or a file that policy names, its OCI layout, its statements). On top of that,
an artifact whose tag now resolves to a digest other than the one recorded on the status
branch counts as changed even when no file did: the merge would plan it. Resources the head
does not change are not listed; resources it removes are, without a plan.

The head's changes to the trust anchors (``seshat.yaml``, VerificationPolicy and
ApprovalPolicy declarations, the files they name) are listed on their own
(:func:`trust_changes`): a preview judges the head with the base's, so these are changes for
a reviewer to read, which take effect only once merged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gitops.approvals.verify import matching_rule
from gitops.reconcile.identities import coordination_digest
from gitops.reconcile.touched import STATEMENT_FOLDERS, touched_by
from gitops.repo.loader import CONFIG_FILE, LoadedResource, Repository
from gitops.repo.problems import ResourceKey
from gitops.resources.approvals import ResourceRef
from gitops.resources.migration import DatabaseMigration
from gitops.resources.policies import ApprovalPolicy, VerificationPolicy
from gitops.resources.schema import DatabaseSchema

__all__ = [
    "FieldChange",
    "ResourceChange",
    "changed_resources",
    "declaration_fields",
    "trust_changes",
]

Database = DatabaseSchema | DatabaseMigration


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field of a declaration: its path (``spec.policy.apply``) and both values as JSON
    (None: absent on that side)."""

    field: str
    base: str | None
    head: str | None


@dataclass(frozen=True, slots=True)
class ResourceChange:
    """What the head changes for one database resource (reasons are sentences for people)."""

    key: ResourceKey
    reasons: tuple[str, ...]
    fields: tuple[FieldChange, ...] = ()
    introduced: bool = False  # not declared on the base
    removed: bool = False  # declared on the base, not on the head
    target_changed: bool = False  # spec.target differs: shown, never planned
    recorded_digest: str | None = None  # the artifact digest the status branch records
    resolved_digest: str | None = None  # what the head's reference resolves to now


def declaration_fields(resource: Database) -> dict[str, str]:
    """The declaration flattened to ``field path -> JSON value`` (the uid left out: it is
    Git's, not the author's)."""
    document = resource.model_dump(mode="json", by_alias=True, exclude_none=True)
    document.get("metadata", {}).pop("uid", None)
    flat: dict[str, str] = {}
    _flatten(document, "", flat)
    return flat


def _flatten(value: Any, prefix: str, into: dict[str, str]) -> None:
    if isinstance(value, dict) and value:
        for name in sorted(value):
            _flatten(value[name], f"{prefix}.{name}" if prefix else name, into)
        return
    into[prefix] = json.dumps(value, sort_keys=True, ensure_ascii=False)


def _field_changes(base: Database, head: Database) -> tuple[FieldChange, ...]:
    old, new = declaration_fields(base), declaration_fields(head)
    return tuple(
        FieldChange(name, old.get(name), new.get(name))
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    )


def changed_resources(
    base: Repository,
    head: Repository,
    paths: Iterable[str],
    *,
    recorded: Callable[[LoadedResource], str | None],
    resolve: Callable[[LoadedResource], str | None],
) -> list[ResourceChange]:
    """Every database resource the head changes relative to the base, in resource order.

    ``recorded(loaded)`` is the artifact digest the status branch records for a resource
    (None: none recorded); ``resolve(loaded)`` what the head's reference resolves to now
    (None: it could not be resolved). Only a recorded digest that differs from the resolved
    one counts as a changed artifact.
    """
    changed = sorted(set(paths))
    databases = [r for r in head.resources if isinstance(r.resource, Database)]
    kept = {r.key for r in databases}
    removed = [r for r in base.resources if isinstance(r.resource, Database) and r.key not in kept]
    touched = touched_by(head, _without_removals(base, head, changed, removed))
    found: list[ResourceChange] = []
    for loaded in databases:
        resource = loaded.resource
        assert isinstance(resource, Database)
        before = base.find(loaded.key.kind, loaded.key.namespace, loaded.key.name)
        reasons: list[str] = []
        fields: tuple[FieldChange, ...] = ()
        introduced = before is None
        target_changed = False
        if before is None:
            reasons.append("introduced by this pull request")
        else:
            assert isinstance(before.resource, Database)
            fields = _field_changes(before.resource, resource)
            if fields:
                reasons.append(f"declaration changed ({len(fields)} field(s))")
            target_changed = before.resource.spec.target != resource.spec.target
        if loaded.key in touched and not introduced:
            reasons += _policy_reasons(base, head, loaded, changed)
            reasons += _other_reasons(loaded, changed, touched.everything, touched.why)
        recorded_digest = recorded(loaded)
        resolved_digest = None
        if recorded_digest is not None and not target_changed:
            resolved_digest = resolve(loaded)
            if resolved_digest is not None and resolved_digest != recorded_digest:
                reasons.append(
                    f"artifact {resource.spec.artifact.ref} now resolves to {resolved_digest} "
                    f"(the status branch records {recorded_digest})"
                )
        if loaded.key in touched and not reasons:
            reasons.append(
                "a file it depends on changed (its declaration's file, its OCI layout in the "
                "repository, or a resource on the same database)"
            )
        if not reasons:
            continue
        found.append(
            ResourceChange(
                key=loaded.key,
                reasons=tuple(dict.fromkeys(reasons)),
                fields=fields,
                introduced=introduced,
                target_changed=target_changed,
                recorded_digest=recorded_digest,
                resolved_digest=resolved_digest,
            )
        )
    for loaded in removed:
        found.append(
            ResourceChange(key=loaded.key, reasons=("removed by this pull request",), removed=True)
        )
    return found


def _without_removals(
    base: Repository, head: Repository, changed: list[str], removed: list[LoadedResource]
) -> list[str]:
    """``changed`` without the deleted files that declared only resources the head removes:
    those are listed as removed, and to :func:`touched_by` a vanished declaration could
    have been anything, so it would list every resource. Their realm partners stay listed
    (a removal can end a realm conflict)."""
    gone = {r.key for r in removed}
    dropped: set[str] = set()
    for path in changed:
        if (head.root / path).exists():
            continue
        declared = [r for r in base.resources if r.path == path]
        if declared and all(r.key in gone for r in declared):
            dropped.add(path)
    partners = [
        r.path
        for r in head.resources
        if isinstance(r.resource, Database) and any(_same_database(r, g) for g in removed)
    ]
    return sorted((set(changed) - dropped) | set(partners))


def _same_database(one: LoadedResource, other: LoadedResource) -> bool:
    a, b = one.resource, other.resource
    assert isinstance(a, Database) and isinstance(b, Database)
    return coordination_digest(a.metadata.namespace, a.spec.target) == coordination_digest(
        b.metadata.namespace, b.spec.target
    )


def _policy_reasons(
    base: Repository, head: Repository, loaded: LoadedResource, changed: list[str]
) -> list[str]:
    """The policies of ``loaded`` whose declaration, or a file they name, the head changes."""
    resource = loaded.resource
    assert isinstance(resource, Database)
    namespace = loaded.key.namespace
    policies: list[LoadedResource] = []
    verification = head.find(
        "VerificationPolicy", namespace, resource.spec.artifact.verification.policy
    )
    if verification is not None:
        policies.append(verification)
    approval_policies = [
        r.resource for r in head.resources if isinstance(r.resource, ApprovalPolicy)
    ]
    meta = resource.metadata
    ref = ResourceRef(
        kind=resource.kind, namespace=meta.namespace, name=meta.name, uid=str(meta.uid)
    )
    rule = matching_rule(approval_policies, ref)
    if rule is not None:
        found = head.find("ApprovalPolicy", namespace, rule[0].metadata.name)
        if found is not None:
            policies.append(found)
    reasons: list[str] = []
    for policy in policies:
        assert isinstance(policy.resource, (VerificationPolicy, ApprovalPolicy))
        before = base.find(policy.key.kind, namespace, policy.key.name)
        named = sorted(path for _, path in policy.resource.repo_paths() if path in changed)
        what = f"{policy.key.kind} {policy.key.name}"
        if before is None:
            reasons.append(f"{what} is new")
        elif before.resource.spec != policy.resource.spec:
            reasons.append(f"{what} changed")
        if named:
            reasons.append(f"{what}: {', '.join(named)} changed")
    return reasons


def _other_reasons(
    loaded: LoadedResource, changed: list[str], everything: bool, why: str
) -> list[str]:
    namespace, name = loaded.key.namespace, loaded.key.name
    reasons: list[str] = []
    for folder in STATEMENT_FOLDERS:
        prefix = f"{folder}/{namespace}/{name}/"
        if any(path.startswith(prefix) for path in changed):
            reasons.append(f"{folder} of this resource changed")
    if everything:
        reasons.append(f"{why} changed, which concerns every resource")
    return reasons


def trust_changes(base: Repository, head: Repository, paths: Iterable[str]) -> tuple[str, ...]:
    """What the head changes among the trust anchors, as sentences for people: ``seshat.yaml``
    and the file its signing settings name, each VerificationPolicy and ApprovalPolicy it
    adds, removes or edits, and each key, allowed-signers file or trusted root such a policy
    names (on either side). None of it judges the head (docs/preview.md)."""
    changed = set(paths)
    found: list[str] = []
    if CONFIG_FILE in changed:
        found.append(f"{CONFIG_FILE} changed")
    signing = base.config.spec.commit.signing
    if signing is not None and signing.verify_with in changed:
        found.append(f"{signing.verify_with}, named by {CONFIG_FILE}, changed")
    keys = sorted(
        {
            loaded.key
            for repository in (base, head)
            for loaded in repository.resources
            if isinstance(loaded.resource, (VerificationPolicy, ApprovalPolicy))
        },
        key=lambda k: (k.kind, k.namespace, k.name),
    )
    for key in keys:
        before = base.find(key.kind, key.namespace, key.name)
        after = head.find(key.kind, key.namespace, key.name)
        what = f"{key.kind} {key.namespace}/{key.name}"
        if before is None:
            found.append(f"{what} is new (only the head declares it)")
        elif after is None:
            found.append(f"{what} is removed (or has problems) on the head")
        elif before.resource.spec != after.resource.spec:
            found.append(f"{what} changed")
        named: set[str] = set()
        for side in (before, after):
            if side is not None:
                assert isinstance(side.resource, (VerificationPolicy, ApprovalPolicy))
                named |= {path for _, path in side.resource.repo_paths() if path in changed}
        found += [f"{path}, named by {what}, changed" for path in sorted(named)]
    return tuple(found)
