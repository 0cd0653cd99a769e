"""Reading one YAML file safely, keeping the line of every field.

A declaration file is untrusted input. Before anything else looks at it this module refuses
files over :data:`MAX_FILE_BYTES`, bytes that are not UTF-8, YAML that does not parse,
duplicate keys, and "YAML bombs": anchors and aliases let a few hundred bytes describe
billions of nodes, so the size of every document *after* alias expansion is computed (with
memoization, never by expanding) and bounded by :data:`MAX_NODES`. A file of more than
:data:`MAX_DOCUMENTS` documents is refused too: parsing costs about as much per document as
per field, and a 1 MiB file of 100,000 tiny documents would take every reader of the file
(the loader, the uid history walk) tens of seconds.

What comes out is plain Python data (dicts, lists, str, int, float, bool, None; dates and
times stay text, for the models to parse) plus a map from each field's path to its 1-based
line, so errors can say ``path:line: field: message``.

Parsing is the slow part (ruamel's round-trip parser is pure Python: milliseconds for a
small declaration), and one pass reads the same bytes more than once (the loader, the uid
history walk at each commit that touched the file, the status files), as does every pass of
a long-lived controller over an unchanged repository. So what a file's bytes parse to (or
the error they raise) is remembered, keyed by their SHA-256, for the most recently read
files holding :data:`REMEMBERED_NODES` nodes in all (aliases expanded: what the data costs in
memory, which a file's size does not bound); each caller gets its own copy of the data.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

__all__ = [
    "MAX_DOCUMENTS",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "Document",
    "FileError",
    "read_documents",
]

MAX_FILE_BYTES: Final = 1024 * 1024
"""A declaration file larger than 1 MiB is refused."""
MAX_NODES: Final = 100_000
"""A document that expands to more nodes than this (counting aliases) is refused."""
MAX_DOCUMENTS: Final = 1000
"""A file of more YAML documents than this (empty ones included) is refused."""
REMEMBERED_NODES: Final = 200_000
"""How many nodes (aliases expanded) of the most recently read files' data are remembered:
a few thousand declaration files, a few tens of MB at most. A file over it alone (a YAML
bomb that stays under :data:`MAX_NODES` per document) is never remembered."""

Path = tuple[str | int, ...]
_DUPLICATE = re.compile(r'found duplicate key ("[^"]*")')


class FileError(Exception):
    """The file as a whole cannot be read; ``line`` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True, slots=True)
class Document:
    """One YAML document of a file: its data, its first line and the line of each field."""

    data: object
    line: int
    lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Path) -> int:
        """The line of the longest prefix of ``path`` that exists in the document."""
        for end in range(len(path), 0, -1):
            found = self.lines.get(path[:end])
            if found is not None:
                return found
        return self.line


_INT_DIGITS: Final = 4300  # Python's own limit for turning text into an int
# An int below 2 ** _INT_BITS has at most _INT_DIGITS decimal digits, so it can be printed:
# ``0x`` and 4,000 hex digits is short text but a number of 4,817 digits that ``str()``
# (an error message quoting it) refuses to convert.
_INT_BITS: Final = int((_INT_DIGITS - 1) * math.log2(10))


def _strict(
    convert: Callable[[RoundTripConstructor, Any], object], what: str
) -> Callable[[RoundTripConstructor, Any], object]:
    """``convert``, with a value it cannot convert reported as a YAML error at its line."""

    def construct(self: RoundTripConstructor, node: Any) -> object:
        text = node.value if isinstance(node.value, str) else ""
        if what == "an integer" and len(text) > _INT_DIGITS:
            raise ConstructorError(
                None, None, f"an integer of more than {_INT_DIGITS} digits", node.start_mark
            )
        try:
            value = convert(self, node)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError):
            raise ConstructorError(None, None, f"not {what}", node.start_mark) from None
        if isinstance(value, int) and value.bit_length() > _INT_BITS:
            raise ConstructorError(
                None, None, f"an integer of more than {_INT_DIGITS} digits", node.start_mark
            )
        return value

    return construct


