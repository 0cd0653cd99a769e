"""MariaDB privileges for managed accounts and roles: naming them, spelling GRANT and REVOKE,
and reading the grants a desired schema writes.

A managed grantee is an account, ``user@host``, a role, or ``PUBLIC`` (MariaDB 10.11). A name
with a host (``app@localhost``, ``'app'@'localhost'``, ```app`@`10.0.%```) is an account; a
bare name is the role of that name where the server has one (as MariaDB reads ``GRANT ... TO
name``), else the account ``name@%`` (the host ``CREATE USER app`` gives): :func:`resolve`.
Grants carry the grantee in that canonical form (:attr:`~runner.engines.model.Grant.grantee`:
``user@host``, ``role``, ``PUBLIC``), spelled ``'user'@'host'``, ``'role'``, ``PUBLIC``. A role
membership (``GRANT role TO grantee [WITH ADMIN OPTION]``) is a grant on ``role:<role>`` of
the one privilege :data:`MEMBER`, held with the admin option as its grant option.

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
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from runner.engines.changes import Change, Statement, UnsupportedChange
from runner.engines.model import PUBLIC, Grant
from runner.engines.mysql.quoting import ident, literal

__all__ = [
    "DATABASE_KEY",
    "GRANT_RENDERERS",
    "MEMBER",
    "AccountError",
    "GrantStatement",
    "account",
    "account_sql",
    "grant_statement",
    "is_role",
    "resolve",
    "role_key",
    "server_name",
]

DATABASE_KEY = "database:db"
"""The ``on`` of a grant on the whole database (``ON *``): no plan drops it."""

MEMBER = "MEMBER"
"""The privilege a role membership grants (its grant option is ``WITH ADMIN OPTION``)."""


def role_key(role: str) -> str:
    """The ``on`` of a membership in ``role``."""
    return f"role:{role}"


def is_role(grantee: str) -> bool:
    """Whether a canonical grantee is a role (``PUBLIC`` included) rather than an account."""
    return "@" not in grantee


def server_name(grantee: str) -> str:
    """``user@host`` as the grant tables hold it: a role's host is empty (``role@``)."""
    return f"{grantee}@" if is_role(grantee) else grantee


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
    """The canonical ``user@host`` of an account (``app`` -> ``app@%``)."""
    user, host = written(role)
    return f"{user}@{'%' if host is None else host}"


def resolve(name: str, roles: Collection[str]) -> str:
    """The canonical grantee a name means: ``PUBLIC``; a bare name in ``roles`` (the server's,
    or the managed roles) is that role; anything else the account :func:`account` names."""
    if name.upper() == PUBLIC:
        return PUBLIC
    user, host = written(name)
    return user if host is None and user in roles else account(name)


def written(role: str) -> tuple[str, str | None]:
    """The user and host (None: not written) of an account or role name."""
    text = role.strip()
    match = re.match(
        r"^(`(?:[^`]|``)*`|'(?:[^'\\]|''|\\.)*'|\"(?:[^\"]|\"\")*\"|.+?)"
        r"(?:@(`(?:[^`]|``)*`|'(?:[^'\\]|''|\\.)*'|\"(?:[^\"]|\"\")*\"|[^@]*))?$",
        text,
    )
    if not match or not text:
        raise AccountError(f"{role!r} is not an account (user or user@host)")
    user = _unquote(match.group(1))
    host = None if match.group(2) is None else _unquote(match.group(2))
    if not user:
        raise AccountError(f"{role!r} names no user")
    if host == "":
        raise AccountError(f"{role!r} has an empty host: name a role without one")
    return user, host


def account_sql(name: str) -> str:
    """How a grant names a canonical grantee: ``'user'@'host'``, a role ``'role'`` (also
    from its :func:`server_name`, ``role@``), ``PUBLIC``."""
    if name in (PUBLIC, f"{PUBLIC}@"):
        return PUBLIC
    user, at, host = name.rpartition("@")
    if not at or not host:
        return literal(user if at else name)
    return f"{literal(user)}@{literal(host)}"


# -- rendering -------------------------------------------------------------------------------


def _privileges(names: tuple[str, ...], column: str) -> str:
    suffix = f" ({ident(column)})" if column else ""
    return ", ".join(f"{name}{suffix}" for name in names)


def _what(grant: Grant) -> str:
    """What a GRANT or REVOKE names: a role, or privileges ON an object."""
    if grant.on.startswith("role:"):
        return grant.target
    return f"{_privileges(grant.privileges, grant.column)} ON {grant.target}"


def _grant(change: Change) -> list[Statement]:
    grant = change.new(Grant)
    to = account_sql(grant.grantee)
    option = ""
    if grant.grantable:
        option = " WITH ADMIN OPTION" if grant.on.startswith("role:") else " WITH GRANT OPTION"
    return [Statement(f"GRANT {_what(grant)} TO {to}{option}", transactional=False)]


