"""The MySQL differ's own rules on models built by hand (no server: what MySQL, which the
test harness does not run, gets from the same model)."""

from __future__ import annotations

from runner.engines.model import Database, Definition
from runner.engines.mysql.definers import with_definer
from runner.engines.mysql.diff import diff


def _routine(kind: str, body: str, *, mariadb: bool, definer: str | None = None) -> Definition:
    text = f"{kind.upper()} `r`() {body}"
    routine = Definition(
        key=f"{kind}:db.r",
        kind=kind,
        create=f"CREATE {text}",
        drop=f"DROP {kind.upper()} `r`",
        definition=text,
        replace=f"CREATE OR REPLACE {text}" if mariadb else None,
        extra=(("security_definer", "true"),),
    )
    return with_definer(routine, definer)


def _db(dialect: str, *definitions: Definition) -> Database:
    return Database(dialect=dialect, server_major=8, definitions={d.key: d for d in definitions})


def test_a_changed_routine_is_dropped_and_created_on_mysql() -> None:
    for kind in ("function", "procedure"):
        live = _db("mysql", _routine(kind, "RETURN 1", mariadb=False, definer="app@%"))
        desired = _db("mysql", _routine(kind, "RETURN 2", mariadb=False))
        assert [(c.op, c.key) for c in diff(live, desired)] == [
            ("drop_definition", f"{kind}:db.r"),
            ("create_definition", f"{kind}:db.r"),
        ]


def test_a_changed_routine_is_replaced_in_place_on_mariadb() -> None:
    for kind in ("function", "procedure"):
        live = _db("mariadb", _routine(kind, "RETURN 1", mariadb=True, definer="app@%"))
        desired = _db("mariadb", _routine(kind, "RETURN 2", mariadb=True))
        changes = diff(live, desired)
        assert [(c.op, c.key) for c in changes] == [("replace_definition", f"{kind}:db.r")]
        # The live routine as compared: its definer left out, since the desired one names none.
        assert changes[0].before == with_definer(live.definitions[f"{kind}:db.r"], None)


def test_a_definer_counts_only_where_the_desired_schema_names_one() -> None:
    live = _db("mariadb", _routine("procedure", "SELECT 1", mariadb=True, definer="app@%"))
    unnamed = _db("mariadb", _routine("procedure", "SELECT 1", mariadb=True))
    assert diff(live, unnamed) == []
    same = _db("mariadb", _routine("procedure", "SELECT 1", mariadb=True, definer="app@%"))
    assert diff(live, same) == []
    other = _db("mariadb", _routine("procedure", "SELECT 1", mariadb=True, definer="ops@%"))
    changes = diff(live, other)
    assert [(c.op, c.key) for c in changes] == [("replace_definition", "procedure:db.r")]
    assert "DEFINER=`ops`@`%`" in changes[0].new(Definition).create
