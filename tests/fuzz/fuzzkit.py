"""What the fuzz tests share: the example budget, the write guard, and hostile YAML and JSON.

* :func:`budget` is the number of examples a test runs in the ``ci`` profile; in the
  ``long`` profile (``SESHAT_FUZZ=long``) every test runs the profile's own number.
* :func:`confined` records every write the code under test makes (an audit hook on
  ``open`` for writing, ``mkdir``, ``rename``, ``remove``, ``symlink``, ``chmod`` ...) and
  fails the example when one lands outside the folders it names; ``tempfile`` is pointed
  into the first of them for the duration, so a private temporary copy is allowed.
* :func:`yaml_documents` renders structurally plausible declarations (one seed document per
  kind, then mutated: values replaced by hostile scalars, tags, anchors and aliases, keys
  removed or added); :func:`mutated_bytes` damages any seed at the byte level.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hypothesis import settings
from hypothesis import strategies as st

__all__ = [
    "LONG",
    "MARKER",
    "SEEDS",
    "Raw",
    "budget",
    "confined",
    "hostile_json",
    "hostile_scalars",
    "hostile_strings",
    "hostile_text",
    "json_values",
    "mutated_bytes",
    "render_yaml",
    "yaml_documents",
]

LONG: Final = os.environ.get("SESHAT_FUZZ", "") == "long"
"""Whether the ``long`` profile is selected (see ``conftest.py``)."""

MARKER: Final = "s3cr3t-FUZZ-pw"
"""A stand-in password: planted where a credential could be written, never in a message."""


def budget(ci_examples: int) -> settings:
    """``ci_examples`` examples in the ``ci`` profile; the profile's own number otherwise."""
    return settings() if LONG else settings(max_examples=ci_examples)


# -- the write guard ---------------------------------------------------------------------


@dataclass
class _Guard:
    allowed: tuple[str, ...] = ()
    active: bool = False
    violations: list[str] = field(default_factory=list)


_GUARD = _Guard()
_WRITE_FLAGS: Final = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Audit events that change the file system: (path argument, its dir_fd argument) pairs.
_PATH_EVENTS: Final[dict[str, tuple[tuple[int, int | None], ...]]] = {
    "os.mkdir": ((0, 2),),
    "os.rename": ((0, 2), (1, 3)),
    "os.remove": ((0, 1),),
    "os.rmdir": ((0, 1),),
    "os.symlink": ((1, 2),),
    "os.link": ((1, 3),),
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.truncate": ((0, None),),
    "os.utime": ((0, 3),),
    "os.mkfifo": ((0, 2),),
    "os.mknod": ((0, 3),),
    "shutil.rmtree": ((0, 1),),
    "shutil.copyfile": ((1, None),),
    "shutil.move": ((1, None),),
    "tempfile.mkstemp": ((0, None),),
    "tempfile.mkdtemp": ((0, None),),
}


def _outside(path: object, dir_fd: object = None) -> str | None:
    """``path`` (resolved) if it is a path outside every allowed folder."""
    if isinstance(path, int) or path is None:
        return None  # a file descriptor: its opening was checked
    try:
        name = os.fsdecode(path)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return repr(path)
    if isinstance(dir_fd, int) and not os.path.isabs(name):
        name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
    resolved = os.path.realpath(name)
    if any(resolved == root or resolved.startswith(root + os.sep) for root in _GUARD.allowed):
        return None
    return resolved


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _GUARD.active:
        return
    if event == "open":
        path, mode, flags = args[0], args[1], args[2]
        writing = (isinstance(flags, int) and flags & _WRITE_FLAGS) or (
            isinstance(mode, str) and any(c in mode for c in "wax+")
        )
        if not writing:
            return
        where = _outside(path)
    elif event in _PATH_EVENTS:
        where = None
        for at, fd_at in _PATH_EVENTS[event]:
            if at < len(args):
                fd = args[fd_at] if fd_at is not None and fd_at < len(args) else None
                where = where or _outside(args[at], fd)
    else:
        return
    if where is not None:
        _GUARD.violations.append(f"{event}: {where}")


