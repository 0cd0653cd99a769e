"""A plan's SQL text runs in each dialect's own client exactly as the plan says.

Names in a desired schema are chosen by whoever controls the artifact. A name with a line
break once ended a ``-- [0003] …`` comment line of ``plan.sql``, so ``psql -f`` ran a
statement that was not in the plan. Here each rendered plan is fed to the real client
(``psql``, ``mariadb``, the ``sqlite3`` shell) with the client echoing every statement it
sends, and what it sent must be the plan's statements, in order, and nothing else: no
statement, meta-command, shell escape or dot command hidden in a name runs.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

from harness import secret_scan
from harness.mariadb import MariaDBDatabase
from harness.postgres import PostgresDatabase

from runner.engines.mysql.engine import MysqlEngine
from runner.engines.plan import PlanDocument, comment_text, plan_sql
from runner.engines.planner import PlanOptions
from runner.engines.postgresql.engine import PostgresEngine
from runner.engines.sqlite.engine import SqliteEngine
from runner.url import parse_url

# Every character some client or editor may take as the end of a line.
LINE_BREAKS = ("\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c")


MARKER = "pwned"
"""What a shell escape hidden in a name would create, in the client's working folder."""

HOSTILE_NAMES = (
    *(f"t{i}{brk}DROP TABLE important; --" for i, brk in enumerate(LINE_BREAKS)),
    *(f"m{i}{brk}\\! touch {MARKER}{brk}x" for i, brk in enumerate(("\n", "\r"))),
    f"s1\nsystem touch {MARKER}\nx",  # the mariadb client's long form
    f"d\n.shell touch {MARKER}\nx",  # sqlite3 shell dot commands
    f"e\n.system touch {MARKER}\nx",
    "bidi\u202etxt.exe\u202c \\n",
    "dl\nDELIMITER ;\nDROP TABLE important;\nx",  # a statement with a `;` is delimited
)
"""Table names that, written raw in a comment line, would run something."""


def desired_schema(tmp_path: Path, quote: str, comment: str) -> Path:
    tables = ["important", *HOSTILE_NAMES]
    lines = [f"CREATE TABLE {quote}{name}{quote} (id integer PRIMARY KEY);" for name in tables]
    lines.append(comment)
    path = tmp_path / "desired.sql"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_client(command: list[str | Path], cwd: Path, stdin: Path | None = None) -> str:
    with (stdin or Path("/dev/null")).open("rb") as source:
        run = subprocess.run(
            command, cwd=cwd, stdin=source, capture_output=True, timeout=60, check=False
        )
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    assert not (cwd / MARKER).exists()
    return run.stdout.decode("utf-8")


def check_rendering(document: PlanDocument) -> str:
    text = plan_sql(document)
    comments = [line for line in text.split("\n") if line.startswith("--")]
    # One comment line per statement plus the two header lines: no name split a line.
    assert len(comments) == len(document.statements) + 2
    for number, statement in enumerate(document.statements, start=1):
        assert f"-- [{number:04d}] {statement.op} {comment_text(statement.key)} " in text
    assert all(line.isprintable() for line in comments)
    return text


def expected_echo(document: PlanDocument) -> str:
    return "".join(f"{statement.sql};\n" for statement in document.statements)


def test_psql_runs_exactly_the_plan(postgres_database: PostgresDatabase, tmp_path: Path) -> None:
    with postgres_database.connect_as_app() as conn:
        conn.execute("CREATE TABLE important (id integer PRIMARY KEY)")
        conn.execute("INSERT INTO important VALUES (1)")
    url = postgres_database.url_with_password
    comment = f"COMMENT ON TABLE important IS 'x\n\\! touch {MARKER}\ny';"
    desired = desired_schema(tmp_path, '"', comment)
    document = PostgresEngine(parse_url(url)).plan(desired, PlanOptions())
    plan = tmp_path / "plan.sql"
    plan.write_text(check_rendering(document), encoding="utf-8")
    psql = shutil.which("psql") or "psql"
    echoed = run_client(
        [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "--echo-queries", "-f", plan, url], tmp_path
    )
    assert echoed == expected_echo(document)
    with postgres_database.connect() as conn:
        assert conn.execute("SELECT count(*) FROM important").fetchone() == (1,)
    assert PostgresEngine(parse_url(url)).plan(desired, PlanOptions()).statements == []


def test_the_mariadb_client_runs_exactly_the_plan(
    mariadb_database: MariaDBDatabase, tmp_path: Path
) -> None:
    with mariadb_database.connect_as_app() as conn, conn.cursor() as cursor:
        cursor.execute("CREATE TABLE important (id integer PRIMARY KEY)")
        cursor.execute("INSERT INTO important VALUES (1)")
    comment = f"ALTER TABLE important COMMENT = 'x\n\\! touch {MARKER}\ny';"
    # A body holds `;`: plan.sql puts it between DELIMITER lines, and it is sent whole.
    comment += "\nCREATE PROCEDURE p() BEGIN SELECT 1; SELECT ';'; END;"
    desired = desired_schema(tmp_path, "`", comment)
    url = mariadb_database.url_with_password
    document = MysqlEngine(parse_url(url)).plan(desired, PlanOptions())
    plan = tmp_path / "plan.sql"
    plan.write_text(check_rendering(document), encoding="utf-8")
    server = mariadb_database.server
    client = shutil.which("mariadb") or "mariadb"
    # The password stays off the command line; an option file is a test input.
    options = secret_scan.input_file(tmp_path / "client.cnf")
    options.write_text(f'[client]\npassword="{server.app_password}"\n')
    command: list[str | Path] = [
        client,
        f"--defaults-file={options}",
        f"--host={server.host}",
        f"--port={server.port}",
        f"--user={server.app_user}",
        "--batch",
        "--verbose",
        mariadb_database.name,
    ]
    echoed = run_client(command, tmp_path, stdin=plan)
    # --verbose writes each statement it sends between two lines of dashes.
    rule = "--------------\n"
    expected = "".join(f"{rule}{statement.sql}\n{rule}\n" for statement in document.statements)
    assert echoed == expected
    with mariadb_database.connect() as conn, conn.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM important")
        assert cursor.fetchone() == (1,)
    assert MysqlEngine(parse_url(url)).plan(desired, PlanOptions()).statements == []


def test_the_sqlite3_shell_runs_exactly_the_plan(tmp_path: Path) -> None:
    live = tmp_path / "live.db"
    with sqlite3.connect(live) as conn:
        conn.execute("CREATE TABLE important (id integer PRIMARY KEY)")
        conn.execute("INSERT INTO important VALUES (1)")
    conn.close()
    desired = desired_schema(tmp_path, '"', "")
    url = f"sqlite:///{live}"
    document = SqliteEngine(parse_url(url)).plan(desired, PlanOptions())
    plan = tmp_path / "plan.sql"
    plan.write_text(check_rendering(document), encoding="utf-8")
    shell = shutil.which("sqlite3") or "sqlite3"
    echoed = run_client([shell, "-bail", "-cmd", ".trace stdout", live], tmp_path, stdin=plan)
    assert echoed == expected_echo(document)
    with sqlite3.connect(live) as conn:
        assert conn.execute("SELECT count(*) FROM important").fetchone() == (1,)
    conn.close()
    assert SqliteEngine(parse_url(url)).plan(desired, PlanOptions()).statements == []
