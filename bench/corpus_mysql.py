"""Scoring the engine on the MySQL-family cases of the sqldef corpus, on MariaDB.

The environment is a private MariaDB server started with the test harness
(``tests/harness/mariadb.py``). Each case gets its own databases, dropped afterwards:

* ``a``  ``current`` executed verbatim, statement by statement: what the engine plans
  against and applies to. Cases whose SQL names ``mysqldef_test`` (the corpus README's
  database name, used inside view bodies) get exactly that name, one case at a time;
  the others get ``corpus_<pid>_<n>_a``;
* ``a2`` a second fresh copy of ``current``, planned once more for the determinism check;
* ``b``  ``desired`` loaded with a retrying loader: the oracle.

The oracle is ``SHOW CREATE TABLE|VIEW|TRIGGER|PROCEDURE|FUNCTION|EVENT`` of every object
``information_schema`` lists, sorted by type and name, with the ``AUTO_INCREMENT=n`` table
option removed and the database's own name replaced by a placeholder. Trigger, routine and
event bodies are the statement text the server keeps as written, so they are compared with
whitespace, backquotes and letter case normalized, and a recurring event's start time
(``STARTS``, the moment it was created unless the SQL gives one) is removed. The engine
is only ever called through ``seshat-runner`` (see :mod:`corpus_runner`).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
from corpus_cases import Case, version_satisfied
from corpus_result import CaseResult
from corpus_runner import ROOT, Runner
from corpus_score import run_case

__all__ = ["NAMED_DATABASE", "MysqlEnvironment", "running_environment"]

NAMED_DATABASE = "mysqldef_test"
SHM = Path("/dev/shm")
VECTOR_CASES = frozenset(
    {"CreateVectorIndex", "CreateVectorIndexWithOptions", "AddVectorIndex", "DropVectorIndex"}
)
_AUTO_INCREMENT = re.compile(r" AUTO_INCREMENT=\d+")
_DESTRUCTIVE_SQL = re.compile(
    r"^\s*(DROP|REVOKE|TRUNCATE)\b|\bDROP\s+(COLUMN|INDEX|KEY|FOREIGN|PRIMARY|CONSTRAINT|CHECK)\b"
    r"|^\s*ALTER\s+TABLE\s+\S+\s+DROP\b",
    re.IGNORECASE | re.DOTALL,
)
"""What README step 7 forbids without --allow-destructive: DROP, REVOKE and the like."""
_LITERALS = re.compile(r"'(?:[^'\\]|\\.|'')*'|`(?:[^`]|``)*`", re.DOTALL)
_SHOW = {
    "TABLE": ("SHOW CREATE TABLE {}", 1),
    "VIEW": ("SHOW CREATE VIEW {}", 1),
    "TRIGGER": ("SHOW CREATE TRIGGER {}", 2),
    "PROCEDURE": ("SHOW CREATE PROCEDURE {}", 2),
    "FUNCTION": ("SHOW CREATE FUNCTION {}", 2),
    "EVENT": ("SHOW CREATE EVENT {}", 3),
}
_STARTS = re.compile(r" starts '[^']*'")
_LOOSE = frozenset({"TRIGGER", "PROCEDURE", "FUNCTION", "EVENT"})


def _harness(module: str) -> Any:
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    return importlib.import_module(f"harness.{module}")


def _split(script: str) -> list[Any]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from runner.sql.split_mysql import split_mysql

    return split_mysql(script)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _error_text(error: BaseException) -> str:
    args: tuple[object, ...] = tuple(getattr(error, "args", ()))
    return str(args[1]) if len(args) >= 2 else str(error)


def destructive_sql(text: str) -> bool:
    return bool(_DESTRUCTIVE_SQL.search(_LITERALS.sub("_", text)))


def _is_destructive(statement: dict[str, Any]) -> bool:
    hazards = statement.get("hazards") or []
    if any(h.get("kind") == "destructive" for h in hazards):
        return True
    return destructive_sql(str(statement.get("sql", "")))


class LoadError(Exception):
    """A script did not load; the message names the statement's line and the server error."""


Dump = dict[tuple[str, str], str]


@dataclass(frozen=True)
class _Databases:
    a: str
    a2: str
    b: str


def _lines(body: str) -> set[str]:
    return {line.strip().rstrip(",") for line in body.splitlines()[1:-1]}


def compare(after: Dump, oracle: Dump) -> tuple[str, str]:
    """(one-line summary, a short diff) of what differs; empty summary when equal."""
    problems: list[str] = []
    detail: list[str] = []
    for key in sorted(after.keys() | oracle.keys()):
        if key not in oracle:
            problems.append(f"extra {key[0].lower()} {key[1]}")
        elif key not in after:
            problems.append(f"missing {key[0].lower()} {key[1]}")
        elif after[key] != oracle[key]:
            problems.append(f"differs {key[0].lower()} {key[1]}")
            detail += [f"- {after[key]}", f"+ {oracle[key]}"]
    return ("; ".join(problems[:3]) + (" ..." if len(problems) > 3 else "")), "\n".join(detail)


