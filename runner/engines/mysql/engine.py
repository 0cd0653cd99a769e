"""The MySQL/MariaDB engine: plan, dry-run, apply, drift and inspect against real servers.

DDL is not transactional here. Planning normalizes the desired schema in a shadow schema,
then rebuilds the live schema in a second one and runs the plan there, statement by
statement, probing for each ``ALTER TABLE`` the cheapest algorithm the server accepts
(``INSTANT``, ``INPLACE`` with ``LOCK=NONE``, else ``COPY``); that is the statement's lock
hazard. Applying holds ``GET_LOCK`` on the apply session, refuses a stale plan, and records
each statement in a journal before and after it runs (see :mod:`.journal`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from fnmatch import fnmatchcase
from typing import Any, Final

import pymysql

from runner.engines.core import Engine, LoadPiece, load_retrying, probed_hazards
from runner.engines.desired import DesiredSchemaError
from runner.engines.model import PUBLIC, Database, Definition, Grant, PrivilegeScope, object_of
from runner.engines.mysql.acl import (
    GRANT_TABLES,
    ROLE_TABLE,
    GrantsNotVisible,
    left_behind,
    orphans,
    with_grants,
)
from runner.engines.mysql.connection import connection, database_name, error_text, rows
from runner.engines.mysql.definers import (
    attach,
    expected_definers,
    named_definers,
    split_account,
)
from runner.engines.mysql.diff import diff
from runner.engines.mysql.grants import (
    AccountError,
    account_sql,
    grant_statement,
    is_role,
    resolve,
    server_name,
    written,
)
from runner.engines.mysql.introspect import SCHEMA, RoutineNotVisible, introspect
from runner.engines.mysql.journal import Journal, interrupted
from runner.engines.mysql.leftovers import leftovers as find_leftovers
from runner.engines.mysql.quoting import ident, literal
from runner.engines.mysql.render import renderer
from runner.engines.mysql.sandbox import (
    Sandbox,
    ServerFacts,
    dev_sandbox,
    private_sandbox,
    rewrite_definers,
    server_facts,
)
from runner.engines.plan import HazardEntry, PlanDocument, PlanStatement, plan_digest
from runner.engines.planner import (
    Planned,
    PlanOptions,
    PlanRefused,
    Renderer,
    converged,
    document_privileges,
    fingerprint,
    plan_changes,
)
from runner.engines.privileges import PRIVILEGE_OPS, role_uses
from runner.engines.renamed import Spelling
from runner.engines.renames import Naming
from runner.engines.report import ApplyOptions, ApplyReport
from runner.engines.scope import EVERYTHING, Scope, apply_scope
from runner.engines.watchdog import Watchdog, watching
from runner.errors import CanNotRunError
from runner.sql.split_mysql import split_mysql

__all__ = ["ALGORITHMS", "MysqlEngine", "lock_name"]

ALGORITHMS = (
    ("INSTANT", ", ALGORITHM=INSTANT"),
    ("INPLACE", ", ALGORITHM=INPLACE, LOCK=NONE"),
    ("COPY", ""),
)
"""Probed in this order on the shadow schema; the first one accepted is recorded."""

_USE = re.compile(r"^\s*USE\s+`?([^`\s;]+)`?\s*$", re.IGNORECASE)


def lock_name(database: str) -> str:
    """The ``GET_LOCK`` name every apply to ``database`` holds (at most 64 characters)."""
    name = f"seshat-schema-apply:{database}"
    if len(name) > 64:
        name = "seshat-schema-apply:" + hashlib.sha256(database.encode()).hexdigest()[:44]
    return name


def _execute(conn: Any, sql: str) -> None:
    with conn.cursor() as cur:
        cur.execute(sql)


class MysqlEngine(Engine[ServerFacts, Sandbox]):
    """One MySQL or MariaDB target, read only while planning; everything else runs in a
    sandbox (:mod:`.sandbox`)."""

    dialect = "mysql"
    transactional_ddl = False
    transaction_modes = frozenset({"auto", "none"})  # each DDL statement commits on its own
    manages_privileges = True  # grants of managed accounts; no ownership (see manage)
    naming = Naming(default_schema=SCHEMA, schemas=False)
    spelling = Spelling(
        quote=ident,
        qualified_references=False,
        deparsed_definitions=False,
        index_names_per_table=True,
        kinds=frozenset({"table", "column", "index"}),  # MariaDB renames no constraint
    )
    journals = True  # apply reads ApplyOptions.journal: the CLI passes --journal

    database: str  # the target's database (a MySQL URL names exactly one)

    def prepare(self) -> None:
        self.database = database_name(self.url)
        self.stand_ins: dict[str, str] = {}  # a sandbox stand-in's user -> the managed user

    def _stand_ins(self, sandbox: Sandbox, named: Sequence[str] = ()) -> dict[str, str]:
        """The sandbox's stand-in for each managed grantee, and for each role of ``named``
        (:meth:`Sandbox.stand_ins`)."""
        made = sandbox.stand_ins({*self.privileges.roles, *named})
        for real, stand_in in made.items():
            user = stand_in.rpartition("@")[0]
            self.stand_ins[user] = server_name(real).rpartition("@")[0]
            if user not in self.scratch_names:
                self.scratch_names.append(user)
        return made

    def _grant_in_sandbox(self, sandbox: Sandbox, file: str, line: int, sql: str) -> str | None:
        """A desired GRANT or REVOKE as the sandbox runs it: to the stand-ins of the managed
        grantees it names, the others left out (None: it names none, and is left alone).
        Refused: the runner's own account, PROXY, a role grant naming a role that is not
        managed, another database's or a global level (a plan manages one database)."""
        statement = grant_statement(sql)
        assert statement is not None
        where = f"{file}:{line}"
        roles = {r for r in self.privileges.roles if is_role(r)}
        try:
            grantees = {g: resolve(g, roles) for g in statement.grantees if g != "CURRENT_USER"}
        except AccountError as error:
            raise DesiredSchemaError(f"{where}: {error}") from None
        for grantee in statement.grantees:
            if grantee == "CURRENT_USER" or grantees[grantee] == sandbox.facts.account:
                shown = "CURRENT_USER" if grantee == "CURRENT_USER" else account_sql(grantee)
                raise DesiredSchemaError(
                    f"{where}: the desired schema grants to or revokes from {shown}, the "
                    "runner's own account; a plan must not change what the account that "
                    "applies it may do"
                )
        managed = {g: r for g, r in grantees.items() if r in self.privileges.roles}
        if not managed:
            return None
        if statement.proxy:
            raise DesiredSchemaError(f"{where}: PROXY grants are not managed")
        if not statement.level:
            unmanaged = [r for r in statement.roles if r not in roles]
            if unmanaged:
                raise DesiredSchemaError(
                    f"{where}: a membership is managed when both the role and the grantee are "
                    f"managed roles; {account_sql(unmanaged[0])} is not (add --managed-role "
                    f"{unmanaged[0]}, policy.managedRoles)"
                )
        qualifier = statement.qualifier()
        if qualifier is not None and qualifier != self.database:
            raise DesiredSchemaError(
                f"{where}: a grant on {'every database' if qualifier == '*' else qualifier} "
                f"is outside the database a plan manages ({self.database})"
            )
        stand = self._stand_ins(sandbox)
        return statement.with_grantees({g: stand[r] for g, r in managed.items()}, stand)

    # -- reading ---------------------------------------------------------------------------

    def manage(self, scope: PrivilegeScope) -> None:
        """Managed roles are accounts, roles or ``PUBLIC``, as the target resolves their
        names (:func:`~.grants.resolve`: ``app`` is the role ``app`` where the target has
        one, else the account ``app@%``); ``--manage-ownership`` is refused: MariaDB
        objects have no owner."""
        if scope.ownership:
            raise PlanRefused(
                "unsupported_option",
                "--manage-ownership (policy.manageOwnership) has no meaning on MariaDB: its "
                "objects have no owner (a routine's or view's DEFINER is part of its definition)",
            )
        if not scope.roles:
            super().manage(scope)
            return
        try:
            names = [written(role) for role in scope.roles]
        except AccountError as error:
            raise PlanRefused("unsupported_option", str(error)) from None
        bare = sorted({user for user, host in names if host is None})
        with self._server_errors(), connection(self.url) as conn:
            roles = _roles(conn, bare)
            version = str(rows(conn, "SELECT VERSION()")[0][0])
        if PUBLIC in scope.roles and not _has_public(version):
            raise PlanRefused(
                "unsupported_option",
                f"PUBLIC cannot be a managed role on {version}: GRANT ... TO PUBLIC is "
                "MariaDB 10.11's; name accounts and roles",
            )
        super().manage(PrivilegeScope.of([resolve(role, roles) for role in scope.roles]))

    def _dry_run(
        self,
        lazy: Any,
        live: Database,
        desired: Database,
        planned: Planned,
        options: PlanOptions,
    ) -> tuple[list[PlanStatement], str]:
        """With privileges managed, the dry run rebuilds the whole live schema: a scope of it
        would leave out the database's own grants (``ON *``)."""
        if not self.privileges.active:
            return super()._dry_run(lazy, live, desired, planned, options)
        statements, result = self.dry_run(lazy.get(), live, planned.statements)
        return statements, converged(_scoped(result, options.scope), desired, diff)

    def _read(
        self, conn: Any, database: str, scope: Scope, accounts: dict[str, str] | None = None
    ) -> Database:
        """The model of ``database`` in ``scope``, with the grants of the managed accounts
        (``accounts``: the server's account -> the managed one; by default themselves)."""
        model = _introspect(conn, database)
        if self.privileges.active:
            names = {server_name(g): g for g in self.privileges.roles}
            names = names if accounts is None else accounts
            try:
                model = with_grants(conn, database, model, names)
            except GrantsNotVisible as error:
                raise PlanRefused(
                    "catalog_not_visible",
                    f"managing privileges needs SELECT on {', '.join(GRANT_TABLES)} (and "
                    f"{ROLE_TABLE} to manage roles): {error}",
                ) from None
        return _scoped(model, scope)

    @contextlib.contextmanager
    def _server_errors(self) -> Iterator[None]:
        """A server error outside a statement's own step: could not run, nothing to blame."""
        try:
            yield
        except pymysql.MySQLError as error:
            raise CanNotRunError(self._scrub(f"database error: {error_text(error)}")) from None

    def facts(self) -> ServerFacts:
        """The server's facts, once the credential is known to see every object."""
        with self._server_errors(), connection(self.url) as conn:
            _refuse_invisible(conn, self.database)
            facts = server_facts(conn, self.database)
        if facts.account in self.privileges.roles:
            raise PlanRefused(
                "unsupported_option",
                f"the managed account {facts.account} is the runner's own: a plan must not "
                "grant to or revoke from the account that applies it",
            )
        return facts

    def leftovers(self) -> list[str]:
        """Prepared XA transactions on the server (:mod:`.leftovers`)."""
        with self._server_errors(), connection(self.url) as conn:
            return find_leftovers(conn)

    def impact_reader(self, timeout_ms: int) -> contextlib.AbstractContextManager[Any]:
        from runner.engines.mysql.impact import reader

        return reader(self.url, timeout_ms)

    def observe(self, scope: Scope) -> Database:
        """The live schema, read only: in read-only transactions, twice, until two readings
        agree (the data dictionary has no snapshot)."""
        with self._server_errors(), connection(self.url) as conn:
            _execute(conn, "SET SESSION TRANSACTION READ ONLY")
            for _ in range(3):
                _execute(conn, "START TRANSACTION READ ONLY")
                first = self._read(conn, self.database, scope)
                second = self._read(conn, self.database, scope)
                _execute(conn, "COMMIT")
                if fingerprint(first) == fingerprint(second):
                    return first
        raise CanNotRunError("the live schema changed while it was read, three times; plan again")

    def server_key(self, facts: ServerFacts) -> dict[str, object]:
        return {
            "version": facts.version,
            "sqlMode": facts.sql_mode,
            "lowerCaseTableNames": facts.lower_case_table_names,
            "charset": facts.charset,
            "collation": facts.collation,
            "database": self.database,  # qualifiers naming it are pointed at the sandbox
            "account": facts.account,  # the definer of what the plan creates
        }

    def _scrub(self, text: str) -> str:
        """``text`` with sandbox schema names replaced by the target's name, and stand-in
        accounts by the accounts they stand for."""
        for stand_in, user in self.stand_ins.items():
            text = text.replace(stand_in, user)
        for name in self.scratch_names:
            text = text.replace(name, self.database)
        return text

    @contextlib.contextmanager
    def sandbox(self, facts: ServerFacts) -> Iterator[Sandbox]:
        opened = self.server_sandbox(facts, dev_sandbox, private_sandbox)
        with self._server_errors(), opened as sandbox:
            yield sandbox

    def normalize(self, sandbox: Sandbox, files: list[tuple[str, str]], scope: Scope) -> Database:
        """Load the desired schema into a fresh sandbox schema and read it back."""
        with self._server_errors():
            conn, name = sandbox.fresh()
        self.scratch_names.append(name)
        pieces: list[LoadPiece] = []
        named: list[str] = []  # the statements as written, for the definers they name
        qualifier = re.compile(r"(?<![\w`$])(`?)" + re.escape(self.database) + r"\1(?=\s*\.)")
        try:
            with self._server_errors(), conn.cursor() as cur:
                # How quotes are read, as the classifier reads them (runner/sql/classify.py).
                cur.execute("SET SESSION sql_mode = %s", (sandbox.facts.sql_mode,))
            for piece in self.declared(files, sandbox.facts.sql_mode):
                file = piece.file
                if match := _USE.match(piece.sql):
                    if match.group(1) != self.database:
                        raise DesiredSchemaError(f"{file}:{piece.line}: USE names another database")
                    continue
                sql = piece.sql
                if grant_statement(sql) is not None:
                    granted = self._grant_in_sandbox(sandbox, file, piece.line, sql)
                    if granted is None:
                        continue  # grants nothing to a managed account: left alone
                    sql = granted
                else:
                    named.append(sql)
                sql = rewrite_definers(qualifier.sub(ident(name), sql))
                pieces.append(LoadPiece(file, piece.line, sql))

            def run(piece: LoadPiece) -> str | None:
                try:
                    _watched(watch, conn, piece.sql)
                except pymysql.MySQLError as error:
                    return self._scrub(watch.explain(error_text(error)))
                return None

            with self._server_errors():
                _execute(conn, "SET SESSION foreign_key_checks = 0")
            with watching(sandbox.canceller(conn)) as watch:
                load_retrying(pieces, run)
        finally:
            conn.close()
        # Read back in a new session: nothing the desired SQL set on its own carries over.
        stood = {v: k for k, v in sandbox.accounts.items()}
        with self._server_errors(), connection(sandbox.server, name, env_password=False) as reader:
            desired = self._read(reader, name, scope, stood)
        desired = attach(desired, named_definers(named, sandbox.facts.account))
        return desired

    # -- planning --------------------------------------------------------------------------

    def renderer(self, desired: Database, live: Database) -> Renderer:
        return renderer(desired, live)

    def check_desired(self, desired: Database, options: PlanOptions) -> None:
        if self.privileges.active:
            self._accounts_exist(desired)

    def finish_plan(self, planned: Planned) -> Planned:
        self._refuse_unknown_definers(planned)
        return Planned(planned.changes, tuple(_merged(planned.statements)))

    def split(self, text: str) -> list[tuple[int, str]]:
        return [(piece.line, piece.sql) for piece in split_mysql(text)]

    def classifier_mode(self, facts: ServerFacts) -> str:
        """The target's ``sql_mode``: the loader sets it on its session (so an explicit
        sandbox reads quotes as the target does, and as the classifier does)."""
        return facts.sql_mode

    def _accounts_exist(self, desired: Database) -> None:
        """Refuse (``unknown_role``) a desired grant to an account or role the target lacks:
        Seshat creates neither (the sandbox grants to stand-ins, so only the target knows)."""
        named = role_uses(desired)
        for key, grant in desired.grants.items():
            if grant.on.startswith("role:"):
                named.setdefault(grant.on.removeprefix("role:"), key)
        if not named:
            return
        with self._server_errors(), connection(self.url) as conn:
            for name, key in sorted(named.items()):
                what = "role" if is_role(name) else "account"
                try:
                    found = _account_exists(conn, server_name(name))
                except pymysql.MySQLError:
                    raise PlanRefused(
                        "unknown_role",
                        f"the desired schema grants to {account_sql(name)}, and this credential "
                        f"cannot read mysql.user to check that the {what} exists",
                    ) from None
                if not found:
                    raise PlanRefused(
                        "unknown_role",
                        f"{what} {account_sql(name)} does not exist on the target server "
                        f"(named by {key}); Seshat does not create {what}s: create it first",
                    )

    def _refuse_unknown_definers(self, planned: Planned) -> None:
        """``unknown_definer`` when the plan creates an object whose named definer is no
        account of the target (the server would create it, and it could never run)."""
        named = sorted(
            {
                definer
                for change in planned.changes
                if isinstance(change.after, Definition)
                and change.op in ("create_definition", "replace_definition")
                and (definer := change.after.fact("definer")) is not None
            }
        )
        if not named:
            return
        with self._server_errors(), connection(self.url) as conn:
            current = str(rows(conn, "SELECT CURRENT_USER()")[0][0])
            for definer in named:
                user, host = split_account(definer)
                try:
                    exists = definer == current or _account_exists(conn, definer)
                except pymysql.MySQLError:
                    raise PlanRefused(
                        "unknown_definer",
                        f"the desired schema names DEFINER={literal(user)}@{literal(host)}, "
                        "and this credential cannot read mysql.user to check that the account "
                        "exists",
                    ) from None
                if not exists:
                    raise PlanRefused(
                        "unknown_definer",
                        f"the desired schema names DEFINER={literal(user)}@{literal(host)}, "
                        "which is not an account of the target server",
                    )

    def drift_differ(self, live: Database, desired: Database) -> list[Any]:
        return diff(live, desired)

    def dry_run(
        self, sandbox: Sandbox, baseline: Database, statements: Sequence[PlanStatement]
    ) -> tuple[list[PlanStatement], Database]:
        """Rebuild ``baseline`` in a fresh sandbox schema and run the plan there, probing
        each ``ALTER TABLE``'s algorithm; the result carries the definers the target will
        have (the sandbox's own user owns everything there)."""
        with self._server_errors():
            conn, name = sandbox.fresh()
            self.scratch_names.append(name)
            try:
                with watching(sandbox.canceller(conn)) as watch:
                    probed, result = self._probe_run(
                        conn, name, baseline, statements, sandbox, watch
                    )
            finally:
                conn.close()
        account = sandbox.facts.account
        return probed, expected_definers(result, baseline, statements, account)

    def _probe_run(
        self,
        conn: Any,
        name: str,
        baseline: Database,
        statements: Sequence[PlanStatement],
        sandbox: Sandbox,
        watch: Watchdog,
    ) -> tuple[list[PlanStatement], Database]:
        stand = self._stand_ins(sandbox) if self.privileges.active else {}

        def execute(sql: str) -> None:
            _watched(watch, conn, sql)

        def stood(sql: str) -> str:
            """A plan's GRANT or REVOKE to the stand-ins of what it names."""
            granted = grant_statement(sql)
            assert granted is not None
            named = granted.with_grantees(stand, stand)
            assert named is not None
            return named

        def here(statement: PlanStatement) -> str:
            """The statement as the sandbox runs it: definers its own, grants to stand-ins."""
            if statement.op in PRIVILEGE_OPS:
                return stood(statement.sql)
            return rewrite_definers(statement.sql)

        empty = _introspect(conn, name)
        held, left = orphans(baseline)
        copy = plan_changes(
            empty,
            held,
            PlanOptions(allow_destructive=True),
            renderer(held, empty),
            differ=diff,
        )
        _execute(conn, "SET SESSION foreign_key_checks = 0")
        try:
            for statement in copy.statements:
                execute(here(statement))
            for sql, grants in left_behind(held, left):
                execute(stood(sql) if grants else sql)
        except pymysql.MySQLError as error:
            raise self._dry_run_failed(watch, error, "could not rebuild the live schema") from None
        finally:
            _execute(conn, "SET SESSION foreign_key_checks = 1")
        probed: list[PlanStatement] = []
        for index, statement in enumerate(statements):
            try:
                algorithm = _probe(execute, here(statement))
            except pymysql.MySQLError as error:
                raise self._dry_run_failed(watch, error, f"statement {index + 1} failed") from None
            probed.append(probed_hazards(statement, algorithm))
        return probed, self._read(conn, name, EVERYTHING, {v: k for k, v in stand.items()})

    def _dry_run_failed(self, watch: Watchdog, error: Exception, what: str) -> PlanRefused:
        """``dry_run_failed``: ``what`` happened in the dry run, and the server's reason."""
        why = watch.explain(error_text(error))
        return PlanRefused("dry_run_failed", self._scrub(f"{what} in the dry run: {why}"))

    # -- applying --------------------------------------------------------------------------

    def apply(self, document: PlanDocument, options: ApplyOptions) -> ApplyReport:
        """Run ``document`` statement by statement under ``GET_LOCK``, journaling each one.

        If ``options.journal`` records an interrupted run of this same plan, nothing runs: the
        report says which statements finished and which one's outcome is unknown.
        """
        report = ApplyReport(plan_id=plan_digest(document))
        self.manage(document_privileges(document))
        journal = options.journal
        if journal is not None and (previous := interrupted(journal, report.plan_id)):
            report.ran = previous.finished
            report.unknown = previous.unknown
            report.interrupted = True
            report.error = _interrupted_message(previous.finished, previous.unknown)
            return report
        seconds = max(1, options.lock_timeout_ms // 1000)
        with self._server_errors(), connection(self.url) as conn:
            _execute(conn, f"SET SESSION lock_wait_timeout = {seconds}")
            got = rows(conn, "SELECT GET_LOCK(%s, %s)", (lock_name(self.database), seconds))
            if not got or got[0][0] != 1:
                raise PlanRefused("locked", "another apply holds this database's lock")
            live = self._read(conn, self.database, document.scope)
            if fingerprint(live) != document.observed:
                raise PlanRefused("stale_plan", "the live schema changed since the plan was made")
            log = Journal(journal, report.plan_id)
            try:
                log.write("begin", statements=len(document.statements))
                for index, statement in enumerate(document.statements):
                    log.write("started", index=index)
                    try:
                        _execute(conn, statement.sql)
                    except pymysql.MySQLError as error:
                        report.failed = index
                        report.error = error_text(error)
                        log.write("failed", index=index, error=report.error)
                        return report
                    log.write("finished", index=index)
                    report.ran.append(index)
                after = self._read(conn, self.database, document.scope)
                report.settle(fingerprint(after) == document.expected)
                log.write("end", converged=report.converged)
            finally:
                log.close()
        return report


def _scoped(db: Database, scope: Scope) -> Database:
    """``db`` in ``scope``, keeping the grants that are on no object the scope could leave
    out: the database's own, role memberships, and those on a name nothing holds unless an
    ``--exclude`` pattern matches the name (MariaDB keeps them for the next object of it)."""
    scoped = apply_scope(db, scope)
    if scoped is db:
        return db

    def kept(grant: Grant) -> bool:
        if grant.on.startswith(("database:", "role:")):
            return True
        name = object_of(grant.on).split(":", 1)[1]
        held = object_of(grant.on) in db.tables or "view:" + name in db.definitions
        return not held and not any(fnmatchcase(name, p) for p in scope.exclude)

    grants = {k: g for k, g in db.grants.items() if k in scoped.grants or kept(g)}
    return dataclasses.replace(scoped, grants=grants)


def _introspect(conn: Any, database: str) -> Database:
    """:func:`introspect`, with a routine the credential may not read refused."""
    try:
        return introspect(conn, database)
    except RoutineNotVisible as hidden:
        raise PlanRefused(
            "catalog_not_visible",
            f"the credential cannot read the text of {hidden}; it must be the routine's "
            "definer or may read mysql.proc (see docs/engine.md)",
        ) from None


def _account_exists(conn: Any, account: str) -> bool:
    """Whether ``account`` (``user@host``; a role's host is empty) is a user or role of
    ``conn``'s server; pymysql's error when the credential may not read ``mysql.user``."""
    user, host = split_account(account)
    found = rows(
        conn, "SELECT COUNT(*) FROM mysql.user WHERE User = %s AND Host = %s", (user, host)
    )
    return bool(found and int(found[0][0]))


def _roles(conn: Any, names: Sequence[str]) -> set[str]:
    """Which of ``names`` are roles of ``conn``'s server (none on MySQL, whose roles are
    accounts); ``catalog_not_visible`` when the credential may not read ``mysql.user``."""
    if not names:
        return set()
    marks = ", ".join("%s" for _ in names)
    try:
        found = rows(
            conn,
            f"SELECT User FROM mysql.user WHERE Host = '' AND is_role = 'Y' AND User IN ({marks})",
            tuple(names),
        )
    except pymysql.err.OperationalError as error:
        if error.args and error.args[0] == 1054:  # no is_role: MySQL
            return set()
        raise PlanRefused(
            "catalog_not_visible",
            f"managing privileges needs SELECT on mysql.user (to tell roles from accounts): "
            f"{error_text(error)}",
        ) from None
    except pymysql.MySQLError as error:
        raise PlanRefused(
            "catalog_not_visible",
            f"managing privileges needs SELECT on mysql.user (to tell roles from accounts): "
            f"{error_text(error)}",
        ) from None
    return {str(r[0]) for r in found}


def _has_public(version: str) -> bool:
    """Whether a server of ``version`` grants to PUBLIC (MariaDB 10.11 and later)."""
    if "mariadb" not in version.lower():
        return False
    major, minor = (int(p) for p in version.split("-", 1)[0].split(".")[:2])
    return (major, minor) >= (10, 11)


def _interrupted_message(finished: list[int], unknown: int | None) -> str:
    ran = ", ".join(str(i + 1) for i in finished) or "none"
    text = f"a previous apply of this plan was interrupted; statements that ran: {ran}"
    if unknown is not None:
        text += f"; the outcome of statement {unknown + 1} is unknown"
    return text + "; inspect the database and plan again"


def _watched(watch: Watchdog, conn: Any, sql: str) -> None:
    """``sql`` under the watchdog's deadline. A statement the watchdog ended fails, even
    where MariaDB answers success (an interrupted ``DO SLEEP()`` or ``BENCHMARK()`` does)."""
    with watch.statement():
        _execute(conn, sql)
    if watch.fired:
        raise pymysql.err.OperationalError(1317, "Query execution was interrupted")


def _merged(statements: Sequence[PlanStatement]) -> list[PlanStatement]:
    """One statement where several changes of one column render the same SQL."""
    merged: list[PlanStatement] = []
    seen: dict[tuple[str, str], int] = {}
    for statement in statements:
        at = seen.get((statement.key, statement.sql))
        if at is None:
            seen[(statement.key, statement.sql)] = len(merged)
            merged.append(statement)
            continue
        hazards = {(h.kind, h.code) for h in merged[at].hazards + statement.hazards}
        merged[at] = merged[at].model_copy(
            update={"hazards": [HazardEntry(kind=k, code=c) for k, c in sorted(hazards)]}
        )
    return merged


def _probe(execute: Callable[[str], None], sql: str) -> str | None:
    """Run ``sql`` in the cheapest algorithm accepted; ``None`` for other than ALTER TABLE."""
    if not re.match(r"ALTER\s+TABLE\b", sql, re.IGNORECASE):
        execute(sql)
        return None
    for algorithm, clause in ALGORITHMS:
        try:
            execute(sql + clause)
            return algorithm
        except pymysql.MySQLError:
            if not clause:
                raise
    raise AssertionError("unreachable")


REQUIRED_PRIVILEGES: Final = ("SELECT", "SHOW VIEW", "TRIGGER", "EVENT")
"""What a credential needs on the whole target database to see every object Seshat models
(information_schema hides tables, views' text, triggers and events from anyone else)."""


def _refuse_invisible(conn: Any, database: str) -> None:
    """``catalog_not_visible`` unless the credential holds :data:`REQUIRED_PRIVILEGES` on the
    whole database (globally or on a schema pattern matching it): with less, whole classes
    of objects would be missing from the reading, and a plan would recreate them."""
    user, _, host = str(rows(conn, "SELECT CURRENT_USER()")[0][0]).rpartition("@")
    enabled = "SELECT ROLE_NAME FROM information_schema.ENABLED_ROLES"
    roles = [str(r[0]) for r in rows(conn, enabled)]
    names = [f"'{user}'@'{host}'"] + [f"'{r}'" for r in roles] + [f"'{r}'@''" for r in roles]
    wanted = ", ".join("%s" for _ in names)
    held = {
        str(row[0])
        for row in rows(
            conn,
            f"SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE IN"
            f" ({wanted}) UNION SELECT PRIVILEGE_TYPE FROM information_schema.SCHEMA_PRIVILEGES"
            f" WHERE GRANTEE IN ({wanted}) AND %s LIKE TABLE_SCHEMA",
            (*names, *names, database),
        )
    }
    missing = [p for p in REQUIRED_PRIVILEGES if p not in held]
    if missing:
        raise PlanRefused(
            "catalog_not_visible",
            f"the credential cannot see every object of {database}: it lacks "
            f"{', '.join(missing)} on {database}.* (grant SELECT, SHOW VIEW, TRIGGER, EVENT "
            f"ON `{database}`.*; see docs/engine.md)",
        )
