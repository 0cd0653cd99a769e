"""Spelling privilege changes as PostgreSQL statements: GRANT, REVOKE, ALTER DEFAULT
PRIVILEGES and ALTER ... OWNER TO.

Every name is quoted (``GRANT SELECT ON TABLE "public"."users" TO "app_user"``) and
privileges are listed in sorted order, so one change always reads the same. A grant with
and without grant option are two statements; a column grant names its column after each
privilege (``SELECT ("id")``). Revokes name no CASCADE: a privilege someone re-granted
makes the revoke fail rather than silently taking the re-grants with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runner.engines.changes import Change, Statement
from runner.engines.model import OWN_ROLE, PUBLIC, DefaultGrant, Grant, Ownership
from runner.engines.postgresql.quoting import quoted

__all__ = ["GRANT_RENDERERS", "grantee_sql"]


def grantee_sql(role: str) -> str:
    return "PUBLIC" if role == PUBLIC else quoted(role)


def _privileges(names: Sequence[str], column: str) -> str:
    suffix = f" ({quoted(column)})" if column else ""
    return ", ".join(f"{name}{suffix}" for name in names)


def _object(grant: Grant | DefaultGrant) -> tuple[str, str, str]:
    """(the statement's prefix, the ``ON ...`` clause, the column) of a grant."""
    if isinstance(grant, Grant):
        return "", f"ON {grant.target}", grant.column
    prefix = "ALTER DEFAULT PRIVILEGES "
    if grant.role != OWN_ROLE:
        prefix += f"FOR ROLE {quoted(grant.role)} "
    if grant.schema != "*":
        prefix += f"IN SCHEMA {quoted(grant.schema)} "
    return prefix, f"ON {grant.objects}", ""


def _grant(change: Change) -> list[Statement]:
    grant = change.after
    assert isinstance(grant, (Grant, DefaultGrant))
    prefix, on, column = _object(grant)
    to = grantee_sql(grant.grantee)
    plain = [p for p in grant.privileges if p not in grant.grantable]
    statements = []
    if plain:
        statements.append(Statement(f"{prefix}GRANT {_privileges(plain, column)} {on} TO {to}"))
    if grant.grantable:
        listed = _privileges(grant.grantable, column)
        statements.append(Statement(f"{prefix}GRANT {listed} {on} TO {to} WITH GRANT OPTION"))
    return statements


def _revoke(option: bool) -> Callable[[Change], list[Statement]]:
    def render(change: Change) -> list[Statement]:
        grant = change.before
        assert isinstance(grant, (Grant, DefaultGrant))
        prefix, on, column = _object(grant)
        what = ("GRANT OPTION FOR " if option else "") + _privileges(grant.privileges, column)
        return [Statement(f"{prefix}REVOKE {what} {on} FROM {grantee_sql(grant.grantee)}")]

    return render


def _set_owner(change: Change) -> list[Statement]:
    owner = change.new(Ownership)
    return [Statement(f"ALTER {owner.target} OWNER TO {quoted(owner.owner)}")]


GRANT_RENDERERS: dict[str, Callable[[Change], list[Statement]]] = {
    "grant": _grant,
    "revoke": _revoke(option=False),
    "revoke_grant_option": _revoke(option=True),
    "set_owner": _set_owner,
}
"""The privilege ops' entries of :data:`~runner.engines.postgresql.render.RENDERERS`."""