_YAML_TAG: Final = "tag:yaml.org,2002:"
_NODE_KINDS: Final = {
    **{f"{_YAML_TAG}{name}": ScalarNode for name in ("str", "int", "float", "bool", "null")},
    f"{_YAML_TAG}timestamp": ScalarNode,
    f"{_YAML_TAG}map": MappingNode,
    f"{_YAML_TAG}seq": SequenceNode,
}
"""The tags a declaration may use (the JSON-like core schema), each with its node kind."""


class _Constructor(RoundTripConstructor):
    """The round-trip constructor without surprises: a timestamp stays text (the models
    parse dates and durations and say what is wrong with them), and a scalar that does not
    convert to its tag's type (``!!int abc``, an integer of 5,000 digits) is a YAML error
    at its line instead of an exception.

    Only the core schema's tags construct, each on its own kind of node, and mapping keys
    are scalars: ``!!set``, ``!!omap``, ``!!binary``, ``!!python/...``, local tags, a tag on
    the wrong kind of node (``!!omap x``) and complex keys (``? [a, b]``) mean nothing in a
    declaration, and ruamel's constructors for them fail in ways of their own."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        kind = _NODE_KINDS.get(node.tag)
        if kind is None:
            raise ConstructorError(
                None, None, f"the tag {_shown_tag(node.tag)} is not allowed", node.start_mark
            )
        if not isinstance(node, kind):
            raise ConstructorError(
                None,
                None,
                f"the tag {_shown_tag(node.tag)} does not fit this value",
                node.start_mark,
            )
        if isinstance(node, MappingNode):
            for key, _value in node.value:
                if not isinstance(key, ScalarNode):
                    raise ConstructorError(
                        None, None, "a mapping key must be a plain value", key.start_mark
                    )
        return super().construct_object(node, deep)

    def construct_text(self, node: Any) -> object:
        return self.construct_scalar(node)


def _shown_tag(tag: object) -> str:
    text = str(tag)
    text = "!!" + text.removeprefix(_YAML_TAG) if text.startswith(_YAML_TAG) else text
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


for _tag, _what in (("int", "an integer"), ("float", "a number"), ("bool", "a boolean")):
    _tag = f"tag:yaml.org,2002:{_tag}"
    _Constructor.add_constructor(_tag, _strict(RoundTripConstructor.yaml_constructors[_tag], _what))
_Constructor.add_constructor("tag:yaml.org,2002:timestamp", _Constructor.construct_text)


def _expanded_size(node: object, memo: dict[int, int], active: set[int]) -> int:
    """Nodes in ``node`` once aliases are expanded, computed without expanding them."""
    if not isinstance(node, (dict, list)):
        return 1
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise FileError("a YAML alias refers to its own ancestor (recursive document)")
    active.add(key)
    children = node.values() if isinstance(node, dict) else node
    total = 1
    for child in children:
        total += _expanded_size(child, memo, active)
        if total > MAX_NODES:
            break
    active.discard(key)
    memo[key] = total
    return total


def _text(value: str, line: int | None) -> str:
    """``value`` as Unicode text. YAML's ``\\u`` escapes are UTF-16 code units, so JSON's
    spelling of a character outside the BMP (``"\\ud83d\\ude00"``) is a surrogate pair:
    it is joined into its character. A lone surrogate (``"\\ud800"``) spells no character
    and could never be written as UTF-8 again: it is refused."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass
    units = value.encode("utf-16-le", "surrogatepass")
    try:
        return units.decode("utf-16-le")
    except UnicodeDecodeError as error:
        code = int.from_bytes(units[error.start : error.start + 2], "little")
        raise FileError(
            f"invalid YAML: a string holds \\u{code:04x}, a lone surrogate, not a character",
            line,
        ) from None


