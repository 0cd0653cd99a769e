"""Seshat's data plane: one database operation per process.

What belongs here: database engines, migrations, the artifact client, the result protocol,
and the pure models the control plane may import (``runner.digests``, ``runner.errors``).
What never does: Git, forges, Kubernetes, or any import of ``gitops`` — the runner must run
with nothing but a database credential (``tests/test_imports.py`` enforces it).

Add a part as a module named for what it does (``runner/engines/diff.py``) and list its
public names in that module's ``__all__``.
"""

__all__: list[str] = []
