"""The ``--repo FOLDER`` option of the commands that read a repository from a local folder.

``seshat approve``, ``seshat acknowledge``, ``seshat verify-approval`` and ``seshat artifact
verify`` all take the repository the same way (an existing folder, the current one by
default); only what they read from it differs, so only the help is theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["repo_option"]

F = TypeVar("F", bound=Callable[..., Any])


def repo_option(help: str) -> Callable[[F], F]:
    """``--repo FOLDER`` into ``repo`` (a :class:`~pathlib.Path`), default ``.``."""
    return click.option(
        "--repo",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=".",
        show_default=True,
        help=help,
    )
