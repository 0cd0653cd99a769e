"""Which definer a desired statement names (:mod:`runner.engines.mysql.definers`)."""

from __future__ import annotations

import pytest

from runner.engines.model import Definition
from runner.engines.mysql.definers import definer_of, named_definers, with_definer

ME = "app@10.0.0.1"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "CREATE DEFINER='root'@'%' EVENT `e` ON SCHEDULE EVERY 1 DAY DO SELECT 1",
            ("event", "e", "root@%"),
        ),
        ("create definer = `o``k`@`h` procedure db.p() select 1", ("procedure", "p", "o`k@h")),
        (
            "CREATE OR REPLACE ALGORITHM=MERGE DEFINER=CURRENT_USER() SQL SECURITY INVOKER"
            " VIEW v AS SELECT 1",
            ("view", "v", ME),
        ),
        (
            "CREATE DEFINER=a@localhost TRIGGER IF NOT EXISTS t BEFORE INSERT ON x"
            " FOR EACH ROW SET @a = 1",
            ("trigger", "t", "a@localhost"),
        ),
        (
            "CREATE DEFINER=\"weird@name\"@'::1' FUNCTION f() RETURNS int RETURN 1",
            ("function", "f", "weird@name@::1"),
        ),
    ],
)
def test_a_named_definer_is_read_from_the_statement(
    sql: str, expected: tuple[str, str, str]
) -> None:
    assert definer_of(sql, ME) == expected


def test_statements_without_a_definer_name_none() -> None:
    assert definer_of("CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT 'DEFINER=x@y'", ME) is None
    assert named_definers(["CREATE TABLE definer (id int)", "SELECT 1"], ME) == {}


def test_routine_names_are_case_insensitive_and_the_last_statement_wins() -> None:
    found = named_definers(
        ["CREATE DEFINER=a@h PROCEDURE P() SELECT 1", "CREATE DEFINER=b@h PROCEDURE p() SELECT 2"],
        ME,
    )
    assert found == {("procedure", "p"): "b@h"}


def test_the_definer_clause_goes_after_a_views_algorithm() -> None:
    view = Definition(
        key="view:db.v",
        kind="view",
        create="CREATE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `v` AS select 1",
        drop="DROP VIEW `v`",
        definition="ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `v` AS select 1",
        replace="CREATE OR REPLACE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `v` AS select 1",
    )
    owned = with_definer(view, "root@%")
    assert owned.create == (
        "CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`%` SQL SECURITY DEFINER VIEW `v` AS select 1"
    )
    assert owned.replace is not None and owned.replace.startswith(
        "CREATE OR REPLACE ALGORITHM=UNDEFINED DEFINER=`root`@`%` SQL"
    )
    assert owned.fact("definer") == "root@%"
    assert with_definer(owned, None) == view
