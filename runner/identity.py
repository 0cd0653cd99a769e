"""The target identity digest: which database an operation actually reached.

Computed by the runner from the parsed URL it connected with — engine, host, port, database
and user, never the password — so the control plane can tell two targets apart (and bind a
plan to one) without ever seeing a credential. Engine spellings are canonical (``postgres``
and ``postgresql`` are one engine; so are ``mysql`` and ``mariadb``) and default ports are
filled in, so equal targets written differently get one digest. A PostgreSQL URL without a
host but with a ``host`` parameter (a Unix socket directory) is identified by that directory.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from runner.digests import Digest, digest
from runner.url import DEFAULT_PORTS, DatabaseURL

__all__ = ["target_identity"]


def target_identity(url: DatabaseURL) -> Digest:
    """``sha256:<hex>`` over (engine, host, port, database, user) of ``url``."""
    if url.engine == "sqlite":
        document: dict[str, object] = {
            "engine": url.engine,
            "host": "",
            "port": 0,
            "database": str(PurePosixPath(url.database)),
            "user": "",
        }
    else:
        document = {
            "engine": url.engine,
            "host": url.server_host.lower(),
            "port": url.port or DEFAULT_PORTS[url.engine],
            "database": url.database,
            "user": url.user,
        }
    return digest("target-identity", document)
