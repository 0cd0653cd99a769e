"""What a desired schema may hold: each statement classified before anything runs.

A desired schema is declarations, not a program (DESIGN.md, "Engines": the first of the three
walls around the sandbox). Every statement of the desired files is classified by its leading
keywords, after leading comments, on the pieces the dialect's own splitter makes (the splitter
the sandbox loader uses: :func:`~runner.sql.split.split_postgresql`,
:func:`~runner.sql.split_mysql.split_mysql`, SQLite's
:func:`~runner.engines.sqlite.sqltext.split_script`), and lexed as the server lexes it
(:mod:`runner.sql.tokens`): PostgreSQL nests ``/* */``; MySQL's ``/*! ... */``,
``/*!NNNNN ... */`` and ``/*M!NNNNNN ... */`` are code (the server runs them, and mysqldump
writes them), ``#`` and ``--`` followed by a blank or a control character are comments. Each
statement is one of:

* **a declaration** (runs): CREATE, ALTER and DROP of schema objects, COMMENT ON, GRANT and
  REVOKE; a PostgreSQL materialized view is created ``WITH NO DATA`` (its query does not run);
* **a session setting** (runs): SET of a short allowlist with safe values, what
  ``pg_dump --schema-only`` and ``mysqldump --no-data`` write (pg_dump's
  ``SELECT pg_catalog.set_config('search_path', '', false)`` too). Settings that change how the
  server *lexes* text stay as the runner set them: PostgreSQL ``standard_conforming_strings``
  only ``on``, ``client_encoding`` only UTF8; MySQL character sets only ASCII-safe ones, an
  ``sql_mode`` only of allowlisted flags with the lexing flags (``ANSI_QUOTES``,
  ``NO_BACKSLASH_ESCAPES`` and the modes that imply them) exactly as the session had them, and
  ``SET x = @v`` only where ``@v`` was saved from ``@@x`` itself earlier in the same file;
* **skipped** (never sent): transaction control around a file (``BEGIN``, ``START
  TRANSACTION``, ``COMMIT``, ``END``), pg_dump's ``\\restrict`` lines, mysqldump's
  ``DO SETVAL(...)`` (a sequence's position is data) and its ``/*M!999999\\- ... */`` line;
* **procedural** (refused unless the declaration opts in with
  ``spec.policy.proceduralSchema: true``): DO blocks, CALL, queries and DML, CREATE TABLE AS,
  PREPARE/EXECUTE, maintenance (VACUUM, ANALYZE, ...), LOCK;
* **outside** (always refused): what reaches beyond the schema (roles, databases, tablespaces,
  servers, files, libraries, plugins, the server's configuration), the lexing settings above,
  and anything this module does not recognize;
* **superuser** (always refused, a declaration no sandbox can load): a PostgreSQL function
  declared ``LEAKPROOF``, which only a superuser may define, and the sandbox role never is one.

A refusal is :class:`NotDeclarative` (reason ``statement_not_declarative``), or
:class:`NeedsSuperuser` (``superuser_required``) for the last kind, naming the file, line and
kind of the first refused statement. The pieces that run are exactly the pieces that
were classified; the loaders send each as exactly one statement (PostgreSQL's extended query
protocol, MySQL without multi-statements, SQLite's ``execute``), so a statement the splitter
and the server read differently fails, and never runs a second statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, Literal

from runner.errors import SeshatError
from runner.sql.split import split_postgresql
from runner.sql.split_mysql import MysqlLexing, split_mysql
from runner.sql.tokens import (
    Token,
    Unreadable,
    mysql_tokens,
    postgresql_outer_words,
    postgresql_tokens,
    sqlite_tokens,
)

__all__ = [
    "MYSQL_CHARSETS",
    "MYSQL_ENGINES",
    "MYSQL_SQL_MODES",
    "REASON",
    "SQLITE_MODULES",
    "SQLITE_PRAGMAS",
    "SUPERUSER_REASON",
    "Classified",
    "NeedsSuperuser",
    "NotDeclarative",
    "Verdict",
    "classify",
    "declared",
    "leakproof_function",
    "materialized_without_data",
    "mysql_lexing",
    "verdicts",
]

REASON: Final = "statement_not_declarative"
SUPERUSER_REASON: Final = "superuser_required"


def _words(text: str) -> tuple[str, ...]:
    """The words of ``text``: the keyword tables below are written as one string each."""
    return tuple(text.split())


_HOLDS: Final = "a desired schema holds only CREATE/ALTER/DROP, COMMENT, GRANT/REVOKE and safe SET"
_OPT_IN: Final = (
    "; a declaration may let procedural statements run with spec.policy.proceduralSchema: "
    "true (seshat-runner --procedural-schema)"
)

Action = Literal["run", "skip", "procedural", "outside", "superuser"]


def _objects(action: Action, text: str) -> dict[tuple[str, ...], Action]:
    """An objects table's entries for the one-word kinds in ``text``, each with ``action``."""
    return {(word,): action for word in _words(text)}


def _firsts(action: Action, text: str) -> dict[str, tuple[Action, str]]:
    """A first-word table's entries for the words in ``text``: each with ``action``, and the
    statement's kind named by the word itself."""
    return {word: (action, word) for word in _words(text)}


class NotDeclarative(SeshatError):
    """A statement of the desired schema that may not run (see the module docstring)."""

    reason: ClassVar[str] = REASON

    def __init__(self, file: str, line: int, kind: str, procedural: bool, more: int) -> None:
        tail = _OPT_IN if procedural else ""
        others = f" ({more} more such statement{'s' if more != 1 else ''})" if more else ""
        super().__init__(
            f"{file}:{line}: {kind} is not a declaration ({REASON}): {_HOLDS}{tail}; "
            f"see docs/engine.md{others}"
        )
        self.file, self.line, self.kind, self.procedural = file, line, kind, procedural


