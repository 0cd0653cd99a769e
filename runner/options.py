"""Command-line options both programs spell the same way (``seshat`` and ``seshat-runner``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["format_option"]

F = TypeVar("F", bound=Callable[..., Any])


def format_option(*choices: str, help: str | None = None) -> Callable[[F], F]:
    """``--format CHOICE`` into ``output_format``; the first choice is the default."""
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(list(choices)),
        default=choices[0],
        show_default=True,
        help=help,
    )