sys.addaudithook(_audit)


@contextlib.contextmanager
def confined(*roots: Path) -> Iterator[None]:
    """Fail when the body writes outside ``roots`` (``tempfile`` goes into the first)."""
    allowed = tuple(os.path.realpath(root) for root in roots)
    temporary = Path(allowed[0]) / ".tmp"
    temporary.mkdir(parents=True, exist_ok=True)
    saved = tempfile.tempdir
    tempfile.tempdir = str(temporary)
    _GUARD.allowed, _GUARD.violations, _GUARD.active = allowed, [], True
    try:
        yield
    finally:
        _GUARD.active = False
        tempfile.tempdir = saved
    assert not _GUARD.violations, f"writes outside {allowed}: {_GUARD.violations[:5]}"


# -- hostile values -----------------------------------------------------------------------

_CONTROL: Final = "".join(chr(c) for c in [*range(0x20), 0x7F, 0x85, 0x2028, 0x2029, 0xFEFF])
hostile_text: Final = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from(_CONTROL + "ab/.\\'\":;#&*!%@`|>-{}[],?"), max_size=40),
    st.builds(lambda c, n: c * n, st.sampled_from("a/.\n\\é🙂"), st.integers(200, 5000)),
    st.sampled_from(["", " ", "..", "../../etc/passwd", "/etc/passwd", "a\x00b", "\ud800"]),
)
"""Strings a person (or an attacker) could write: control characters, long, escapes."""


@dataclass(frozen=True, slots=True)
class Raw:
    """A YAML scalar, collection or alias written exactly as ``text`` (flow context)."""

    text: str


def _quoted(text: str) -> Raw:
    return Raw(json.dumps(text))  # JSON strings are YAML double-quoted scalars


def _unescaped(text: str) -> Raw:
    return Raw(json.dumps(text, ensure_ascii=False))  # non-ASCII written as itself


_TAGS: Final = (
    "!!int",
    "!!float",
    "!!bool",
    "!!str",
    "!!null",
    "!!timestamp",
    "!!binary",
    "!!set",
    "!!omap",
    "!!pairs",
    "!!map",
    "!!seq",
    "!!merge",
    "!!python/object/apply:os.system",
    "!local",
    "!<tag:yaml.org,2002:int>",
    "!<tag:example.com,2000:x>",
)
_TAG_PAYLOADS: Final = (
    "",
    "abc",
    "12",
    "-0",
    "0x1F",
    "0o17",
    "0b101",
    "1_000",
    "1:20:30",
    ".nan",
    "-.inf",
    "1e400",
    "yes",
    "2001-12-14t21:59:43.10-05:00",
    "2026-13-45",
    "2026-02-30T25:61:61Z",
    "aGVsbG8=",
    "!!!",
    "{a, b}",
    "[a: 1, b: 2]",
    "[a, a]",
    "{x: 1}",
    "[1, 2]",
)
_SPECIAL: Final = (
    "null",
    "~",
    "yes",
    "No",
    "on",
    "TRUE",
    "0",
    "-1",
    "0.5",
    "1e400",
    "-.inf",
    ".NaN",
    "[]",
    "{}",
    "''",
    "'it''s'",
    '"\\ud800"',
    '"\\udfff\\ud800"',
    '"\\x1b[31m"',
    '"\\0"',
    '"\\u2028"',
    '"\\N\\_\\L\\P"',
    "2026-12-03",
    "2026-12-03T00:00:00Z",
    "12:30:00",
    "<<",
    "*undefined",
    "=",
)


def _huge(prefix: str, digit: str, count: int, sign: str) -> Raw:
    return Raw(f"{sign}{prefix}{digit * count}")