def _plain(node: object, path: Path, lines: dict[Path, int]) -> object:
    """Convert ruamel's round-trip objects to plain data, recording each field's line."""
    if isinstance(node, CommentedMap):
        out: dict[str, object] = {}
        for key, value in node.items():
            line: int | None = None
            with contextlib.suppress(KeyError, TypeError):
                line = node.lc.key(key)[0] + 1
            name = _text(key if isinstance(key, str) else str(key), line or lines.get(path))
            if name in out:  # `1:` and `"1":`, or a character and its escaped spelling
                shown = name[:40] + ("..." if len(name) > 40 else "")
                raise FileError(f'invalid YAML: duplicate key "{shown}"', line)
            here = (*path, name)
            if line is not None:
                lines[here] = line
            out[name] = _plain(value, here, lines)
        return out
    if isinstance(node, CommentedSeq):
        items: list[object] = []
        for index, value in enumerate(node):
            here = (*path, index)
            with contextlib.suppress(KeyError, TypeError, IndexError):
                lines[here] = node.lc.item(index)[0] + 1
            items.append(_plain(value, here, lines))
        return items
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return _text(str(node), lines.get(path))
    if isinstance(node, datetime):
        return datetime.fromisoformat(node.isoformat())
    if isinstance(node, date):
        return node.isoformat()
    return str(node)


class _Remembered:
    """What recently read files parsed to, by the SHA-256 of their bytes, within a budget
    of nodes (least recently used first out); thread-safe (a pass reads from several)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: OrderedDict[bytes, tuple[int, list[Document] | FileError]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: bytes) -> list[Document] | FileError | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[1]

    def put(self, key: bytes, size: int, parsed: list[Document] | FileError) -> None:
        if size > self.budget:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (size, parsed)
            self._size += size
            while self._size > self.budget:
                _, (dropped, _) = self._entries.popitem(last=False)
                self._size -= dropped


_remembered = _Remembered(REMEMBERED_NODES)


def _copy(data: object) -> object:
    """``data`` (what :func:`_plain` makes) with containers of its own."""
    if isinstance(data, dict):
        return {key: _copy(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_copy(value) for value in data]
    return data  # str, int, float, bool, None: immutable


def read_documents(raw: bytes) -> list[Document]:
    """Parse every document of a YAML file, or raise :class:`FileError` saying why not."""
    if len(raw) > MAX_FILE_BYTES:
        raise FileError(f"file is {len(raw)} bytes; the limit is {MAX_FILE_BYTES}")
    key = hashlib.sha256(raw).digest()
    found = _remembered.get(key)
    if found is None:
        try:
            found, nodes = _parse(raw)
        except FileError as error:
            found, nodes = error, 1
        _remembered.put(key, max(nodes, 1), found)
    if isinstance(found, FileError):
        raise FileError(found.message, found.line)
    return [Document(_copy(d.data), d.line, dict(d.lines)) for d in found]


def _parse(raw: bytes) -> tuple[list[Document], int]:
    """The file's documents, and how many nodes they hold (aliases expanded)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        bad_line = raw[: error.start].count(b"\n") + 1
        raise FileError(f"not valid UTF-8 (byte {error.start})", bad_line) from None
    yaml = YAML(typ="rt", pure=True)
    yaml.Constructor = _Constructor
    yaml.allow_duplicate_keys = False
    documents: list[Document] = []
    nodes = 0
    try:
        for count, loaded in enumerate(yaml.load_all(text), start=1):
            first = getattr(getattr(loaded, "lc", None), "line", None)
            start = first + 1 if isinstance(first, int) else 1
            if count > MAX_DOCUMENTS:  # stops parsing here: the rest is never read
                raise FileError(
                    f"more than {MAX_DOCUMENTS} YAML documents in one file; split it",
                    start if isinstance(first, int) else None,
                )
            if loaded is None:
                continue
            size = _expanded_size(loaded, {}, set())
            if size > MAX_NODES:
                raise FileError(
                    f"a document expands to more than {MAX_NODES} nodes through YAML aliases",
                    start,
                )
            nodes += size
            lines: dict[Path, int] = {}
            documents.append(Document(_plain(loaded, (), lines), start, lines))
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line: int | None = mark.line + 1 if mark is not None else None
        reason = error.problem or error.context or "invalid YAML"
        duplicate = _DUPLICATE.match(reason)
        if duplicate:
            # ruamel quotes both values; a duplicated `url:` could carry a password.
            reason = f"duplicate key {duplicate.group(1)}"
        raise FileError(f"invalid YAML: {reason}", line) from None
    except YAMLError as error:
        raise FileError(f"invalid YAML: {error}") from None
    except RecursionError:
        raise FileError("invalid YAML: nested too deeply") from None
    return documents, nodes
