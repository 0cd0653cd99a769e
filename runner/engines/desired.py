"""Reading the desired schema from disk: one ``.sql`` file or a folder of them.

Shared by every dialect; the dialect's loader runs the statements (and names the file and
line of the one that fails, through :class:`DesiredSchemaError`).
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import SeshatError

__all__ = ["DesiredSchemaError", "desired_files"]


class DesiredSchemaError(SeshatError):
    """The desired schema does not load; the message names the file, line and server error."""


def desired_files(path: Path) -> list[tuple[str, str]]:
    """(name, text) of the desired schema: one ``.sql`` file, or a folder's in lexical order."""
    if path.is_file():
        return [(path.name, path.read_text(encoding="utf-8"))]
    if not path.is_dir():
        raise DesiredSchemaError(f"{path}: no such file or folder")
    files = sorted(p for p in path.rglob("*.sql") if p.is_file())
    return [(p.relative_to(path).as_posix(), p.read_text(encoding="utf-8")) for p in files]