hostile_scalars: Final = st.one_of(
    st.sampled_from(_SPECIAL).map(Raw),
    st.builds(
        lambda tag, payload: Raw(f"{tag} {payload}".strip()),
        st.sampled_from(_TAGS),
        st.sampled_from(_TAG_PAYLOADS),
    ),
    st.builds(
        _huge,
        st.sampled_from(["", "0x", "0o", "0b", "0"]),
        st.sampled_from(["1", "7", "f", "9"]),
        st.sampled_from([20, 400, 4299, 4300, 4301, 5000, 20000]),
        st.sampled_from(["", "-", "+"]),
    ),
    st.integers(min_value=-(2**70), max_value=2**70).map(lambda n: Raw(str(n))),
    hostile_text.map(_quoted),
    hostile_text.map(_unescaped),
)
"""One YAML value as a person could write it, hostile to a typed model."""

credentials: Final = st.sampled_from(
    [
        f"postgresql://user:{MARKER}@db.example.com/app",
        f"mysql://root:{MARKER}@127.0.0.1:3306/x?ssl=true",
        MARKER,
    ]
).map(_quoted)
"""A database URL with a password (or the password alone), for a credential's place."""
_CREDENTIAL_KEYS: Final = ("url", "password", "passwd", "dsn", "token", "secret", "databaseUrl")


def json_values(leaves: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[Any]:
    """Small JSON documents (with hostile strings and numbers when ``leaves`` is omitted)."""
    base = leaves or st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        hostile_text,
    )
    return st.recursive(
        base,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)
        ),
        max_leaves=12,
    )


# -- structurally plausible YAML ---------------------------------------------------------

UID: Final = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
PLAN_ID: Final = "sha256:" + "ab" * 32

SEEDS: Final[dict[str, dict[str, Any]]] = {
    "DatabaseSchema": {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "DatabaseSchema",
        "metadata": {"name": "orders", "namespace": "shop", "labels": {"team": "orders"}},
        "spec": {
            "target": {
                "engine": "postgresql",
                "url": {"fromFile": "/run/secrets/orders-db-url"},
                "coordinationKey": "orders-prod",
                "sharedRealm": True,
            },
            "artifact": {
                "ref": "oci://localhost:5000/acme/orders-schema:v5",
                "verification": {"policy": "signed-by-ci"},
            },
            "interval": "5m",
            "policy": {
                "apply": "OnApproval",
                "exclude": ["audit.*"],
                "lockTimeout": "10s",
                "protectedTables": ["orders_archive"],
            },
        },
    },
    "DatabaseMigration": {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "DatabaseMigration",
        "metadata": {"name": "ledger", "namespace": "shop"},
        "spec": {
            "target": {
                "engine": "sqlite",
                "url": {"fromEnv": "SHOP_LEDGER_URL"},
                "coordinationKey": "shop-ledger",
            },
            "artifact": {
                "ref": "oci://localhost:5000/acme/shop-ledger-migrations:v3",
                "verification": {"policy": "signed-by-ci"},
            },
            "policy": {"apply": "OnApproval", "outOfOrder": False, "transactionMode": "file"},
        },
    },
    "VerificationPolicy": {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "VerificationPolicy",
        "metadata": {"name": "signed-by-ci", "namespace": "shop"},
        "spec": {
            "artifactTypes": [
                "application/vnd.seshat.schema.v1",
                "application/vnd.seshat.migrations.v1",
            ],
            "requiredAnnotations": ["org.opencontainers.image.source"],
            "signatures": {
                "mode": "enforce",
                "count": 1,
                "authorities": [
                    {"name": "ci-key", "key": {"publicKey": "policies/keys/ci.pub"}},
                    {
                        "name": "ci-keyless",
                        "keyless": {
                            "issuer": "https://token.actions.githubusercontent.com",
                            "subjectRegExp": "https://github.com/acme/.*",
                            "trustedRoot": "policies/trusted_root.json",
                        },
                    },
                ],
            },
        },
    },
    "ApprovalPolicy": {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "ApprovalPolicy",
        "metadata": {"name": "shop-approvers", "namespace": "shop"},
        "spec": {
            "rules": [
                {
                    "match": {"namespaces": ["shop"], "names": ["orders", "led*"]},
                    "approvers": {
                        "allowedSigners": "policies/allowed_signers",
                        "keyless": [
                            {
                                "issuerRegExp": "https://accounts\\.example\\.com",
                                "subject": "carol@example.com",
                                "trustedRoot": "policies/trusted_root.json",
                            }
                        ],
                    },
                    "count": 1,
                    "destructiveCount": 2,
                    "privilegeCount": 2,
                    "maxAge": "7d",
                }
            ]
        },
    },
    "Approval": {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "Approval",
        "metadata": {"name": "orders-abab", "namespace": "shop"},
        "spec": {
            "resource": {
                "kind": "DatabaseSchema",
                "namespace": "shop",
                "name": "orders",
                "uid": UID,
            },
            "plan": {"id": PLAN_ID},
            "approvedAt": "2026-12-01T10:00:00Z",
            "expiresAt": "2026-12-31T00:00:00Z",
            "nonce": "0123456789abcdef",
            "comment": "ship it",
        },
    },
    "RunAcknowledgment": {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "RunAcknowledgment",
        "metadata": {"name": "ledger-run", "namespace": "shop"},
        "spec": {
            "resource": {
                "kind": "DatabaseMigration",
                "namespace": "shop",
                "name": "ledger",
                "uid": UID,
            },
            "operationId": "0123456789abcdef0123",
            "comment": "settled by hand",
        },
    },
    "Config": {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "Config",
        "spec": {
            "branch": "main",
            "statusBranch": "seshat/status",
            "paths": ["databases", "policies", "approvals", "acknowledgments"],
            "reviews": {"forge": "none"},
            "commit": {"author": {"name": "seshat", "email": "seshat@example.com"}},
        },
    },
}
"""One valid document of every kind a repository holds (``Config`` is ``seshat.yaml``)."""

