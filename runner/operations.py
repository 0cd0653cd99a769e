"""``seshat-runner op``: run one operation from an input file and print one framed result.

The runner resolves the URL reference itself, learns every secret it holds (the password,
secret URL parameters, scratch database names) and redacts them from everything it prints,
including the frame. Errors become a stable code and a bounded message.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner.deadline import DeadlineExceeded, deadline
from runner.digests import sha256_digest
from runner.errors import CanNotRunError, NotWritable, RecoveryNeeded, SeshatError
from runner.identity import target_identity
from runner.protocol.frame import encode_frame
from runner.protocol.messages import (
    REASON_PATTERN,
    BatchInput,
    OperationError,
    OperationInput,
    OperationResult,
    UrlReference,
)
from runner.protocol.results import (
    ApplyReportModel,
    ApplyResult,
    DriftReport,
    DriftResult,
    ErrorCode,
    HistoryReport,
    HistoryResult,
    InspectResult,
    MigrateResult,
    OperationPayload,
    PlanResult,
    RecoverResult,
    RecoveryReport,
)
from runner.redact import Redactor
from runner.url import DatabaseURL, InvalidURL, UnsupportedScheme, parse_url, secrets_of_unreadable

__all__ = ["MAX_MESSAGE", "run_operations"]

MAX_MESSAGE = 2048


MAX_URL_FILE = 64 * 1024


def _read_reference(reference: UrlReference) -> str:
    if reference.from_env is not None:
        value = os.environ.get(reference.from_env)
        if not value:
            raise _Failure(
                ErrorCode.CREDENTIAL_UNAVAILABLE,
                f"environment variable {reference.from_env} is not set",
            )
        return value.strip()
    assert reference.from_file is not None
    try:
        with open(reference.from_file, "rb") as stream:
            data = stream.read(MAX_URL_FILE + 1)
    except OSError as error:
        raise _Failure(
            ErrorCode.CREDENTIAL_UNAVAILABLE, f"cannot read {reference.from_file}: {error.strerror}"
        ) from None
    if len(data) > MAX_URL_FILE:
        raise _Failure(ErrorCode.INVALID_URL, f"{reference.from_file} is too large to hold a URL")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise _Failure(ErrorCode.INVALID_URL, f"{reference.from_file} is not UTF-8") from None


def _resolve(reference: UrlReference, secrets: list[str]) -> DatabaseURL:
    """The URL ``reference`` names, parsed once; every secret it holds goes to ``secrets``."""
    text = _read_reference(reference)
    try:
        url = parse_url(text)
    except UnsupportedScheme as error:
        raise _Failure(ErrorCode.UNSUPPORTED_ENGINE, str(error)) from None
    except InvalidURL as error:
        secrets += secrets_of_unreadable(text)
        raise _Failure(ErrorCode.INVALID_URL, str(error)) from None
    secrets += url.secrets()
    return url


class _Failure(Exception):
    def __init__(self, code: ErrorCode, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason


def _refused(reason: str, message: str) -> _Failure:
    """A refusal: its reason travels in a field of its own (and starts the message)."""
    return _Failure(ErrorCode.PLAN_REFUSED, f"{reason}: {message}", reason)


def _migrations(request: OperationInput, url: DatabaseURL) -> OperationPayload:
    """``history`` (read-only) and ``migrate`` (the migration family's Apply)."""
    from runner.errors import ConfigurationError
    from runner.migrations.apply import MigrationRefused, apply_pending, check_mode
    from runner.migrations.files import read_directory
    from runner.migrations.history import judge
    from runner.migrations.stores import open_store

    assert request.migrations is not None
    settings = request.settings
    try:
        files = read_directory(Path(request.migrations))
    except ConfigurationError as error:
        raise _Failure(ErrorCode.MIGRATIONS_INVALID, str(error)) from None
    store = open_store(url, max(1, settings.lock_timeout_ms // 1000))
    mode = settings.transaction_mode or "file"
    try:
        if request.operation == "history":
            verdict = judge(files, store.rows(), allow_out_of_order=settings.out_of_order)
            try:  # a mode the database cannot honour is refused before anything is planned
                check_mode(store, mode, verdict.pending_files)
            except MigrationRefused as refusal:
                raise _refused(refusal.reason, refusal.message) from None
            pending = [[f.version, f.checksum] for f in verdict.pending_files]
            names = [f.name for f in verdict.pending_files]
            reading = HistoryReport.model_validate(
                verdict.to_json() | {"pendingChecksums": pending, "pendingNames": names}
            )
            return HistoryResult(history=reading)
        expected = [(version, checksum) for version, checksum in request.expect_pending or []]
        try:
            _, report = apply_pending(
                store,
                files,
                operation_id=request.id,
                expected=expected,
                allow_out_of_order=settings.out_of_order,
                mode=mode,
            )
        except MigrationRefused as refusal:
            raise _refused(refusal.reason, refusal.message) from None
        return MigrateResult(migrate=report)
    finally:
        store.close()


def _with_artifact(
    request: OperationInput,
    url: DatabaseURL | None,
    dev_url: DatabaseURL | None,
    secrets: list[str],
) -> OperationPayload:
    """Resolve and Verify; or any other operation, reading its artifact by digest."""
    from runner.artifacts.errors import ArtifactError
    from runner.artifacts.operations import Opened, materialize, resolve_source, verify_source

    assert request.artifact is not None
    with tempfile.TemporaryDirectory(prefix="seshat-op-") as scratch:
        try:
            opened = Opened(request.artifact, request.registry, Path(scratch))
            secrets += opened.secrets
            if request.operation == "resolve":
                return resolve_source(opened)
            if request.operation == "verify":
                assert request.policy is not None
                return verify_source(opened, request.policy, request.trust, Path(scratch))
            assert url is not None
            with materialize(opened) as folder:
                where = "migrations" if request.operation in ("history", "migrate") else "desired"
                local = request.model_copy(update={where: str(folder), "artifact": None})
                return _execute(local, url, dev_url, secrets)
        except ArtifactError as error:
            if error.retryable:
                raise _Failure(ErrorCode.REGISTRY_UNAVAILABLE, str(error)) from None
            raise _Failure(ErrorCode.ARTIFACT_REFUSED, str(error), error.reason) from None


def _execute(
    request: OperationInput, url: DatabaseURL, dev_url: DatabaseURL | None, secrets: list[str]
) -> OperationPayload:
    if request.operation in ("history", "migrate"):
        return _migrations(request, url)
    from runner.engines.base import engine_for
    from runner.engines.cache import planning_cache
    from runner.engines.desired import DesiredSchemaError
    from runner.engines.impact import DEFAULT_TIMEOUT_MS, refuse_certain
    from runner.engines.plan import plan_digest, read_plan
    from runner.engines.planner import PlanOptions, PlanRefused, model_document
    from runner.engines.report import ApplyOptions
    from runner.errors import ConfigurationError

    settings = request.settings
    procedural = bool(settings.procedural_schema)
    isolation = settings.sandbox_isolation or "jail"
    try:
        engine = engine_for(
            url, dev_url, cache=planning_cache(), procedural=procedural, isolation=isolation
        )
    except ConfigurationError as error:
        raise _Failure(ErrorCode.UNSUPPORTED_ENGINE, str(error)) from None
    options = PlanOptions(
        settings.allow_destructive,
        tuple(settings.protected_tables),
        tuple(settings.exclude),
        tuple(settings.schemas),
        tuple(settings.exclude_schemas),
        managed_roles=tuple(settings.managed_roles or ()),
        manage_ownership=bool(settings.manage_ownership),
        procedural_schema=procedural,
        sandbox_isolation=isolation,
        skip_drops=settings.drops == "skip",
    )
    try:
        if request.operation == "inspect":
            model = engine.inspect(options.scope, options.privileges)
            return InspectResult(model=model_document(model))
        if request.operation == "drift":
            assert request.desired is not None
            report = engine.drift(Path(request.desired), options.scope, options.privileges)
            return DriftResult(drift=DriftReport.model_validate(report))
        if request.operation == "recover":
            return RecoverResult(recovery=RecoveryReport.model_validate(engine.recover()))
        mode = settings.transaction_mode or "auto"
        if request.operation == "plan":
            assert request.desired is not None
            engine.check_transaction_mode(mode)
            document = engine.plan(Path(request.desired), options)
            engine.check_transaction_mode(mode, document)
            impact = engine.impact(
                document,
                settings.impact or "estimate",
                settings.impact_timeout_ms or DEFAULT_TIMEOUT_MS,
            )
            refuse_certain(impact)
            return PlanResult(plan_digest=plan_digest(document), plan=document, impact=impact)
        assert request.plan is not None
        data = Path(request.plan).read_bytes()
        if sha256_digest(data) != request.expect_digest:
            raise _refused("digest_mismatch", "the plan does not hash to the expected digest")
        plan = read_plan(data)
        engine.check_transaction_mode(mode, plan)
        journal = Path(request.journal) if request.journal and engine.journals else None
        applying = ApplyOptions(settings.lock_timeout_ms, mode, journal)
        applied = engine.apply(plan, applying)
        return ApplyResult(apply=ApplyReportModel.model_validate(applied, from_attributes=True))
    except PlanRefused as refusal:
        raise _refused(refusal.reason, refusal.message) from None
    except DesiredSchemaError as error:
        raise _Failure(ErrorCode.DESIRED_SCHEMA_INVALID, str(error)) from None
    finally:
        secrets.extend(engine.scratch_names)


def _read_input(input_path: Path) -> list[OperationInput]:
    """The operations ``input_path`` describes: one operation, or a batch of them."""
    try:
        data = json.loads(input_path.read_bytes())
        if isinstance(data, dict) and "batch" in data:
            return BatchInput.model_validate(data).batch
        return [OperationInput.model_validate(data)]
    except (OSError, ValueError) as error:
        if isinstance(error, ValidationError):
            detail = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                for e in error.errors(include_input=False)
            )
        else:
            detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise _Failure(ErrorCode.INVALID_INPUT, f"invalid operation input: {detail}") from None


class _Urls:
    """The batch's URL references, each read and parsed once (every operation of a batch
    names the same ones); a failure to read one is the failure of the operation that
    needed it first."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets = secrets
        self._parsed: dict[UrlReference, DatabaseURL] = {}

    def __call__(self, reference: UrlReference | None) -> DatabaseURL | None:
        if reference is None:
            return None
        if reference not in self._parsed:
            self._parsed[reference] = _resolve(reference, self.secrets)
        return self._parsed[reference]


def _answer(request: OperationInput, urls: _Urls) -> tuple[OperationResult, int]:
    """The result of one operation and its exit status (0 done, 1 refused, 2 failed)."""
    operation, operation_id, identity = request.operation, request.id, None
    secrets = urls.secrets

    def failed(code: ErrorCode, message: str, reason: str | None = None) -> OperationResult:
        return _error(operation, operation_id, identity, code, message, reason)

    seconds = request.deadline_seconds
    expired = f"the operation did not finish within its deadline of {seconds} s and was stopped"

    def hard_stop() -> None:
        """The watchdog's last word, when the operation never returned to the interpreter."""
        payload = failed(ErrorCode.DEADLINE_EXCEEDED, f"{expired} (hard stop)")
        sys.stdout.write(_framed(payload, secrets))
        sys.stdout.flush()

    try:
        with deadline(seconds, hard_stop):
            url = urls(request.url)
            dev_url = urls(request.dev_url)
            identity = target_identity(url) if url is not None else None
            if request.artifact is not None:
                result = _with_artifact(request, url, dev_url, secrets)
            else:
                assert url is not None  # the input's validator requires it
                result = _execute(request, url, dev_url, secrets)
        done = OperationResult(
            operation=operation, id=operation_id, target_identity=identity, result=result
        )
        return done, 0
    except DeadlineExceeded:
        return failed(ErrorCode.DEADLINE_EXCEEDED, expired), 2
    except _Failure as failure:
        status = 1 if failure.code is ErrorCode.PLAN_REFUSED else 2
        return failed(failure.code, failure.message, failure.reason), status
    except RecoveryNeeded as error:
        return failed(ErrorCode.RECOVERY_NEEDED, str(error), f"recovery_{error.kind}"), 2
    except NotWritable as error:
        return failed(ErrorCode.NOT_WRITABLE, str(error)), 2
    except CanNotRunError as error:
        return failed(ErrorCode.CANNOT_CONNECT, str(error)), 2
    except SeshatError as error:
        return failed(ErrorCode.OPERATION_FAILED, str(error)), 2
    except KeyboardInterrupt:
        return failed(ErrorCode.INTERRUPTED, "the runner was interrupted"), 2
    except Exception as error:  # the protocol promises one frame, whatever went wrong
        message = f"{type(error).__name__}: {error}"
        return failed(ErrorCode.INTERNAL, message), 2


def run_operations(input_path: Path) -> Iterator[tuple[str, int]]:
    """The frame to print for each operation ``input_path`` describes, in order, as each
    ends, with its exit status. After an operation fails, the rest of a batch are not
    started: each answers ``not_run``."""
    secrets: list[str] = []
    try:
        requests = _read_input(input_path)
    except _Failure as failure:
        payload = _error("unknown", "unknown", None, failure.code, failure.message)
        yield _framed(payload, secrets), 2
        return
    urls = _Urls(secrets)
    failed: OperationResult | None = None
    for request in requests:
        if failed is not None:
            assert failed.error is not None
            message = f"not run: {failed.operation} {failed.id} failed ({failed.error.code})"
            identity = failed.target_identity
            payload = _error(request.operation, request.id, identity, ErrorCode.NOT_RUN, message)
            yield _framed(payload, secrets), 2
            continue
        payload, status = _answer(request, urls)
        if status != 0:
            failed = payload
        yield _framed(payload, secrets), status


def _framed(payload: OperationResult, secrets: list[str]) -> str:
    """The frame of ``payload``, with every secret the runner learned so far redacted."""
    redact = Redactor(secrets)
    document = payload.model_dump(mode="json", by_alias=True, exclude_none=True)
    # Keys and the protocol fields are Seshat's own words (operation, id, digests, the error
    # code) and stay as they are, so a short password cannot break the frame; every other
    # string may quote what a server or a file said, and is redacted.
    framed = {k: v if k in _PROTOCOL_FIELDS else _redacted(v, redact) for k, v in document.items()}
    if "error" in document:
        framed["error"] = document["error"] | {"message": redact(document["error"]["message"])}
    return encode_frame(framed)


_REASON = re.compile(REASON_PATTERN)
_PROTOCOL_FIELDS = frozenset({"protocol", "operation", "id", "target_identity"})


def _redacted(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redacted(item, redact) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item, redact) for item in value]
    return value


def _error(
    operation: str,
    operation_id: str,
    identity: str | None,
    code: ErrorCode,
    message: str,
    reason: str | None = None,
) -> OperationResult:
    bounded = message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"
    if reason is not None and not _REASON.fullmatch(reason):
        reason = None  # reasons are Seshat's own constants; anything else is not sent
    return OperationResult(
        operation=operation,
        id=operation_id,
        target_identity=identity,
        error=OperationError(code=code, reason=reason, message=bounded),
    )
