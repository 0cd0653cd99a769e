"""The pieces every resource model is built from: the model base, metadata and durations.

Declarations are Kubernetes-style documents, so field names are camelCase on the wire
(``allowDestructive``) and snake_case in Python (``allow_destructive``). Every model is frozen
and refuses unknown fields: a typo in Git is an error, never a silently ignored setting.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PlainSerializer,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from runner.models import Model, plain_path

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "DNS_LABEL",
    "DatabaseObjectMeta",
    "Declaration",
    "Interval",
    "MaxAge",
    "MigrationLockTimeout",
    "Model",
    "ObjectMeta",
    "RetryInterval",
    "SchemaLockTimeout",
    "exactly_one",
    "format_duration",
    "parse_duration",
    "plain_path",
    "storable_name",
]

API_GROUP: Final = "seshat.dev"
API_VERSION: Final = "seshat.dev/v1alpha1"

DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""A Kubernetes DNS subdomain (dot-separated DNS labels; 253 characters at most)."""
STORED_NAME_MAX: Final = 250
"""The longest database resource name: ``<name>.yaml`` must fit a 255-byte file name."""
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def storable_name(name: str) -> str:
    """``name`` if a database resource may carry it: it names a status file
    (``status/<ns>/<name>.yaml``), a plans folder and a review branch
    (``seshat/review/<ns>/<name>``), so it must fit a file name and be a valid Git ref part."""
    if len(name) > STORED_NAME_MAX:
        raise PydanticCustomError(
            "stored_name",
            "at most {limit} characters: it names the resource's status file and review branch",
            {"limit": STORED_NAME_MAX},
        )
    if name.endswith(".lock"):
        raise PydanticCustomError(
            "stored_name", "must not end in .lock: it names the resource's review branch"
        )
    return name


class ObjectMeta(Model):
    """The part of Kubernetes ``metadata`` Seshat reads.

    ``uid`` is never written by a person: the loader assigns it (see ``gitops/repo/uids.py``).
    """

    name: Annotated[str, Field(pattern=DNS_SUBDOMAIN, max_length=253)]
    namespace: Annotated[str, Field(pattern=DNS_LABEL, max_length=63)] = "default"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    uid: str | None = None

    @field_validator("labels")
    @classmethod
    def _labels_are_kubernetes_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            if not _LABEL_KEY.match(key):
                raise PydanticCustomError(
                    "label_key", "'{key}' is not a valid label key", {"key": key}
                )
            if not _LABEL_VALUE.match(value):
                raise PydanticCustomError(
                    "label_value",
                    "the value of label '{key}' is not a valid label value",
                    {"key": key},
                )
        return labels


class DatabaseObjectMeta(ObjectMeta):
    """Metadata of a ``DatabaseSchema`` or ``DatabaseMigration``, whose name becomes file
    names and a branch name (:func:`storable_name`)."""

    @field_validator("name")
    @classmethod
    def _storable(cls, name: str) -> str:
        return storable_name(name)


class Declaration(Model):
    """How every kind a repository declares begins: ``apiVersion``, ``kind``, ``metadata``.

    Each kind narrows ``kind`` to its own name (and ``metadata`` where it needs more) and adds
    its ``spec``; pydantic keeps inherited fields first, so the documents and the CRDs list
    the fields in this order.
    """

    api_version: Literal["seshat.dev/v1alpha1"] = API_VERSION
    kind: str
    metadata: ObjectMeta


def exactly_one(error: str, *fields: str) -> Any:
    """A model validator refusing a model with none or several of ``fields`` set, for the
    alternatives a person must choose between (the message names them as on the wire)."""
    names = [to_camel(field) for field in fields]
    message = f"set exactly one of {', '.join(names[:-1])} or {names[-1]}"

    def check(model: Model) -> Model:
        if sum(getattr(model, field) is not None for field in fields) != 1:
            raise PydanticCustomError(error, message)
        return model

    return model_validator(mode="after")(check)


_UNITS: Final = {"h": 3600, "m": 60, "s": 1}
# ASCII digits only: ``\d`` (and ``int``) also take full-width and other scripts' digits,
# so ``１０m`` would read as ten minutes in Seshat and as nothing anywhere else.
_DURATION = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
DURATION_PATTERN: Final = r"^([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?$"


def parse_duration(value: object) -> int:
    """Seconds in a Go-style duration without fractions: ``90s``, ``10m``, ``1h30m``, ``7d``."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise PydanticCustomError("duration", "must be a duration such as 30s, 10m or 1h30m")
    if isinstance(value, int):
        return value
    text = value.strip()
    match = _DURATION.fullmatch(text) if value.isascii() else None
    if not text or match is None:
        raise PydanticCustomError("duration", "must be a duration such as 30s, 10m or 1h30m")
    days, hours, minutes, seconds = (int(part) if part else 0 for part in match.groups())
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def format_duration(seconds: int) -> str:
    """The shortest spelling of a duration, so rendered CRs and digests are stable."""
    if seconds == 0:
        return "0s"
    parts: list[str] = []
    if seconds % 86400 == 0 and seconds >= 2 * 86400:
        return f"{seconds // 86400}d"
    for unit, size in _UNITS.items():
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def bounded(minimum: int, maximum: int) -> BeforeValidator:
    """Validate a duration and bound it to ``[minimum, maximum]`` seconds."""

    def check(value: object) -> int:
        seconds = parse_duration(value)
        if seconds < minimum or seconds > maximum:
            raise PydanticCustomError(
                "duration_range",
                "must be between {low} and {high}",
                {"low": format_duration(minimum), "high": format_duration(maximum)},
            )
        return seconds

    return BeforeValidator(check)


AS_DURATION: Final = PlainSerializer(format_duration, return_type=str)
"""Durations are kept as integer seconds and written back in their shortest spelling."""
DURATION_SCHEMA: Final = WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN})

Interval = Annotated[int, bounded(10, 86400), AS_DURATION, DURATION_SCHEMA]
"""How often a resource is refreshed: 10s to 24h."""
RetryInterval = Annotated[int, bounded(5, 3600), AS_DURATION, DURATION_SCHEMA]
"""How soon a Failed resource is retried: 5s to 1h."""
SchemaLockTimeout = Annotated[int, bounded(1, 600), AS_DURATION, DURATION_SCHEMA]
"""How long a schema apply waits for a table lock: 1s to 10m."""
MigrationLockTimeout = Annotated[int, bounded(1, 3600), AS_DURATION, DURATION_SCHEMA]
"""How long a migration waits for a lock: 1s to 1h."""
OperationTimeout = Annotated[int, bounded(30, 7 * 86400), AS_DURATION, DURATION_SCHEMA]
"""How long one runner operation may take: 30s to 7d."""
MaxAge = Annotated[int, bounded(60, 366 * 86400), AS_DURATION, DURATION_SCHEMA]
"""How old an approval may be: 1m to 366d."""
