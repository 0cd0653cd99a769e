"""Diffing privileges (``runner/engines/privileges.py``) and what an empty scope leaves alone."""

from __future__ import annotations

import dataclasses

from runner.digests import digest
from runner.engines.diff import diff
from runner.engines.hazards import hazards_of
from runner.engines.model import OBJECT_CLASSES, Column, Database, Grant, PrivilegeScope, Table
from runner.engines.plan import PlanDocument, PlanSummary, plan_bytes
from runner.engines.planner import PlanOptions, fingerprint, model_rows

USERS = Table("public", "users", (Column("id", "bigint"),))
SHA = "sha256:" + "0" * 64


def model(*grants: Grant, tables: tuple[Table, ...] = (USERS,)) -> Database:
    return Database(
        "postgresql",
        15,
        tables={t.key: t for t in tables},
        grants={g.key: g for g in grants},
    )


def grant(privileges: tuple[str, ...], grantable: tuple[str, ...] = ()) -> Grant:
    return Grant("table:public.users", 'TABLE "public"."users"', "app", privileges, grantable)


def test_missing_privileges_are_granted_extra_ones_revoked_and_grant_options_apart() -> None:
    live = model(grant(("INSERT", "SELECT", "UPDATE"), ("UPDATE",)))
    desired = model(grant(("DELETE", "SELECT", "UPDATE"), ("SELECT",)))
    changes = {c.op: c for c in diff(live, desired)}
    assert set(changes) == {"revoke", "revoke_grant_option", "grant"}
    assert changes["revoke"].old(Grant).privileges == ("INSERT",)
    assert changes["revoke_grant_option"].old(Grant).privileges == ("UPDATE",)
    assert changes["grant"].new(Grant).privileges == ("DELETE", "SELECT")
    assert changes["grant"].new(Grant).grantable == ("SELECT",)
    codes = {(h.kind, h.code) for c in changes.values() for h in hazards_of(c)}
    assert codes == {("privilege", "GRANT"), ("privilege", "REVOKE"), ("destructive", "REVOKE")}


def test_a_dropped_table_takes_its_grants_and_a_new_one_gets_all_of_its_own() -> None:
    assert [c.op for c in diff(model(grant(("SELECT",))), model(tables=()))] == ["drop_table"]
    ops = [c.op for c in diff(model(tables=()), model(grant(("SELECT",))))]
    assert ops == ["create_table", "grant"]


def test_an_empty_scope_keeps_option_digests_fingerprints_and_plan_bytes() -> None:
    options = PlanOptions(exclude=("audit.*",))
    assert not options.privileges.active
    assert options.digest() == digest(
        "plan-options", {"allowDestructive": False, "protectedTables": [], "exclude": ["audit.*"]}
    )
    db = model()
    assert "grants" not in model_rows(db)
    names = {k.__name__: [f.name for f in dataclasses.fields(k)] for k in OBJECT_CLASSES}
    expected = digest("schema-model", {"fields": names, "objects": model_rows(db)}, checked=False)
    assert fingerprint(db) == expected
    summary = PlanSummary(statements=0, destructive=False, privilege_changes=[], hazards={})
    document = PlanDocument(
        dialect="postgresql", server_major=15, observed=SHA, desired=SHA, expected=SHA,
        options=SHA, exclude=[], statements=[], summary=summary,
    )  # fmt: skip
    assert b"privileges" not in plan_bytes(document)
    assert PrivilegeScope.of(["public", "b", "a", "b"]).roles == ("PUBLIC", "a", "b")
