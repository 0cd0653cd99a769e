"""The PostgreSQL renderer: exact SQL for structured changes (no database needed)."""

from __future__ import annotations

from runner.engines.changes import Change, Phase, Statement
from runner.engines.model import Column, Constraint, Index, Sequence
from runner.engines.postgresql.render import render

SEQUENCE = Sequence("public", "order_no", "bigint", 100, 5, 1, 9_000_000, 1, False)


def test_sequences_are_created_and_altered_with_every_option() -> None:
    options = (
        " AS bigint INCREMENT BY 5 MINVALUE 1 MAXVALUE 9000000 START WITH 100 CACHE 1 NO CYCLE"
    )
    created = render(Change("create_sequence", SEQUENCE.key, Phase.CREATE, after=SEQUENCE))
    assert created == [Statement(f"CREATE SEQUENCE public.order_no{options}")]
    altered = render(Change("alter_sequence", SEQUENCE.key, Phase.CREATE, after=SEQUENCE))
    assert altered == [Statement(f"ALTER SEQUENCE public.order_no{options}")]


def test_checks_on_existing_tables_are_added_not_valid_then_validated() -> None:
    check = Constraint("table:public.t", "t_x_check", "c", "CHECK ((x > 0))")
    change = Change("add_constraint", check.key, Phase.CREATE, after=check, existing_table=True)
    assert render(change) == [
        Statement("ALTER TABLE public.t ADD CONSTRAINT t_x_check CHECK ((x > 0)) NOT VALID"),
        Statement("ALTER TABLE public.t VALIDATE CONSTRAINT t_x_check"),
    ]
    fresh = Change("add_constraint", check.key, Phase.CREATE, after=check)
    assert render(fresh) == [
        Statement("ALTER TABLE public.t ADD CONSTRAINT t_x_check CHECK ((x > 0))")
    ]


def test_indexes_on_existing_tables_are_built_concurrently_outside_a_transaction() -> None:
    index = Index(
        "public", "t_x_idx", "table:public.t", "CREATE INDEX t_x_idx ON public.t USING btree (x)"
    )
    change = Change("create_index", index.key, Phase.CREATE, after=index, existing_table=True)
    assert render(change) == [
        Statement(
            "CREATE INDEX CONCURRENTLY t_x_idx ON public.t USING btree (x)", transactional=False
        )
    ]


def test_quoted_identifiers_and_identity_options() -> None:
    column = Column(
        "Order",
        "integer",
        not_null=True,
        identity="ALWAYS",
        identity_options=("START WITH 5", "INCREMENT BY 2"),
    )
    change = Change("add_identity", "table:public.t", Phase.CREATE, after=column, detail="Order")
    assert render(change) == [
        Statement(
            'ALTER TABLE public.t ALTER COLUMN "Order" ADD GENERATED ALWAYS AS IDENTITY'
            " (START WITH 5 INCREMENT BY 2)"
        )
    ]
