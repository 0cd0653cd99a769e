"""The corpus oracles' subset checks, which ``enable_drop: false`` cases are judged by:
everything desired must be in the database, which may hold more (what ``--skip-drops``
left alone). Pure functions over dump text and snapshots; no server."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from corpus_pgdump import Dump, normalize, subset_problems  # noqa: E402
from corpus_sqlite import Snapshot, snapshot  # noqa: E402
from corpus_sqlite import subset_problems as sqlite_subset  # noqa: E402

HEADER = "--\n-- PostgreSQL database dump\n--\n\nSET statement_timeout = 0;\n"
TABLE = (
    "--\n-- Name: users; Type: TABLE; Schema: public; Owner: -\n--\n\n"
    "CREATE TABLE public.users (\n    id bigint\n);\n\n"
)
FOOTER = "\n--\n-- PostgreSQL database dump complete\n--\n"


def dump(*entries: str, preamble: str = "") -> Dump:
    return normalize(HEADER + preamble + "\n" + "".join(entries) + FOOTER, "db")


def test_a_table_last_in_one_dump_and_followed_in_the_other_is_the_same_table() -> None:
    index = (
        "--\n-- Name: idx; Type: INDEX; Schema: public; Owner: -\n--\n\n"
        "CREATE INDEX idx ON public.users USING btree (id);\n\n"
    )
    with_index = dump(TABLE, index, preamble="SET default_table_access_method = heap;\n")
    assert subset_problems(with_index, dump(TABLE)) == []
    assert subset_problems(dump(TABLE), with_index) == [
        " (preamble) lacks 'SET default_table_access_method = heap;'",
        "missing INDEX public.idx",
    ]


def test_acl_lines_are_compared_privilege_by_privilege() -> None:
    def acl(line: str) -> str:
        return f"--\n-- Name: TABLE users; Type: ACL; Schema: public; Owner: -\n--\n\n{line}\n\n"

    more = dump(TABLE, acl("GRANT SELECT,INSERT ON TABLE public.users TO app_user;"))
    less = dump(TABLE, acl("GRANT SELECT ON TABLE public.users TO app_user;"))
    assert subset_problems(more, less) == []
    assert subset_problems(less, more) == [
        "ACL public.TABLE users lacks 'GRANT INSERT ON TABLE public.users TO app_user;'"
    ]


def test_sqlite_subset_allows_extra_columns_and_indexes_but_not_missing_ones(
    tmp_path: Path,
) -> None:
    def made(name: str, script: str) -> Snapshot:
        path = tmp_path / name
        with sqlite3.connect(path) as conn:
            conn.executescript(script)
        conn.close()
        return snapshot(path)

    kept = made(
        "kept.db",
        "CREATE TABLE users (id integer NOT NULL, email text, legacy text);"
        "CREATE INDEX idx_email ON users (email);",
    )
    desired = made("desired.db", "CREATE TABLE users (id integer NOT NULL, email text);")
    assert sqlite_subset(kept, desired) == []
    assert sqlite_subset(desired, kept) == [
        "missing INDEX idx_email",
        "differs TABLE users: lacks xinfo, indexes, index_xinfo, sql",
    ]
