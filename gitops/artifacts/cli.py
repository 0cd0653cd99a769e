"""``seshat artifact``: push, pull, resolve, sign and verify schema and migration artifacts.

Keyless signing: ``seshat artifact payload REF`` prints the simple-signing payload naming
REF's manifest digest; sign it with any Sigstore client (``sigstore sign --bundle``) and
store the bundle with ``seshat artifact attach-bundle REF --bundle FILE --payload FILE``.

Output for scripts goes to stdout (a digest, or JSON with ``--format json``); progress and
explanations go to stderr. Every line passes through a redactor that knows the registry
credentials in use. Exit status: 0 done (or accepted), 1 refused (the reason is printed),
2 could not run (a registry that cannot be reached, a missing file).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from gitops.repo.options import repo_option
from gitops.repo.single import load_one
from gitops.resources.policies import VerificationPolicy
from runner.artifacts.errors import ArtifactError
from runner.artifacts.fetch import ContentCache, fetch, resolve, write_files
from runner.artifacts.format import (
    ANNOTATION_CREATED,
    ANNOTATION_REVISION,
    ANNOTATION_SOURCE,
    ARTIFACT_TYPES,
    package_folder,
)
from runner.artifacts.keyless import attach_bundle as attach_bundle_to
from runner.artifacts.push import push as push_artifact
from runner.artifacts.reference import Reference, parse_reference
from runner.artifacts.registry import RegistryOptions, credentials_for
from runner.artifacts.signing import load_private_key, payload_for
from runner.artifacts.signing import sign as sign_digest
from runner.artifacts.store import Store, open_store
from runner.artifacts.verify import policy_digest, verify_artifact
from runner.digests import Digest
from runner.errors import SeshatError
from runner.options import format_option
from runner.redact import Redactor

__all__ = ["artifact"]

EXIT_OK, EXIT_REFUSED, EXIT_CANNOT_RUN = 0, 1, 2

F = TypeVar("F", bound=Callable[..., Any])


class _Context:
    def __init__(self, options: RegistryOptions) -> None:
        self.options = options
        self.redact = Redactor()

    def store(self, reference: Reference) -> Store:
        if reference.transport == "oci":
            self.redact = Redactor(credentials_for(reference.registry).secrets())
        return open_store(reference, self.options)

    def say(self, text: str) -> None:
        click.echo(self.redact(text), err=True)

    def out(self, text: str) -> None:
        click.echo(self.redact(text))

    def fail(self, error: SeshatError) -> NoReturn:
        if isinstance(error, ArtifactError):
            self.say(f"seshat: {error.reason}: {error.message}")
            sys.exit(EXIT_CANNOT_RUN if error.retryable else EXIT_REFUSED)
        self.say(f"seshat: {error}")
        sys.exit(EXIT_CANNOT_RUN)

    @contextmanager
    def exit_on_error(self) -> Iterator[None]:
        """End the command on a :class:`SeshatError`, saying why, with its exit status."""
        try:
            yield
        except SeshatError as error:
            self.fail(error)


def _context() -> _Context:
    context = click.get_current_context().find_object(_Context)
    assert context is not None
    return context


def _reference(text: str) -> Reference:
    with _context().exit_on_error():
        return parse_reference(text)


def _resolve(ref: str) -> tuple[_Context, Reference, Store, Digest]:
    """How the commands that act on REF's current manifest start: REF parsed, its store
    opened and the digest REF names now resolved (a failure ends the command)."""
    context = _context()
    reference = _reference(ref)
    with context.exit_on_error():
        store = context.store(reference)
        return context, reference, store, resolve(store, reference)


def _file_option(*names: str, help: str, required: bool = False) -> Callable[[F], F]:
    """An option naming a file that must exist (a CA bundle, a key, a Sigstore bundle...)."""
    return click.option(
        *names,
        required=required,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=help,
    )


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "seshat" / "artifacts"


@click.group()
@_file_option(
    "--ca-file", help="Trust this CA bundle (PEM) for registry TLS, instead of the system's roots."
)
@click.option(
    "--plain-http",
    "plain_http",
    multiple=True,
    metavar="HOST[:PORT]",
    help="Talk plain HTTP to this registry (repeatable). Never the default.",
)
@click.pass_context
def artifact(context: click.Context, ca_file: Path | None, plain_http: tuple[str, ...]) -> None:
    """Schema and migration artifacts in an OCI registry or an OCI layout directory.

    References are `oci://host[:port]/repo:tag` (or `@sha256:...`) and
    `oci-layout://path:tag`. Registry credentials come from SESHAT_REGISTRY_TOKEN, or
    SESHAT_REGISTRY_USERNAME and SESHAT_REGISTRY_PASSWORD, or the docker config.json
    (DOCKER_CONFIG or ~/.docker). See docs/artifacts.md.
    """
    context.obj = _Context(RegistryOptions(ca_file=ca_file, plain_http=frozenset(plain_http)))


@artifact.command()
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("ref")
@click.option(
    "--type",
    "kind",
    type=click.Choice(sorted(ARTIFACT_TYPES)),
    required=True,
    help="What the folder holds: a desired schema or a migration directory.",
)
@click.option("--source", help="org.opencontainers.image.source (e.g. the Git repository URL).")
@click.option("--revision", help="org.opencontainers.image.revision (e.g. the commit).")
@click.option(
    "--created",
    help="org.opencontainers.image.created (RFC 3339); default SOURCE_DATE_EPOCH, else now.",
)
def push(
    folder: Path,
    ref: str,
    kind: str,
    source: str | None,
    revision: str | None,
    created: str | None,
) -> None:
    """Package the .sql files under FOLDER and push them to REF; print the digest.

    One layer per file, titled with its path relative to FOLDER. The same files and
    annotations always give the same digest.
    """
    context = _context()
    reference = _reference(ref)
    if created is None:
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        moment = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
        created = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    annotations = {ANNOTATION_CREATED: created}
    if source:
        annotations[ANNOTATION_SOURCE] = source
    if revision:
        annotations[ANNOTATION_REVISION] = revision
    with context.exit_on_error():
        packaged = package_folder(folder, kind, annotations)
        digest = push_artifact(context.store(reference), reference, packaged)
    context.say(f"pushed {len(packaged.titles)} files to {reference}")
    context.out(digest)


@artifact.command()
@click.argument("ref")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option(
    "--type",
    "kind",
    type=click.Choice(sorted(ARTIFACT_TYPES)),
    help="Refuse any other artifact type (default: either).",
)
@click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    help="Content-addressed cache (default: $XDG_CACHE_HOME/seshat/artifacts).",
)
def pull(ref: str, folder: Path, kind: str | None, cache: Path | None) -> None:
    """Fetch REF by digest, verify every blob, and write its files into FOLDER (empty)."""
    context = _context()
    reference = _reference(ref)
    allowed = (ARTIFACT_TYPES[kind],) if kind else tuple(ARTIFACT_TYPES.values())
    with context.exit_on_error():
        fetched = fetch(
            context.store(reference),
            reference,
            allowed_types=allowed,
            cache=ContentCache(cache or _default_cache()),
        )
        written = write_files(fetched, folder)
    context.say(f"wrote {len(written)} files from {fetched.reference} into {folder}")
    context.out(fetched.manifest.digest)


@artifact.command(name="resolve")
@click.argument("ref")
def resolve_command(ref: str) -> None:
    """Print the digest REF names now (a tag is resolved once, to an immutable digest)."""
    context, _, _, digest = _resolve(ref)
    context.out(digest)


@artifact.command()
@click.argument("ref")
@_file_option(
    "--key",
    required=True,
    help="PEM private key (PKCS#8, ECDSA P-256 or Ed25519); password from "
    "SESHAT_SIGNING_KEY_PASSWORD if encrypted.",
)
def sign(ref: str, key: Path) -> None:
    """Sign REF's manifest digest with a static key (cosign tag layout and OCI referrer)."""
    context, reference, store, digest = _resolve(ref)
    with context.exit_on_error():
        written = sign_digest(store, reference, digest, load_private_key(key))
    context.say(f"signed {reference.pinned(digest)} ({len(written)} signature manifests)")
    context.out(digest)


