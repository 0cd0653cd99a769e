"""Diffing privileges: grants, default privileges and owners of a managed scope.

Only what a :class:`~runner.engines.model.PrivilegeScope` read is compared: a grantee that is
not a managed role is in neither model, so it is never granted to and never revoked from; an
owner the desired schema does not set (``ALTER ... OWNER TO``) is never changed.

A grant is compared privilege by privilege: what the desired model holds and the live one
lacks is granted (``WITH GRANT OPTION`` where desired), what only the live one holds is
revoked, and a grant option held in excess is revoked on its own (``REVOKE GRANT OPTION
FOR``), keeping the privilege. An object the plan creates (or drops and creates again) has
none of its live grants, so all of its desired ones are granted after its creation; one the
plan drops takes its grants with it, so nothing is revoked from it. A ``database:`` key (a
MariaDB grant on the whole database, ``ON *``) names the database the plan runs in, which no
plan drops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TypeVar

from runner.engines.changes import Change, Phase
from runner.engines.model import OWN_ROLE, PUBLIC, Database, DefaultGrant, Grant, object_of

__all__ = ["PRIVILEGE_OPS", "privilege_changes", "role_uses"]

G = TypeVar("G", Grant, DefaultGrant)

PRIVILEGE_OPS = ("revoke", "revoke_grant_option", "set_owner", "grant")
"""Every op this module emits, in the order one object's changes run."""


def _delta(key: str, old: G | None, new: G | None) -> list[Change]:
    """The revokes and grants that take ``old`` to ``new`` (either may be absent)."""
    base = new if new is not None else old
    assert base is not None
    old_all = set(old.privileges) if old else set()
    old_option = set(old.grantable) if old else set()
    new_all = set(new.privileges) if new else set()
    new_option = set(new.grantable) if new else set()
    revoke = sorted(old_all - new_all)
    revoke_option = sorted((old_option - new_option) & new_all)
    with_option = new_option - old_option
    grant = sorted((new_all - old_all) | with_option)
    changes: list[Change] = []
    if revoke:
        gone = dataclasses.replace(base, privileges=tuple(revoke), grantable=())
        changes.append(Change("revoke", key, Phase.FINISH, before=gone))
    if revoke_option:
        options = tuple(revoke_option)
        lose = dataclasses.replace(base, privileges=options, grantable=options)
        changes.append(Change("revoke_grant_option", key, Phase.FINISH, before=lose))
    if grant:
        held = tuple(sorted(with_option))
        gain = dataclasses.replace(base, privileges=tuple(grant), grantable=held)
        changes.append(Change("grant", key, Phase.FINISH, after=gain))
    return changes


def _grants(
    live: Mapping[str, Grant],
    desired: Mapping[str, Grant],
    fresh: set[str],
    gone: Callable[[str], bool],
) -> list[Change]:
    changes: list[Change] = []
    for key in sorted(live.keys() | desired.keys()):
        old, new = live.get(key), desired.get(key)
        if old is not None and (old.on in fresh or object_of(old.on) in fresh):
            old = None  # created by the plan: its live grants went with the old one
        if new is None and (old is None or (not old.on.startswith("database:") and gone(old.on))):
            continue  # dropped: its grants go with it
        changes += _delta(key, old, new)
    return changes


def _owners(live: Database, desired: Database, fresh: set[str]) -> list[Change]:
    changes: list[Change] = []
    for key, new in sorted(desired.owners.items()):
        old = None if new.on in fresh else live.owners.get(key)
        if old is None or old.owner != new.owner:
            changes.append(Change("set_owner", key, Phase.FINISH, before=old, after=new))
    return changes


def privilege_changes(
    live: Database, desired: Database, fresh: set[str], gone: Callable[[str], bool]
) -> list[Change]:
    """Every grant, revoke and owner change from ``live`` to ``desired``.

    ``fresh`` holds the keys of the objects (and ``column:`` keys of the columns) the plan
    creates; ``gone(key)`` says whether a live object is dropped for good.
    """
    changes = _grants(live.grants, desired.grants, fresh, gone)
    for key in sorted(live.default_grants.keys() | desired.default_grants.keys()):
        changes += _delta(key, live.default_grants.get(key), desired.default_grants.get(key))
    return changes + _owners(live, desired, fresh)


def role_uses(db: Database) -> dict[str, str]:
    """Every role ``db``'s privileges name (not ``PUBLIC``, not the connecting role), with
    the first key that names it, for a refusal to point at."""
    uses: dict[str, str] = {}
    for key, grant in sorted(db.grants.items()):
        uses.setdefault(grant.grantee, key)
    for key, default in sorted(db.default_grants.items()):
        uses.setdefault(default.grantee, key)
        uses.setdefault(default.role, key)
    for key, owner in sorted(db.owners.items()):
        uses.setdefault(owner.owner, key)
    return {role: key for role, key in sorted(uses.items()) if role not in (PUBLIC, OWN_ROLE)}
