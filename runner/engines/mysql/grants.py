"""MariaDB privileges for managed accounts: naming an account, spelling GRANT and REVOKE, and
reading the grants a desired schema writes.

A managed role here is an account, ``user@host``. ``--managed-role app`` means ``app@%``
(the host ``CREATE USER app`` gives); ``app@localhost``, ``'app'@'localhost'`` and
```app`@`10.0.%``` name the host. Grants carry the account in that canonical ``user@host``
form (:attr:`~runner.engines.model.Grant.grantee`) and are spelled ``'user'@'host'``.

Every statement names the target's objects without a database qualifier, as every other
statement of a MySQL plan does: ``GRANT SELECT ON `orders` TO 'app'@'%'``, a column grant
``GRANT SELECT (`email`) ON `customers` TO ...``, a routine ``GRANT EXECUTE ON PROCEDURE `p`
TO ...``, and the database's own level ``ON *`` (the session's database: the target when
applied, a scratch schema in the sandbox). MariaDB keeps one grant option per level, so a
grant that holds it is one statement ``WITH GRANT OPTION`` and losing it is
``REVOKE GRANT OPTION ON ...``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from runner.engines.changes import Change, Statement, UnsupportedChange
from runner.engines.model import PUBLIC, Grant
from runner.engines.mysql.quoting import ident, literal

__all__ = [
    "DATABASE_KEY",
    "GRANT_RENDERERS",
    "AccountError",
    "GrantStatement",
    "account",
    "account_sql",
    "grant_statement",
]

DATABASE_KEY = "database:db"
"""The ``on`` of a grant on the whole database (``ON *``): no plan drops it."""

_QUOTED = re.compile(r"^(`(?:[^`]|``)*`|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\")$")


def _unquote(text: str) -> str:
    text = text.strip()
    if _QUOTED.match(text):
        quote = text[0]
        return text[1:-1].replace(quote * 2, quote)
    return text


class AccountError(ValueError):
    """A managed role that names no account MariaDB can hold privileges for."""


def account(role: str) -> str:
    """The canonical ``user@host`` of a ``--managed-role`` (``app`` -> ``app@%``)."""
    if role == PUBLIC:
        raise AccountError("PUBLIC cannot be a managed role on MariaDB: name accounts")
    text = role.strip()
    match = re.match(
        r"^(`(?:[^`]|``)*`|'(?:[^'\\]|''|\\.)*'|\"(?:[^\"]|\"\")*\"|.+?)"
        r"(?:@(`(?:[^`]|``)*`|'(?:[^'\\]|''|\\.)*'|\"(?:[^\"]|\"\")*\"|[^@]*))?$",
        text,
    )
    if not match or not text:
        raise AccountError(f"{role!r} is not an account (user or user@host)")
    user = _unquote(match.group(1))
    host = "%" if match.group(2) is None else _unquote(match.group(2))
    if not user:
        raise AccountError(f"{role!r} names no user")
    return f"{user}@{host}"


def account_sql(name: str) -> str:
    """``'user'@'host'`` of a canonical ``user@host``."""
    user, _, host = name.rpartition("@")
    return f"{literal(user)}@{literal(host)}"


# -- rendering -------------------------------------------------------------------------------


def _privileges(names: tuple[str, ...], column: str) -> str:
    suffix = f" ({ident(column)})" if column else ""
    return ", ".join(f"{name}{suffix}" for name in names)


def _grant(change: Change) -> list[Statement]:
    grant = change.new(Grant)
    to = account_sql(grant.grantee)
    what = _privileges(grant.privileges, grant.column)
    option = " WITH GRANT OPTION" if grant.grantable else ""
    return [Statement(f"GRANT {what} ON {grant.target} TO {to}{option}", transactional=False)]


def _revoke(change: Change) -> list[Statement]:
    grant = change.old(Grant)
    what = _privileges(grant.privileges, grant.column)
    sql = f"REVOKE {what} ON {grant.target} FROM {account_sql(grant.grantee)}"
    return [Statement(sql, transactional=False)]


def _revoke_option(change: Change) -> list[Statement]:
    grant = change.old(Grant)
    sql = f"REVOKE GRANT OPTION ON {grant.target} FROM {account_sql(grant.grantee)}"
    return [Statement(sql, transactional=False)]


def _no_owner(change: Change) -> list[Statement]:
    raise UnsupportedChange(change, "MariaDB objects have no owner to change")


GRANT_RENDERERS: dict[str, Callable[[Change], list[Statement]]] = {
    "grant": _grant,
    "revoke": _revoke,
    "revoke_grant_option": _revoke_option,
    "set_owner": _no_owner,
}
"""The privilege ops' renderers (see :mod:`.render`)."""


