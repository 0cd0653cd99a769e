"""Fuzzing the declarations: ``read_documents``, ``load_repository``, ``load_one``.

Whatever a repository holds, reading it ends in resources and problems (or, for one file,
a :class:`FileError` / :class:`ConfigurationError`), never another exception, never a hang,
never a write; every problem can be printed and written as JSON, never repeats a planted
credential, and every resource that loads can be serialized (no lone surrogate, no integer
too long to print reaches the models' callers).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fuzz.fuzzkit import (
    MARKER,
    SEEDS,
    budget,
    confined,
    mutated_bytes,
    render_yaml,
    yaml_documents,
)
from gitops.repo.loader import load_repository
from gitops.repo.problems import Problem, ResourceKey
from gitops.repo.single import load_one
from gitops.repo.uids import uid_from
from gitops.repo.yamlfile import Document, FileError, read_documents
from gitops.resources.kinds import KINDS
from runner.errors import ConfigurationError

SEED_BYTES = [render_yaml(seed).encode() for seed in SEEDS.values()] + [
    b"a: &x [1, *x]\n",
    b"a: &a [b, b, b]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n",
    b"--- a\n--- [b]\n...\n--- {c: d}\n",
    b"%YAML 1.1\n---\nbase: 0b101\ntime: 1:20:30\n",
    b"? [a, b]\n: c\n? {d: e}\n: f\n",
    b"x: !!binary aGVsbG8=\ny: !!set {a, b}\nz: !!omap [a: 1]\n",
    b"key: |\n  literal\n  text\nother: >-\n  folded\n",
    b"\xef\xbb\xbfapiVersion: seshat.dev/v1alpha1\n",
]


class FixedUids:
    """Uids without Git: the ``worktree`` preview uid of every key."""

    def uid_for(self, key: ResourceKey) -> str:
        return uid_from(key, "worktree")


def _plain(value: object, where: str = "$") -> None:
    """``value`` is what ``read_documents`` promises: plain data, printable, UTF-8."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert isinstance(key, str), where
            key.encode("utf-8")
            _plain(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _plain(item, f"{where}[{index}]")
    elif isinstance(value, str):
        value.encode("utf-8")  # no lone surrogate ("\ud800" escapes)
    elif isinstance(value, int):
        str(value)  # printable: not more digits than Python converts
    else:
        assert value is None or isinstance(value, float), (where, type(value))


def _check_documents(raw: bytes) -> list[Document] | None:
    try:
        documents = read_documents(raw)
    except FileError as error:
        assert isinstance(error.message, str) and error.message
        error.message.encode("utf-8")
        assert error.line is None or (isinstance(error.line, int) and error.line >= 1)
        return None
    for document in documents:
        _plain(document.data)
        assert document.line >= 1
        assert all(isinstance(n, int) and n >= 1 for n in document.lines.values())
    return documents


@given(st.binary(max_size=2048))
@budget(300)
def test_any_bytes_read_or_refused(raw: bytes) -> None:
    _check_documents(raw)


@given(mutated_bytes(SEED_BYTES))
@budget(300)
@example(b"a: 0x" + b"f" * 4000 + b"\n")  # 4000 hex digits: an int of 4817 decimal digits
@example(b"{0x" + b"f" * 4000 + b": 1}\n")
@example(b'a: "\\ud800"\n')  # a lone surrogate, escaped
@example(b'"\\udc80": 1\n')
def test_damaged_documents_read_or_refused(raw: bytes) -> None:
    _check_documents(raw)


@given(yaml_documents())
@budget(400)
def test_hostile_documents_read_or_refused(document: tuple[str, str]) -> None:
    _check_documents(document[1].encode("utf-8", "surrogatepass"))


# -- a whole repository ------------------------------------------------------------------

_PLACES = {
    "DatabaseSchema": "databases/shop/orders.yaml",
    "DatabaseMigration": "databases/shop/ledger.yaml",
    "VerificationPolicy": "policies/verification.yaml",
    "ApprovalPolicy": "policies/approval.yaml",
    "Approval": "approvals/shop/orders/" + "ab" * 32 + ".yaml",
    "RunAcknowledgment": "acknowledgments/shop/ledger/0123456789abcdef0123.yaml",
}


def _problems_ok(problems: tuple[Problem, ...]) -> None:
    for problem in problems:
        assert isinstance(problem, Problem)
        text = str(problem)
        text.encode("utf-8")
        json.dumps(problem.to_json(), ensure_ascii=False).encode("utf-8")
        assert MARKER not in text, text
        assert problem.line is None or problem.line >= 1


def _load(root: Path, scratch: Path) -> None:
    with confined(scratch):
        repository = load_repository(root, FixedUids())
    _problems_ok(repository.problems)
    json.dumps(repository.config.model_dump(mode="json", by_alias=True)).encode("utf-8")
    for loaded in repository.resources:
        assert loaded.resource.metadata.uid
        dumped = loaded.resource.model_dump(mode="json", by_alias=True)
        json.dumps(dumped, ensure_ascii=False).encode("utf-8")


def _write(root: Path, relative: str, data: bytes) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-repos")


def _valid(kind: str) -> bytes:
    return render_yaml(SEEDS[kind]).encode()


@given(
    config=st.one_of(
        st.none(),
        yaml_documents(["Config"]).map(lambda d: d[1].encode("utf-8", "surrogatepass")),
        mutated_bytes([_valid("Config")]),
    ),
    documents=st.lists(
        st.tuples(
            yaml_documents([k for k in SEEDS if k != "Config"]),
            st.sampled_from(["own", "shared", "stray"]),
        ),
        max_size=4,
    ),
    signatures=st.lists(
        st.tuples(st.sampled_from([".sig", ".sigstore.json"]), st.binary()), max_size=2
    ),
)
@budget(150)
@example(  # a path component over 255 bytes: Path.exists raised ENAMETOOLONG
    config=render_yaml({**SEEDS["Config"], "spec": {"paths": ["a" * 300]}}).encode(),
    documents=[
        (
            (
                "ApprovalPolicy",
                render_yaml(SEEDS["ApprovalPolicy"]).replace(
                    "policies/allowed_signers", "policies/" + "a" * 300
                ),
            ),
            "own",
        )
    ],
    signatures=[],
)
@example(
    config=render_yaml({**SEEDS["Config"], "spec": {"paths": ["databases", "a\x00b"]}}).encode(),
    documents=[],
    signatures=[],
)
@example(
    config=None,
    documents=[
        (
            (
                "ApprovalPolicy",
                render_yaml(
                    {
                        **SEEDS["ApprovalPolicy"],
                        "spec": {"rules": [{"approvers": {"allowedSigners": "policies/a\x00b"}}]},
                    }
                ),
            ),
            "own",
        )
    ],
    signatures=[],
)
@example(
    config=None,
    documents=[
        (
            (
                "DatabaseSchema",
                render_yaml(SEEDS["DatabaseSchema"]).replace("OnApproval", "0x" + "f" * 4000),
            ),
            "own",
        )
    ],
    signatures=[],
)
def test_repository_loads_or_reports(
    base: Path,
    config: bytes | None,
    documents: list[tuple[tuple[str, str], str]],
    signatures: list[tuple[str, bytes]],
) -> None:
    with tempfile.TemporaryDirectory(dir=base) as folder:
        root, scratch = Path(folder) / "repo", Path(folder) / "scratch"
        root.mkdir()
        scratch.mkdir()
        if config is not None:
            _write(root, "seshat.yaml", config)
        # Valid neighbours: references resolve, so the hostile document is checked further.
        _write(root, "policies/allowed_signers", b"alice@example.com ssh-ed25519 AAAA\n")
        _write(root, "policies/keys/ci.pub", b"not a key\n")
        _write(root, "policies/trusted_root.json", b"{}\n")
        _write(root, "databases/shop/base.yaml", _valid("VerificationPolicy"))
        shared: list[str] = []
        for number, ((kind, text), where) in enumerate(documents):
            data = text.encode("utf-8", "surrogatepass")
            if where == "shared":
                shared.append(text)
            elif where == "own" and kind in _PLACES:
                _write(root, _PLACES[kind], data)
            else:
                _write(root, f"databases/stray-{number}.yaml", data)
        if shared:
            _write(
                root, "databases/shared.yml", "---\n".join(shared).encode("utf-8", "surrogatepass")
            )
        for suffix, data in signatures:
            _write(root, _PLACES["Approval"] + suffix, data)
        _load(root, scratch)


# -- hostile trees: links, FIFOs, folders where files belong ----------------------------

_TARGETS = [
    "/etc/passwd",
    "/dev/zero",
    "/dev/null",
    "..",
    "../..",
    "self",
    "seshat.yaml",
    "nowhere",
]


@given(
    entries=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "seshat.yaml",
                    "databases",
                    "databases/a.yaml",
                    "databases/sub",
                    "databases/sub/b.yml",
                    "policies",
                    "policies/allowed_signers",
                    "approvals/shop/orders/" + "ab" * 32 + ".yaml.sig",
                    "approvals/shop/orders/" + "ab" * 32 + ".yaml.sigstore.json",
                    "databases/.hidden.yaml",
                ]
            ),
            st.sampled_from(["file", "dir", "fifo", "link"]),
            st.sampled_from(_TARGETS),
        ),
        max_size=5,
    )
)
@budget(60)
def test_hostile_tree_loads_or_reports(base: Path, entries: list[tuple[str, str, str]]) -> None:
    with tempfile.TemporaryDirectory(dir=base) as folder:
        root, scratch = Path(folder) / "repo", Path(folder) / "scratch"
        root.mkdir()
        scratch.mkdir()
        _write(root, "databases/shop/base.yaml", _valid("VerificationPolicy"))
        _write(root, "databases/shop/orders.yaml", _valid("DatabaseSchema"))
        for relative, what, target in entries:
            path = root / relative
            if path.exists() or path.is_symlink():
                continue
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                continue  # a file where its folder would be: the tree has that already
            if what == "file":
                path.write_bytes(_valid("ApprovalPolicy"))
            elif what == "dir":
                path.mkdir()
            elif what == "fifo":
                os.mkfifo(path)
            else:
                os.symlink(path.name if target == "self" else target, path)
        _load(root, scratch)


# -- one file: --policy FILE and friends --------------------------------------------------


@given(
    document=st.one_of(
        yaml_documents().map(lambda d: d[1].encode("utf-8", "surrogatepass")),
        mutated_bytes(SEED_BYTES),
    ),
    kind=st.sampled_from(sorted(KINDS)),
)
@budget(200)
def test_single_file_loads_or_refuses(base: Path, document: bytes, kind: str) -> None:
    with tempfile.TemporaryDirectory(dir=base) as folder:
        path = Path(folder) / "policy.yaml"
        path.write_bytes(document)
        try:
            with confined(Path(folder) / "scratch"):
                loaded: Any = load_one(path, KINDS[kind].model)
        except ConfigurationError as error:
            str(error).encode("utf-8")
            assert MARKER not in str(error)
            return
        json.dumps(loaded.model_dump(mode="json", by_alias=True), ensure_ascii=False).encode()
