"""Reading a Seshat repository into typed resources and a list of problems.

:func:`load_repository` never stops at the first problem and never lets one bad document
hide the good ones: it returns every valid resource (with its uid assigned) and every
problem, each located as ``path:line: field`` and tied to the resource it belongs to when
that can be told. A resource with a problem is not returned; the reconciler gives it a
``Blocked/ConfigurationError`` verdict of its own from the problem's ``resource``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from gitops.repo.files import MAX_SIGNATURE_BYTES, UnreadableFile, read_in_repository
from gitops.repo.fleets import Membership, expand_fleet
from gitops.repo.messages import FieldPath, field_errors, format_field
from gitops.repo.problems import MAX_PROBLEMS_PER_FILE, Problem, ResourceKey, problem_lines
from gitops.repo.uids import GitHistoryUids, UidSource, uid_from
from gitops.repo.yamlfile import MAX_FILE_BYTES, Document, FileError, read_documents
from gitops.resources.approvals import Approval, RunAcknowledgment
from gitops.resources.base import API_VERSION
from gitops.resources.config import DEFAULT_PATHS, Config, ConfigSpec
from gitops.resources.fleet import DatabaseFleet
from gitops.resources.kinds import KINDS, Resource
from gitops.resources.migration import DatabaseMigration
from gitops.resources.policies import ApprovalPolicy, VerificationPolicy
from gitops.resources.schema import DatabaseSchema
from runner.digests import digest_hex
from runner.errors import CanNotRunError

__all__ = [
    "CONFIG_FILE",
    "MAX_FILES",
    "MAX_PROBLEMS_PER_FILE",
    "LoadedResource",
    "Repository",
    "load_repository",
    "problem_lines",
]

CONFIG_FILE: Final = "seshat.yaml"
_MAX_PATH, _MAX_PATHS = 1024, 64  # ConfigSpec.paths: the length of one path, of the list
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
MAX_FILES: Final = 10_000
"""More declaration files than this under the configured paths is refused."""


@dataclass(frozen=True, slots=True)
class LoadedResource:
    """A valid resource and where it was declared."""

    resource: Resource
    path: str
    line: int
    member: Membership | None = None
    """A fleet member's fleet, name, labels and where it is listed (None: not a member)."""

    @property
    def key(self) -> ResourceKey:
        meta = self.resource.metadata
        return ResourceKey(self.resource.kind, meta.namespace, meta.name)


@dataclass(frozen=True, slots=True)
class Repository:
    """What a repository declares: its config, its valid resources and its problems."""

    root: Path
    config: Config
    resources: tuple[LoadedResource, ...]
    problems: tuple[Problem, ...]

    def find(self, kind: str, namespace: str, name: str) -> LoadedResource | None:
        """The valid resource with this key, if there is one."""
        wanted = ResourceKey(kind, namespace, name)
        return next((r for r in self.resources if r.key == wanted), None)

    def members(self, namespace: str, fleet: str) -> list[LoadedResource]:
        """The valid members of fleet ``namespace/fleet``, by member name."""
        return [
            r
            for r in self.resources
            if r.member is not None and r.member.fleet == fleet and r.key.namespace == namespace
        ]


@dataclass(frozen=True, slots=True)
class _Candidate(LoadedResource):
    """A resource where it was declared, before the checks across documents and before its
    uid; its document gives the line of each of its fields."""

    document: Document = dataclasses.field(kw_only=True)