# -- GRANT and REVOKE in a desired schema ----------------------------------------------------

_TOKEN = re.compile(
    r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|`(?:[^`]|``)*`|@|,|\(|\)|;|[^\s'\"`@,();]+",
    re.S,
)
_STARTS = re.compile(r"^\s*(?:(?:--[^\n]*\n|#[^\n]*\n|/\*.*?\*/)\s*)*(GRANT|REVOKE)\b", re.I | re.S)
_KINDS = {"TABLE", "FUNCTION", "PROCEDURE", "PACKAGE"}
_TAIL = {"IDENTIFIED", "REQUIRE", "WITH", "PASSWORD", "ACCOUNT", "AS"}


@dataclass(frozen=True, slots=True)
class GrantStatement:
    """A GRANT or REVOKE of a desired schema: its grantees (canonical ``user@host``, or
    ``CURRENT_USER``), where the list of them is in the text, and the level it is on."""

    sql: str
    grantees: tuple[str, ...]
    span: tuple[int, int]  # the grantee list's characters
    level: str  # the text after ON (``*.*``, ```shop`.*``, ``orders``), "" when there is none

    def with_grantees(self, names: Mapping[str, str]) -> str | None:
        """The statement granting to ``names[g]`` for each grantee ``g`` that ``names``
        holds (spelled ``'user'@'host'``), the others left out; None when none is left."""
        kept = [account_sql(names[g]) for g in self.grantees if g in names]
        if not kept:
            return None
        start, end = self.span
        return f"{self.sql[:start]}{', '.join(kept)}{self.sql[end:]}"

    def qualifier(self) -> str | None:
        """The database the level names (``shop`` of ```shop`.orders``), ``*`` for a global
        level (``*.*``), None for the session's database."""
        level = self.level
        if level.startswith("*."):
            return "*"
        match = re.match(r"^(`(?:[^`]|``)*`|[^.`]+)\.", level)
        return _unquote(match.group(1)) if match else None


def grant_statement(sql: str) -> GrantStatement | None:
    """The grantees of ``sql`` if it is a GRANT or REVOKE, else None. A GRANT of roles or
    PROXY (no ``ON``) has an empty level."""
    starts = _STARTS.match(sql)
    if starts is None:
        return None
    tokens = list(_TOKEN.finditer(sql, starts.start(1)))  # after any leading comment
    depth = 0
    on = -1
    to = -1
    word = "TO" if tokens[0].group(0).upper() == "GRANT" else "FROM"
    for index, token in enumerate(tokens):
        text = token.group(0)
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
        elif depth == 0 and text.upper() == "ON" and on < 0:
            on = index
        elif depth == 0 and text.upper() == word:
            to = index
            break
    if to < 0:
        return None
    level = ""
    if on >= 0:
        parts = [t.group(0) for t in tokens[on + 1 : to]]
        if parts and parts[0].upper() in _KINDS:
            parts = parts[1:]
        level = "".join(parts)
    grantees: list[str] = []
    index = to + 1
    start = tokens[index].start() if index < len(tokens) else len(sql)
    end = start
    while index < len(tokens):
        text = tokens[index].group(0)
        if text.upper() in _TAIL or text == ";":
            break
        name = text
        nxt = tokens[index + 1].group(0) if index + 1 < len(tokens) else ""
        if name.upper() == "CURRENT_USER":
            grantees.append("CURRENT_USER")
            index += 1
            if nxt == "(":
                index += 2
        elif nxt == "@" and index + 2 < len(tokens):
            grantees.append(f"{_unquote(name)}@{_unquote(tokens[index + 2].group(0))}")
            index += 3
        else:
            grantees.append(account(name))
            index += 1
        end = tokens[index - 1].end()
        if index < len(tokens) and tokens[index].group(0) == ",":
            index += 1
            continue
        break
    return GrantStatement(sql, tuple(grantees), (start, end), level)
