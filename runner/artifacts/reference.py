"""Artifact references: ``oci://host[:port]/repo[:tag|@sha256:hex]`` and
``oci-layout://path[:tag|@sha256:hex]``.

A reference names where an artifact lives and, optionally, which version; resolving a tag to
its digest is the store's job (:mod:`runner.artifacts.store`). Parsing is strict: a reference
Seshat cannot read exactly is refused, never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.artifacts.errors import ArtifactError
from runner.digests import Digest, InvalidDigest

__all__ = ["Reference", "parse_reference"]

_HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.?)+(?::[0-9]{1,5})?$|^\[[0-9a-fA-F:]+\](?::[0-9]{1,5})?$"
)
_REPOSITORY = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True, slots=True)
class Reference:
    """A parsed reference. Exactly one of ``registry`` (with ``repository``) or ``layout``."""

    transport: str  # "oci" | "oci-layout"
    registry: str = ""  # host[:port]
    repository: str = ""
    layout: str = ""  # a directory path
    tag: str | None = None
    digest: Digest | None = None

    def __str__(self) -> str:
        where = (
            f"oci://{self.registry}/{self.repository}"
            if self.transport == "oci"
            else f"oci-layout://{self.layout}"
        )
        if self.digest is not None:
            return f"{where}@{self.digest}"
        return f"{where}:{self.tag}" if self.tag is not None else where

    def pinned(self, digest: Digest) -> Reference:
        """This reference with ``digest`` (and without its tag)."""
        return Reference(self.transport, self.registry, self.repository, self.layout, None, digest)

    def with_tag(self, tag: str) -> Reference:
        return Reference(self.transport, self.registry, self.repository, self.layout, tag, None)


def _split_version(rest: str, text: str) -> tuple[str, str | None, Digest | None]:
    """(location, tag, digest) from ``location[:tag][@digest]``."""
    digest = None
    if "@" in rest:
        rest, written = rest.rsplit("@", 1)
        try:
            digest = Digest(written)
        except InvalidDigest as error:
            raise ArtifactError("invalid_reference", f"{text}: {error}") from None
    tag = None
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
        if not _TAG.match(tag):
            raise ArtifactError("invalid_reference", f"{text}: {tag!r} is not a valid tag")
    return rest, tag, digest


def parse_reference(text: str) -> Reference:
    """Parse ``text``; :class:`ArtifactError` ``invalid_reference`` says what is wrong."""
    if text.startswith("oci://"):
        rest = text.removeprefix("oci://")
        host, _, path = rest.partition("/")
        if not host or not _HOST.match(host):
            raise ArtifactError("invalid_reference", f"{text}: missing or invalid registry host")
        repository, tag, digest = _split_version(path, text)
        if not _REPOSITORY.match(repository):
            raise ArtifactError(
                "invalid_reference",
                f"{text}: {repository!r} is not a repository name (lowercase, '/'-separated)",
            )
        return Reference("oci", registry=host, repository=repository, tag=tag, digest=digest)
    if text.startswith("oci-layout://"):
        rest = text.removeprefix("oci-layout://")
        # Only the last path component may carry ":tag" / "@digest".
        head, _, last = rest.rpartition("/")
        last, tag, digest = _split_version(last, text)
        layout = f"{head}/{last}" if head else last
        if not layout:
            raise ArtifactError("invalid_reference", f"{text}: missing layout directory")
        return Reference("oci-layout", layout=layout, tag=tag, digest=digest)
    raise ArtifactError(
        "invalid_reference",
        f"{text}: an artifact reference starts with oci:// or oci-layout://",
    )
