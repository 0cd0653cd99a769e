"""Fuzzing migration directories (file names, bytes) and the SQL splitters of each dialect.

A migration directory is an artifact's content, written by whoever publishes it. Reading
it ends in the migrations in version order or a ConfigurationError; splitting a file into
statements (PostgreSQL, MySQL/MariaDB, SQLite) ends in pieces that are the script's own
text, in order, on the lines they start on, in linear time. Statements built so that a
``;`` hides in a string, a quoted name, a comment or a body split back into themselves.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import tempfile
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from fuzz.fuzzkit import budget, confined, hostile_text
from runner.engines.sqlite.sqltext import SqlTextError, split_script
from runner.errors import ConfigurationError, SeshatError
from runner.migrations.apply import statements_of
from runner.migrations.files import read_directory
from runner.sql.split import Piece, split_postgresql, strip_block_comments
from runner.sql.split_mysql import split_mysql

# -- migration directories -----------------------------------------------------------------

_NAME_PARTS = st.sampled_from(
    [
        "1",
        "2",
        "10",
        "007",
        "99999999999999999999",
        "123456789012345678901",
        "١",
        "_",
        "__",
        "init",
        "add users",
        ".up",
        ".down",
        ".checkpoint",
        ".sql",
        ".SQL",
        ".sql\n",
        "\n",
        "é",
        "\udcff",  # a byte that is not UTF-8, as os.fsdecode spells it
        "\udce9",
        "-",
        ".",
    ]
)
_names = st.one_of(
    st.lists(_NAME_PARTS, min_size=1, max_size=6).map("".join),
    st.builds(
        lambda version, description, suffix: f"{version}_{description}{suffix}",
        st.sampled_from(["1", "2", "2", "10", "007", "0", "99999999999999999999", "١"]),
        st.lists(_NAME_PARTS, min_size=1, max_size=3).map("".join),
        st.sampled_from([".sql", ".up.sql", ".down.sql", ".checkpoint.sql", ".sql\n", ".sql "]),
    ),
)
_contents = st.one_of(
    st.sampled_from(
        [
            b"CREATE TABLE t (id int);\n",
            b"-- seshat:no-transaction\nCREATE INDEX CONCURRENTLY i ON t (id);\n",
            b"\xff\xfe not utf-8",
            b"",
            b"\x00",
        ]
    ),
    st.binary(max_size=64),
    hostile_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
)


@given(st.lists(st.tuples(_names, _contents), max_size=6))
@budget(200)
@example([("1_a.sql\n", b"x"), ("2_b.sql", b"y")])
@example([("1_\udcff.sql", b"x")])
def test_migration_directories_read_or_refused(
    tmp_path_factory: pytest.TempPathFactory, files: list[tuple[str, bytes]]
) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as folder:
        directory = Path(folder) / "migrations"
        directory.mkdir()
        for name, data in files:
            raw = os.fsencode(name)
            if b"/" in raw or b"\x00" in raw or raw in (b".", b".."):
                continue
            with open(os.path.join(os.fsencode(directory), raw), "wb") as handle:
                handle.write(data)
        try:
            with confined(Path(folder) / "scratch"):
                migrations = read_directory(directory)
        except ConfigurationError as error:
            str(error).encode("utf-8")  # the message names the file printably
            event("refused")
            return
    numbers = [m.number for m in migrations]
    assert numbers == sorted(set(numbers))
    event(f"{len(migrations)} migrations")
    for migration in migrations:
        migration.name.encode("utf-8")  # it goes into history rows, plans and digests
        assert not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in migration.name)
        assert re.fullmatch(r"[0-9]{1,20}_.+\.sql", migration.name)
        data = migration.text.encode("utf-8")
        assert migration.checksum == "sha256:" + hashlib.sha256(data).hexdigest()


# -- splitting: pieces are the script's own text, in order, on their lines -------------------

_SQL_ALPHABET = "abE ;'\"`$_\\/*-#!\n\t()"
_SQL_WORDS = [
    "BEGIN",
    "END",
    "END IF",
    "CASE",
    "DELIMITER //",
    "DELIMITER ;",
    "//",
    "$$",
    "$fn$",
    "E'",
    "/*",
    "*/",
    "/*!",
    "-- ",
    "--",
    "#",
    "CREATE TRIGGER t AFTER INSERT ON x BEGIN",
]
_scripts = st.one_of(
    st.text(alphabet=_SQL_ALPHABET, max_size=300),
    st.lists(st.sampled_from(_SQL_WORDS) | st.text(_SQL_ALPHABET, max_size=8), max_size=40).map(
        " ".join
    ),
    hostile_text,
)


def _in_order(script: str, pieces: list[Piece]) -> None:
    at = 0
    for piece in pieces:
        assert piece.sql and piece.sql == piece.sql.strip()
        found = script.find(piece.sql, at)
        assert found >= 0, (piece, at)
        assert piece.line == script.count("\n", 0, found) + 1, piece
        at = found + len(piece.sql)


@given(_scripts)
@budget(400)
def test_postgresql_pieces_are_the_scripts_text(script: str) -> None:
    _in_order(script, split_postgresql(script))


@given(_scripts)
@budget(400)
def test_mysql_pieces_are_the_scripts_text(script: str) -> None:
    pieces = split_mysql(script)
    at = 0
    for piece in pieces:  # a DELIMITER line is not part of any piece
        assert piece.sql and piece.sql == piece.sql.strip()
        found = script.find(piece.sql, at)
        assert found >= 0 and piece.line == script.count("\n", 0, found) + 1, piece
        at = found + len(piece.sql)


@given(_scripts)
@budget(300)
@example("SELECT 1;\x00;")
@example("/*" + ";" * 10)
def test_sqlite_pieces_are_the_scripts_text(script: str) -> None:
    try:
        found = split_script(script)
    except SeshatError as error:  # SqlTextError: text the tokenizer cannot read
        assert isinstance(error, SqlTextError)
        return
    _in_order(script, [Piece(sql, line) for line, sql in found])


@given(st.text(alphabet="/*! x\n", max_size=60), st.sampled_from([None, "!"]))
@budget(500)
def test_block_comments_are_stripped_as_the_regular_expression_did(
    text: str, keep: str | None
) -> None:
    pattern = r"/\*.*?\*/" if keep is None else r"/\*(?!!).*?\*/"
    assert strip_block_comments(text, keep) == re.sub(pattern, "", text, flags=re.DOTALL)


# -- splitting statements that hide a ';' -----------------------------------------------------

_WORD = st.sampled_from(["SELECT", "x", "1", "t.id", "(a)", "+", "INSERT INTO t VALUES"])


def _postgresql_token(draw: st.DrawFn) -> str:
    inner = draw(st.text(alphabet="ab;'\"$\n -*/", max_size=10))
    kind = draw(st.sampled_from(["word", "string", "estring", "ident", "dollar", "block"]))
    if kind == "string":
        return "'" + inner.replace("'", "''") + "'"
    if kind == "estring":
        return " E'" + inner.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if kind == "ident":
        return '"' + inner.replace('"', '""') + '"'
    if kind == "dollar":
        tag = draw(st.sampled_from(["", "fn", "x_1"]))
        return f"${tag}$" + inner.replace(f"${tag}$", "") + f"${tag}$"
    if kind == "block":
        return "/* " + inner.replace("*/", "").replace("/*", "") + " */ x"
    return draw(_WORD)


def _mysql_token(draw: st.DrawFn) -> str:
    inner = draw(st.text(alphabet="ab;'\"`\n -*/#", max_size=10))
    kind = draw(st.sampled_from(["word", "single", "double", "backquote", "block", "begin"]))
    if kind == "single":
        return "'" + inner.replace("\\", "\\\\").replace("'", "''") + "'"
    if kind == "double":
        return '"' + inner.replace("\\", "\\\\").replace('"', '""') + '"'
    if kind == "backquote":
        return "`" + inner.replace("`", "``") + "`"
    if kind == "block":
        return "/* " + inner.replace("*/", "").replace("/*", "") + " */ x"
    if kind == "begin":
        return "BEGIN SELECT 1; SET @a = 2; END"
    return draw(_WORD)


def _statements(token: Callable[[st.DrawFn], str]) -> st.SearchStrategy[list[str]]:
    @st.composite
    def one(draw: st.DrawFn) -> str:
        words = ["x"] + [token(draw) for _ in range(draw(st.integers(0, 5)))]
        return " ".join(words)

    return st.lists(one(), min_size=1, max_size=5)


def _joined(statements: list[str], comment: str) -> tuple[str, list[str]]:
    """The script, and the pieces expected: a comment between two statements belongs to the
    piece of the statement after it."""
    script = f";\n{comment}".join(statements) + ";\n"
    return script, statements[:1] + [comment + s for s in statements[1:]]


@given(_statements(_postgresql_token), st.sampled_from(["", " ", "-- note ;\n", "/* ; */ "]))
@budget(300)
def test_postgresql_statements_split_back(statements: list[str], comment: str) -> None:
    script, expected = _joined(statements, comment)
    assert [p.sql for p in split_postgresql(script)] == [e.strip() for e in expected]


@given(_statements(_mysql_token), st.sampled_from(["", " ", "# note ;\n", "-- x;\n"]))
@budget(300)
@example(["x À ß", "x"], "")
def test_mysql_statements_split_back(statements: list[str], comment: str) -> None:
    script, expected = _joined(statements, comment)
    assert [p.sql for p in split_mysql(script)] == [e.strip() for e in expected]


def _sqlite_text(statement: str) -> bool:
    """Whether ``statement`` is SQLite text: PostgreSQL's dollar quotes and E'' strings
    (where a backslash escapes) are not, and a ';' in them ends a SQLite statement."""
    return "$" not in statement and "E'" not in statement


@given(_statements(_postgresql_token).map(lambda found: [s for s in found if _sqlite_text(s)]))
@budget(150)
@example(["x  E'\\';\\''"])  # not SQLite text: left out, it split in two
def test_sqlite_statements_split_back(statements: list[str]) -> None:
    statements = [s for s in statements if _sqlite_text(s)]
    script = ";\n".join(statements) + ";"
    if any(not sqlite3.complete_statement(s + ";") for s in statements):
        return  # not a complete SQLite statement: nothing to compare with
    assert [sql.rstrip(";").strip() for _, sql in split_script(script)] == statements


@given(st.sampled_from(["postgresql", "mysql", "sqlite"]), _scripts)
@budget(150)
def test_statements_of_a_migration(dialect: str, script: str) -> None:
    from runner.migrations.files import MigrationFile

    migration = MigrationFile("1", "x", "1_x.sql", "sha256:" + "0" * 64, True, script)
    try:
        found = statements_of(dialect, migration)
    except SeshatError:
        return
    assert all(isinstance(sql, str) and sql for sql in found)


# -- linear time --------------------------------------------------------------------------

_LARGE = {
    "comments that never end": "SELECT 1;\nx " + "/* " * 50_000,
    "many statements": "a;\n" * 100_000,
}


@pytest.mark.parametrize("split", [split_postgresql, split_mysql], ids=["postgresql", "mysql"])
@pytest.mark.parametrize("script", list(_LARGE.values()), ids=list(_LARGE))
def test_splitting_takes_linear_time(split: Callable[[str], list[Piece]], script: str) -> None:
    started = time.process_time()
    split(script)
    # Linear: about 0.2 s for these 150-300 KB; the quadratic splitters took 5 to 28 s.
    assert time.process_time() - started < 3


def _cpu_seconds(split: Callable[[str], object], script: str) -> float:
    """The least CPU time of three runs (the others may have shared the CPU)."""
    times = []
    for _ in range(3):
        started = time.process_time()
        split(script)
        times.append(time.process_time() - started)
    return min(times)


def test_sqlite_splitting_takes_linear_time() -> None:
    small = _cpu_seconds(split_script, "a;\n" * 20_000)
    large = _cpu_seconds(split_script, "a;\n" * 80_000)
    assert large < 8 * max(small, 0.02)  # 4 times the text: 4 times the time, not 16


def test_sqlite_splits_a_nul_without_value_error() -> None:
    with contextlib.suppress(SeshatError):
        split_script("SELECT 1;\x00;")
