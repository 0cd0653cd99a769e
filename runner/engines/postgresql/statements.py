"""What a PostgreSQL sandbox reads out of statements before any of them runs.

The sandbox makes up, as its administrator, the roles, extensions and schemas a desired
schema or a dry run needs (:mod:`.sandbox`). It learns which from the statements' tokens
here, never from an error message a statement can raise, and it builds every statement it
runs with more rights than the sandbox role from these parsed names, quoted by the runner:
no statement text is ever run by the administrator as written.

The tokens follow the server's lexer with ``standard_conforming_strings`` on, which every
sandbox session is fixed to (:data:`.sandbox.SESSION_OPTIONS`): ``'...'`` with doubled
quotes, ``E'...'`` with backslash escapes, ``"..."`` identifiers, dollar quotes, ``--`` and
nested ``/* */`` comments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from runner.sql.charsets import DOLLAR_QUOTE, NAME
from runner.sql.split import block_comment_end

__all__ = [
    "ExtensionStatement",
    "Token",
    "extension_statement",
    "leading_words",
    "roles_named",
    "schema_created",
    "tokens",
]

_SPACE = " \t\r\n\f\v"


@dataclass(frozen=True, slots=True)
class Token:
    """``word`` (an unquoted name or keyword, ``value`` folded to lower case), ``name`` (a
    quoted identifier, ``value`` unescaped), ``string`` (a literal, ``value`` its text, or
    None for an ``E''`` literal holding a backslash), or ``symbol``; ``depth`` counts the
    parentheses around it."""

    kind: Literal["word", "name", "string", "symbol"]
    value: str | None
    depth: int


def _skip_space(sql: str, i: int) -> int:
    """The position of the first character from ``i`` on that is not white space or part of
    a comment (``--`` to the line's end, nested ``/* */``)."""
    n = len(sql)
    while i < n:
        if sql[i] in _SPACE:
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            i = block_comment_end(sql, i)
        else:
            break
    return i


def _fold(word: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in word)


def tokens(sql: str) -> list[Token]:
    """The tokens of one statement (see the module docstring)."""
    found: list[Token] = []
    i, n, depth = 0, len(sql), 0
    while (i := _skip_space(sql, i)) < n:
        ch = sql[i]
        if ch == '"':
            end, text = _quoted(sql, i, '"')
            found.append(Token("name", text, depth))
            i = end
        elif ch == "'":
            end, text = _quoted(sql, i, "'")
            found.append(Token("string", text, depth))
            i = end
        elif ch in "eE" and sql.startswith("'", i + 1):
            end, escaped = _escaped(sql, i + 1)
            found.append(Token("string", escaped, depth))
            i = end
        elif ch == "$" and (match := DOLLAR_QUOTE.match(sql, i)):
            end = sql.find(match.group(0), match.end())
            stop = n if end < 0 else end
            found.append(Token("string", sql[match.end() : stop], depth))
            i = n if end < 0 else end + len(match.group(0))
        elif (match := NAME.match(sql, i)) is not None:
            found.append(Token("word", _fold(match.group(0)), depth))
            i = match.end()
        else:
            if ch == "(":
                depth += 1
            found.append(Token("symbol", ch, depth))
            if ch == ")":
                depth = max(depth - 1, 0)
            i += 1
    return found


def _quoted(sql: str, i: int, quote: str) -> tuple[int, str]:
    parts, i, n = [], i + 1, len(sql)
    while i < n:
        end = sql.find(quote, i)
        if end < 0:
            parts.append(sql[i:])
            return n, "".join(parts)
        parts.append(sql[i:end])
        if sql.startswith(quote, end + 1):
            parts.append(quote)
            i = end + 2
            continue
        return end + 1, "".join(parts)
    return n, "".join(parts)


def _escaped(sql: str, i: int) -> tuple[int, str | None]:
    """An ``E'...'`` literal from its quote at ``i``: its end, and its text when it holds no
    backslash (None otherwise: the runner never rebuilds what it would have to unescape)."""
    j, n, plain = i + 1, len(sql), True
    while j < n:
        if sql[j] == "\\":
            plain, j = False, j + 2
            continue
        if sql[j] == "'":
            if sql.startswith("'", j + 1):
                j += 2
                continue
            break
        j += 1
    text = sql[i + 1 : j].replace("''", "'") if plain else None
    return min(j + 1, n), text


def _is(token: Token | None, *words: str) -> bool:
    return token is not None and token.kind == "word" and token.value in words


def _name(token: Token | None) -> str | None:
    if token is None or token.kind not in ("word", "name"):
        return None
    return token.value


_NOT_ROLES: Final = frozenset({"public", "current_user", "session_user", "current_role", "group"})
_LIST_ENDS: Final = frozenset(
    {"with", "granted", "cascade", "restrict", "using", "for", "as", "in", "grant", "revoke"}
)


def _role_list(found: list[Token], start: int) -> set[str]:
    """The role names from ``found[start]`` on: names separated by commas, at depth 0."""
    roles: set[str] = set()
    i = start
    while i < len(found):
        token = found[i]
        if token.depth != 0 or (token.kind == "word" and token.value in _LIST_ENDS):
            break
        if token.kind == "symbol":
            if token.value != ",":
                break
        elif token.value and (token.kind == "name" or token.value not in _NOT_ROLES):
            roles.add(token.value)
        i += 1
    return roles


def roles_named(sql: str) -> set[str]:
    """Every role ``sql`` names as a grantee, a new owner, an authorization, a policy's role
    or a role being granted, so a sandbox can make those that do not exist before it runs
    (a role it misses makes the statement fail, never a role the sandbox grants itself)."""
    found = [t for t in tokens(sql) if t.depth == 0]
    words = [t.value if t.kind == "word" else None for t in found]
    roles: set[str] = set()

    def after(word: str, before: str | None = None) -> None:
        for i, value in enumerate(words):
            if value == word and (before is None or (i > 0 and words[i - 1] == before)):
                roles.update(_role_list(found, i + 1))

    kind = words[:2]
    if kind[:1] == ["alter"]:
        after("to", "owner")
    if kind == ["create", "schema"]:
        after("authorization")
    if kind in (["create", "policy"], ["alter", "policy"]):
        after("to")
    if kind == ["alter", "default"]:
        after("role", "for")
        after("user", "for")
    grant = next((i for i, w in enumerate(words) if w in ("grant", "revoke")), None)
    if grant is not None and (grant == 0 or kind == ["alter", "default"]):
        verb = words[grant]
        after("to" if verb == "grant" else "from")
        after("by", "granted")
        if grant == 0 and "on" not in words:
            # GRANT a, b TO c: a role membership, whose granted roles are roles too.
            start = 1
            if verb == "revoke" and words[1:3] in (["admin", "option"], ["inherit", "option"]):
                start = 4  # REVOKE ADMIN OPTION FOR a FROM b
            end = (
                words.index("to" if verb == "grant" else "from")
                if (("to" if verb == "grant" else "from") in words)
                else len(found)
            )
            roles.update(_role_list(found[:end], start))
    return {r for r in roles if r}


@dataclass(frozen=True, slots=True)
class ExtensionStatement:
    """An extension statement, as the sandbox rebuilds it."""

    action: Literal["create", "comment", "set_schema", "drop"]
    name: str
    schema: str | None = None
    version: str | None = None
    comment: str | None = None


def extension_statement(sql: str) -> ExtensionStatement | None:
    """``sql`` read as one of the extension statements a sandbox runs for itself, or None
    when it is none of them or cannot be read exactly (the caller refuses it then)."""
    found = tokens(sql)
    while found and found[-1].kind == "symbol" and found[-1].value == ";":
        found.pop()
    words = [t.value if t.kind == "word" else None for t in found]

    def at(i: int) -> Token | None:
        return found[i] if i < len(found) else None

    if words[:2] == ["create", "extension"]:
        i = 2
        if words[i : i + 3] == ["if", "not", "exists"]:
            i += 3
        name = _name(at(i))
        if name is None:
            return None
        i += 1
        if words[i : i + 1] == ["with"]:
            i += 1
        schema = version = None
        while i < len(found):
            if words[i] == "schema" and _name(at(i + 1)) is not None:
                schema, i = _name(at(i + 1)), i + 2
            elif words[i] == "version" and at(i + 1) is not None:
                value = at(i + 1)
                assert value is not None
                if value.kind == "symbol" or value.value is None:
                    return None
                version, i = value.value, i + 2
            else:
                return None  # CASCADE, FROM, or anything the runner does not rebuild
        return ExtensionStatement("create", name, schema, version)
    if words[:3] == ["comment", "on", "extension"] and len(found) == 6 and words[4] == "is":
        name, value = _name(at(3)), at(5)
        if name is None or value is None:
            return None
        if value.kind == "string" and value.value is not None:
            return ExtensionStatement("comment", name, comment=value.value)
        if value.kind == "word" and value.value == "null":
            return ExtensionStatement("comment", name)
        return None
    if words[:2] == ["alter", "extension"] and len(found) == 6 and words[3:5] == ["set", "schema"]:
        name, schema = _name(at(2)), _name(at(5))
        if name is None or schema is None:
            return None
        return ExtensionStatement("set_schema", name, schema)
    if words[:2] == ["drop", "extension"]:
        i = 2
        if words[i : i + 2] == ["if", "exists"]:
            i += 2
        name = _name(at(i))
        if name is None or len(found) != i + 1:
            return None
        return ExtensionStatement("drop", name)
    return None


def schema_created(sql: str) -> tuple[str, str | None] | None:
    """``CREATE SCHEMA [IF NOT EXISTS] name [AUTHORIZATION role]`` read as (name, role), or
    None for any other statement (a schema with elements, or no name)."""
    found = tokens(sql)
    while found and found[-1].kind == "symbol" and found[-1].value == ";":
        found.pop()
    words = [t.value if t.kind == "word" else None for t in found]
    if words[:2] != ["create", "schema"]:
        return None
    i = 2
    if words[i : i + 3] == ["if", "not", "exists"]:
        i += 3
    name = _name(found[i]) if i < len(found) else None
    if name is None or words[i] == "authorization":
        return None
    i += 1
    if i == len(found):
        return name, None
    if words[i] == "authorization" and i + 2 == len(found):
        role = _name(found[i + 1])
        return (name, role) if role is not None else None
    return None


def leading_words(sql: str, count: int) -> tuple[str, ...]:
    """The first ``count`` words of ``sql``, upper case, after comments and white space
    (fewer when a quote or symbol comes first): cheap, for deciding what to read further."""
    words: list[str] = []
    i, n = 0, len(sql)
    while len(words) < count and (i := _skip_space(sql, i)) < n:
        match = NAME.match(sql, i)
        if match is None:
            break
        words.append(match.group(0).upper())
        i = match.end()
    return tuple(words)
