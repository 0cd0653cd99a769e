"""Seshat's control plane: Git in, Git out, decisions and scheduling; no database access.

``gitops.resources`` holds the typed resources, ``gitops.repo`` reads a repository into
them, ``gitops.crds`` publishes them as CRDs and ``gitops.cli`` is the ``seshat`` command.
It may import ``runner``'s protocol and pure models, never a database driver.
"""

__all__: list[str] = []