class NeedsSuperuser(SeshatError):
    """A declaration only a superuser may make (a ``LEAKPROOF`` function): the sandbox that
    loads the desired schema never runs as one, so it cannot be planned."""

    reason: ClassVar[str] = SUPERUSER_REASON

    def __init__(self, file: str, line: int, kind: str, more: int) -> None:
        others = f" ({more} more refused statement{'s' if more != 1 else ''})" if more else ""
        super().__init__(
            f"{file}:{line}: {kind} needs a superuser ({SUPERUSER_REASON}): only a superuser "
            "may define a LEAKPROOF function, and the sandbox that loads a desired schema "
            "never runs as one; declare the function without LEAKPROOF; see docs/engine.md"
            f"{others}"
        )
        self.file, self.line, self.kind = file, line, kind


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one statement is: ``action`` and its ``kind`` (``CREATE TABLE``, ``DO block``);
    ``sql`` is the text that runs (a materialized view's, rewritten ``WITH NO DATA``)."""

    action: Action
    kind: str
    sql: str


@dataclass(frozen=True, slots=True)
class Classified:
    """A statement of a desired file that runs: where it is, its kind and its text."""

    file: str
    line: int
    kind: str
    sql: str


class _Words:
    """The statement's tokens, read from the front. Given the first few tokens and how to
    read them all (``whole``), it reads the rest only when asked past them: most statements
    of a large schema are decided by their leading keywords."""

    def __init__(self, tokens: list[Token], whole: Callable[[], list[Token]] | None = None) -> None:
        self.tokens = tokens
        self.at = 0
        self._whole = whole

    def _reach(self, index: int) -> None:
        if index >= len(self.tokens) and self._whole is not None:
            self.tokens, self._whole = self._whole(), None

    def all(self) -> list[Token]:
        """Every token of the statement."""
        self._reach(len(self.tokens))
        return self.tokens

    def word(self, offset: int = 0) -> str:
        """The keyword at ``offset`` from the reading position (empty if not a word)."""
        index = self.at + offset
        self._reach(index)
        if index < len(self.tokens) and self.tokens[index].kind == "word":
            return self.tokens[index].value
        return ""

    def take(self, *words: str) -> bool:
        """Read ``words`` if they come next."""
        if all(self.word(k) == w for k, w in enumerate(words)):
            self.at += len(words)
            return True
        return False

    def take_symbol(self, value: str) -> bool:
        """Read the symbol ``value`` if it comes next."""
        self._reach(self.at)
        token = self.tokens[self.at] if self.at < len(self.tokens) else None
        if token is not None and token.kind == "symbol" and token.value == value:
            self.at += 1
            return True
        return False

    def skip(self, *words: str) -> None:
        while any(self.take(word) for word in words):
            pass

    def rest(self) -> list[Token]:
        return self.all()[self.at :]


def _phrase(words: _Words, table: dict[tuple[str, ...], Action]) -> tuple[str, Action] | None:
    """The longest phrase of ``table`` that comes next (read), with its action."""
    for size in (4, 3, 2, 1):
        phrase = tuple(words.word(k) for k in range(size))
        if all(phrase) and phrase in table:
            words.at += size
            return " ".join(phrase), table[phrase]
    return None


def _named_object(
    words: _Words, first: str, table: dict[tuple[str, ...], Action], sql: str
) -> tuple[str, Verdict]:
    """What a CREATE, ALTER or DROP (``first``) names next, read with ``table``: the phrase
    and the statement's verdict by it alone, ``<first> <phrase>`` with the phrase's action; a
    phrase the table does not hold is ``""`` and outside, named by the word that came."""
    found = _phrase(words, table)
    if found is None:
        return "", Verdict("outside", f"{first} {_shown(words.word() or '...')}", sql)
    phrase, action = found
    return phrase, Verdict(action, f"{first} {phrase}", sql)


def _values(tokens: Sequence[Token]) -> list[Token]:
    """A SET's value tokens, without a trailing semicolon."""
    return [t for t in tokens if not (t.kind == "symbol" and t.value == ";")]


def _one(tokens: Sequence[Token]) -> str | None:
    """The single word, name, string or number a value is, lower case; None otherwise."""
    values = _values(tokens)
    if len(values) == 1 and values[0].kind in ("word", "name", "string", "number"):
        return values[0].value.lower()
    return None


# -- PostgreSQL ------------------------------------------------------------------------------

_PG_OBJECTS: Final[dict[tuple[str, ...], Action]] = {
    **_objects(
        "run",
        "TABLE INDEX VIEW SEQUENCE TYPE DOMAIN FUNCTION PROCEDURE ROUTINE AGGREGATE OPERATOR "
        "TRIGGER RULE POLICY SCHEMA EXTENSION COLLATION CAST CONVERSION STATISTICS TRANSFORM",
    ),
    ("MATERIALIZED", "VIEW"): "run",
    ("OPERATOR", "CLASS"): "run",
    ("OPERATOR", "FAMILY"): "run",
    ("DEFAULT", "PRIVILEGES"): "run",
    **{
        ("TEXT", "SEARCH", what): "run"
        for what in ("CONFIGURATION", "DICTIONARY", "PARSER", "TEMPLATE")
    },
    **_objects(
        "outside",
        "DATABASE ROLE USER GROUP TABLESPACE SERVER SUBSCRIPTION PUBLICATION LANGUAGE SYSTEM OWNED",
    ),
    ("FOREIGN", "DATA", "WRAPPER"): "outside",
    ("FOREIGN", "TABLE"): "outside",
    ("USER", "MAPPING"): "outside",
    ("EVENT", "TRIGGER"): "outside",
    ("ACCESS", "METHOD"): "outside",
    ("LARGE", "OBJECT"): "outside",
}
"""What follows CREATE, ALTER or DROP (after its modifiers), and whether it may run."""

_PG_MODIFIERS: Final = _words(
    "OR REPLACE GLOBAL LOCAL TEMP TEMPORARY UNLOGGED UNIQUE DEFAULT TRUSTED PROCEDURAL CONSTRAINT "
    "RECURSIVE"
)

_PG_COMMENT_OUTSIDE: Final = frozenset(
    _words(
        "DATABASE ROLE TABLESPACE SERVER SUBSCRIPTION PUBLICATION LANGUAGE LARGE "
        "ACCESS EVENT FOREIGN"
    )
)

_PG_FIRST: Final[dict[str, tuple[Action, str]]] = {
    **_firsts(
        "procedural",
        "CALL INSERT UPDATE DELETE MERGE TRUNCATE VALUES TABLE EXPLAIN SHOW PREPARE EXECUTE "
        "DEALLOCATE DECLARE FETCH MOVE CLOSE LISTEN NOTIFY UNLISTEN VACUUM ANALYZE ANALYSE "
        "CLUSTER REINDEX LOCK REFRESH",
    ),
    "DO": ("procedural", "DO block"),
    "WITH": ("procedural", "WITH query"),
    "SELECT": ("procedural", "SELECT"),
    **_firsts("outside", "COPY LOAD CHECKPOINT DISCARD RESET ABORT ROLLBACK SAVEPOINT RELEASE"),
    "REASSIGN": ("outside", "REASSIGN OWNED"),
    "SECURITY": ("outside", "SECURITY LABEL"),
    "IMPORT": ("outside", "IMPORT FOREIGN SCHEMA"),
    "BEGIN": ("skip", "BEGIN"),
    "START": ("skip", "START TRANSACTION"),
    "END": ("skip", "END"),
    "COMMIT": ("skip", "COMMIT"),
    "GRANT": ("run", "GRANT"),
    "REVOKE": ("run", "REVOKE"),
}


def _duration(value: str | None) -> bool:
    return value is not None and re.fullmatch(r"[0-9]+\s*(?:us|ms|s|min|h|d)?", value) is not None


def _boolean(value: str | None) -> bool:
    return value in ("on", "off", "true", "false", "yes", "no", "1", "0")


def _one_of(*allowed: str) -> Callable[[Sequence[Token]], bool]:
    return lambda tokens: _one(tokens) in allowed


_PG_LEVELS: Final = _words("debug5 debug4 debug3 debug2 debug1 debug log info notice warning error")


def _pg_names(tokens: Sequence[Token]) -> bool:
    """A list of names (search_path): words, quoted names or strings, between commas."""
    values = _values(tokens)
    if not values:
        return False
    for index, token in enumerate(values):
        expected = ("word", "name", "string") if index % 2 == 0 else ("symbol",)
        if token.kind not in expected or (token.kind == "symbol" and token.value != ","):
            return False
        if token.kind == "word" and token.value == "DEFAULT":
            return False
    return len(values) % 2 == 1


def _pg_name(tokens: Sequence[Token]) -> bool:
    values = _values(tokens)
    return len(values) == 1 and _pg_names(values)


_PG_SETTINGS: Final[dict[str, Callable[[Sequence[Token]], bool]]] = {
    "statement_timeout": lambda t: _duration(_one(t)),
    "lock_timeout": lambda t: _duration(_one(t)),
    "idle_in_transaction_session_timeout": lambda t: _duration(_one(t)),
    "transaction_timeout": lambda t: _duration(_one(t)),
    "client_encoding": _one_of("utf8", "utf-8", "unicode"),
    "standard_conforming_strings": _one_of("on", "true", "yes", "1"),
    "check_function_bodies": lambda t: _boolean(_one(t)),
    "escape_string_warning": lambda t: _boolean(_one(t)),
    "row_security": lambda t: _boolean(_one(t)),
    "xmloption": _one_of("content", "document"),
    "client_min_messages": _one_of(*_PG_LEVELS),
    "default_with_oids": _one_of("off", "false", "no", "0"),
    "default_tablespace": _pg_name,
    "default_table_access_method": _pg_name,
    "search_path": _pg_names,
}
"""The session settings a desired PostgreSQL schema may set, and the values each may take:
what pg_dump writes, with the two that change lexing fixed (client_encoding, standard
conforming strings)."""

_PG_ALIASES: Final = {"NAMES": "client_encoding", "SCHEMA": "search_path"}


def _pg_set(words: _Words) -> tuple[Action, str]:
    words.take("SESSION") or words.take("LOCAL")
    if words.take("ROLE"):
        return "outside", "SET ROLE"
    if words.take("SESSION", "AUTHORIZATION") or words.take("AUTHORIZATION"):
        return "outside", "SET SESSION AUTHORIZATION"
    for phrase in (("TRANSACTION",), ("CONSTRAINTS",), ("TIME", "ZONE"), ("CHARACTERISTICS",)):
        if words.take(*phrase):
            return "outside", f"SET {' '.join(phrase)}"
    rest = words.rest()
    if words.take("XML", "OPTION"):
        name, value = "xmloption", words.rest()
    elif rest and rest[0].kind == "word" and rest[0].value in _PG_ALIASES:
        name, value = _PG_ALIASES[rest[0].value], rest[1:]
    elif rest and rest[0].kind in ("word", "name"):
        name, value = rest[0].value.lower(), rest[1:]
        if len(value) > 1 and value[0].kind == "symbol" and value[0].value == ".":
            return "outside", f"SET {_shown(name)}.{_shown(value[1].value.lower())}"
        if not value or value[0].value not in ("=", "TO"):
            return "outside", f"SET {_shown(name)}"
        value = value[1:]
    else:
        return "outside", "SET"
    check = _PG_SETTINGS.get(name)
    if check is None:
        return "outside", f"SET {_shown(name)}"
    if not check(value):
        return "outside", f"SET {name} to a value other than the safe ones"
    return "run", f"SET {name}"


_SET_CONFIG: Final = re.compile(
    r"\s*SELECT\s+(?:pg_catalog\s*\.\s*)?set_config\s*\(\s*'search_path'\s*,\s*'[^'\\]*'\s*,"
    r"\s*false\s*\)\s*;?\s*",
    re.IGNORECASE,
)


def _pg_set_config(sql: str, tokens: list[Token]) -> bool:
    """pg_dump's ``SELECT pg_catalog.set_config('search_path', '', false)``, and no more."""
    start = tokens[0].start
    return _SET_CONFIG.fullmatch(sql, start, tokens[-1].end) is not None


def _pg_materialized(sql: str, tokens: list[Token]) -> str:
    """``sql`` (a CREATE MATERIALIZED VIEW) made ``WITH NO DATA``: a trailing ``WITH DATA``
    replaced, else the clause added on a line of its own (after any trailing comment)."""
    code = [t for t in tokens if not (t.kind == "symbol" and t.value == ";")]

    def ends(*words: str) -> bool:
        last = code[-len(words) :]
        return len(last) == len(words) and all(
            t.kind == "word" and t.depth == 0 and t.value == w
            for t, w in zip(last, words, strict=True)
        )

    if ends("WITH", "NO", "DATA"):
        return sql
    if ends("WITH", "DATA"):
        return sql[: code[-2].start] + "WITH NO DATA" + sql[code[-1].end :]
    end = code[-1].end
    return sql[:end] + "\nWITH NO DATA" + sql[end:]


def materialized_without_data(sql: str) -> str:
    """A PostgreSQL ``CREATE MATERIALIZED VIEW`` as the classifier lets it run: created
    ``WITH NO DATA``, so its query never runs (a dry run may use it for the same reason)."""
    tokens = postgresql_tokens(sql)
    return _pg_materialized(sql, tokens) if tokens else sql


def _pg_restrict(sql: str, tokens: list[Token]) -> int | None:
    """Where the text after a leading psql ``\\restrict KEY`` / ``\\unrestrict KEY`` line
    starts (pg_dump 15.14 and later writes them around a dump); None without one."""
    if (
        len(tokens) >= 2
        and tokens[0].value == "\\"
        and tokens[1].kind == "word"
        and tokens[1].value in ("RESTRICT", "UNRESTRICT")
        and tokens[1].start == tokens[0].end
    ):
        end = sql.find("\n", tokens[1].end)
        return len(sql) if end < 0 else end + 1
    return None


_AS_WORD: Final = re.compile(r"\bas\b", re.IGNORECASE)
_LANGUAGE_WORD: Final = re.compile(r"\blanguage\b", re.IGNORECASE)
_LEAKPROOF_WORD: Final = re.compile(r"\bleakproof\b", re.IGNORECASE)
"""Cheap tests before reading a whole statement: the words ``AS`` and ``LANGUAGE`` as the
lexer reads them are always words to these expressions too (every character that continues
a PostgreSQL name is a word character here), so a statement without one has no such token."""


def _postgresql(sql: str, session: _Session) -> Verdict:
    tokens = postgresql_tokens(sql, limit=12)
    if not tokens:
        return Verdict("skip", "comment", sql)
    after = _pg_restrict(sql, tokens)
    if after is not None:
        rest = sql[after:].lstrip()
        verdict = _postgresql(rest, session)
        return verdict if verdict.action != "skip" else Verdict("skip", "psql \\restrict", "")
    words = _Words(tokens, lambda: postgresql_tokens(sql))
    first = words.word()
    if first in ("CREATE", "ALTER", "DROP"):
        words.at += 1
        # DEFAULT PRIVILEGES is read before DEFAULT is skipped as a modifier.
        phrase, verdict = _named_object(words, first, _PG_OBJECTS, sql)
        if not phrase:
            words.skip(*_PG_MODIFIERS)
            phrase, verdict = _named_object(words, first, _PG_OBJECTS, sql)
        if verdict.action != "run":
            return verdict
        kind = verdict.kind
        table = first == "CREATE" and phrase == "TABLE"
        if table and _AS_WORD.search(sql) and "AS" in postgresql_outer_words(sql):
            return Verdict("procedural", "CREATE TABLE AS", sql)  # CREATE TABLE ... AS query
        if (
            first == "CREATE"
            and phrase in ("FUNCTION", "PROCEDURE")
            and _LANGUAGE_WORD.search(sql)
            and _pg_c_language(words)
        ):
            return Verdict("outside", f"{kind} in LANGUAGE C (a shared library)", sql)
        if phrase == "FUNCTION" and _LEAKPROOF_WORD.search(sql):
            name = _pg_leakproof(sql, words)
            if name is not None:
                return Verdict("superuser", f"{kind} {name} LEAKPROOF", sql)
        if first == "CREATE" and phrase == "MATERIALIZED VIEW" and not session.procedural:
            return Verdict("run", kind, _pg_materialized(sql, words.all()))
        return Verdict("run", kind, sql)
    if first == "COMMENT":
        words.take("COMMENT", "ON")
        target = words.word()
        if target in _PG_COMMENT_OUTSIDE:
            return Verdict("outside", f"COMMENT ON {target}", sql)
        return Verdict("run", "COMMENT ON", sql)
    if first == "SET":
        words.at += 1
        action, kind = _pg_set(words)
        return Verdict(action, kind, sql)
    if first == "SELECT" and _pg_set_config(sql, words.all()):
        return Verdict("run", "SELECT set_config('search_path', ...)", sql)
    if first == "PREPARE" and words.word(1) == "TRANSACTION":
        return Verdict("outside", "PREPARE TRANSACTION", sql)
    if first == "COMMIT" and words.word(1) == "PREPARED":
        return Verdict("outside", "COMMIT PREPARED", sql)
    if first == "START" and words.word(1) != "TRANSACTION":
        return Verdict("outside", "START", sql)
    if first == "BEGIN" and words.word(1) == "ATOMIC":
        return Verdict("outside", "BEGIN ATOMIC (outside a function body)", sql)
    if first in _PG_FIRST:
        action, kind = _PG_FIRST[first]
        if first == "REFRESH":
            kind = "REFRESH MATERIALIZED VIEW"
        return Verdict(action, kind, sql)
    return Verdict("outside", _unknown(tokens), sql)


def _as_query(words: _Words) -> bool:
    """Whether a SQLite CREATE TABLE is ``CREATE TABLE ... AS query``: an ``AS`` outside
    the parentheses of its definitions."""
    return any(t.kind == "word" and t.value == "AS" and t.depth == 0 for t in words.rest())


def _pg_leakproof(sql: str, words: _Words) -> str | None:
    """The name (as written) of the function a CREATE or ALTER FUNCTION declares
    ``LEAKPROOF`` (not ``NOT LEAKPROOF``; a body is a string, so a word in it does not count);
    None when it does not."""
    rest = words.rest()
    marked = any(
        token.kind == "word"
        and token.value == "LEAKPROOF"
        and token.depth == 0
        and not (index and rest[index - 1].kind == "word" and rest[index - 1].value == "NOT")
        for index, token in enumerate(rest)
    )
    if not marked or not rest:
        return None
    end = 1
    while end + 1 < len(rest) and rest[end].kind == "symbol" and rest[end].value == ".":
        end += 2
    return sql[rest[0].start : rest[end - 1].end]


def leakproof_function(sql: str) -> str | None:
    """The name of the function ``sql`` (one PostgreSQL statement) declares ``LEAKPROOF``,
    which only a superuser may do; None when it declares none."""
    if not _LEAKPROOF_WORD.search(sql):
        return None
    verdict = _postgresql(sql, _session(False, ""))
    return verdict.kind if verdict.action == "superuser" else None


def _pg_c_language(words: _Words) -> bool:
    """Whether a CREATE FUNCTION names ``LANGUAGE c`` (code loaded from a shared library)."""
    rest = words.rest()
    for index, token in enumerate(rest[:-1]):
        if token.kind == "word" and token.value == "LANGUAGE" and token.depth == 0:
            following = rest[index + 1]
            if following.kind in ("word", "name", "string") and following.value.lower() == "c":
                return True
    return False


# -- MySQL and MariaDB ----------------------------------------------------------------------

_MY_OBJECTS: Final[dict[tuple[str, ...], Action]] = {
    **_objects("run", "TABLE INDEX VIEW TRIGGER PROCEDURE FUNCTION EVENT SEQUENCE"),
    **_objects("outside", "DATABASE SCHEMA USER ROLE SERVER TABLESPACE LOGFILE INSTANCE PACKAGE"),
    ("PREPARE",): "procedural",
    ("RESOURCE", "GROUP"): "outside",
    ("SPATIAL", "REFERENCE", "SYSTEM"): "outside",
}

_MY_MODIFIERS: Final = _words(
    "OR REPLACE TEMPORARY UNIQUE FULLTEXT SPATIAL VECTOR ONLINE OFFLINE IGNORE AGGREGATE"
)

_MY_FIRST: Final[dict[str, tuple[Action, str]]] = {
    **_firsts(
        "procedural",
        "CALL INSERT REPLACE UPDATE DELETE TRUNCATE SELECT VALUES TABLE PREPARE EXECUTE "
        "DEALLOCATE HANDLER SHOW DESCRIBE DESC EXPLAIN ANALYZE OPTIMIZE REPAIR CHECK CHECKSUM "
        "SIGNAL RESIGNAL GET LOCK UNLOCK",
    ),
    "WITH": ("procedural", "WITH query"),
    "DO": ("procedural", "DO"),
    **_firsts(
        "outside",
        "LOAD INSTALL UNINSTALL KILL SHUTDOWN FLUSH RESET PURGE CHANGE STOP BINLOG CACHE "
        "BACKUP CLONE IMPORT HELP XA ROLLBACK SAVEPOINT RELEASE",
    ),
    "GRANT": ("run", "GRANT"),
    "REVOKE": ("run", "REVOKE"),
    "USE": ("run", "USE"),
    "COMMIT": ("skip", "COMMIT"),
}

MYSQL_ENGINES: Final = frozenset(
    _words(
        "INNODB MYISAM ARIA MEMORY HEAP CSV ARCHIVE BLACKHOLE MERGE MRG_MYISAM "
        "SEQUENCE ROCKSDB MROONGA"
    )
)
"""Storage engines a desired MySQL table may name: each keeps its data in the server's own
data folder. CONNECT, FEDERATED(X), SPIDER and S3 reach files or other servers, OQGRAPH and
COLUMNSTORE are plugins a sandbox does not load: refused, as is any engine not listed."""

_MY_COLUMN_FOLLOWERS: Final = frozenset(
    _words(
        "TO AFTER FIRST SET DROP ASC DESC INT INTEGER TINYINT SMALLINT MEDIUMINT "
        "BIGINT DECIMAL DEC NUMERIC FIXED FLOAT DOUBLE REAL BIT BOOL BOOLEAN SERIAL "
        "DATE DATETIME TIMESTAMP TIME YEAR CHAR VARCHAR BINARY VARBINARY TINYBLOB "
        "BLOB MEDIUMBLOB LONGBLOB TINYTEXT TEXT MEDIUMTEXT LONGTEXT ENUM JSON "
        "GEOMETRY POINT LINESTRING POLYGON MULTIPOINT MULTILINESTRING MULTIPOLYGON "
        "GEOMETRYCOLLECTION NATIONAL NCHAR NVARCHAR CHARACTER LONG UUID INET4 INET6 VECTOR "
        "INT1 INT2 INT3 INT4 INT8 MIDDLEINT FLOAT4 FLOAT8"
    )
)
"""Words after ``ENGINE`` that make it a column's name, not the table option (``engine
varchar(20)``, ``RENAME COLUMN engine TO motor``)."""

_MY_COLUMN_LEADERS: Final = frozenset(
    {"ADD", "COLUMN", "CHANGE", "MODIFY", "DROP", "ALTER", "RENAME", "AFTER", "BY"}
)
"""Words before ``ENGINE`` that make it a column's name (``ADD COLUMN engine int``)."""

MYSQL_CHARSETS: Final = frozenset({"utf8", "utf8mb3", "utf8mb4", "latin1", "ascii", "binary"})
"""Client character sets a desired schema may set: every byte below 0x80 is the ASCII
character in each, so a quote or a backslash is never the second byte of another character
(as it can be in gbk, sjis or big5, which would let the server read strings differently)."""

MYSQL_SQL_MODES: Final = frozenset(
    _words(
        "REAL_AS_FLOAT PIPES_AS_CONCAT IGNORE_SPACE IGNORE_BAD_TABLE_OPTIONS "
        "ONLY_FULL_GROUP_BY NO_UNSIGNED_SUBTRACTION NO_DIR_IN_CREATE NO_KEY_OPTIONS "
        "NO_TABLE_OPTIONS NO_FIELD_OPTIONS NO_AUTO_VALUE_ON_ZERO STRICT_TRANS_TABLES "
        "STRICT_ALL_TABLES NO_ZERO_IN_DATE NO_ZERO_DATE ALLOW_INVALID_DATES "
        "ERROR_FOR_DIVISION_BY_ZERO TRADITIONAL NO_AUTO_CREATE_USER "
        "HIGH_NOT_PRECEDENCE NO_ENGINE_SUBSTITUTION PAD_CHAR_TO_FULL_LENGTH "
        "EMPTY_STRING_IS_NULL SIMULTANEOUS_ASSIGNMENT TIME_ROUND_FRACTIONAL "
        "TIME_TRUNCATE_FRACTIONAL"
    )
)
"""``sql_mode`` flags a desired schema may set. Not listed, so never gained: ANSI_QUOTES and
NO_BACKSLASH_ESCAPES (they change how the server reads quotes), and the modes that imply
ANSI_QUOTES (ANSI, ORACLE, MSSQL, DB2, POSTGRESQL, MAXDB)."""

_IMPLIES_ANSI_QUOTES: Final = frozenset(
    {"ANSI_QUOTES", "ANSI", "ORACLE", "MSSQL", "DB2", "POSTGRESQL", "MAXDB"}
)


def _mode_flags(mode: str) -> frozenset[str]:
    return frozenset(flag.strip().upper() for flag in mode.split(",") if flag.strip())


def mysql_lexing(sql_mode: str) -> MysqlLexing:
    """How a session with ``sql_mode`` reads quotes."""
    flags = _mode_flags(sql_mode)
    return MysqlLexing(
        backslash_escapes="NO_BACKSLASH_ESCAPES" not in flags,
        ansi_quotes=bool(flags & _IMPLIES_ANSI_QUOTES),
    )


def _my_flag_value(tokens: Sequence[Token]) -> str | None:
    """An sql_mode value: one string, or words and names between commas; None otherwise."""
    values = _values(tokens)
    if len(values) == 1 and values[0].kind in ("string", "word", "name"):
        return values[0].value
    if values and all(
        (t.kind in ("word", "name") if k % 2 == 0 else t.value == ",") for k, t in enumerate(values)
    ):
        return ",".join(t.value for t in values if t.kind != "symbol")
    return None


def _my_collation(value: str | None) -> bool:
    return value is not None and (
        value == "binary" or any(value.startswith(f"{c}_") for c in MYSQL_CHARSETS)
    )


def _my_time_zone(value: str | None) -> bool:
    return value is not None and (
        re.fullmatch(r"[+-][0-9]{1,2}:[0-9]{2}", value) is not None
        or re.fullmatch(r"[a-z][a-z0-9_/+-]{0,63}", value) is not None
    )


def _my_sql_mode(tokens: Sequence[Token], session: _Session) -> bool:
    value = _my_flag_value(tokens)
    if value is None:
        return False
    flags = _mode_flags(value)
    if "DEFAULT" in flags or not flags <= (MYSQL_SQL_MODES | session.initial_flags):
        return False
    return mysql_lexing(value) == session.lexing


_MY_SETTINGS: Final[dict[str, Callable[[Sequence[Token], _Session], bool]]] = {
    "character_set_client": lambda t, _: _one(t) in MYSQL_CHARSETS,
    "character_set_connection": lambda t, _: _one(t) in MYSQL_CHARSETS,
    "character_set_results": lambda t, _: _one(t) in MYSQL_CHARSETS | {"null"},
    "collation_connection": lambda t, _: _my_collation(_one(t)),
    "time_zone": lambda t, _: _my_time_zone(_one(t)),
    "unique_checks": lambda t, _: _boolean(_one(t)),
    "foreign_key_checks": lambda t, _: _boolean(_one(t)),
    "sql_notes": lambda t, _: _boolean(_one(t)),
    "sql_quote_show_create": lambda t, _: _boolean(_one(t)),
    "note_verbosity": lambda t, _: _my_flag_value(t) is not None or _one(t) is not None,
    "default_storage_engine": lambda t, _: (_one(t) or "").upper() in MYSQL_ENGINES,
    "storage_engine": lambda t, _: (_one(t) or "").upper() in MYSQL_ENGINES,
    "sql_mode": _my_sql_mode,
}
"""The session variables a desired MySQL schema may set, and the values each may take: what
mysqldump writes (and the default engine, within :data:`MYSQL_ENGINES`)."""


def _split_commas(tokens: Sequence[Token]) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    for token in _values(tokens):
        if token.kind == "symbol" and token.value == "," and token.depth == tokens[0].depth:
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def _my_set(words: _Words, session: _Session) -> tuple[Action, str]:
    rest = words.rest()
    if not rest:
        return "outside", "SET"
    head = words.word()
    for phrase in (
        ("PASSWORD",),
        ("ROLE",),
        ("DEFAULT", "ROLE"),
        ("TRANSACTION",),
        ("GLOBAL",),
        ("PERSIST",),
        ("PERSIST_ONLY",),
        ("STATEMENT",),
        ("SESSION", "TRANSACTION"),
    ):
        if words.take(*phrase):
            return "outside", f"SET {' '.join(phrase)}"
    if head == "NAMES":
        values = [t for t in _values(rest[1:]) if t.kind != "word" or t.value != "COLLATE"]
        ok = bool(values) and values[0].value.lower() in MYSQL_CHARSETS
        ok = ok and all(_my_collation(t.value.lower()) for t in values[1:]) and len(values) <= 2
        return ("run", "SET NAMES") if ok else ("outside", "SET NAMES of an unsafe character set")
    if head in ("CHARSET", "CHARACTER"):
        values = _values(rest[2:] if head == "CHARACTER" else rest[1:])
        ok = len(values) == 1 and values[0].value.lower() in MYSQL_CHARSETS
        return ("run", "SET CHARACTER SET") if ok else ("outside", "SET CHARACTER SET (unsafe)")
    kinds: list[str] = []
    for part in _split_commas(rest):
        action, kind = _my_assignment(part, session)
        if action != "run":
            return action, kind
        kinds.append(kind.removeprefix("SET "))
    return "run", "SET " + ", ".join(dict.fromkeys(kinds))


def _my_assignment(part: list[Token], session: _Session) -> tuple[Action, str]:
    """One ``target = value`` of a SET; a user variable saved from a system one is
    remembered (restoring it later is allowed), others are not."""
    tokens = list(part)
    if tokens and tokens[0].kind == "word" and tokens[0].value in ("SESSION", "LOCAL"):
        tokens = tokens[1:]
    if len(tokens) < 3 or tokens[1].value not in ("=", ":"):
        return "outside", "SET"
    value = tokens[3:] if tokens[1].value == ":" and tokens[2].value == "=" else tokens[2:]
    target = tokens[0]
    if target.kind == "variable":
        source = _values(value)
        if len(source) == 1 and source[0].kind == "sysvar":
            scope, _, name = source[0].value.rpartition(".")
            if scope in ("", "session", "local"):
                session.saved[target.value] = name
                return "run", "SET @variable = @@variable"
        session.saved.pop(target.value, None)
        return "procedural", "SET of a user variable"
    if target.kind == "sysvar":
        scope, _, name = target.value.rpartition(".")
        if scope not in ("", "session", "local"):
            return "outside", f"SET @@{_shown(scope)}"
    elif target.kind in ("word", "name"):
        name = target.value.lower()
    else:
        return "outside", "SET"
    check = _MY_SETTINGS.get(name)
    if check is None:
        return "outside", f"SET {_shown(name)}"
    source = _values(value)
    if len(source) == 1 and source[0].kind == "variable":
        if session.saved.get(source[0].value) == name:
            return "run", f"SET {name}"
        return "outside", f"SET {name} from a variable not saved from @@{name}"
    if _one(source) == "default" or not check(value, session):
        return "outside", f"SET {name} to a value other than the safe ones"
    return "run", f"SET {name}"


def _my_skip_definer(words: _Words) -> None:
    """``DEFINER = user@host`` (or ``CURRENT_USER``), ``ALGORITHM = x``, ``SQL SECURITY x``."""
    while True:
        if words.take("DEFINER"):
            words.take_symbol("=")
            words.at += 1  # the user: a name, string or word (CURRENT_USER)
            if words.take_symbol("("):
                words.take_symbol(")")
            rest = words.rest()
            if rest and rest[0].kind == "variable":
                words.at += 1  # @host
        elif words.take("ALGORITHM"):
            words.take_symbol("=")
            words.at += 1
        elif words.take("SQL", "SECURITY"):
            words.at += 1
        elif not any(words.take(word) for word in _MY_MODIFIERS):
            return


def _my_engine(tokens: Sequence[Token], index: int) -> str | None:
    """The engine an ``ENGINE`` table option at ``tokens[index]`` names (upper case), or None
    where the word is a column's name (see :data:`_MY_COLUMN_FOLLOWERS`)."""
    before = tokens[index - 1] if index else None
    if before is not None and tokens[index].depth > 0 and before.value in ("(", ","):
        return None  # the first word of a column's definition
    if before is not None and before.kind == "word" and before.value in _MY_COLUMN_LEADERS:
        return None  # ALTER TABLE ... ADD COLUMN engine ...
    following = tokens[index + 1 : index + 3]
    if following and following[0].value == "=":
        named = following[1:]
        return named[0].value.upper() if named else ""
    if not following or following[0].kind not in ("word", "name", "string"):
        return None
    if following[0].kind == "word" and following[0].value in _MY_COLUMN_FOLLOWERS:
        return None
    return following[0].value.upper()


_MY_QUERIES: Final = frozenset({"SELECT", "WITH", "VALUES", "TABLE"})


def _my_table(tokens: list[Token], create: bool) -> tuple[Action, str] | None:
    """What refuses a CREATE or ALTER TABLE: a query (``CREATE TABLE ... SELECT``), a table
    in files outside the server's data folder (``DATA DIRECTORY``, ``INDEX DIRECTORY``, in
    the table or a partition), an engine not in :data:`MYSQL_ENGINES`; None for none."""
    first_group = True
    for index, token in enumerate(tokens):
        word = token.value if token.kind == "word" else ""
        if word == "DIRECTORY" and index and tokens[index - 1].value in ("DATA", "INDEX"):
            return "outside", f"{tokens[index - 1].value} DIRECTORY table option"
        if word == "ENGINE":
            engine = _my_engine(tokens, index)
            if engine is not None and engine not in MYSQL_ENGINES:
                return "outside", f"ENGINE={_shown(engine)} (a storage engine not allowed)"
        if not create:
            continue
        if word == "SELECT" or (
            token.depth == 0 and word in ("AS", "VALUES", "TABLE", "IGNORE", "REPLACE")
        ):
            return "procedural", "CREATE TABLE ... SELECT"
        if token.kind == "symbol" and token.value == "(" and token.depth == 0 and first_group:
            first_group = False  # the definitions, or a query in parentheses
            inner = tokens[index + 1] if index + 1 < len(tokens) else None
            if inner is not None and inner.kind == "word" and inner.value in _MY_QUERIES:
                return "procedural", "CREATE TABLE ... SELECT"
    return None


def _mysql(sql: str, session: _Session) -> Verdict:
    tokens = mysql_tokens(sql, session.lexing)
    if not tokens:
        return Verdict("skip", "comment", sql)
    words = _Words(tokens)
    first = words.word()
    if first in ("CREATE", "ALTER", "DROP"):
        words.at += 1
        _my_skip_definer(words)
        phrase, verdict = _named_object(words, first, _MY_OBJECTS, sql)
        if verdict.action != "run":
            return verdict
        kind = verdict.kind
        if any(t.kind == "word" and t.value == "SONAME" for t in words.rest()):
            return Verdict("outside", f"{kind} ... SONAME (a shared library)", sql)
        if phrase == "TABLE":
            refused = _my_table(words.rest(), create=first == "CREATE")
            if refused is not None:
                return Verdict(refused[0], refused[1], sql)
        return Verdict("run", kind, sql)
    if first == "RENAME":
        if words.word(1) == "TABLE":
            return Verdict("run", "RENAME TABLE", sql)
        return Verdict("outside", f"RENAME {_shown(words.word(1) or '...')}", sql)
    if first == "SET":
        words.at += 1
        action, kind = _my_set(words, session)
        return Verdict(action, kind, sql)
    if first == "DO" and _my_setval(tokens):
        return Verdict("skip", "DO SETVAL", sql)
    if first == "BEGIN":
        if words.word(1) == "NOT":
            return Verdict("procedural", "BEGIN NOT ATOMIC block", sql)
        return Verdict("skip", "BEGIN", sql)
    if first == "START":
        if words.word(1) == "TRANSACTION":
            return Verdict("skip", "START TRANSACTION", sql)
        return Verdict("outside", f"START {_shown(words.word(1) or '...')}", sql)
    if first in _MY_FIRST:
        action, kind = _MY_FIRST[first]
        return Verdict(action, kind, sql)
    return Verdict("outside", _unknown(tokens), sql)


def _my_setval(tokens: list[Token]) -> bool:
    """mysqldump's ``DO SETVAL(seq, n, 0)``: a sequence's position, which a schema does not
    hold (skipped, never run)."""
    values = _values(tokens)
    shape = [t.kind if t.kind != "symbol" else t.value for t in values]
    return (
        len(values) >= 8
        and values[1].value == "SETVAL"
        and shape[2] == "("
        and shape[3] in ("name", "word")
        and shape[-1] == ")"
        and all(s in ("number", ",", "word") for s in shape[4:-1])
    )


# -- SQLite -----------------------------------------------------------------------------------

_SQLITE_OBJECTS: Final[dict[tuple[str, ...], Action]] = {
    ("TABLE",): "run",
    ("INDEX",): "run",
    ("VIEW",): "run",
    ("TRIGGER",): "run",
    ("VIRTUAL", "TABLE"): "run",
}

SQLITE_MODULES: Final = frozenset({"fts3", "fts4", "fts5", "rtree", "rtree_i32", "geopoly"})
"""Virtual table modules a desired SQLite schema may use (built into SQLite; none reads a
file)."""

SQLITE_PRAGMAS: Final = frozenset(
    {"foreign_keys", "defer_foreign_keys", "encoding", "user_version", "application_id"}
)
"""Pragmas a desired SQLite schema may set (``sqlite3 .dump`` writes ``foreign_keys``); never
those that change how the sandbox runs (``trusted_schema``, ``legacy_alter_table``,
``writable_schema``) or reach files."""

_SQLITE_FIRST: Final[dict[str, tuple[Action, str]]] = {
    **_firsts("procedural", "SELECT INSERT UPDATE DELETE REPLACE VALUES EXPLAIN ANALYZE REINDEX"),
    "WITH": ("procedural", "WITH query"),
    **_firsts("outside", "ATTACH DETACH VACUUM"),
    **_firsts("outside", "ROLLBACK SAVEPOINT RELEASE"),
    "BEGIN": ("skip", "BEGIN"),
    "COMMIT": ("skip", "COMMIT"),
    "END": ("skip", "END"),
}


def _sqlite(sql: str, session: _Session) -> Verdict:
    tokens = sqlite_tokens(sql)
    if not tokens:
        return Verdict("skip", "comment", sql)
    words = _Words(tokens)
    first = words.word()
    if first in ("CREATE", "DROP", "ALTER"):
        words.at += 1
        words.skip("TEMP", "TEMPORARY", "UNIQUE")
        phrase, verdict = _named_object(words, first, _SQLITE_OBJECTS, sql)
        if verdict.action != "run":
            return verdict
        kind = verdict.kind
        if first == "CREATE" and phrase == "TABLE" and _as_query(words):
            return Verdict("procedural", "CREATE TABLE AS", sql)
        if first == "CREATE" and phrase == "VIRTUAL TABLE":
            rest = words.rest()
            using = [i for i, t in enumerate(rest) if t.kind == "word" and t.value == "USING"]
            module = rest[using[0] + 1].value.lower() if using and using[0] + 1 < len(rest) else ""
            if module not in SQLITE_MODULES:
                return Verdict("outside", f"virtual table module {_shown(module)}", sql)
        return Verdict("run", kind, sql)
    if first == "PRAGMA":
        rest = words.rest()[1:]
        if len(rest) >= 2 and rest[1].value == ".":
            rest = rest[2:]
        name = rest[0].value.lower() if rest else ""
        if name in SQLITE_PRAGMAS:
            return Verdict("run", f"PRAGMA {name}", sql)
        return Verdict("outside", f"PRAGMA {_shown(name)}", sql)
    if first in _SQLITE_FIRST:
        action, kind = _SQLITE_FIRST[first]
        return Verdict(action, kind, sql)
    return Verdict("outside", _unknown(tokens), sql)


# -- the shared part ----------------------------------------------------------------------


@dataclass
class _Session:
    """What a file's earlier statements decided: user variables saved from system ones
    (MySQL: ``SET @old = @@sql_mode``), and how the session reads quotes."""

    procedural: bool = False
    lexing: MysqlLexing = field(default_factory=MysqlLexing)
    initial_flags: frozenset[str] = frozenset()
    saved: dict[str, str] = field(default_factory=dict)


def _shown(text: str) -> str:
    """Artifact text for a message: a short run of name characters, no more."""
    return re.sub(r"[^A-Za-z0-9_$.@-]", "?", text)[:40] or "?"


def _unknown(tokens: list[Token]) -> str:
    first = tokens[0]
    if first.kind == "word":
        return f"{_shown(first.value)} (not recognized)"
    return "a statement that does not start with a keyword"


_CLASSIFIERS: Final[dict[str, Callable[[str, _Session], Verdict]]] = {
    "postgresql": _postgresql,
    "mysql": _mysql,
    "sqlite": _sqlite,
}


def classify(dialect: str, sql: str, *, procedural: bool = False, sql_mode: str = "") -> Verdict:
    """What one statement of ``dialect`` is (see the module docstring), on its own: a
    MySQL restore from a variable is judged as if nothing had been saved."""
    session = _session(procedural, sql_mode)
    return _judged(dialect, sql, session)


def _session(procedural: bool, sql_mode: str) -> _Session:
    return _Session(
        procedural=procedural,
        lexing=mysql_lexing(sql_mode),
        initial_flags=_mode_flags(sql_mode),
    )


def _judged(dialect: str, sql: str, session: _Session) -> Verdict:
    try:
        verdict = _CLASSIFIERS[dialect](sql, session)
    except Unreadable as why:
        verdict = Verdict("outside", f"a statement that cannot be read exactly ({why})", sql)
    if verdict.action == "procedural" and session.procedural:
        session.saved.clear()  # procedural code may change any user variable
        return Verdict("run", verdict.kind, verdict.sql)
    return verdict


def _pieces(dialect: str, text: str, lexing: MysqlLexing) -> list[tuple[int, str]]:
    """(line, text) of each statement, by the splitter the dialect's sandbox loader uses."""
    if dialect == "postgresql":
        return [(p.line, p.sql) for p in split_postgresql(text)]
    if dialect == "mysql":
        return [(p.line, p.sql) for p in split_mysql(text, lexing)]
    from runner.engines.sqlite.sqltext import split_script

    return split_script(text)


def verdicts(
    dialect: str, text: str, *, procedural: bool = False, sql_mode: str = ""
) -> list[tuple[int, Verdict]]:
    """Every statement of one desired file, in order, with the line it starts on and what
    it is, judged as the file runs (a restore knows the saves before it). The line of a
    refused statement is its first word's, past any comment in front of it."""
    session = _session(procedural, sql_mode)
    judged: list[tuple[int, Verdict]] = []
    for line, sql in _pieces(dialect, text, session.lexing):
        verdict = _judged(dialect, sql, session)
        if verdict.action == "run":
            line += _leading_lines(sql, verdict.sql)
        elif verdict.action != "skip":
            line += _comment_lines(dialect, sql, session)
        judged.append((line, verdict))
    return judged


def declared(
    dialect: str,
    files: Sequence[tuple[str, str]],
    *,
    procedural: bool = False,
    sql_mode: str = "",
) -> list[Classified]:
    """The statements of the desired ``files`` (name, text) that run, in order; or
    :class:`NotDeclarative` for the first that may not (and how many more there are).

    ``procedural`` is the declaration's ``spec.policy.proceduralSchema``: procedural
    statements run as written (a materialized view too). ``sql_mode`` (MySQL) is the mode the
    runner set on the loading session: it decides how quotes are read, and which ``sql_mode``
    a statement may set. Each file starts a new session state (saved variables)."""
    found: list[Classified] = []
    refused: list[tuple[str, int, Verdict]] = []
    for name, text in files:
        for line, verdict in verdicts(dialect, text, procedural=procedural, sql_mode=sql_mode):
            if verdict.action == "run":
                found.append(Classified(name, line, verdict.kind, verdict.sql))
            elif verdict.action != "skip":
                refused.append((name, line, verdict))
    if refused:
        name, line, verdict = refused[0]
        if verdict.action == "superuser":
            raise NeedsSuperuser(name, line, verdict.kind, len(refused) - 1)
        raise NotDeclarative(
            name, line, verdict.kind, verdict.action == "procedural", len(refused) - 1
        )
    return found


def _comment_lines(dialect: str, sql: str, session: _Session) -> int:
    """Lines of comments in front of a statement's first word (a refusal names the line the
    statement itself starts on)."""
    try:
        if dialect == "mysql":
            tokens = mysql_tokens(sql, session.lexing)
        else:
            tokens = postgresql_tokens(sql) if dialect == "postgresql" else sqlite_tokens(sql)
    except Unreadable:
        return 0
    return sql[: tokens[0].start].count("\n") if tokens else 0


def _leading_lines(original: str, runs: str) -> int:
    """Lines of ``original`` dropped in front of ``runs`` (a psql ``\\restrict`` line)."""
    if runs and original.endswith(runs) and len(runs) < len(original):
        return original[: len(original) - len(runs)].count("\n")
    return 0
