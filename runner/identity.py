"""The target identity digest: which database an operation actually reached.

Computed by the runner from the URL it connected with — engine, host, port, database and
user, never the password — so the control plane can tell two targets apart (and bind a plan
to one) without ever seeing a credential. Engine spellings are canonical (``postgres`` and
``postgresql`` are one engine; so are ``mysql`` and ``mariadb``) and default ports are
filled in, so equal targets written differently get one digest.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Final
from urllib.parse import unquote, urlsplit

from runner.digests import digest

__all__ = ["ENGINES", "canonical_engine", "target_identity"]

ENGINES: Final = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
}
_DEFAULT_PORTS: Final = {"postgresql": 5432, "mysql": 3306}


def canonical_engine(url: str) -> str:
    """The canonical engine name of a database URL's scheme."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ENGINES:
        raise ValueError(f"unsupported database URL scheme {scheme!r}")
    return ENGINES[scheme]


def target_identity(url: str) -> str:
    """``sha256:<hex>`` over (engine, host, port, database, user) of ``url``."""
    engine = canonical_engine(url)
    parts = urlsplit(url)
    if engine == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute/path.db
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        document = {
            "engine": engine,
            "host": "",
            "port": 0,
            "database": str(PurePosixPath(path)),
            "user": "",
        }
    else:
        document = {
            "engine": engine,
            "host": (parts.hostname or "").lower(),
            "port": parts.port or _DEFAULT_PORTS[engine],
            "database": unquote(parts.path.lstrip("/")),
            "user": unquote(parts.username or ""),
        }
    return digest("target-identity", document)
