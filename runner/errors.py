"""The error hierarchy every Seshat component raises.

Each error carries a stable CamelCase ``code`` (it becomes a verdict reason in status files
and a condition reason) and says whether it is *Blocked* (a refusal: retrying is useless
until somebody changes an input) or *Failed* (a fault: a retry is reasonable)::

    SeshatError                      Internal (Failed)
    ├── ConfigurationError           ConfigurationError (Blocked): bad declarations
    └── CanNotRunError               CanNotRun (Failed): a path, tool or server is missing

The control plane and the runner share this base so that a code means the same thing on
both sides of the protocol. Driver and library exceptions are translated in the one module
that talks to that library, never here.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CanNotRunError",
    "ConfigurationError",
    "SeshatError",
]


class SeshatError(Exception):
    """Base of every error Seshat raises on purpose."""

    code: ClassVar[str] = "Internal"
    blocked: ClassVar[bool] = False  # True: a retry cannot help until an input changes


class ConfigurationError(SeshatError):
    """The declarations cannot be used as written."""

    code = "ConfigurationError"
    blocked = True


class CanNotRunError(SeshatError):
    """A command could not run at all (a missing file, tool or server); nothing changed."""

    code = "CanNotRun"