def subset_problems(after: Dump, oracle: Dump) -> list[str]:
    """What of B is not in A identically (tables line by line)."""
    problems: list[str] = []
    for key, body in oracle.items():
        if key not in after:
            problems.append(f"missing {key[0].lower()} {key[1]}")
        elif key[0] == "TABLE":
            lacking = _lines(body) - _lines(after[key])
            if lacking:
                problems.append(f"table {key[1]} lacks {sorted(lacking)[0]!r}")
        elif after[key] != body:
            problems.append(f"differs {key[0].lower()} {key[1]}")
    return problems


def survival_problems(before: Dump, after: Dump) -> list[str]:
    """Objects and table lines of the starting schema that vanished."""
    problems: list[str] = []
    for key, body in before.items():
        if key not in after:
            problems.append(f"dropped {key[0].lower()} {key[1]}")
        elif key[0] == "TABLE":
            columns = {line for line in _lines(body) if line.startswith("`")}
            lost = columns - _lines(after[key])
            names = {line.split("`")[1] for line in lost}
            kept = {line.split("`")[1] for line in _lines(after[key]) if line.startswith("`")}
            problems += [f"table {key[1]} lost column {n}" for n in sorted(names - kept)]
    return problems


class MysqlEnvironment:
    """A running MariaDB prepared for the corpus, and the per-case scoring procedure."""

    dialect = "mysql"

    def __init__(self, server: Any, runner: Runner, work: Path) -> None:
        self.server = server
        self.runner = runner
        self.work = work
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self._named = threading.Lock()  # one case at a time may use `mysqldef_test`
        with self._admin() as conn, conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            self.server_version = str(cur.fetchone()[0])
            # The account sqldef's MySQL servers (the official images) have, which a case
            # names as a definer; locked and without privileges: it only has to exist.
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'%' ACCOUNT LOCK")
        self.flavor = "mariadb" if "mariadb" in self.server_version.lower() else "mysql"

    def _admin(self, database: str | None = None) -> Any:
        return self.server.connect(database)

    def skip_reason(self, case: Case) -> str | None:
        """Why ``case`` is not run here, or ``None`` (README, "Which cases run")."""
        if not version_satisfied(self.server_version, case.min_version, case.max_version):
            bound = f"min_version {case.min_version}" if case.min_version else ""
            if case.max_version:
                bound = f"max_version {case.max_version}"
            return f"{bound} (server {self.server_version.split('-')[0]})"
        if case.flavor:
            wanted = case.flavor.lstrip("!")
            if (wanted == self.flavor) == case.flavor.startswith("!"):
                return f"flavor {case.flavor}"
        if case.offline:
            return "offline (text-only case)"
        if case.file == "mariadb" and case.name in VECTOR_CASES:
            return "VECTOR needs MariaDB 11.7"
        return None

    # -- databases -----------------------------------------------------------------------

    def _names(self, named: bool) -> _Databases:
        with self._lock:
            number = next(self._counter)
        stem = f"corpus_{os.getpid()}_{number}"
        return _Databases(NAMED_DATABASE if named else f"{stem}_a", f"{stem}_a2", f"{stem}_b")

    def _create(self, name: str) -> None:
        with self._admin() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {_quote(name)}")
            cur.execute(f"CREATE DATABASE {_quote(name)}")

    def _drop(self, names: list[str]) -> None:
        with self._admin() as conn, conn.cursor() as cur:
            for name in names:
                with contextlib.suppress(pymysql.MySQLError):
                    cur.execute(f"DROP DATABASE IF EXISTS {_quote(name)}")

    def url(self, name: str) -> str:
        url: str = self.server.url(name)
        return url

    # -- loading -------------------------------------------------------------------------

    @staticmethod
    def _script(script: str, name: str) -> str:
        return script if name == NAMED_DATABASE else script.replace(NAMED_DATABASE, name)

    def load_verbatim(self, name: str, script: str) -> None:
        """Run ``script`` in order, one statement at a time; the first failure is fatal."""
        with self._admin(name) as conn, conn.cursor() as cur:
            for statement in _split(self._script(script, name)):
                try:
                    cur.execute(statement.sql)
                except pymysql.MySQLError as error:
                    raise LoadError(f"line {statement.line}: {_error_text(error)}") from None

    def load_retrying(self, name: str, script: str) -> None:
        """The oracle loader: retry failed statements until no further progress."""
        pending = _split(self._script(script, name))
        with self._admin(name) as conn, conn.cursor() as cur:
            while pending:
                failed: list[tuple[Any, str]] = []
                for statement in pending:
                    try:
                        cur.execute(statement.sql)
                    except pymysql.MySQLError as error:
                        failed.append((statement, _error_text(error)))
                if len(failed) == len(pending):
                    first, message = failed[0]
                    raise LoadError(f"line {first.line}: {message}")
                pending = [s for s, _ in failed]

    def dump(self, name: str) -> Dump:
        """``SHOW CREATE`` of every object, keyed by (type, name), normalized."""
        objects: list[tuple[str, str]] = []
        with self._admin(name) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT IF(TABLE_TYPE = 'VIEW', 'VIEW', 'TABLE'), TABLE_NAME FROM"
                " information_schema.TABLES WHERE TABLE_SCHEMA = %s"
                " UNION ALL SELECT 'TRIGGER', TRIGGER_NAME FROM information_schema.TRIGGERS"
                " WHERE TRIGGER_SCHEMA = %s"
                " UNION ALL SELECT ROUTINE_TYPE, ROUTINE_NAME FROM information_schema.ROUTINES"
                " WHERE ROUTINE_SCHEMA = %s"
                " UNION ALL SELECT 'EVENT', EVENT_NAME FROM information_schema.EVENTS"
                " WHERE EVENT_SCHEMA = %s",
                (name, name, name, name),
            )
            objects = sorted((str(t), str(n)) for t, n in cur.fetchall())
            dump: Dump = {}
            for kind, object_name in objects:
                sql, column = _SHOW[kind]
                cur.execute(sql.format(_quote(object_name)))
                row = cur.fetchone()
                text = str(row[column])
                text = _AUTO_INCREMENT.sub("", text).replace(_quote(name), "`<db>`")
                if kind in _LOOSE:
                    text = " ".join(text.replace("`", "").split()).lower()
                if kind == "EVENT":
                    text = _STARTS.sub("", text)
                dump[(kind, object_name)] = text
        return dump

    # -- scoring -------------------------------------------------------------------------

    def run_case(self, case: Case) -> CaseResult:
        """Score one case (README, "How to score an engine", steps 1-7)."""
        named = NAMED_DATABASE in case.current or NAMED_DATABASE in case.desired
        guard = self._named if named else contextlib.nullcontext()
        with guard:
            return self._run_case(case, named)

    def _run_case(self, case: Case, named: bool) -> CaseResult:
        return run_case(case, self.runner, self.work, lambda _: self._databases(named))

    @contextlib.contextmanager
    def _databases(self, named: bool) -> Iterator[_MysqlCase]:
        names = self._names(named)
        try:
            yield _MysqlCase(self, names)
        finally:
            self._drop([names.a, names.a2, names.b])


