"""A status commit's tree built in memory is the tree Git's own index would build.

:meth:`BareClone.commit` builds a commit's tree by reading and rewriting only the folders on
the changed paths (:meth:`BareClone._tree_in_memory`); before, a temporary index held the
whole tree and ``update-index --replace`` set each path. Both are run here on random trees
(files, executables, symlinks, nested folders, as anyone who can push may leave them on the
status branch) and random changes (new files, replaced files, deletions, a file where a
folder or symlink was, a folder where a file was, deletions below a file), against a real
bare repository: the two object ids must be equal, byte for byte.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import pytest
from gitdb import IStream
from hypothesis import given
from hypothesis import strategies as st

from fuzz.fuzzkit import budget
from gitops.writeback.bare import BareClone

NAMES = st.sampled_from(["a", "b", "a.yaml", "a-b", "status", "shop", "z", "é", "a b"])
PATHS = st.lists(NAMES, min_size=1, max_size=4).map("/".join)
MODES = st.sampled_from(["100644", "100755", "120000"])
CONTENT = st.binary(max_size=12)


@pytest.fixture(scope="module")
def clone() -> Iterator[BareClone]:
    with tempfile.TemporaryDirectory(prefix="seshat-fuzz-trees-") as folder:
        made = BareClone(Path(folder) / "status.git", "file:///nonexistent")
        yield made
        made.close()


def _index_tree(clone: BareClone, entries: dict[str, tuple[str, bytes]]) -> str:
    """A tree of ``entries`` (path -> mode, content) through an index, as Git builds one;
    where a path is both a file and a folder of others, the later one (in path order) wins."""
    repo = clone.repo
    lines = []
    for path in sorted(entries):
        mode, content = entries[path]
        blob = repo.odb.store(IStream("blob", len(content), BytesIO(content)))
        lines.append(f"{mode} {blob.hexsha.decode()}\t{path}\0")
    with tempfile.TemporaryDirectory(prefix="seshat-index-") as folder:
        env = {"GIT_INDEX_FILE": f"{folder}/index"}
        repo.git.read_tree("--empty", env=env)
        info = Path(folder) / "info"
        info.write_text("".join(lines), encoding="utf-8")
        with info.open("rb") as stream:
            repo.git.update_index(
                "--add", "--replace", "-z", "--index-info", istream=stream, env=env
            )
        return str(repo.git.write_tree(env=env))


@budget(40)
@given(
    base=st.dictionaries(PATHS, st.tuples(MODES, CONTENT), max_size=8),
    changes=st.dictionaries(PATHS, st.none() | CONTENT, min_size=1, max_size=6),
)
def test_a_tree_built_in_memory_is_the_one_an_index_builds(
    clone: BareClone, base: dict[str, tuple[str, bytes]], changes: dict[str, bytes | None]
) -> None:
    tree = _index_tree(clone, base)
    in_memory = clone._tree_in_memory(tree, changes)
    through_index = clone._tree_through_index(tree, changes)
    assert in_memory == through_index
