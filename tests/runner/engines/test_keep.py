"""``drops: skip`` on the models (:mod:`runner.engines.keep`): what is kept, what is a
replacement rather than a removal, and what the plan lists. The engines' tests plan and
apply it against real servers (postgresql/, mysql/, sqlite/)."""

from __future__ import annotations

from runner.engines.diff import diff
from runner.engines.keep import SkippedRemoval, keep_live_only
from runner.engines.model import Column, Constraint, Database, Definition, Grant, Table

USERS = Table("public", "users", (Column("id", "bigint"), Column("name", "text")))


def view(key: str, kind: str, text: str) -> Definition:
    return Definition(key, kind, f"CREATE {text}", f"DROP {text}", text)


def test_only_in_live_is_kept_listed_and_then_nothing_is_planned() -> None:
    legacy = Table("public", "legacy", (Column("id", "integer"),))
    live = Database(
        "postgresql",
        15,
        tables={USERS.key: USERS, legacy.key: legacy},
        constraints={
            "constraint:public.legacy.legacy_pkey": Constraint(
                "table:public.legacy", "legacy_pkey", "p", "PRIMARY KEY (id)"
            )
        },
    )
    desired = Database(
        "postgresql", 15, tables={USERS.key: Table("public", "users", (Column("id", "bigint"),))}
    )
    kept = keep_live_only(live, desired)
    assert kept.skipped == (
        SkippedRemoval("column:public.users.name", "drop_column"),
        SkippedRemoval("table:public.legacy", "drop_table"),  # its key goes with it, unlisted
    )
    assert diff(live, kept.desired) == []
    assert keep_live_only(live, live).skipped == ()


def test_an_object_whose_name_a_desired_one_takes_is_replaced_not_kept() -> None:
    old = view("view:public.v", "view", "VIEW v")
    new = view("materialized_view:public.v", "materialized_view", "MATERIALIZED VIEW v")
    live = Database(
        "postgresql",
        15,
        tables={USERS.key: USERS},
        definitions={old.key: old},
        constraints={
            "constraint:public.users.users_pkey": Constraint(
                USERS.key, "users_pkey", "p", "PRIMARY KEY (id)"
            ),
            "constraint:public.users.users_name_idx": Constraint(
                USERS.key, "users_name_idx", "u", "UNIQUE (name)"
            ),
        },
    )
    desired = Database(
        "postgresql",
        15,
        tables={USERS.key: USERS},
        definitions={new.key: new},
        constraints={
            "constraint:public.users.users_pk": Constraint(
                USERS.key, "users_pk", "p", "PRIMARY KEY (id)"
            )
        },
        indexes={},
    )
    kept = keep_live_only(live, desired)
    # The view becomes a materialized view of its name, the primary key takes a new name:
    # both are changes of what the schema declares. The unique constraint is only live's.
    assert kept.skipped == (
        SkippedRemoval("constraint:public.users.users_name_idx", "drop_constraint"),
    )
    assert old.key not in kept.desired.definitions
    assert "constraint:public.users.users_pkey" not in kept.desired.constraints


def test_a_grant_keeps_every_privilege_it_holds() -> None:
    def grant(*privileges: str) -> Grant:
        return Grant(USERS.key, 'TABLE "public"."users"', "app", tuple(privileges))

    key = f"grant:{USERS.key}:app"
    live = Database("postgresql", 15, tables={USERS.key: USERS}, grants={key: grant("INSERT")})
    desired = Database("postgresql", 15, tables={USERS.key: USERS}, grants={key: grant("SELECT")})
    kept = keep_live_only(live, desired)
    assert kept.desired.grants[key].privileges == ("INSERT", "SELECT")
    assert kept.skipped == (SkippedRemoval(key, "revoke", "INSERT"),)
    assert [c.op for c in diff(live, kept.desired)] == ["grant"]
