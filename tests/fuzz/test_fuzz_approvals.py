"""Fuzzing approvals and acknowledgments with their ``.sig`` and ``.sigstore.json`` files.

A statement, its armored SSH signatures and its Sigstore bundles are written by anyone with
push access. Whatever they hold: reading them ends in bytes or a ConfigurationError,
splitting and bundle loading in a bounded list or a ConfigurationError, and
``verify_statement`` in a verdict (accepted, or refused with one of its reasons), never an
exception, never a write outside the temporary folder; and it accepts only bytes that were
really signed.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from harness.sigstore_root import PrivateSigstore
from harness.sshkeys import SSHKeyFactory
from hypothesis import event, example, given
from hypothesis import strategies as st

from fuzz.fuzzkit import (
    SEEDS,
    budget,
    confined,
    hostile_json,
    hostile_text,
    json_values,
    mutated_bytes,
    render_yaml,
    yaml_documents,
)
from gitops.approvals.files import read_signature_file, read_signatures, read_statement
from gitops.approvals.ssh import APPROVAL_NAMESPACE, MAX_SIGNATURES, sign, split_signatures
from gitops.approvals.verify import MAX_BUNDLES, REASONS, load_bundles, verify_statement
from gitops.repo.single import load_one
from gitops.repo.yamlfile import FileError, read_documents
from gitops.resources.approvals import Approval, ResourceRef, RunAcknowledgment
from gitops.resources.policies import ApprovalPolicy
from runner.errors import ConfigurationError

ISSUER = "https://accounts.example.com"
SUBJECT = "carol@example.com"
ROOT = "policies/sigstore/trusted_root.json"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
BEGIN, END = "-----BEGIN SSH SIGNATURE-----", "-----END SSH SIGNATURE-----"

POLICY = {
    **SEEDS["ApprovalPolicy"],
    "spec": {
        "rules": [
            {
                "match": {"namespaces": ["shop"], "names": ["orders", "ledger"]},
                "approvers": {
                    "allowedSigners": "policies/allowed_signers",
                    "keyless": [{"issuer": ISSUER, "subject": SUBJECT, "trustedRoot": ROOT}],
                },
                "count": 1,
                "destructiveCount": 2,
                "maxAge": "7d",
            }
        ]
    },
}


@dataclass(frozen=True)
class Signed:
    """A repository with a policy, and one approval really signed both ways."""

    repo: Path
    policy: ApprovalPolicy
    data: bytes
    statement: Approval
    signature: str
    bundle: bytes


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Signed]:
    base = tmp_path_factory.mktemp("fuzz-approvals")
    repo = base / "repo"
    (repo / "policies" / "sigstore").mkdir(parents=True)
    keys = base / "keys"
    keys.mkdir()
    alice = SSHKeyFactory(keys)("alice@example.com")
    (repo / "policies" / "allowed_signers").write_text(
        alice.allowed_signers_line(APPROVAL_NAMESPACE) + "\n"
    )
    sigstore = PrivateSigstore("seshat-fuzz")
    sigstore.write_trusted_root(repo / ROOT)
    data = render_yaml(SEEDS["Approval"]).encode()
    yield Signed(
        repo,
        ApprovalPolicy.model_validate(POLICY),
        data,
        Approval.model_validate(read_documents(data)[0].data),
        sign(data, alice.private_key, APPROVAL_NAMESPACE),
        sigstore.mint_bundle(data, SUBJECT, ISSUER),
    )


# -- reading the files -------------------------------------------------------------------


@given(
    what=st.sampled_from(["file", "dir", "fifo", "link-out", "link-loop", "missing", "big"]),
    content=st.binary(max_size=256),
)
@budget(60)
def test_statement_files_read_or_refused(signed: Signed, what: str, content: bytes) -> None:
    with tempfile.TemporaryDirectory(dir=signed.repo.parent) as folder:
        root = Path(folder)
        path = root / "approvals" / "x.yaml"
        path.parent.mkdir(parents=True)
        if what == "file":
            path.write_bytes(content)
        elif what == "big":
            path.write_bytes(content + b"#" * (1024 * 1024 + 1))
        elif what == "dir":
            path.mkdir()
        elif what == "fifo":
            os.mkfifo(path)
        elif what == "link-out":
            path.symlink_to("/etc/passwd")
        elif what == "link-loop":
            path.symlink_to(path.name)
        for read in (read_statement, read_signature_file, read_signatures):
            try:
                with confined(root / "scratch"):
                    got = read(root, path)
            except ConfigurationError as error:
                assert str(error)
                continue
            assert isinstance(got, (bytes, str))
            if what != "file":
                assert not got, (what, read)


@given(
    st.one_of(
        yaml_documents(["Approval", "RunAcknowledgment"]).map(
            lambda d: d[1].encode("utf-8", "surrogatepass")
        ),
        mutated_bytes([render_yaml(SEEDS[k]).encode() for k in ("Approval", "RunAcknowledgment")]),
    ),
    st.sampled_from([Approval, RunAcknowledgment]),
)
@budget(200)
def test_statements_parse_or_refused(
    tmp_path_factory: pytest.TempPathFactory,
    data: bytes,
    model: type[Approval] | type[RunAcknowledgment],
) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as folder:
        path = Path(folder) / "statement.yaml"
        path.write_bytes(data)
        try:
            with confined(Path(folder) / "scratch"):
                statement = load_one(path, model)
        except ConfigurationError:
            return
        json.dumps(statement.model_dump(mode="json", by_alias=True), ensure_ascii=False).encode()


# -- splitting signatures, loading bundles ------------------------------------------------

_ARMOR = st.sampled_from([BEGIN, END, BEGIN + "\n", "\n" + END + "\n", "U1NIU0lH", "=", "\n"])


@given(st.lists(st.one_of(_ARMOR, hostile_text), max_size=80).map("".join))
@budget(300)
@example(f"{BEGIN}\nx\n{END}\n" * (MAX_SIGNATURES + 5))
def test_signatures_split_into_bounded_blocks(text: str) -> None:
    blocks = split_signatures(text)
    assert len(blocks) <= MAX_SIGNATURES
    for block in blocks:
        assert block.startswith(BEGIN) and block.endswith(END + "\n")
        assert block.count(END) == 1
        assert block[len(BEGIN) : -len(END) - 1] in text


@given(
    st.one_of(
        st.text(max_size=200),
        json_values().map(json.dumps),
        st.lists(json_values(), max_size=MAX_BUNDLES + 3).map(json.dumps),
        st.sampled_from(["[" * 100_000, "1" * 5000, "[" + "1" * 5000 + "]", "NaN", "[{}]" * 3]),
    )
)
@budget(300)
@example("[" * 100_000)
@example("[" + "1" * 5000 + "]")
def test_bundles_load_or_refused(text: str) -> None:
    try:
        bundles = load_bundles(text, "x.yaml.sigstore.json")
    except ConfigurationError as error:
        assert str(error).startswith("x.yaml.sigstore.json: ")
        return
    assert len(bundles) <= MAX_BUNDLES
    for bundle in bundles:
        assert isinstance(json.loads(bundle), dict)


# -- verifying --------------------------------------------------------------------------


@st.composite
def _signatures(draw: st.DrawFn, signature: str) -> str:
    """The real armored signature, damaged, repeated or mixed with other blocks."""
    body = signature.strip()[len(BEGIN) : -len(END)]
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["real", "flipped", "cut", "junk", "text", "non-ascii"]))
        if kind == "real":
            parts.append(signature)
        elif kind == "flipped":
            at = draw(st.integers(1, len(body) - 2))
            char = draw(st.sampled_from("AZaz09+/=\n-"))
            parts.append(f"{BEGIN}{body[:at]}{char}{body[at + 1 :]}{END}\n")
        elif kind == "cut":
            parts.append(f"{BEGIN}{body[: draw(st.integers(0, len(body)))]}{END}\n")
        elif kind == "junk":
            parts.append(f"{BEGIN}\n{draw(hostile_text)}\n{END}\n")
        elif kind == "text":
            parts.append(draw(hostile_text))
        else:
            parts.append(f"{BEGIN}{body}é{END}\n")
    return "".join(parts)


@st.composite
def _bundles(draw: st.DrawFn, bundle: bytes) -> list[bytes]:
    real = json.loads(bundle)
    found: list[bytes] = []
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["real", "damaged", "any"]))
        if kind == "real":
            found.append(bundle)
        elif kind == "damaged":
            found.append(json.dumps(draw(hostile_json(real))).encode("utf-8", "surrogatepass"))
        else:
            found.append(json.dumps(draw(json_values())).encode("utf-8", "surrogatepass"))
    return found


@given(data=st.data())
@budget(40)
def test_verify_statement_judges_never_raises(signed: Signed, data: st.DataObject) -> None:
    statement_bytes = data.draw(
        st.one_of(st.just(signed.data), mutated_bytes([signed.data])), label="statement"
    )
    try:
        documents = read_documents(statement_bytes)
        statement = Approval.model_validate(documents[0].data)
    except (FileError, ValueError, IndexError):
        statement = signed.statement  # judged against bytes it was not read from
    signatures = data.draw(_signatures(signed.signature), label="signatures")
    bundles = data.draw(_bundles(signed.bundle), label="bundles")
    flags = data.draw(st.tuples(st.booleans(), st.booleans()), label="destructive, privilege")
    days = data.draw(st.just(0) | st.integers(-30, 30), label="days")
    now = NOW + timedelta(days=days)
    named = statement.spec.resource
    expected = data.draw(
        st.sampled_from([named, signed.statement.spec.resource, None]), label="expected"
    )
    assert expected is None or isinstance(expected, ResourceRef)
    with confined(signed.repo.parent / "scratch"):
        verdict = verify_statement(
            statement,
            statement_bytes,
            signatures,
            [signed.policy],
            signed.repo,
            namespace=APPROVAL_NAMESPACE,
            expected=expected,
            current_plan=data.draw(st.sampled_from([None, str(statement.spec.plan.id)])),
            bundles=bundles,
            destructive=flags[0],
            privilege=flags[1],
            now=now,
        )
    json.dumps(verdict.to_json())
    event(f"verdict: {verdict.reason or 'accepted'}")
    if verdict.accepted:
        assert statement_bytes == signed.data, "accepted bytes nobody signed"
        assert len(verdict.signers) >= verdict.required >= 1
    else:
        assert verdict.reason in REASONS, verdict
