"""A migration directory: ``<version>_<description>.sql`` files, ordered by version.

* ``version`` is digits, compared as a number (``2`` before ``10``); two files with the same
  number are refused. golang-migrate's ``<version>_<description>.up.sql`` is accepted and
  ``.down.sql`` files are ignored. Other files are ignored.
* ``<version>_<description>.checkpoint.sql`` is a checkpoint: the cumulative schema at its
  version. A fresh database (no history rows) runs the newest checkpoint instead of the
  files below it; see :mod:`runner.migrations.history`.
* A header line ``-- seshat:no-transaction`` (among the leading comment lines) runs the file
  outside a transaction, statement by statement.
* The checksum, algorithm ``sha256-bytes-v1``, is ``sha256:`` and the hex SHA-256 of the
  file's bytes exactly as stored: no decoding, no newline or whitespace normalization. A
  file read on another machine, or after a checkout that preserved its bytes, has the same
  checksum; any edit (even of a comment or a line ending) changes it. The algorithm's name is
  stored with every history row, so a future algorithm never reinterprets an old row.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from runner.digests import sha256_digest
from runner.errors import ConfigurationError

__all__ = ["CHECKSUM_ALGORITHM", "MigrationFile", "read_directory"]

CHECKSUM_ALGORITHM = "sha256-bytes-v1"
_NAME = re.compile(
    r"(?P<version>[0-9]{1,20})_(?P<description>[^/]+?)"
    r"(?P<checkpoint>\.checkpoint)?(?P<up>\.up)?\.sql"
)  # matched whole (fullmatch): ``$`` also matched before a final newline, "1_a.sql\n"
_NO_TRANSACTION = "-- seshat:no-transaction"


@dataclass(frozen=True, slots=True)
class MigrationFile:
    version: str
    description: str
    name: str
    checksum: str
    transactional: bool
    text: str
    checkpoint: bool = False

    @property
    def number(self) -> int:
        return int(self.version)


def _directives(text: str) -> bool:
    """Whether the file runs in a transaction (no ``-- seshat:no-transaction`` header)."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("--"):
            break
        if stripped.lower() == _NO_TRANSACTION:
            return False
    return True


def _printable_utf8(name: str) -> bool:
    """Whether a file name (as ``os.fsdecode`` spells it) is UTF-8 text on one line: bytes
    that are not UTF-8 come back as lone surrogates, which no UTF-8 writer takes."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in name)


def read_directory(folder: Path) -> list[MigrationFile]:
    """Every migration file of ``folder``, in version order."""
    if not folder.is_dir():
        raise ConfigurationError(f"{folder}: no such migration directory")
    found: dict[int, MigrationFile] = {}
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".down.sql") or not path.is_file():
            continue
        match = _NAME.fullmatch(path.name)
        if match is None:
            continue
        if not _printable_utf8(path.name):
            # The name is recorded in history rows and hashed into plans: it must be text.
            raise ConfigurationError(
                f"{path.name!r}: a migration file name must be UTF-8 without control characters"
            )
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ConfigurationError(f"{path.name}: not UTF-8 (byte {error.start})") from None
        migration = MigrationFile(
            version=match["version"],
            description=match["description"],
            name=path.name,
            checksum=sha256_digest(data),
            transactional=_directives(text),
            text=text,
            checkpoint=match["checkpoint"] is not None,
        )
        if migration.number in found:
            raise ConfigurationError(
                f"{path.name} and {found[migration.number].name} have the same version"
            )
        found[migration.number] = migration
    return [found[number] for number in sorted(found)]