class _MysqlCase:
    """One case's databases on the environment's server."""

    def __init__(self, environment: MysqlEnvironment, names: _Databases) -> None:
        self.environment, self.names = environment, names
        self.url_a, self.url_a2 = environment.url(names.a), environment.url(names.a2)
        self.env: dict[str, str] = {}

    def load(self, case: Case, result: CaseResult) -> bool:
        environment, names = self.environment, self.names
        for name in (names.a, names.a2):
            environment._create(name)
            try:
                environment.load_verbatim(name, case.current)
            except LoadError as error:
                result.fail("load_error", f"current: {error}")
                return False
        environment._create(names.b)
        try:
            environment.load_retrying(names.b, case.desired)
            result.oracle = True
        except LoadError as error:
            result.oracle = False
            result.fail("no_oracle", f"desired: {error}")
        return True

    def desired_for_a2(self, text: str) -> str:
        return self.environment._script(text, self.names.a2)

    def dump_a(self) -> Dump:
        return self.environment.dump(self.names.a)

    def dump_b(self) -> Dump:
        return self.environment.dump(self.names.b)

    def same(self, one: Dump, other: Dump) -> bool:
        return one == other

    def converged(self, after: Dump, oracle: Dump, before: Dump) -> tuple[str, str]:
        return compare(after, oracle)

    def missing(self, after: Dump, oracle: Dump) -> list[str]:
        return subset_problems(after, oracle)

    def lost(self, before: Dump, after: Dump, oracle: Dump | None) -> list[str]:
        return survival_problems(before, after) if oracle is not None else []

    def destructive(self, statement: dict[str, Any]) -> bool:
        return _is_destructive(statement)


@contextlib.contextmanager
def running_environment(runner: Runner, base_dir: Path | None = None) -> Iterator[MysqlEnvironment]:
    """Start a throw-away MariaDB with the harness, stop it afterwards."""
    mariadb = _harness("mariadb")
    if base_dir is None and SHM.is_dir() and os.access(SHM, os.W_OK):
        base_dir = SHM
    base = Path(tempfile.mkdtemp(prefix="seshat-corpus-", dir=base_dir))
    base.chmod(0o755)
    try:
        with mariadb.running_mariadb(base) as server:
            work = base / "cases"
            work.mkdir()
            yield MysqlEnvironment(server, runner, work)
    finally:
        if os.environ.get("SESHAT_KEEP_HARNESS_DIR"):
            print(f"corpus: keeping {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
