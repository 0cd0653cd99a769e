"""Fuzzing what a desired schema may hold (runner/sql/classify.py): desired SQL is hostile.

Whatever the text, classifying it ends in verdicts (or ``NotDeclarative``, or the SQLite
splitter's own ``SqlTextError``), never another exception; each statement that runs is the
splitter's own piece, changed only where the classifier says it changes one (a PostgreSQL
materialized view made ``WITH NO DATA``, a psql ``\\restrict`` line dropped); a refusal
names a line of the file and a short printable kind; and the opt-in only ever turns
procedural statements into ones that run."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from fuzz.fuzzkit import budget, hostile_text
from runner.engines.sqlite.sqltext import SqlTextError
from runner.sql.classify import NotDeclarative, declared, verdicts

_ALPHABET = "abE ;'\"`$_\\/*-#!@=,.()\n\t0"
_WORDS = [
    "CREATE",
    "TABLE",
    "MATERIALIZED VIEW",
    "AS",
    "SELECT",
    "SET",
    "sql_mode",
    "@@sql_mode",
    "@old",
    "NAMES",
    "ENGINE",
    "DATA DIRECTORY",
    "DO",
    "BEGIN",
    "END",
    "WITH DATA",
    "/*!50001",
    "/*M!999999",
    "*/",
    "\\restrict",
    "E'",
    "$$",
    "PRAGMA",
    "DELIMITER ;;",
]
_scripts = st.one_of(
    st.text(alphabet=_ALPHABET, max_size=300),
    st.lists(st.sampled_from(_WORDS) | st.text(_ALPHABET, max_size=6), max_size=40).map(" ".join),
    hostile_text,
)
_DIALECTS = st.sampled_from(["postgresql", "mysql", "sqlite"])
_MODES = st.sampled_from(["", "STRICT_TRANS_TABLES", "NO_BACKSLASH_ESCAPES", "ANSI,TRADITIONAL"])


@given(_DIALECTS, _scripts, _MODES)
@budget(400)
@example("postgresql", "\\restrict k\nCREATE MATERIALIZED VIEW v AS SELECT 1 WITH DATA", "")
@example("mysql", "/*!50001 SET @a = @@sql_mode */; SET sql_mode = @a;", "")
def test_classifying_any_text_ends_in_verdicts(dialect: str, script: str, mode: str) -> None:
    lines = script.count("\n") + 1
    try:
        judged = verdicts(dialect, script, sql_mode=mode)
    except SqlTextError:
        assert dialect == "sqlite"  # its splitter's own refusal: the desired schema is invalid
        return
    for line, verdict in judged:
        assert 1 <= line <= lines
        assert verdict.kind and verdict.kind.isprintable() and len(verdict.kind) <= 120
        if verdict.action == "run":
            changed = verdict.sql not in script
            assert not changed or (dialect == "postgresql" and "NO DATA" in verdict.sql)
    try:
        found = declared(dialect, [("x.sql", script)], sql_mode=mode)
    except NotDeclarative as refused:
        assert refused.line >= 1 and str(refused).startswith(f"x.sql:{refused.line}: ")
        return
    assert all(piece.sql for piece in found)


@given(_DIALECTS, _scripts)
@budget(300)
def test_the_opt_in_only_lets_procedural_statements_run(dialect: str, script: str) -> None:
    try:
        plain = verdicts(dialect, script)
    except SqlTextError:
        return
    opted = verdicts(dialect, script, procedural=True)
    assert len(plain) == len(opted)
    for (_, before), (_, after) in zip(plain, opted, strict=True):
        if before.action == "procedural":
            assert after.action == "run"
        elif before.action in ("outside", "skip"):
            assert after.action == before.action  # what reaches outside stays refused
        elif after.action != "run":
            # A restore from a variable a procedural statement could have overwritten since
            # it was saved is not taken on trust.
            assert dialect == "mysql" and after.kind.startswith("SET "), (before, after)
