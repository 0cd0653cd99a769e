"""Expanding a ``DatabaseFleet`` into its members: one full resource per member.

Each member is the template's kind, named ``<fleet>/<member>`` in the fleet's namespace,
with the fleet's labels and then the member's own, and the template's ``spec`` with
``{{ member.name }}`` and ``{{ member.labels.KEY }}`` replaced in every string. That is the
only templating: any other ``{{ ... }}``, or a label the member does not have, is a problem
at the fleet file's line (and, for a member read from a members file, that file's line too).
The member's spec is then validated exactly as a hand-written declaration is, and each
problem is reported at the line of the template field it came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from gitops.repo.files import UnreadableFile, read_in_repository
from gitops.repo.messages import FieldPath, field_errors, format_field
from gitops.repo.problems import ResourceKey
from gitops.repo.yamlfile import MAX_FILE_BYTES, Document, FileError, read_documents
from gitops.resources.base import API_VERSION, STORED_NAME_MAX
from gitops.resources.fleet import DatabaseFleet, FleetMember, member_name
from gitops.resources.kinds import KINDS, Resource

__all__ = ["Expansion", "MemberProblem", "Membership", "expand_fleet", "substitute"]

_PLACEHOLDER: Final = re.compile(r"\{\{(.*?)\}\}")
_NAME: Final = re.compile(r"^\s*member\.name\s*$")
_LABEL: Final = re.compile(r"^\s*member\.labels\.([A-Za-z0-9][-A-Za-z0-9_./]*)\s*$")
_TEMPLATE_SPEC: Final = ("spec", "template", "spec")


@dataclass(frozen=True, slots=True)
class Membership:
    """What makes a resource a fleet member: its fleet, its own name and labels, and where
    it is listed (the fleet file, or the members file)."""

    fleet: str
    member: str
    labels: tuple[tuple[str, str], ...]
    listed_in: str
    line: int

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True, slots=True)
class MemberProblem:
    """A problem found while expanding; ``resource`` is the member's key, or the fleet's."""

    path: str
    line: int | None
    field: str
    message: str
    resource: ResourceKey


@dataclass(frozen=True, slots=True)
class Expansion:
    """The valid members of one fleet (each with the document its lines are read from) and
    every problem found on the way."""

    members: list[tuple[Resource, Document, Membership]]
    problems: list[MemberProblem]


def substitute(
    value: object, member: FleetMember, where: FieldPath = ()
) -> tuple[object, list[tuple[FieldPath, str]]]:
    """``value`` with the member's placeholders replaced in every string, and the problems
    (the field path and what is wrong) of the placeholders that name nothing."""
    problems: list[tuple[FieldPath, str]] = []

    def replace(match: re.Match[str], path: FieldPath) -> str:
        inside = match.group(1)
        if _NAME.match(inside):
            return member.name
        label = _LABEL.match(inside)
        if label is None:
            problems.append(
                (
                    path,
                    f"unknown placeholder {{{{{inside[:64]}}}}}: only {{{{ member.name }}}} and "
                    "{{ member.labels.KEY }} are substituted",
                )
            )
            return match.group(0)
        key = label.group(1)
        if key not in member.labels:
            problems.append((path, f"member {member.name!r} has no label {key!r}"))
            return match.group(0)
        return member.labels[key]

    def walk(node: object, path: FieldPath) -> object:
        if isinstance(node, str):
            return _PLACEHOLDER.sub(lambda m: replace(m, path), node)
        if isinstance(node, dict):
            return {k: walk(v, (*path, str(k))) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, (*path, i)) for i, v in enumerate(node)]
        return node

    return walk(value, where), problems


class _Expander:
    def __init__(self, root: Path, path: str, document: Document, fleet: DatabaseFleet) -> None:
        self.root, self.path, self.document, self.fleet = root, path, document, fleet
        meta = fleet.metadata
        self.fleet_key = ResourceKey("DatabaseFleet", meta.namespace, meta.name)
        self.kind = fleet.spec.template.kind
        self.problems: list[MemberProblem] = []

    def problem(
        self, path: str, line: int | None, field: str, message: str, key: ResourceKey
    ) -> None:
        self.problems.append(MemberProblem(path, line, field, message, key))

    def member_key(self, name: str) -> ResourceKey:
        return ResourceKey(
            self.kind, self.fleet.metadata.namespace, member_name(self.fleet.metadata.name, name)
        )

    def listed(self) -> Iterator[tuple[FleetMember, str, int]]:
        """Each member with the file and line it is listed at (duplicates refused)."""
        members = self.fleet.spec.members
        if members.list_ is not None:
            entries = [
                (
                    m,
                    self.path,
                    self.document.line_of(("spec", "members", "list", i)),
                    f"spec.members.list[{i}].name",
                )
                for i, m in enumerate(members.list_)
            ]
        else:
            entries = list(self._from_file(members.from_file or ""))
        lines: dict[str, list[tuple[str, int]]] = {}
        for member, path, line, _ in entries:
            lines.setdefault(member.name, []).append((path, line))
        for member, path, line, field in entries:
            where = lines[member.name]
            if len(where) > 1:
                others = ", ".join(f"{p}:{n}" for p, n in where if (p, n) != (path, line))
                self.problem(
                    path,
                    line,
                    field,
                    f"member {member.name!r} of fleet {self.fleet.metadata.name!r} is listed "
                    f"more than once (also at {others})",
                    self.member_key(member.name),
                )
                continue
            longest = STORED_NAME_MAX - len(self.fleet.metadata.name) - 1
            if len(member.name) > longest:
                self.problem(
                    path,
                    line,
                    field,
                    f"at most {longest} characters in this fleet: <fleet>/<member> names the "
                    "member's status file",
                    self.fleet_key,
                )
                continue
            yield member, path, line

    def _from_file(self, name: str) -> Iterator[tuple[FleetMember, str, int, str]]:
        line = self.document.line_of(("spec", "members", "fromFile"))
        field = "spec.members.fromFile"
        if Path(name).is_absolute():  # a path inside the repository, never one of the host
            self.problem(
                self.path, line, field, f"{name}: a path inside the repository", self.fleet_key
            )
            return
        try:
            data = read_in_repository(self.root, self.root / name, MAX_FILE_BYTES)
            documents = read_documents(data) if data is not None else None
        except (UnreadableFile, FileError) as error:
            said = error.reason if isinstance(error, UnreadableFile) else error.message
            self.problem(self.path, line, field, f"{name}: {said}", self.fleet_key)
            return
        if documents is None:
            self.problem(
                self.path, line, field, f"no such file in the repository: {name}", self.fleet_key
            )
            return
        if len(documents) != 1 or not isinstance(documents[0].data, list):
            self.problem(
                name, 1, "", "a members file holds one YAML list of {name, labels}", self.fleet_key
            )
            return
        listing = documents[0]
        assert isinstance(listing.data, list)
        for index, entry in enumerate(listing.data):
            at = listing.line_of((index,))
            try:
                yield FleetMember.model_validate(entry), name, at, f"[{index}].name"
            except ValidationError as error:
                for where, message in field_errors(error):
                    self.problem(
                        name,
                        listing.line_of((index, *where)),
                        format_field((index, *where)),
                        message,
                        self.fleet_key,
                    )

    def expand(self) -> Expansion:
        meta = self.fleet.metadata
        model = KINDS[self.kind].model
        found: list[tuple[Resource, Document, Membership]] = []
        for member, listed_in, listed_at in self.listed():
            key = self.member_key(member.name)
            spec, missing = substitute(self.fleet.spec.template.spec, member, _TEMPLATE_SPEC)
            for where, message in missing:
                self._at_template(where, message, member, listed_in, listed_at, key)
            if missing:
                continue
            data = {
                "apiVersion": API_VERSION,
                "kind": self.kind,
                "metadata": {
                    "name": member.name,
                    "namespace": meta.namespace,
                    "labels": {**meta.labels, **member.labels},
                },
                "spec": spec,
            }
            try:
                resource = model.model_validate(data)
            except ValidationError as error:
                for where, message in field_errors(error):
                    path = (*_TEMPLATE_SPEC, *where[1:]) if where[:1] == ("spec",) else where
                    self._at_template(path, message, member, listed_in, listed_at, key)
                continue
            named = resource.metadata.model_copy(update={"name": key.name})
            resource = resource.model_copy(update={"metadata": named})
            membership = Membership(
                meta.name, member.name, tuple(sorted(member.labels.items())), listed_in, listed_at
            )
            found.append((resource, self._member_document(listed_at), membership))
        return Expansion(found, self.problems)

    def _at_template(
        self,
        where: FieldPath,
        message: str,
        member: FleetMember,
        listed_in: str,
        listed_at: int,
        key: ResourceKey,
    ) -> None:
        """A problem of one member's spec: at the template's line in the fleet file, naming
        the member and where it is listed."""
        said = f"{message} (member {member.name!r}, listed at {listed_in}:{listed_at})"
        self.problem(self.path, self.document.line_of(where), format_field(where), said, key)

    def _member_document(self, line: int) -> Document:
        """The fleet document as the member's own: the template's fields at the lines the
        loader's later checks (a missing VerificationPolicy) look up as ``spec.*``."""
        lines: dict[FieldPath, int] = {}
        for path, at in self.document.lines.items():
            if path[: len(_TEMPLATE_SPEC)] == _TEMPLATE_SPEC:
                lines[("spec", *path[len(_TEMPLATE_SPEC) :])] = at
        return Document(self.document.data, line, lines)


def expand_fleet(root: Path, path: str, document: Document, fleet: DatabaseFleet) -> Expansion:
    """The members of ``fleet`` (declared in ``path`` at ``document``), each validated."""
    return _Expander(root, path, document, fleet).expand()