def _revoke(change: Change) -> list[Statement]:
    grant = change.old(Grant)
    sql = f"REVOKE {_what(grant)} FROM {account_sql(grant.grantee)}"
    return [Statement(sql, transactional=False)]


def _revoke_option(change: Change) -> list[Statement]:
    grant = change.old(Grant)
    option = (
        f"ADMIN OPTION FOR {grant.target}"
        if grant.on.startswith("role:")
        else f"GRANT OPTION ON {grant.target}"
    )
    sql = f"REVOKE {option} FROM {account_sql(grant.grantee)}"
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
    """A GRANT or REVOKE of a desired schema: its grantees as written (``user@host``, a bare
    ``name`` for :func:`resolve`, ``PUBLIC``, ``CURRENT_USER``), the roles a role grant
    names, where each list is in the text, and the level it is on."""

    sql: str
    grantees: tuple[str, ...]
    span: tuple[int, int]  # the grantee list's characters
    level: str  # the text after ON (``*.*``, ```shop`.*``, ``orders``), "" when there is none
    roles: tuple[str, ...] = ()  # a role grant's roles (no ON): ``GRANT r1, r2 TO ...``
    roles_span: tuple[int, int] = (0, 0)
    proxy: bool = False  # GRANT PROXY ON ...

    def with_grantees(
        self, names: Mapping[str, str], roles: Mapping[str, str] | None = None
    ) -> str | None:
        """The statement granting to ``names[g]`` for each grantee ``g`` that ``names``
        holds (spelled by :func:`account_sql`), the others left out, and each role ``r`` it
        grants named ``roles[r]``; None when no grantee is left."""
        kept = [account_sql(names[g]) for g in self.grantees if g in names]
        if not kept:
            return None
        start, end = self.span
        sql = f"{self.sql[:start]}{', '.join(kept)}{self.sql[end:]}"
        if roles is not None and self.roles:
            first, last = self.roles_span
            named = ", ".join(account_sql(roles.get(r, r)) for r in self.roles)
            sql = f"{sql[:first]}{named}{sql[last:]}"
        return sql

    def qualifier(self) -> str | None:
        """The database the level names (``shop`` of ```shop`.orders``), ``*`` for a global
        level (``*.*``), None for the session's database."""
        level = self.level
        if level.startswith("*."):
            return "*"
        match = re.match(r"^(`(?:[^`]|``)*`|[^.`]+)\.", level)
        return _unquote(match.group(1)) if match else None


def _names(tokens: list[re.Match[str]], index: int, stop: set[str]) -> tuple[list[str], int]:
    """The comma-separated account or role names from ``tokens[index]`` on (until a word of
    ``stop``), each as written, and the index after the last one."""
    names: list[str] = []
    while index < len(tokens):
        text = tokens[index].group(0)
        if text.upper() in stop or text == ";":
            break
        nxt = tokens[index + 1].group(0) if index + 1 < len(tokens) else ""
        if text.upper() == "CURRENT_USER":
            names.append("CURRENT_USER")
            index += 3 if nxt == "(" else 1
        elif nxt == "@" and index + 2 < len(tokens):
            names.append(f"{_unquote(text)}@{_unquote(tokens[index + 2].group(0))}")
            index += 3
        else:
            bare = _unquote(text)
            names.append(PUBLIC if bare.upper() == PUBLIC else bare)
            index += 1
        if index < len(tokens) and tokens[index].group(0) == ",":
            index += 1
            continue
        break
    return names, index


def grant_statement(sql: str) -> GrantStatement | None:
    """The grantees of ``sql`` if it is a GRANT or REVOKE, else None. A GRANT of roles (no
    ``ON``) has an empty level and names its roles."""
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
    roles: list[str] = []
    roles_span = (0, 0)
    proxy = len(tokens) > 1 and tokens[1].group(0).upper() == "PROXY"
    if on >= 0:
        parts = [t.group(0) for t in tokens[on + 1 : to]]
        if parts and parts[0].upper() in _KINDS:
            parts = parts[1:]
        level = "".join(parts)
    else:
        first = 1
        words = [t.group(0).upper() for t in tokens[1:4]]
        if words == ["ADMIN", "OPTION", "FOR"]:
            first = 4
        roles, after = _names(tokens, first, {word})
        if first < after:
            roles_span = (tokens[first].start(), tokens[after - 1].end())
    index = to + 1
    start = tokens[index].start() if index < len(tokens) else len(sql)
    grantees, index = _names(tokens, index, _TAIL)
    end = tokens[index - 1].end() if grantees else start
    return GrantStatement(
        sql, tuple(grantees), (start, end), level, tuple(roles), roles_span, proxy
    )
