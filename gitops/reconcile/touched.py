"""Which database resources a change to the repository touches, so ``seshat run`` reconciles
them at once instead of after their ``spec.interval``.

A resource is touched by a changed path when the path is

* the file that declares it (and then every resource on the same coordination digest too:
  a changed target can start or end a realm conflict); for a fleet member, its fleet's file
  and the members file that lists it;
* inside a local OCI layout its ``spec.artifact.ref`` names (``oci-layout://`` relative to
  the repository);
* a VerificationPolicy it uses, or a key or trusted root that policy names;
* an ApprovalPolicy of its namespace with a rule that matches it, or an allowed-signers file
  or trusted root such a policy names (an approval that was refused may now be accepted);
* under ``approvals/<namespace>/<name>/`` or ``acknowledgments/<namespace>/<name>/``
  (statements and their signature files, also when deleted).

A change this module cannot attribute is treated as touching every resource: the repository's
``seshat.yaml`` or the files its signing settings name, a declaration file that no longer
declares a valid resource (deleted, moved, or with problems: it may have been someone's
realm partner or policy), or a diff that cannot be computed at all (``changed`` is None: a
history rewritten under the controller). Any other path (a README, application code) touches
nothing: the resources it does not name keep their schedule.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from gitops.approvals.verify import matching_rule
from gitops.reconcile.identities import coordination_digest
from gitops.repo.loader import CONFIG_FILE, LoadedResource, Repository
from gitops.repo.problems import ResourceKey
from gitops.resources.approvals import ResourceRef
from gitops.resources.migration import DatabaseMigration
from gitops.resources.policies import ApprovalPolicy, VerificationPolicy
from gitops.resources.schema import DatabaseSchema
from runner.artifacts.errors import ArtifactError
from runner.artifacts.reference import parse_reference

__all__ = ["STATEMENT_FOLDERS", "Touched", "touched_by"]

STATEMENT_FOLDERS = ("approvals", "acknowledgments")
"""Where signed statements live, as ``<folder>/<namespace>/<name>/...`` (the loader refuses
them anywhere else)."""

Database = DatabaseSchema | DatabaseMigration


@dataclass(frozen=True, slots=True)
class Touched:
    """The database resources a change touches: ``everything``, or exactly ``keys``; ``why``
    names the first path that made it everything (for the log)."""

    everything: bool
    keys: frozenset[ResourceKey] = frozenset()
    why: str = ""

    def __contains__(self, key: ResourceKey) -> bool:
        return self.everything or key in self.keys


EVERYTHING_UNKNOWN = Touched(True, why="the change could not be computed")


def touched_by(repository: Repository, changed: Iterable[str] | None) -> Touched:
    """The database resources of ``repository`` (as read at the new revision) that the
    paths ``changed`` since the last reconciled revision touch; None means unknown."""
    if changed is None:
        return EVERYTHING_UNKNOWN
    index = _Index(repository)
    keys: set[ResourceKey] = set()
    for path in sorted(set(changed)):
        found = index.touched(path)
        if found is None:
            return Touched(True, why=path)
        keys |= found
    return Touched(False, frozenset(keys))


class _Index:
    """What each kind of path in the repository means for the database resources."""

    def __init__(self, repository: Repository) -> None:
        self.root = repository.root
        self.databases: list[LoadedResource] = [
            r for r in repository.resources if isinstance(r.resource, Database)
        ]
        self.declared: dict[str, set[ResourceKey]] = defaultdict(set)
        self.realms: dict[str, set[ResourceKey]] = defaultdict(set)
        for loaded in self.databases:
            resource = loaded.resource
            assert isinstance(resource, Database)
            for path in self._spellings(loaded.path):
                self.declared[path].add(loaded.key)
            digest = coordination_digest(resource.metadata.namespace, resource.spec.target)
            self.realms[digest].add(loaded.key)
            if loaded.member is not None and loaded.member.listed_in != loaded.path:
                for path in self._spellings(loaded.member.listed_in):  # a fleet's members file
                    self.declared[path].add(loaded.key)
        self.policies: dict[str, set[ResourceKey]] = defaultdict(set)  # path -> users
        self.loaded = {s for r in repository.resources for s in self._spellings(r.path)}
        for loaded in repository.resources:
            users = self._users(loaded)
            if users is None:
                continue
            policy = loaded.resource
            assert isinstance(policy, (VerificationPolicy, ApprovalPolicy))
            named = [loaded.path, *(path for _, path in policy.repo_paths())]
            for path in named:
                for spelling in self._spellings(path):
                    self.policies[spelling] |= users
        self.everything = {CONFIG_FILE}
        signing = repository.config.spec.commit.signing
        if signing is not None and signing.verify_with is not None:
            self.everything.add(_normal(signing.verify_with))
        self.declaration_roots = [_normal(p) for p in repository.config.spec.paths]
        self.layouts: list[tuple[str, ResourceKey]] = sorted(
            (layout, loaded.key)
            for loaded in self.databases
            if (layout := self._layout(loaded)) is not None
        )

    def touched(self, path: str) -> set[ResourceKey] | None:
        """The resources ``path`` touches; None when it could touch any."""
        path = _normal(path)
        if path in self.everything:
            return None
        keys: set[ResourceKey] = set()
        for key in self.declared.get(path, ()):
            keys |= self._realm_of(key)
        keys |= self.policies.get(path, set())
        keys |= {key for layout, key in self.layouts if _under(path, layout)}
        statement = self._statement(path)
        if statement is not None:
            return keys | statement
        if path not in self.loaded and self._declaration_file(path):
            return None  # a declaration that no longer declares a valid resource
        return keys

    def _realm_of(self, key: ResourceKey) -> set[ResourceKey]:
        return set().union(*(keys for keys in self.realms.values() if key in keys))

    def _statement(self, path: str) -> set[ResourceKey] | None:
        """The resources a statement's path names (None: not a statement's path)."""
        parts = path.split("/")
        if len(parts) < 4 or parts[0] not in STATEMENT_FOLDERS:
            return None
        namespace, name = parts[1], parts[2]
        return {
            loaded.key
            for loaded in self.databases
            if (loaded.key.namespace, loaded.key.name) == (namespace, name)
        }

    def _users(self, loaded: LoadedResource) -> set[ResourceKey] | None:
        """The database resources a policy governs (None: not a policy)."""
        policy = loaded.resource
        if isinstance(policy, VerificationPolicy):
            return {
                r.key
                for r in self.databases
                if isinstance(r.resource, Database)
                and r.key.namespace == policy.metadata.namespace
                and r.resource.spec.artifact.verification.policy == policy.metadata.name
            }
        if isinstance(policy, ApprovalPolicy):
            # Those a rule of it matches (as the approval check picks rules): an approval
            # refused so far may be accepted now. One it stops matching has nothing to do
            # at once (its approvals are refused from now on, whenever it next runs).
            return {r.key for r in self.databases if matching_rule([policy], _ref(r))}
        return None

    def _layout(self, loaded: LoadedResource) -> str | None:
        """The repository folder of a resource's ``oci-layout://`` artifact, if it is one."""
        resource = loaded.resource
        assert isinstance(resource, Database)
        try:
            reference = parse_reference(resource.spec.artifact.ref)
        except ArtifactError:
            return None
        if reference.transport != "oci-layout" or os.path.isabs(reference.layout):
            return None
        return _normal(reference.layout)

    def _declaration_file(self, path: str) -> bool:
        if not path.endswith((".yaml", ".yml")):
            return False
        return any(root in (".", "") or _under(path, root) for root in self.declaration_roots)

    def _spellings(self, path: str) -> set[str]:
        """``path`` and, when it is a symbolic link inside the repository, the file it leads
        to: a push that edits the target changes only the target's path."""
        spellings = {_normal(path)}
        try:
            resolved = (self.root / path).resolve()
            spellings.add(resolved.relative_to(self.root).as_posix())
        except (OSError, RuntimeError, ValueError):
            pass
        return spellings


def _normal(path: str) -> str:
    return PurePosixPath(os.path.normpath(path)).as_posix()


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _ref(loaded: LoadedResource) -> ResourceRef:
    resource = loaded.resource
    assert isinstance(resource, Database)
    meta = resource.metadata
    return ResourceRef(
        kind=resource.kind, namespace=meta.namespace, name=meta.name, uid=str(meta.uid)
    )
