"""Reading one resource from one file, for commands that take a file (``--policy FILE``).

The same rules as the repository loader (size, UTF-8, YAML bombs, duplicate keys) and the
same messages: every problem is ``path:line: field: message``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from gitops.repo.files import UnreadableFile, read_regular
from gitops.repo.messages import field_errors, format_field
from gitops.repo.yamlfile import MAX_FILE_BYTES, FileError, read_documents
from runner.errors import ConfigurationError

__all__ = ["load_one"]

M = TypeVar("M", bound=BaseModel)


def load_one(path: Path, model: type[M]) -> M:
    """The single ``model`` document in ``path``; :class:`ConfigurationError` lists problems."""
    try:
        data = read_regular(path, MAX_FILE_BYTES)
        if data is None:
            raise ConfigurationError(f"{path}: no such file")
        documents = read_documents(data)
    except UnreadableFile as error:
        raise ConfigurationError(str(error)) from None
    except FileError as error:
        where = f"{path}:{error.line}" if error.line else str(path)
        raise ConfigurationError(f"{where}: {error.message}") from None
    if len(documents) != 1:
        raise ConfigurationError(f"{path}: expected one YAML document, found {len(documents)}")
    document = documents[0]
    try:
        return model.model_validate(document.data)
    except ValidationError as error:
        lines = [
            f"{path}:{document.line_of(field)}: {format_field(field)}: {message}"
            for field, message in field_errors(error)
        ]
        raise ConfigurationError("\n".join(lines)) from None
