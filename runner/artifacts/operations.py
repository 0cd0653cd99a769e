"""The artifact side of runner operations: Resolve, Verify, and reading a verified artifact
by digest for Observe, Plan and the migration operations.

The runner is the only process that talks to a registry (DESIGN.md): its credential comes
from its own environment (a docker config or ``SESHAT_REGISTRY_*``, see
:mod:`runner.artifacts.registry`), never from the operation input, and every secret it holds
is redacted from the frame. After Resolve, an artifact is named by its manifest digest only:
:func:`materialize` fetches it by that digest through the runner's content-addressed cache
(every blob checked against its digest again, on a hit as on a fetch) and writes its files
into a fresh folder the operation reads and then removes.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from runner.artifacts.errors import ArtifactError
from runner.artifacts.fetch import ContentCache, fetch, write_files
from runner.artifacts.format import ARTIFACT_TYPES
from runner.artifacts.policy import VerificationPolicySpec
from runner.artifacts.reference import Reference, parse_reference
from runner.artifacts.store import Store, open_store
from runner.digests import Digest
from runner.engines.servers import cache_folder
from runner.protocol.messages import ArtifactSource, RegistrySettings, TrustFile
from runner.protocol.results import ResolveResult, VerifyResult

__all__ = ["Opened", "materialize", "resolve_source", "verify_source"]


class Opened:
    """An artifact reference opened on its store, with the secrets the store holds."""

    def __init__(self, source: ArtifactSource, settings: RegistrySettings, scratch: Path) -> None:
        self.reference: Reference = parse_reference(source.ref)
        if (
            self.reference.transport == "oci-layout"
            and not Path(self.reference.layout).is_absolute()
        ):
            raise ArtifactError(
                "invalid_reference", f"{source.ref}: the runner reads only an absolute layout"
            )
        self.source = source
        self.secrets: list[str] = []
        if self.reference.transport == "oci-layout":
            self.store: Store = open_store(self.reference)
            return
        # Only a registry needs the HTTP client (and a layout folder reads faster without).
        from runner.artifacts.registry import RegistryOptions, credentials_for

        options = RegistryOptions(
            plain_http=frozenset(settings.plain_http), timeout=settings.timeout
        )
        if settings.ca_pem is not None:
            ca_file = scratch / "registry-ca.pem"
            ca_file.write_text(settings.ca_pem, encoding="utf-8")
            options = RegistryOptions(
                ca_file=ca_file, plain_http=options.plain_http, timeout=options.timeout
            )
        self.secrets = credentials_for(self.reference.registry).secrets()
        self.store = open_store(self.reference, options)

    @property
    def digest(self) -> Digest:
        """The digest the operation names the artifact by (Resolve gave it)."""
        assert self.source.digest is not None  # the input's validator requires it
        return self.source.digest


def resolve_source(opened: Opened) -> ResolveResult:
    """The manifest digest the reference names now: its own when pinned, else its tag's."""
    reference = opened.reference
    if reference.digest is not None:
        return ResolveResult(digest=reference.digest)
    return ResolveResult(digest=opened.store.resolve(reference.tag or "latest").digest)


def verify_source(
    opened: Opened, policy: VerificationPolicySpec, trust: list[TrustFile], scratch: Path
) -> VerifyResult:
    """The policy judged against the artifact's digest. Key files and trusted roots are the
    ones the control plane read from the repository and sent along (``trust``)."""
    from runner.artifacts.verify import verify_artifact

    folder = scratch / "trust"
    folder.mkdir()
    for item in trust:
        path = folder / item.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(item.content)
    verdict = verify_artifact(opened.store, opened.reference, policy, folder, digest=opened.digest)
    if verdict.reason == "registry_unavailable":  # a fault, not a refusal
        detail = next((c.detail for c in verdict.checks if not c.passed), "")
        raise ArtifactError("registry_unavailable", detail, retryable=True)
    return VerifyResult(
        accepted=verdict.accepted,
        reason=verdict.reason,
        digest=verdict.digest,
        artifact_type=verdict.manifest.artifact_type if verdict.manifest is not None else None,
        checks=list(verdict.checks),
    )


@contextlib.contextmanager
def materialize(opened: Opened) -> Iterator[Path]:
    """The artifact's files, fetched by digest, in a folder that lives as long as the
    ``with`` block. Only the type the input names is accepted (a schema never stands in for
    migrations)."""
    wanted = opened.source.artifact_type
    allowed = (wanted,) if wanted is not None else tuple(ARTIFACT_TYPES.values())
    cache = ContentCache(cache_folder("artifacts"))
    fetched = fetch(
        opened.store, opened.reference.pinned(opened.digest), allowed_types=allowed, cache=cache
    )
    folder = Path(tempfile.mkdtemp(prefix="seshat-artifact-"))
    try:
        write_files(fetched, folder / "files")
        yield folder / "files"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
