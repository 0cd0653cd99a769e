"""The one error artifact code raises, with a stable snake_case ``reason``.

Every refusal an artifact can earn has its own reason, so the reconciler can report it as a
condition and a test can assert it. ``retryable`` tells a transient fault (the registry is
down) from a refusal that only a changed input can clear.
"""

from __future__ import annotations

from typing import Final

from runner.errors import SeshatError

__all__ = ["REASONS", "ArtifactError"]

REASONS: Final = (
    "invalid_reference",  # the ref is not oci://host/repo:tag|@digest or oci-layout://path:tag
    "digest_pin_required",  # the policy wants @sha256:..., the ref is a tag
    "registry_unavailable",  # connection refused, timeout, 5xx (retryable)
    "unauthorized",  # 401/403 after offering the configured credentials
    "not_found",  # no such tag, manifest or blob
    "plain_http_refused",  # http:// to a registry not explicitly allowed to use it
    "manifest_invalid",  # not an OCI image manifest Seshat understands
    "manifest_too_large",
    "digest_mismatch",  # content does not hash to the digest that names it
    "size_mismatch",  # a blob's length differs from its descriptor
    "wrong_artifact_type",
    "missing_annotation",
    "unsafe_path",  # absolute, escaping, or otherwise not a plain relative path
    "symlink",
    "duplicate_title",
    "invalid_name",  # not UTF-8, control characters, empty
    "too_many_files",
    "file_too_large",
    "artifact_too_large",
    "empty_artifact",
    "invalid_key",  # a signing or verification key Seshat cannot use
)


class ArtifactError(SeshatError):
    """An artifact could not be used; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, message: str, *, retryable: bool = False) -> None:
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.retryable = retryable
