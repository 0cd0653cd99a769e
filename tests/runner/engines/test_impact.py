"""The dialect-neutral part of impact checks (runner/engines/impact.py): what is measured for
which change, estimates past the exact bound, names quoted by the dialect, and the words
people read. The dialects' readers are tested against real servers beside their engines."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from runner.engines.changes import Change, Phase
from runner.engines.diff import column_change as diff_column_change
from runner.engines.impact import (
    ColumnStats,
    Figure,
    ImpactReport,
    TableFacts,
    certain_failures,
    describe,
    measure,
    probes,
)
from runner.engines.model import Column, Constraint, Database, Table
from runner.engines.plan import PlanDocument, PlanSummary
from runner.engines.postgresql.quoting import ident

HOSTILE = 'x"; DROP TABLE t; --'
TABLE = Table(
    schema="public",
    name="orders",
    columns=(Column("id", "integer", True), Column("email", "text"), Column(HOSTILE, "text")),
)
PARENT = Table(schema="public", name="customers", columns=(Column("id", "integer", True),))
LIVE = Database("postgresql", 16, tables={TABLE.key: TABLE, PARENT.key: PARENT})
DOCUMENT = PlanDocument(
    dialect="postgresql",
    server_major=16,
    observed="sha256:" + "0" * 64,
    desired="sha256:" + "0" * 64,
    expected="sha256:" + "0" * 64,
    options="sha256:" + "0" * 64,
    exclude=[],
    statements=[],
    summary=PlanSummary(statements=0, destructive=False, privilege_changes=[], hazards={}),
)


def column_change(op: str, column: Column) -> Change:
    return diff_column_change(op, TABLE.key, Phase.CREATE, before=column, after=column)


class FakeReader:
    """A reader over made-up catalog facts, recording the SQL it was asked."""

    implicit_defaults = False

    def __init__(self, size: int, stats: ColumnStats | None) -> None:
        self.size, self.statistics, self.queries = size, stats, 0
        self.asked: list[str] = []

    def table(self, key: str) -> TableFacts | None:
        return TableFacts(bytes=self.size, pages=self.size // 8192, rows=9_800_000, readable=True)

    def stats(self, key: str, column: str) -> ColumnStats | None:
        return self.statistics

    def count(self, sql: str) -> int:
        self.queries += 1
        self.asked.append(sql)
        return 3

    def sequence_value(self, key: str) -> int | None:
        return None

    def name(self, key: str) -> str:
        schema, name = key.split(":", 1)[1].split(".", 1)
        return f"{ident(schema)}.{ident(name)}"

    def quote(self, name: str) -> str:
        return ident(name)

    def misfit_condition(self, column: str, old: str, new: str) -> str | None:
        return None

    def label_condition(self, column: str, labels: tuple[str, ...]) -> str | None:
        return None


def run(reader: FakeReader, changes: list[Change], mode: str = "estimate") -> ImpactReport:
    @contextmanager
    def opened() -> Iterator[FakeReader]:
        yield reader

    return measure(opened, probes(changes, DOCUMENT, LIVE), LIVE, mode)


def test_small_tables_are_counted_exactly_with_quoted_names() -> None:
    reader = FakeReader(size=8192, stats=None)
    hostile = TABLE.columns[2]
    report = run(reader, [column_change("set_not_null", hostile)])
    [null_rows, size] = report.figures
    assert (null_rows.verdict, null_rows.count, null_rows.exact, null_rows.fails) == (
        "count",
        3,
        True,
        True,
    )
    assert reader.asked == [
        'SELECT count(*) FROM public.orders WHERE "x""; DROP TABLE t; --" IS NULL'
    ]
    assert size.check == "table_size" and size.hazard == "LOCK_ACCESS_EXCLUSIVE_SCAN"
    assert certain_failures(report) == [null_rows]


def test_large_tables_are_estimated_from_statistics_or_unknown() -> None:
    big = 10 * 1024**3
    email = TABLE.columns[1]
    estimated = run(FakeReader(big, ColumnStats(0.25, -1)), [column_change("set_not_null", email)])
    figure = estimated.figures[0]
    assert (figure.count, figure.exact, figure.fails) == (2_450_000, False, False)
    assert describe(figure) == ("SET NOT NULL on orders.email: ~2,450,000 rows are NULL (estimate)")
    unknown = run(FakeReader(big, None), [column_change("set_not_null", email)])
    assert (unknown.figures[0].verdict, unknown.figures[0].reason) == ("unknown", "too_large")
    exact = run(FakeReader(big, None), [column_change("set_not_null", email)], mode="exact")
    assert exact.figures[0].exact and exact.queries == 1


def test_orphans_are_counted_against_the_parent_the_definition_names() -> None:
    constraint = Constraint(
        table=TABLE.key,
        name="fk",
        kind="f",
        columns=("email",),
        references=PARENT.key,
        definition='FOREIGN KEY (email) REFERENCES public.customers("Id") NOT VALID',
    )
    reader = FakeReader(8192, None)
    change = Change(
        "add_constraint",
        constraint.key,
        Phase.CREATE,
        (TABLE.key, PARENT.key),
        after=constraint,
        existing_table=True,
    )
    report = run(reader, [change])
    assert report.figures[0].check == "orphan_rows"
    assert reader.asked[0].endswith(
        'NOT EXISTS (SELECT 1 FROM public.customers p WHERE p."Id" = c.email)'
    )
    assert describe(report.figures[0]).endswith("3 orphan rows (exact) — this plan would fail")
    # A CHECK's expression is the desired schema's: never run on the target.
    check = Constraint(table=TABLE.key, name="c", kind="c", definition="CHECK (pg_sleep(9))")
    checked = run(
        FakeReader(8192, None),
        [
            Change(
                "add_constraint",
                check.key,
                Phase.CREATE,
                (TABLE.key,),
                after=check,
                existing_table=True,
            )
        ],
    )
    assert checked.figures[0].reason == "expression_not_run" and checked.queries == 0


def test_sizes_read_for_people() -> None:
    figure = Figure(
        op="alter_column_type",
        key=TABLE.key,
        subject="orders",
        hazard="TABLE_REWRITE",
        check="table_size",
        verdict="count",
        count=9_800_000,
        bytes=int(1.2 * 1024**3),
        rows=9_800_000,
    )
    assert describe(figure) == "rewrites orders (1.2 GiB, ~9.8M rows) under ACCESS EXCLUSIVE"