_EXTRA_KEYS: Final = (
    "status",
    "uid",
    "password",
    "url",
    "token",
    "apiVersion",
    "kind",
    "<<",
    "colour",
    "metadata",
    "spec",
    "",
)


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*here, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*here, index))
    return found


def _replace(node: Any, path: tuple[Any, ...], change: Callable[[Any], Any]) -> Any:
    if not path:
        return change(node)
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        copy = dict(node)
        copy[head] = _replace(node[head], rest, change)
        return copy
    copy_list = list(node)
    copy_list[head] = _replace(node[head], rest, change)
    return copy_list


_SENTINEL: Final = object()


def _constant(value: Any) -> Callable[[Any], Any]:
    def change(_old: Any) -> Any:
        return value

    return change


def _without(key: Any) -> Callable[[Any], Any]:
    def change(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: v for k, v in node.items() if k != key}
        return [v for i, v in enumerate(node) if i != key]

    return change


@st.composite
def _mutation(draw: st.DrawFn) -> tuple[int, str, Any]:
    op = draw(
        st.sampled_from(["replace", "replace", "replace", "delete", "add", "wrap", "alias", "url"])
    )
    value: Any = None
    if op == "url":  # a credential written where a URL reference or a password could go
        op, value = "add", (draw(st.sampled_from(_CREDENTIAL_KEYS)), draw(credentials))
    elif op == "replace":
        value = draw(
            st.one_of(
                hostile_scalars,
                st.lists(hostile_scalars, max_size=3),
                st.dictionaries(st.sampled_from(_EXTRA_KEYS), hostile_scalars, max_size=2),
            )
        )
    elif op == "add":
        value = (draw(st.sampled_from(_EXTRA_KEYS) | hostile_text), draw(hostile_scalars))
    return draw(st.integers(0, 10_000)), op, value


def _mutate(document: Any, mutations: Sequence[tuple[int, str, Any]]) -> Any:
    for index, op, value in mutations:
        paths = _paths(document)
        path = paths[index % len(paths)]
        if op == "replace":
            document = _replace(document, path, _constant(value))
        elif op == "delete" and path:
            document = _replace(document, path[:-1], _without(path[-1]))
        elif op == "add":

            def add(node: Any, pair: tuple[Any, Any] = value) -> Any:
                if isinstance(node, dict):
                    return {**node, pair[0]: pair[1]}
                if isinstance(node, list):
                    return [*node, pair[1]]
                return node

            document = _replace(document, path, add)
        elif op == "wrap":
            document = _replace(document, path, lambda old: [old])
        elif op == "alias":
            # The anchor goes on the first node, the alias replaces the last one: an alias
            # that comes before its anchor (or inside it) is a case too.
            document = _replace(document, path, lambda old: ("&", old))
    return document


