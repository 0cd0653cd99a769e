"""Reading a repository: safe YAML with line numbers, validation into resources, uids.

``load_repository`` is the entry point; ``yamlfile`` guards against hostile files,
``messages`` words validation errors, ``uids`` derives each resource's lifetime uid from Git.
"""

from gitops.repo.loader import LoadedResource, Repository, load_repository
from gitops.repo.problems import Problem, ResourceKey

__all__ = ["LoadedResource", "Problem", "Repository", "ResourceKey", "load_repository"]
