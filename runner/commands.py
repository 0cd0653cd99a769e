"""``seshat-runner``'s commands (click): op, schema ..., migrations ...

The runner executes one database operation (or batch) per process with exactly the
credential it needs. ``schema ...`` are the commands for people (and for measuring the engine);
every line they print passes through the redactor, which knows the database password and
the names of the scratch databases, in every spelling. The entry point is
:func:`runner.cli.main`, which runs the control plane's ``op --input FILE`` without
importing this module.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from runner.cli import run_op, start
from runner.digests import canonical_json
from runner.errors import SeshatError
from runner.options import format_option
from runner.redact import Redactor
from runner.url import DatabaseURL, InvalidURL, parse_url, secrets_of_unreadable

if TYPE_CHECKING:
    from runner.engines.planner import PlanOptions

__all__ = ["cli"]

EXIT_OK, EXIT_REFUSED, EXIT_CANNOT_RUN = 0, 1, 2


class Output:
    """Everything the runner prints goes through here, redacted."""

    def __init__(self) -> None:
        self.secrets: list[str] = []
        self.redact = Redactor()

    def learn(self, *secrets: str) -> None:
        """Secrets to redact from now on (passwords, scratch database names)."""
        self.secrets += [s for s in secrets if s]
        self.redact = Redactor(self.secrets)

    def out(self, text: str, *, err: bool = False, nl: bool = True) -> None:
        click.echo(self.redact(text), err=err, nl=nl)

    def fail(self, message: str, code: int = EXIT_CANNOT_RUN) -> NoReturn:
        self.out(f"seshat-runner: {message}", err=True)
        sys.exit(code)


def _output() -> Output:
    context = click.get_current_context()
    if not isinstance(context.obj, Output):
        context.obj = Output()
    return context.obj


def _secrets_from_environment() -> list[str]:
    return [v for k, v in os.environ.items() if k in ("PGPASSWORD", "MYSQL_PWD") and v]


def _parse(text: str) -> DatabaseURL:
    """``text`` parsed once; its secrets learned; a malformed URL is exit status 2."""
    try:
        url = parse_url(text)
    except InvalidURL as error:
        _output().learn(*secrets_of_unreadable(text))
        _output().fail(str(error))
    _output().learn(*url.secrets())
    return url


def _resolve_url(url: str | None, url_env: str | None) -> DatabaseURL:
    """The target URL, refusing a password written on the command line."""
    _output().learn(*_secrets_from_environment())
    if url_env:
        value = os.environ.get(url_env)
        if not value:
            _output().fail(f"environment variable {url_env} is not set")
        return _parse(value.strip())
    if not url:
        _output().fail("give the database with --url URL or --url-env NAME")
    parsed = _parse(url)
    if parsed.secrets():
        _output().fail(
            "refusing a credential in the command line (every user of this machine can read "
            "it); put the password in PGPASSWORD or ~/.pgpass, or pass the URL in an "
            "environment variable with --url-env NAME"
        )
    return parsed


def _engine(
    url: DatabaseURL,
    dev_url: DatabaseURL | None,
    no_cache: bool = False,
    *,
    procedural: bool = False,
    isolation: str = "jail",
) -> Any:
    from runner.engines.base import engine_for
    from runner.engines.cache import planning_cache
    from runner.errors import ConfigurationError

    try:
        return engine_for(
            url,
            dev_url,
            cache=planning_cache(disabled=no_cache),
            procedural=procedural,
            isolation=isolation,
        )
    except ConfigurationError as error:
        _output().fail(str(error))


def _planning_engine(
    target: DatabaseURL, dev_url: str | None, no_cache: bool, options: PlanOptions
) -> Any:
    """The engine ``plan`` and ``drift`` read ``target`` with: its sandbox is ``dev_url`` or a
    private server, and runs the desired schema as ``options`` say."""
    return _engine(
        target,
        _resolve_url(dev_url, None) if dev_url else None,
        no_cache,
        procedural=options.procedural_schema,
        isolation=options.sandbox_isolation,
    )


def _run(action: Any) -> Any:
    """Run ``action`` and turn Seshat errors into messages and exit status 2.

    Refusals (:class:`PlanRefused`, :class:`MigrationRefused`) pass through: the caller
    reports them as exit status 1 with a JSON ``refusal``.
    """
    from runner.engines.planner import PlanRefused
    from runner.migrations.apply import MigrationRefused

    try:
        return action()
    except (PlanRefused, MigrationRefused):
        raise
    except SeshatError as error:
        _output().fail(str(error))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="seshat", prog_name="seshat-runner")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="SESHAT_CACHE_DIR",
    help="Where sandbox templates and the planning cache live (a folder only this user can "
    "write; created if missing). Default: SESHAT_CACHE_DIR, else ~/.cache/seshat/runner.",
)
def cli(cache_dir: Path | None) -> None:
    """Seshat's runner: one database operation (or one resource's batch of them) per process.

    It never holds a Git, forge or Kubernetes credential; the control plane starts it with
    the one database credential the operations need and reads a framed result per operation.
    """
    start(cache_dir)
    _output()


@cli.command()
@click.option(
    "--input",
    "input_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The operation, or a batch of them, as JSON (see runner/protocol/messages.py).",
)
def op(input_path: Path) -> None:
    """Run one operation (or a batch of them) for the control plane and print one framed
    result per operation, each as soon as it ends.

    A frame is a header with the payload's length and SHA-256, one line of JSON, and a
    footer. After an operation of a batch fails, the rest are not started (each answers
    not_run). Exit status: 0 all done, 1 refused by policy, 2 failed (the first failure's).
    """
    run_op(input_path)


@cli.group()
def schema() -> None:
    """Declarative schemas: plan, apply, drift and inspect.

    Give the database as a URL without its password: `postgresql://user@host:5432/db`
    (password from PGPASSWORD or ~/.pgpass), `mysql://user@host:3306/db` (password from
    MYSQL_PWD), `sqlite:///relative.db` or `sqlite:////absolute/path.db`; or name an
    environment variable holding the whole URL with --url-env.
    """


url_option = click.option("--url", help="The target database (no password).")
url_env_option = click.option("--url-env", help="An environment variable holding the URL.")
dev_option = click.option(
    "--dev-url",
    help="An explicit sandbox: an empty database on another server of the target's version, "
    "for versions this machine has no server binaries of (refused if it is the target "
    "server or not empty). Default: a private server the runner starts (docs/engine.md).",
)
no_cache_option = click.option(
    "--no-cache",
    is_flag=True,
    help="Plan cold: neither read nor keep normalized models and dry-run verdicts "
    "(SESHAT_NO_CACHE=1 does the same). The cache is --cache-dir.",
)


def scope_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--exclude``, ``--schema`` and ``--exclude-schema``: what of the database is managed
    (runner/engines/scope.py). A command gets them as ``exclude``, ``schema`` and
    ``exclude_schema``."""
    for option in (
        click.option(
            "--exclude-schema",
            multiple=True,
            help="Leave this schema and everything in it alone (PostgreSQL; repeatable).",
        ),
        click.option(
            "--schema",
            multiple=True,
            help="Manage only this schema (PostgreSQL; repeatable). Default: every schema.",
        ),
        click.option(
            "--exclude",
            multiple=True,
            help="Leave objects whose qualified name matches this glob alone (repeatable).",
        ),
    ):
        command = option(command)
    return command


managed_role_option = click.option(
    "--managed-role",
    "managed_roles",
    multiple=True,
    help="Manage this role's privileges (GRANT what is desired, REVOKE the rest; PUBLIC "
    "too). Roles not named are never granted to nor revoked from.",
)
manage_ownership_option = click.option(
    "--manage-ownership",
    is_flag=True,
    help="Plan ALTER ... OWNER TO for owners the desired schema sets.",
)
procedural_option = click.option(
    "--procedural-schema",
    is_flag=True,
    help="Let procedural statements of the desired schema run in the sandbox (DO blocks, "
    "CALL, queries, DML, CREATE TABLE AS); the plan records it. By default a desired schema "
    "holds declarations only (docs/engine.md).",
)
isolation_option = click.option(
    "--sandbox-isolation",
    type=click.Choice(["jail", "none"]),
    default="jail",
    show_default=True,
    help="How a private sandbox server is isolated: none runs it without its OS jail, for "
    "trusted artifacts only (the plan records it; docs/engine.md).",
)


def plan_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options a desired schema is planned under (``plan``, ``drift``): the managed
    scope (:func:`scope_options`), ``--managed-role``, ``--manage-ownership``,
    ``--procedural-schema`` and ``--sandbox-isolation``. The command gets them as one
    ``options``, a :class:`~runner.engines.planner.PlanOptions` (allowing destructive changes
    and protected tables are ``plan``'s own: its defaults)."""

    @functools.wraps(command)
    def planned(
        *,
        exclude: tuple[str, ...],
        schema: tuple[str, ...],
        exclude_schema: tuple[str, ...],
        managed_roles: tuple[str, ...],
        manage_ownership: bool,
        procedural_schema: bool,
        sandbox_isolation: str,
        **rest: Any,
    ) -> None:
        from runner.engines.planner import PlanOptions

        options = PlanOptions(
            exclude=exclude,
            schemas=schema,
            exclude_schemas=exclude_schema,
            managed_roles=managed_roles,
            manage_ownership=manage_ownership,
            procedural_schema=procedural_schema,
            sandbox_isolation=sandbox_isolation,
        )
        command(options=options, **rest)

    decorated: Callable[..., None] = planned
    for option in (
        isolation_option,
        procedural_option,
        manage_ownership_option,
        managed_role_option,
        scope_options,
    ):
        decorated = option(decorated)
    return decorated


@schema.command()
@url_option
@url_env_option
@click.option(
    "--desired",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="A .sql file, or a folder of them (run in lexical order).",
)
@dev_option
@no_cache_option
@click.option("--allow-destructive", is_flag=True, help="Allow drops and narrowing changes.")
@click.option(
    "--skip-drops",
    is_flag=True,
    help="Leave what only the database has alone instead of dropping it (tables, columns, "
    "indexes, views, functions, ..., row security, grants); the plan lists what it skipped "
    "and records the setting.",
)
@click.option("--protected-table", multiple=True, help="Refuse any plan that changes this table.")
@plan_options
@format_option("json", "sql")
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the plan here instead of stdout.",
)
@click.option(
    "--impact",
    type=click.Choice(["off", "estimate", "exact"]),
    default="estimate",
    show_default=True,
    help="Measure what the plan does to the rows already there (read-only): estimate counts "
    "small tables exactly and large ones from statistics; exact counts every one, each query "
    "bounded by --impact-timeout.",
)
@click.option(
    "--impact-timeout",
    type=click.IntRange(1, 600_000),
    default=None,
    help="Each impact query's statement timeout, in milliseconds (default 2000).",
)
@click.option(
    "--impact-output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the impact figures (JSON, beside the plan, never in it) here.",
)
def plan(
    url: str | None,
    url_env: str | None,
    desired: Path,
    dev_url: str | None,
    no_cache: bool,
    allow_destructive: bool,
    skip_drops: bool,
    protected_table: tuple[str, ...],
    options: PlanOptions,
    output_format: str,
    output: Path | None,
    impact: str,
    impact_timeout: int | None,
    impact_output: Path | None,
) -> None:
    """Plan the changes that take the database to the desired schema.

    The target is only read. The desired schema is loaded in a sandbox (a private server
    the runner starts, or --dev-url), and the plan is verified there: it is dry-run on a
    rebuild of the live schema, which must then equal the desired schema. Exit status: 0
    plan computed (an empty plan means the database has converged), 1 refused by policy or
    for want of a sandbox, 2 could not run.
    """
    from runner.engines.impact import DEFAULT_TIMEOUT_MS, describe, refuse_certain
    from runner.engines.plan import comment_text, plan_bytes, plan_sql
    from runner.engines.planner import PlanRefused

    target = _resolve_url(url, url_env)
    engine = _planning_engine(target, dev_url, no_cache, options)
    options = dataclasses.replace(
        options,
        allow_destructive=allow_destructive,
        protected_tables=protected_table,
        skip_drops=skip_drops,
    )

    def planned() -> tuple[Any, Any]:
        document = engine.plan(desired, options)
        figures = engine.impact(document, impact, impact_timeout or DEFAULT_TIMEOUT_MS)
        refuse_certain(figures)
        return document, figures

    try:
        document, figures = _run(planned)
    except PlanRefused as refusal:
        _output().learn(*engine.scratch_names)
        _output().out(json.dumps({"refusal": {"code": refusal.reason, "message": refusal.message}}))
        sys.exit(EXIT_REFUSED)
    finally:
        _output().learn(*engine.scratch_names)
    text = plan_bytes(document).decode() if output_format == "json" else plan_sql(document)
    if figures is not None:
        for figure in figures.figures:
            _output().out(f"impact: {comment_text(describe(figure))}", err=True)  # names: escaped
        if impact_output is not None:
            report = figures.model_dump_json(by_alias=True, exclude_none=True)
            impact_output.write_text(_output().redact(report) + "\n", encoding="utf-8")
    if output is not None:
        output.write_text(_output().redact(text), encoding="utf-8")
    else:
        _output().out(text, nl=False)


@schema.command()
@url_option
@url_env_option
@click.option(
    "--plan",
    "plan_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@click.option(
    "--expect-digest", help="Refuse unless the plan file hashes to this sha256:... digest."
)
@click.option("--lock-timeout", default=30, show_default=True, help="Seconds to wait for locks.")
@click.option(
    "--journal",
    type=click.Path(dir_okay=False, path_type=Path),
    help="MySQL/MariaDB: record each statement here (default: the plan file + .journal); "
    "applying again after an interruption prints what ran instead of running anything.",
)
def apply(
    url: str | None,
    url_env: str | None,
    plan_file: Path,
    expect_digest: str | None,
    lock_timeout: int,
    journal: Path | None,
) -> None:
    """Apply a plan file exactly as written, then check the database converged.

    The plan's bytes are hashed again first; a plan computed from a live schema that has
    changed since is refused. Exit status: 0 applied and converged, 1 refused (digest
    mismatch, stale plan), 2 failed (the report says which statements ran).
    """
    from runner.digests import sha256_digest
    from runner.engines.plan import read_plan
    from runner.engines.planner import PlanRefused
    from runner.engines.report import NOT_CONVERGED, ApplyOptions

    data = plan_file.read_bytes()
    if expect_digest is not None and sha256_digest(data) != expect_digest:
        _output().out(
            json.dumps(
                {
                    "refusal": {
                        "code": "digest_mismatch",
                        "message": "the plan file does not hash to the expected digest",
                    }
                }
            )
        )
        sys.exit(EXIT_REFUSED)
    try:
        document = read_plan(data)
    except ValueError as error:
        _output().fail(f"{plan_file}: not a plan: {str(error).splitlines()[0]}")
    target = _resolve_url(url, url_env)
    engine = _engine(target, None)
    if engine.journals:  # engines whose DDL is not transactional
        journal = journal or plan_file.with_name(plan_file.name + ".journal")
    else:
        journal = None
    options = ApplyOptions(lock_timeout_ms=lock_timeout * 1000, journal=journal)
    try:
        report = _run(lambda: engine.apply(document, options))
    except PlanRefused as refusal:
        _output().out(json.dumps({"refusal": {"code": refusal.reason, "message": refusal.message}}))
        sys.exit(EXIT_REFUSED)
    _output().out(json.dumps(report.to_json(), sort_keys=True))
    if report.failed is None and report.converged:
        sys.exit(EXIT_OK)
    if report.failed is not None:
        _output().fail(f"statement {report.failed + 1} failed: {report.error}")
    _output().fail(report.error or NOT_CONVERGED)


@schema.command()
@url_option
@url_env_option
@click.option("--desired", required=True, type=click.Path(exists=True, path_type=Path))
@dev_option
@no_cache_option
@plan_options
def drift(
    url: str | None,
    url_env: str | None,
    desired: Path,
    dev_url: str | None,
    no_cache: bool,
    options: PlanOptions,
) -> None:
    """Report how the database differs from the desired schema (the target is only read;
    the desired schema is loaded in a sandbox, as for plan).

    Exit status: 0 no drift, 1 drift (a JSON report of bounded aggregates), 2 could not run
    (also when no sandbox can be had: the message says what to install).
    """
    from runner.engines.planner import PlanRefused

    target = _resolve_url(url, url_env)
    engine = _planning_engine(target, dev_url, no_cache, options)
    try:
        report = _run(lambda: engine.drift(desired, options.scope, options.privileges))
    except PlanRefused as refusal:
        _output().learn(*engine.scratch_names)
        _output().fail(f"{refusal.reason}: {refusal.message}")
    finally:
        _output().learn(*engine.scratch_names)
    _output().out(json.dumps(report, sort_keys=True))
    sys.exit(EXIT_OK if report["total"] == 0 else EXIT_REFUSED)


@schema.command()
@url_option
@url_env_option
@scope_options
@managed_role_option
@manage_ownership_option
def inspect(
    url: str | None,
    url_env: str | None,
    exclude: tuple[str, ...],
    schema: tuple[str, ...],
    exclude_schema: tuple[str, ...],
    managed_roles: tuple[str, ...],
    manage_ownership: bool,
) -> None:
    """Print the database's schema as canonical JSON (the engine's object model)."""
    from runner.engines.model import PrivilegeScope
    from runner.engines.planner import PlanRefused, model_document
    from runner.engines.scope import Scope

    target = _resolve_url(url, url_env)
    engine = _engine(target, None)
    privileges = PrivilegeScope.of(managed_roles, manage_ownership)
    scope = Scope.of(exclude, schema, exclude_schema)
    try:
        model = _run(lambda: engine.inspect(scope, privileges))
    except PlanRefused as refusal:
        _output().fail(f"{refusal.reason}: {refusal.message}")
    _output().out(canonical_json(model_document(model)).decode())


@cli.group()
def migrations() -> None:
    """Versioned migrations: read the revision history, apply what is pending.

    A directory of <version>_<description>.sql files (golang-migrate's .up.sql accepted,
    .down.sql ignored); the history lives in the table seshat_schema_migrations. SQLite,
    PostgreSQL and MySQL/MariaDB targets. See docs/migrations.md for what each verdict
    means and what to do about it.
    """


dir_option = click.option(
    "--dir",
    "directory",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The migration directory.",
)
out_of_order_option = click.option(
    "--out-of-order", is_flag=True, help="Allow pending versions below the highest applied one."
)


def _history_store(target: DatabaseURL) -> Any:
    from runner.migrations.stores import open_store

    return _run(lambda: open_store(target))


@migrations.command(name="status")
@url_option
@url_env_option
@dir_option
@out_of_order_option
@format_option("text", "json")
def migrations_status(
    url: str | None,
    url_env: str | None,
    directory: Path,
    out_of_order: bool,
    output_format: str,
) -> None:
    """Print the history's verdict: dirty, checksum_modified, database_ahead, out_of_order,
    nothing_pending or ready, with the versions involved.

    Exit status: 0 nothing_pending or ready, 1 a blocking verdict, 2 could not run.
    """
    from runner.migrations.files import read_directory
    from runner.migrations.history import judge

    target = _resolve_url(url, url_env)
    files = _run(lambda: read_directory(directory))
    store = _history_store(target)
    try:
        verdict = _run(lambda: judge(files, store.rows(), allow_out_of_order=out_of_order))
    finally:
        store.close()
    if output_format == "json":
        _output().out(json.dumps(verdict.to_json(), sort_keys=True))
    else:
        involved = f": {', '.join(verdict.versions)}" if verdict.versions else ""
        _output().out(f"{verdict.kind}{involved}")
        if verdict.detail:
            _output().out(f"  {verdict.detail}")
        _output().out(
            f"  applied {verdict.applied}, current {verdict.current or '-'}, "
            f"history {verdict.fingerprint}"
        )
        if verdict.checkpoint is not None:
            covered = ", ".join(verdict.covered) or "none"
            _output().out(f"  checkpoint {verdict.checkpoint}, covering {covered}")
    sys.exit(EXIT_REFUSED if verdict.blocking else EXIT_OK)


@migrations.command(name="up")
@url_option
@url_env_option
@dir_option
@out_of_order_option
@click.option(
    "--expect-pending",
    help="Refuse unless the pending versions are exactly these (comma-separated, in order).",
)
def migrations_up(
    url: str | None,
    url_env: str | None,
    directory: Path,
    out_of_order: bool,
    expect_pending: str | None,
) -> None:
    """Apply the pending files in order, each in a transaction unless it opts out.

    Prints a JSON report (outcome UpToDate, Applied, Failed or Partial). Exit status: 0
    UpToDate or Applied, 1 refused (a blocking history, or the pending sequence moved), 2
    Failed or Partial, or could not run.
    """
    import secrets

    from runner.migrations.apply import MigrationRefused, apply_pending
    from runner.migrations.files import read_directory

    target = _resolve_url(url, url_env)
    files = _run(lambda: read_directory(directory))
    expected = None
    if expect_pending is not None:
        wanted = [v.strip() for v in expect_pending.split(",") if v.strip()]
        by_version = {f.version: f.checksum for f in files}
        expected = [(v, by_version.get(v, "")) for v in wanted]
    store = _history_store(target)
    try:
        _, report = apply_pending(
            store,
            files,
            operation_id=f"up-{secrets.token_hex(8)}",
            expected=expected,
            allow_out_of_order=out_of_order,
        )
    except MigrationRefused as refusal:
        _output().out(json.dumps({"refusal": {"code": refusal.reason, "message": refusal.message}}))
        sys.exit(EXIT_REFUSED)
    except SeshatError as error:
        _output().fail(str(error))
    finally:
        store.close()
    _output().out(json.dumps(report.model_dump(mode="json", by_alias=True), sort_keys=True))
    sys.exit(EXIT_OK if report.outcome in ("UpToDate", "Applied") else EXIT_CANNOT_RUN)


@migrations.command(name="baseline")
@url_option
@url_env_option
@dir_option
@click.option("--shadow-url", help="An empty, disposable database of the same engine.")
@click.option("--shadow-url-env", help="An environment variable holding the shadow's URL.")
@click.option("--to", "to_version", help="Baseline the files up to this version (default: all).")
def migrations_baseline(
    url: str | None,
    url_env: str | None,
    directory: Path,
    shadow_url: str | None,
    shadow_url_env: str | None,
    to_version: str | None,
) -> None:
    """Adopt an existing database: record the files as applied if they build its schema.

    The files (up to --to) run in the shadow; the engine compares the shadow's schema with
    the live one (the revision table left out). Only if they match are the versions
    recorded in the live history; otherwise nothing is recorded and the differences are
    printed. The live history must be empty. Prints JSON. Exit status: 0 recorded, 1 the
    schemas differ or the history or shadow is not empty, 2 could not run.
    """
    from runner.migrations.apply import MigrationRefused
    from runner.migrations.baseline import baseline
    from runner.migrations.files import read_directory

    target = _resolve_url(url, url_env)
    if not shadow_url and not shadow_url_env:
        _output().fail("give the shadow database with --shadow-url URL or --shadow-url-env NAME")
    shadow_target = _resolve_url(shadow_url, shadow_url_env)
    files = _run(lambda: read_directory(directory))
    live = _history_store(target)
    shadow = _history_store(shadow_target)
    try:
        result = _run(lambda: baseline(target, live, shadow_target, shadow, files, to=to_version))
    except MigrationRefused as refusal:
        _output().out(json.dumps({"refusal": {"code": refusal.reason, "message": refusal.message}}))
        sys.exit(EXIT_REFUSED)
    finally:
        live.close()
        shadow.close()
    _output().out(json.dumps(result.to_json(), sort_keys=True))
    if not result.matched:
        _output().out(
            f"seshat-runner: the shadow built from the files differs from the live schema in "
            f"{result.total_differences} places; nothing was recorded",
            err=True,
        )
    sys.exit(EXIT_OK if result.matched else EXIT_REFUSED)


@migrations.command(name="mark")
@url_option
@url_env_option
@click.option("--version", "version", required=True, help="The history row to settle.")
@click.option(
    "--as",
    "state",
    required=True,
    type=click.Choice(["applied", "absent"]),
    help="applied: you finished the file by hand; absent: you undid what of it ran.",
)
def migrations_mark(url: str | None, url_env: str | None, version: str, state: str) -> None:
    """Settle a dirty row after repairing the database by hand.

    After a Partial or interrupted run, the row of the file that stopped midway reads
    dirty. Finish the file's remaining statements yourself and mark it applied, or undo the
    statements that ran and mark it absent (the row is deleted; the file is pending again).
    Then acknowledge the run (seshat acknowledge) so the reconciler reads the history again.
    """
    target = _resolve_url(url, url_env)
    store = _history_store(target)
    try:
        rows = _run(store.rows)
        row = next((r for r in rows if r.version == version), None)
        if row is None:
            _output().fail(f"no history row for version {version}", EXIT_REFUSED)
        _run(lambda: store.mark(version, None if state == "absent" else "applied"))
    finally:
        store.close()
    _output().out(f"version {version}: {row.state} -> {state}")