def _key(key: Any) -> str:
    if isinstance(key, Raw):
        return key.text
    text = str(key)
    if text == "<<":
        return text  # a merge key
    plain = text and all(c.isalnum() or c in "_-./" for c in text) and text[0] not in "-."
    return text if plain else json.dumps(text)


def render_yaml(document: Any, *, block: bool = True) -> str:
    """``document`` as YAML: the top mapping in block style (one field per line, so lines
    differ), everything below it in flow style. ``("&", node)`` anchors ``node``; the next
    anchored node is written as an alias of it."""
    anchors: list[str] = []

    def flow(node: Any) -> str:
        if isinstance(node, tuple) and len(node) == 2 and node[0] == "&":
            if anchors and len(anchors) % 2 == 1:
                anchors.append(anchors[-1])
                return f"*{anchors[-1]}"
            name = f"a{len(anchors)}"
            anchors.append(name)
            return f"&{name} {flow(node[1])}"
        if isinstance(node, Raw):
            return node.text
        if isinstance(node, dict):
            return "{" + ", ".join(f"{_key(k)}: {flow(v)}" for k, v in node.items()) + "}"
        if isinstance(node, list):
            return "[" + ", ".join(flow(v) for v in node) + "]"
        if isinstance(node, bool):
            return "true" if node else "false"
        if node is None:
            return "null"
        if isinstance(node, int):
            return str(node)
        return json.dumps(str(node))

    if block and isinstance(document, dict):
        return "".join(f"{_key(k)}: {flow(v)}\n" for k, v in document.items())
    return flow(document) + "\n"


@st.composite
def yaml_documents(draw: st.DrawFn, kinds: Sequence[str] = tuple(SEEDS)) -> tuple[str, str]:
    """(kind, YAML text) of one mutated seed document of one of ``kinds``."""
    kind = draw(st.sampled_from(list(kinds)))
    mutations = draw(st.lists(_mutation(), max_size=4))
    document = _mutate(SEEDS[kind], mutations)
    return kind, render_yaml(document, block=draw(st.booleans()))


@st.composite
def mutated_bytes(draw: st.DrawFn, seeds: Sequence[bytes]) -> bytes:
    """One of ``seeds`` with bytes inserted, deleted, overwritten or the end cut off."""
    data = bytearray(draw(st.sampled_from(list(seeds))))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["insert", "delete", "overwrite", "truncate"]))
        at = draw(st.integers(0, len(data)))
        if op == "insert":
            data[at:at] = draw(
                st.binary(max_size=8)
                | st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\r", b"\t"])
            )
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif op == "overwrite" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[at:]
    return bytes(data)


def hostile_json(seed: Any) -> st.SearchStrategy[Any]:
    """``seed`` (a JSON document) with some values replaced by other JSON values."""

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        document = seed
        for _ in range(draw(st.integers(0, 4))):
            paths = _paths(document)
            path = paths[draw(st.integers(0, len(paths) - 1))]
            value = draw(
                json_values()
                | st.sampled_from([-1, 2**63, 2**64 + 1, 10**30, True, 1.5])
                | st.just(_SENTINEL)
            )
            if value is _SENTINEL and path:
                document = _replace(document, path[:-1], _without(path[-1]))
            elif value is not _SENTINEL:
                document = _replace(document, path, _constant(value))
        return document

    return build()


def hostile_strings(seed: Any) -> st.SearchStrategy[Any]:
    """``seed`` with some of its strings replaced by hostile ones (the shape is kept, so
    the document gets past type checks to what is done with the text)."""
    leaves = [path for path in _paths(seed) if path and isinstance(_at(seed, path), str)]

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        document = seed
        for _ in range(draw(st.integers(1, 3))):
            path = draw(st.sampled_from(leaves))
            document = _replace(document, path, _constant(draw(hostile_text | st.text())))
        return document

    return build()


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node
