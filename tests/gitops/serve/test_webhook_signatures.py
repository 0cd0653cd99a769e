"""Who may wake ``seshat run``: each forge's proof of the shared secret, checked in constant
time, and the secret itself never shown (gitops/serve/webhooks.py)."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest

from gitops.serve.webhooks import Check, Forge, WebhookSecret, load_secret, verify, wakes

SECRET = WebhookSecret(b"0123456789abcdef-secret")
BODY = b'{"ref": "refs/heads/main"}'


def _hmac(key: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


@pytest.mark.parametrize(
    ("forge", "header"),
    [(Forge.GITHUB, "x-hub-signature-256"), (Forge.GENERIC, "x-seshat-signature-256")],
)
def test_an_hmac_of_the_body_verifies_and_nothing_else_does(forge: Forge, header: str) -> None:
    assert verify(forge, SECRET, {header: _hmac(SECRET.value, BODY)}, BODY) is Check.VERIFIED
    assert verify(forge, SECRET, {}, BODY) is Check.MISSING
    assert verify(forge, SECRET, {header: _hmac(b"another secret!!", BODY)}, BODY) is Check.WRONG
    tampered = BODY.replace(b"main", b"evil")
    assert verify(forge, SECRET, {header: _hmac(SECRET.value, BODY)}, tampered) is Check.WRONG
    bare = _hmac(SECRET.value, BODY).removeprefix("sha256=")  # no algorithm: refused
    assert verify(forge, SECRET, {header: bare}, BODY) is Check.WRONG
    # A GitLab token is not a signature.
    assert verify(forge, SECRET, {"x-gitlab-token": SECRET.value.decode()}, BODY) is Check.MISSING


def test_a_gitlab_token_must_equal_the_secret() -> None:
    token = SECRET.value.decode()
    assert verify(Forge.GITLAB, SECRET, {"x-gitlab-token": token}, BODY) is Check.VERIFIED
    assert verify(Forge.GITLAB, SECRET, {"x-gitlab-token": token + "x"}, BODY) is Check.WRONG
    assert verify(Forge.GITLAB, SECRET, {"x-gitlab-token": "é"}, BODY) is Check.WRONG
    signature = {"x-hub-signature-256": _hmac(SECRET.value, BODY)}
    assert verify(Forge.GITLAB, SECRET, signature, BODY) is Check.MISSING


def test_only_pushes_wake_the_loop() -> None:
    assert wakes(Forge.GITHUB, {"x-github-event": "push"})
    assert not wakes(Forge.GITHUB, {"x-github-event": "ping"})
    assert not wakes(Forge.GITHUB, {"x-github-event": "pull_request"})
    assert wakes(Forge.GITLAB, {"x-gitlab-event": "Push Hook"})
    assert not wakes(Forge.GITLAB, {"x-gitlab-event": "Merge Request Hook"})
    assert wakes(Forge.GENERIC, {})


def test_the_secret_comes_from_a_file_or_the_environment_and_is_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "secret"
    path.write_bytes(SECRET.value + b"\n")
    loaded = load_secret(path, None)
    assert loaded == SECRET  # the newline an editor adds is not part of it
    assert SECRET.value.decode() not in repr(loaded) + str(loaded)
    monkeypatch.setenv("HOOK_SECRET", SECRET.value.decode())
    assert load_secret(None, "HOOK_SECRET") == SECRET
    assert load_secret(None, None) is None
    with pytest.raises(ValueError, match="not both"):
        load_secret(path, "HOOK_SECRET")
    monkeypatch.setenv("HOOK_SECRET", "short")
    with pytest.raises(ValueError, match="at least 16 bytes") as refused:
        load_secret(None, "HOOK_SECRET")
    assert "short" not in str(refused.value)
    with pytest.raises(ValueError, match="no such file"):
        load_secret(tmp_path / "missing", None)
