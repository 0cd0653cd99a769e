"""What a file's bytes parse to is remembered (gitops/repo/yamlfile.py): a second read of the
same bytes gives the same documents without parsing, in containers of its own, and an error
is raised again as it was, line and all."""

from __future__ import annotations

import pytest

from gitops.repo import yamlfile
from gitops.repo.yamlfile import FileError, read_documents

TEXT = b"kind: DatabaseSchema\nmetadata:\n  name: orders\n  labels: [a, b]\n---\nx: 1\n"


def _parses(monkeypatch: pytest.MonkeyPatch, budget: int) -> list[bytes]:
    """Every parse from now on (what was not remembered), with an empty memory of
    ``budget`` nodes."""
    parsed: list[bytes] = []
    parse = yamlfile._parse

    def counted(raw: bytes) -> tuple[list[yamlfile.Document], int]:
        parsed.append(raw)
        return parse(raw)

    monkeypatch.setattr(yamlfile, "_parse", counted)
    monkeypatch.setattr(yamlfile, "_remembered", yamlfile._Remembered(budget))
    return parsed


def test_the_same_bytes_are_parsed_once_and_each_reader_gets_its_own_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsed = _parses(monkeypatch, 1024)
    first = read_documents(TEXT)
    first[0].data["metadata"]["labels"].append("changed")  # type: ignore[index]
    first[0].lines.clear()
    second = read_documents(TEXT)
    assert parsed == [TEXT]
    assert second[0].data == {
        "kind": "DatabaseSchema",
        "metadata": {"name": "orders", "labels": ["a", "b"]},
    }
    assert second[0].line_of(("metadata", "labels")) == 4
    assert (second[1].data, second[1].line) == ({"x": 1}, 6)
    read_documents(TEXT + b"\n")  # other bytes: parsed
    assert len(parsed) == 2


def test_an_error_is_remembered_and_raised_again_with_its_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(yamlfile, "_remembered", yamlfile._Remembered(1024))
    broken = b"a: 1\na: 2\n"
    for _ in range(2):
        with pytest.raises(FileError) as raised:
            read_documents(broken)
        assert (raised.value.message, raised.value.line) == ('invalid YAML: duplicate key "a"', 2)


def test_the_budget_keeps_the_most_recently_read() -> None:
    remembered = yamlfile._Remembered(10)
    for key in (b"a", b"b", b"c"):
        remembered.put(key, 4, [])
    assert remembered.get(b"a") is None  # 12 nodes > 10: the oldest went
    assert remembered.get(b"c") == [] and remembered.get(b"b") == []
    remembered.put(b"d", 4, [])  # b was read after c: c goes
    assert remembered.get(b"c") is None and remembered.get(b"b") == []
    remembered.put(b"huge", 11, [])  # over the whole budget: never kept
    assert remembered.get(b"huge") is None and remembered.get(b"d") == []


def test_what_is_remembered_is_counted_in_nodes_with_aliases_expanded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A small file can expand to many nodes through aliases: the budget counts what the
    data holds, not the file's bytes, so such a file over the budget is parsed each time."""
    parsed = _parses(monkeypatch, 500)
    bomb = b"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    bomb += b"c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"  # about 1,100 nodes in 120 bytes
    for _ in range(2):
        assert len(read_documents(bomb)[0].data["c"]) == 10  # type: ignore[index]
    assert parsed == [bomb, bomb]
    read_documents(TEXT)
    read_documents(TEXT)
    assert parsed == [bomb, bomb, TEXT]