@artifact.command(name="payload")
@click.argument("ref")
def payload_command(ref: str) -> None:
    """Print the payload a keyless signature of REF signs (to sign with a Sigstore client)."""
    _, reference, _, digest = _resolve(ref)
    sys.stdout.buffer.write(payload_for(reference, digest))
    sys.stdout.buffer.flush()


@artifact.command(name="attach-bundle")
@click.argument("ref")
@_file_option(
    "--bundle",
    "bundle_file",
    required=True,
    help="A Sigstore bundle (message signature) over the payload.",
)
@_file_option(
    "--payload",
    "payload_file",
    help="The signed payload (default: what 'seshat artifact payload REF' prints).",
)
def attach_bundle(ref: str, bundle_file: Path, payload_file: Path | None) -> None:
    """Store a Sigstore bundle as an OCI 1.1 referrer of REF's manifest (keyless signature).

    The referrer (artifactType application/vnd.dev.sigstore.bundle.v0.3+json) holds the
    bundle and the payload it signs; a bundle over other bytes is refused.
    """
    context, reference, store, digest = _resolve(ref)
    with context.exit_on_error():
        payload = payload_file.read_bytes() if payload_file else payload_for(reference, digest)
        written = attach_bundle_to(store, digest, payload, bundle_file.read_bytes())
    context.say(f"attached a Sigstore bundle to {reference.pinned(digest)} ({written})")
    context.out(written)


@artifact.command()
@click.argument("ref")
@_file_option("--policy", "policy_file", required=True, help="A VerificationPolicy YAML file.")
@repo_option("The repository the policy's key paths are relative to.")
@format_option("text", "json")
def verify(ref: str, policy_file: Path, repo: Path, output_format: str) -> None:
    """Check REF against a VerificationPolicy and say which requirement passed or failed.

    Exit status: 0 accepted, 1 refused (the reason is printed), 2 could not run.
    """
    context = _context()
    reference = _reference(ref)
    with context.exit_on_error():
        policy = load_one(policy_file, VerificationPolicy)
        verdict = verify_artifact(context.store(reference), reference, policy.spec, repo)
    if output_format == "json":
        data = verdict.to_json() | {"policyDigest": policy_digest(policy.spec)}
        context.out(json.dumps(data, sort_keys=True))
    else:
        for check in verdict.checks:
            mark = "pass" if check.passed else "FAIL"
            context.out(f"{mark}  {check.requirement}: {check.detail}")
        if verdict.accepted and verdict.digest is not None:
            context.out(f"accepted {reference.pinned(verdict.digest)}")
        else:
            context.out(f"refused: {verdict.reason}")
    sys.exit(EXIT_OK if verdict.accepted else EXIT_REFUSED)
