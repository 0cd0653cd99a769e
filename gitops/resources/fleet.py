"""``DatabaseFleet``: one template over many member databases, rolled out in steps.

A fleet is not reconciled itself: the loader expands it into one full ``DatabaseSchema`` or
``DatabaseMigration`` per member (``gitops/repo/fleets.py``), named ``<fleet>/<member>``,
each validated like a hand-written declaration. What this module holds is the fleet's own
shape: the template (its ``spec`` is kept as written, placeholders and all, and validated
per member once they are substituted), the members (listed inline or in a file of the
repository), and the rollout steps that decide when a member may apply (docs/fleets.md).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_serializer, field_validator
from pydantic_core import PydanticCustomError

from gitops.resources.base import (
    DNS_LABEL,
    DURATION_PATTERN,
    DatabaseObjectMeta,
    Declaration,
    Model,
    ObjectMeta,
    exactly_one,
    format_duration,
    parse_duration,
    plain_path,
)
from gitops.resources.status import FleetStatus

__all__ = [
    "UNTIL_RESUMED",
    "DatabaseFleet",
    "DatabaseFleetSpec",
    "FleetMember",
    "FleetMembers",
    "FleetRollout",
    "FleetTemplate",
    "OnFailure",
    "RolloutStep",
    "member_name",
    "parallel_limit",
]

MEMBER_NAME_MAX = 63
"""A member's name is a DNS label: it becomes the last part of ``<fleet>/<member>``."""
UNTIL_RESUMED = "untilResumed"
_PERCENT = re.compile(r"^([1-9][0-9]?|100)%$")


def member_name(fleet: str, member: str) -> str:
    """The name a member resource carries: ``<fleet>/<member>``. Its status file is
    ``status/<ns>/<fleet>/<member>.yaml``, beside the fleet's ``status/<ns>/<fleet>.yaml``,
    and it is addressed as ``NS/FLEET/MEMBER`` by every command (docs/fleets.md)."""
    return f"{fleet}/{member}"


class FleetMember(Model):
    """One member: its name and the labels steps select it by and placeholders read."""

    name: Annotated[str, Field(pattern=DNS_LABEL, max_length=MEMBER_NAME_MAX)]
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _kubernetes_labels(cls, labels: dict[str, str]) -> dict[str, str]:
        ObjectMeta(name="x", labels=labels)  # the same rules as metadata.labels
        return labels


class FleetMembers(Model):
    """The members, listed here or in a YAML file of the repository (a list of the same
    entries), exactly one of the two."""

    list_: Annotated[list[FleetMember], Field(max_length=10_000)] | None = Field(
        default=None, alias="list"
    )
    from_file: Annotated[str, Field(min_length=1, max_length=1024)] | None = None

    _one = exactly_one("members", "list_", "from_file")

    @field_validator("from_file")
    @classmethod
    def _plain(cls, path: str | None) -> str | None:
        return plain_path(path) if path is not None else None


class FleetTemplate(Model):
    """What every member is: a kind and that kind's ``spec``, with ``{{ member.name }}`` and
    ``{{ member.labels.KEY }}`` in its strings (the only templating; no expressions)."""

    kind: Literal["DatabaseSchema", "DatabaseMigration"]
    spec: Annotated[
        dict[str, Any],
        WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
    ]


def _max_parallel(value: object) -> int | str:
    if isinstance(value, bool):
        raise PydanticCustomError("max_parallel", "must be a number or a percentage like 50%")
    if isinstance(value, int):
        if value < 1:
            raise PydanticCustomError("max_parallel", "must be at least 1")
        return value
    if isinstance(value, str) and _PERCENT.match(value):
        return value
    raise PydanticCustomError("max_parallel", "must be a number or a percentage like 50%")


def _pause(value: object) -> int | str | None:
    if value is None or value == UNTIL_RESUMED:
        return value
    seconds = parse_duration(value)
    if not 1 <= seconds <= 30 * 86400:
        raise PydanticCustomError("pause", "must be between 1s and 30d, or untilResumed")
    return seconds


MaxParallel = Annotated[
    int | str,
    WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": r"^([0-9]+|[0-9]+%)$"}),
]


class RolloutStep(Model):
    """One step: the members whose labels match (all of ``match``; empty: every member not
    taken by an earlier step), how many of them may apply at once, and what waits after."""

    match: dict[str, str] = Field(default_factory=dict)
    max_parallel: MaxParallel = "100%"
    pause: Annotated[
        int | str | None,
        WithJsonSchema({"type": "string", "pattern": f"({DURATION_PATTERN})|^untilResumed$"}),
    ] = None
    """After the step is done, wait this long (seconds) or ``untilResumed`` before the next."""

    @field_validator("max_parallel", mode="before")
    @classmethod
    def _parallel(cls, value: object) -> int | str:
        return _max_parallel(value)

    @field_validator("pause", mode="before")
    @classmethod
    def _paused(cls, value: object) -> int | str | None:
        return _pause(value)

    @field_serializer("pause")
    def _spelled(self, pause: int | str | None) -> str | None:
        return format_duration(pause) if isinstance(pause, int) else pause


class OnFailure(StrEnum):
    """``Halt``: a Failed or Blocked member stops the later steps; ``Continue``: they go on
    while at most ``maxFailures`` members failed."""

    HALT = "Halt"
    CONTINUE = "Continue"


class FleetRollout(Model):
    """The ordered steps (none: one step of every member, all at once)."""

    steps: Annotated[list[RolloutStep], Field(max_length=32)] = Field(default_factory=list)
    on_failure: OnFailure = OnFailure.HALT
    max_failures: Annotated[int, Field(ge=0)] = 0
    resume: Annotated[str, Field(pattern=r"^[0-9a-z-]{1,80}$")] | None = None
    """The token the fleet status names for a halted or paused rollout: committing it
    here lets the rollout go on past that halt (docs/fleets.md, "Resuming")."""


class DatabaseFleetSpec(Model):
    template: FleetTemplate
    members: FleetMembers
    rollout: FleetRollout = Field(default_factory=FleetRollout)


class DatabaseFleet(Declaration):
    """Many databases declared once; see the module docstring."""

    kind: Literal["DatabaseFleet"] = "DatabaseFleet"
    metadata: DatabaseObjectMeta
    spec: DatabaseFleetSpec
    status: FleetStatus | None = None


def parallel_limit(value: int | str, members: int) -> int:
    """How many of a step's ``members`` may apply at once: a number, or a percentage of
    them rounded up (never less than one)."""
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%"))
    return max(1, -(-members * percent // 100))