def _relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _inside(root: Path, path: Path) -> bool:
    return _outside(root, path) is None


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; not when it cannot even be looked up (a name too long)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _outside(root: Path, path: Path) -> str | None:
    """Why ``path`` does not resolve inside ``root``; None when it does."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # Python 3.11 reports a loop as RuntimeError
        return "cannot be resolved (a loop of symbolic links?)"
    if resolved == root or root in resolved.parents:
        return None
    return "symbolic link leads outside the repository"


class _Loader:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.problems: list[Problem] = []
        # Keys of documents that had problems, so references to them can say so.
        self.broken: set[ResourceKey] = set()
        self.config_document: Document | None = None

    def problem(
        self,
        path: str,
        line: int | None,
        field: FieldPath | str,
        message: str,
        resource: ResourceKey | None = None,
    ) -> None:
        name = field if isinstance(field, str) else format_field(field)
        self.problems.append(Problem(path, line, name, message, resource))
        if resource is not None:
            self.broken.add(resource)

    def candidate_problem(self, candidate: _Candidate, field: FieldPath, message: str) -> None:
        """A problem with a field of a document that otherwise validated."""
        line = candidate.document.line_of(field)
        self.problem(candidate.path, line, field, message, candidate.key)

    # -- files --------------------------------------------------------------------------

    def read(self, path: Path) -> list[Document] | None:
        """The documents of one file, or None when it has a problem (reported here)."""
        rel = _relative(self.root, path)
        try:
            data = read_in_repository(self.root, path, MAX_FILE_BYTES)
            if data is None:
                self.problem(rel, None, "", "no such file")
                return None
            return read_documents(data)
        except FileError as error:
            self.problem(rel, error.line, "", error.message)
        except UnreadableFile as error:
            self.problem(rel, None, "", error.reason)
        return None

    def config(self) -> Config:
        path = self.root / CONFIG_FILE
        if not path.exists() and not path.is_symlink():
            return Config()
        documents = self.read(path)
        if documents is None:
            return Config()
        if len(documents) != 1 or not isinstance(documents[0].data, dict):
            self.problem(CONFIG_FILE, 1, "", "must hold exactly one Config document")
            return Config()
        document = self.config_document = documents[0]
        try:
            return Config.model_validate(document.data)
        except ValidationError as error:
            for field, message in field_errors(error):
                self.problem(CONFIG_FILE, document.line_of(field), field, message)
        return Config(spec=ConfigSpec(paths=_usable_paths(document.data)))

    def files(self, config: Config) -> Iterator[Path]:
        explicit = "paths" in config.spec.model_fields_set
        seen: set[Path] = set()
        count = 0
        for index, entry in enumerate(config.spec.paths):
            where = ("spec", "paths", index)
            line = self.config_document.line_of(where) if self.config_document else None
            base = self.root / entry
            if Path(entry).is_absolute() or os.path.normpath(entry).startswith(".."):
                self.problem(CONFIG_FILE, line, where, "leads outside the repository")
                continue
            if (reason := _outside(self.root, base)) is not None:
                self.problem(entry, None, "", reason)
                continue
            try:
                found = base.exists()
            except OSError as error:  # ENAMETOOLONG: a component over 255 bytes
                self.problem(CONFIG_FILE, line, where, f"cannot be read ({error.strerror})")
                continue
            if not found:
                if explicit:
                    self.problem(CONFIG_FILE, line, where, "no such folder in the repository")
                continue
            for path in self._walk(base):
                if path.resolve() in seen:
                    continue
                seen.add(path.resolve())
                count += 1
                if count > MAX_FILES:
                    self.problem(
                        _relative(self.root, path), None, "", f"more than {MAX_FILES} files"
                    )
                    return
                yield path

    def _walk(self, base: Path) -> Iterator[Path]:
        candidates: list[Path] = []
        if base.is_file():
            candidates = [base]
        else:
            for folder, dirs, names in os.walk(base):
                here = Path(folder)
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in dirs:
                    if (here / name).is_symlink() and (
                        reason := _outside(self.root, here / name)
                    ) is not None:
                        self.problem(_relative(self.root, here / name), None, "", reason)
                candidates += [
                    here / n
                    for n in sorted(names)
                    if not n.startswith(".") and n.endswith((".yaml", ".yml"))
                ]
        for path in candidates:
            if (reason := _outside(self.root, path)) is not None:
                self.problem(_relative(self.root, path), None, "", reason)
                continue
            yield path

    # -- documents ----------------------------------------------------------------------

    def document(self, rel: str, document: Document) -> _Candidate | None:
        data = document.data
        if not isinstance(data, dict):
            self.problem(rel, document.line, "", "a document must be a mapping")
            return None
        key = _key_of(data)
        if "apiVersion" not in data:
            self.problem(rel, document.line, "apiVersion", "required field is missing", key)
            return None
        if data["apiVersion"] != API_VERSION:
            self.problem(
                rel, document.line_of(("apiVersion",)), "apiVersion", f"must be {API_VERSION}", key
            )
            return None
        kind = data.get("kind")
        if kind == "Config":
            self.problem(
                rel,
                document.line_of(("kind",)),
                "kind",
                f"a Config belongs in {CONFIG_FILE} at the repository root",
            )
            return None
        if not isinstance(kind, str) or kind not in KINDS:
            choices = ", ".join(KINDS)
            message = (
                "required field is missing"
                if kind is None
                else f"'{kind}' is not one of {choices}"
                if isinstance(kind, str) and len(kind) <= 64
                else f"must be one of {choices}"
            )
            self.problem(rel, document.line_of(("kind",)), "kind", message)
            return None
        found = False
        if "status" in data:
            self.problem(
                rel,
                document.line_of(("status",)),
                "status",
                "status is written by Seshat on the status branch; remove it",
                key,
            )
            found = True
        metadata = data.get("metadata")
        if isinstance(metadata, dict) and "uid" in metadata:
            self.problem(
                rel,
                document.line_of(("metadata", "uid")),
                "metadata.uid",
                "the uid is assigned by Seshat; remove it",
                key,
            )
            found = True
        if found:  # already reported; validate the rest without them to report it too
            data = {k: v for k, v in data.items() if k != "status"}
            if isinstance(metadata, dict):
                data["metadata"] = {k: v for k, v in metadata.items() if k != "uid"}
        try:
            resource = KINDS[kind].model.model_validate(data)
        except ValidationError as error:
            for field, message in field_errors(error):
                self.problem(rel, document.line_of(field), field, message, key)
            return None
        return None if found else _Candidate(resource, rel, document.line, document=document)

    # -- fleets ---------------------------------------------------------------------------

    def members(self, candidate: _Candidate, config: Config) -> list[_Candidate]:
        """A fleet's members, each validated as a declaration of its own (none for any
        other resource)."""
        fleet = candidate.resource
        if not isinstance(fleet, DatabaseFleet):
            return []
        listed = fleet.spec.members.from_file
        if listed is not None and any(
            os.path.normpath(listed) == os.path.normpath(p)
            or os.path.normpath(listed).startswith(os.path.normpath(p) + "/")
            for p in config.spec.paths
        ):
            self.problem(
                candidate.path,
                candidate.document.line_of(("spec", "members", "fromFile")),
                "spec.members.fromFile",
                f"{listed} is inside a declaration folder (seshat.yaml's spec.paths), where "
                "every file must hold resources; keep members files elsewhere (fleets/)",
                candidate.key,
            )
            return []
        expansion = expand_fleet(self.root, candidate.path, candidate.document, fleet)
        for found in expansion.problems:
            self.problem(found.path, found.line, found.field, found.message, found.resource)
        return [
            _Candidate(resource, candidate.path, document.line, membership, document=document)
            for resource, document, membership in expansion.members
        ]

    # -- across documents ---------------------------------------------------------------

    def cross_check(self, candidates: list[_Candidate]) -> list[_Candidate]:
        by_key: dict[ResourceKey, list[_Candidate]] = defaultdict(list)
        for candidate in candidates:
            by_key[candidate.key].append(candidate)
        unique: list[_Candidate] = []
        for key, group in by_key.items():
            if len(group) == 1:
                unique.append(group[0])
                continue
            for candidate in group:
                others = ", ".join(f"{o.path}:{o.line}" for o in group if o is not candidate)
                self.problem(
                    candidate.path,
                    candidate.line,
                    "metadata.name",
                    f"{key.kind} {key.namespace}/{key.name} is declared more than once "
                    f"(also at {others})",
                    key,
                )
        unique = self._one_database_per_name(unique)
        kept = [
            c
            for c in unique
            if self._paths_ok(c) and self._location_ok(c) and self._signatures_ok(c)
        ]
        valid = {c.key for c in kept}
        return [c for c in kept if self._references_ok(c, valid)]

    def _one_database_per_name(self, candidates: list[_Candidate]) -> list[_Candidate]:
        """A DatabaseSchema and a DatabaseMigration may not share a namespace and name: they
        would share one status file, review branch and pull request, and what one records
        (an unresolved run) the other would overwrite."""
        by_name: dict[tuple[str, str], list[_Candidate]] = defaultdict(list)
        for candidate in candidates:
            if isinstance(candidate.resource, (DatabaseSchema, DatabaseMigration, DatabaseFleet)):
                meta = candidate.resource.metadata
                by_name[(meta.namespace, meta.name)].append(candidate)
        clashing: set[int] = set()
        for (namespace, name), group in by_name.items():
            if len(group) < 2:
                continue
            for candidate in group:
                clashing.add(id(candidate))
                others = ", ".join(
                    f"{o.resource.kind} at {o.path}:{o.line}" for o in group if o is not candidate
                )
                self.candidate_problem(
                    candidate,
                    ("metadata", "name"),
                    f"{namespace}/{name} is also the name of a {others}; a DatabaseSchema, "
                    "a DatabaseMigration and a DatabaseFleet need different names (they would "
                    "share a status file and a review branch)",
                )
        kept = [c for c in candidates if id(c) not in clashing]
        gone = {c.resource.metadata.name for c in candidates if id(c) in clashing}
        # The members of a fleet refused here go with it.
        return [c for c in kept if c.member is None or c.member.fleet not in gone]

    def _paths_ok(self, candidate: _Candidate) -> bool:
        resource = candidate.resource
        if not isinstance(resource, (VerificationPolicy, ApprovalPolicy)):
            return True
        ok = True
        for field, value in resource.repo_paths():
            target = self.root / value
            if Path(value).is_absolute():
                message = "must be a path relative to the repository root"
            elif not _inside(self.root, target):
                message = "leads outside the repository"
            elif not _is_file(target):
                message = f"no such file in the repository: {value}"
            else:
                continue
            ok = False
            self.candidate_problem(candidate, field, message)
        return ok

    def _location_ok(self, candidate: _Candidate) -> bool:
        resource = candidate.resource
        if isinstance(resource, Approval):
            expected = (
                f"approvals/{resource.spec.resource.namespace}/{resource.spec.resource.name}/"
                f"{digest_hex(resource.spec.plan.id)}.yaml"
            )
        elif isinstance(resource, RunAcknowledgment):
            expected = (
                f"acknowledgments/{resource.spec.resource.namespace}/"
                f"{resource.spec.resource.name}/{resource.spec.operation_id}.yaml"
            )
        else:
            return True
        key = candidate.key
        if resource.metadata.namespace != resource.spec.resource.namespace:
            self.problem(
                candidate.path,
                candidate.document.line_of(("metadata", "namespace")),
                "metadata.namespace",
                f"must be the namespace of the resource it is about "
                f"({resource.spec.resource.namespace})",
                key,
            )
            return False
        if candidate.path != expected:
            self.problem(candidate.path, candidate.line, "", f"must be stored at {expected}", key)
            return False
        return True

    def _signatures_ok(self, candidate: _Candidate) -> bool:
        """The ``.sig`` and ``.sigstore.json`` files beside a statement, when there are any,
        are regular files inside the repository and within the bound."""
        if not isinstance(candidate.resource, (Approval, RunAcknowledgment)):
            return True
        ok = True
        for suffix in (".sig", ".sigstore.json"):
            path = self.root / (candidate.path + suffix)
            try:
                read_in_repository(self.root, path, MAX_SIGNATURE_BYTES)
            except UnreadableFile as error:
                key = candidate.key
                self.problem(candidate.path + suffix, None, "", error.reason, key)
                ok = False
        return ok

    def _references_ok(self, candidate: _Candidate, valid: set[ResourceKey]) -> bool:
        resource = candidate.resource
        if not isinstance(resource, (DatabaseSchema, DatabaseMigration)):
            return True
        name = resource.spec.artifact.verification.policy
        wanted = ResourceKey("VerificationPolicy", resource.metadata.namespace, name)
        if wanted in valid:
            return True
        message = (
            f"VerificationPolicy '{name}' has problems of its own"
            if wanted in self.broken
            else f"no VerificationPolicy '{name}' in namespace '{wanted.namespace}'"
        )
        self.candidate_problem(candidate, ("spec", "artifact", "verification", "policy"), message)
        return False


def _usable_paths(data: object) -> list[str]:
    """The configured ``paths`` of an otherwise invalid config, so they are still checked."""
    spec = data.get("spec") if isinstance(data, dict) else None
    paths = spec.get("paths") if isinstance(spec, dict) else None
    if isinstance(paths, list) and paths and all(isinstance(p, str) and p for p in paths):
        # Only paths the model takes (it reported the others): a NUL names no folder.
        usable = [p for p in paths if len(p) <= _MAX_PATH and not _CONTROL.search(p)]
        if usable:
            return usable[:_MAX_PATHS]
    return list(DEFAULT_PATHS)


def _key_of(data: dict[str, object]) -> ResourceKey | None:
    kind, metadata = data.get("kind"), data.get("metadata")
    if not isinstance(kind, str) or kind not in KINDS or not isinstance(metadata, dict):
        return None
    name, namespace = metadata.get("name"), metadata.get("namespace", "default")
    if isinstance(name, str) and isinstance(namespace, str):
        return ResourceKey(kind, namespace, name)
    return None


def load_repository(
    root: Path | str, uids: UidSource | None = None, *, config: Config | None = None
) -> Repository:
    """Load every declaration under ``root``; see the module docstring for the guarantees.

    ``uids`` defaults to :class:`~gitops.repo.uids.GitHistoryUids` over ``root``'s work
    tree. ``config``, when given, is the ``seshat.yaml`` the repository is read with instead
    of its own (whose problems are still reported): a preview reads the pull request's head
    with the base's settings. Raises :class:`~runner.errors.CanNotRunError` only when
    ``root`` is not a folder.
    """
    base = Path(root)
    if not base.is_dir():
        raise CanNotRunError(f"{root}: not a folder")
    base = base.resolve()
    loader = _Loader(base)
    own = loader.config()
    if config is not None:
        loader.config_document = None  # its lines are not the lines of the config in use
    else:
        config = own
    candidates: list[_Candidate] = []
    for path in loader.files(config):
        documents = loader.read(path)
        for document in documents or []:
            candidate = loader.document(_relative(base, path), document)
            if candidate is not None:
                candidates.append(candidate)
                candidates += loader.members(candidate, config)
    valid = loader.cross_check(candidates)
    source = uids if uids is not None else GitHistoryUids(base, config.spec.paths)
    loaded = []
    fleets = {
        (c.resource.metadata.namespace, c.resource.metadata.name): source.uid_for(c.key)
        for c in valid
        if isinstance(c.resource, DatabaseFleet)
    }
    for candidate in valid:
        key = candidate.key
        if candidate.member is not None:
            # A member lives as long as its fleet: its uid is derived from the fleet's.
            fleet_uid = fleets.get((key.namespace, candidate.member.fleet), "")
            uid = uid_from(key, f"fleet:{fleet_uid}")
        else:
            uid = source.uid_for(key)
        meta = candidate.resource.metadata.model_copy(update={"uid": uid})
        resource = candidate.resource.model_copy(update={"metadata": meta})
        loaded.append(LoadedResource(resource, candidate.path, candidate.line, candidate.member))
    loaded.sort(key=lambda r: (list(KINDS).index(r.key.kind), r.key.namespace, r.key.name))
    problems = sorted(set(loader.problems), key=Problem.sort_key)
    return Repository(base, config, tuple(loaded), tuple(problems))
