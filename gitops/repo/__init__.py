"""Reading a repository: safe YAML with line numbers, validation into resources, uids.

``loader.load_repository`` is the entry point; ``yamlfile`` guards against hostile files,
``messages`` words validation errors, ``uids`` derives each resource's lifetime uid from Git,
``problems`` says where a declaration is wrong. Import the module you need: this package
imports nothing itself, so that ``seshat`` can name a problem without building every
resource model first.
"""

__all__: list[str] = []
