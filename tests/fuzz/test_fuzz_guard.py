"""The write guard the fuzz tests rely on catches what it must and lets the rest through."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from fuzz.fuzzkit import confined


def test_writes_inside_and_temporary_files_pass(tmp_path: Path) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    with confined(inside):
        (inside / "a").write_text("x")
        os.mkdir(inside / "b")
        os.replace(inside / "a", inside / "b" / "c")
        with tempfile.NamedTemporaryFile() as handle:
            assert Path(handle.name).parent == inside / ".tmp"
        with tempfile.TemporaryDirectory() as folder:  # removed through dir_fd
            (Path(folder) / "sub").mkdir()
            (Path(folder) / "sub" / "f").write_text("x")
        assert Path("/etc/hostname").read_bytes() is not None  # reading is not writing


@pytest.mark.parametrize(
    "how", ["open", "os.open", "mkdir", "rename", "symlink", "through-link", "dir_fd"]
)
def test_writes_outside_fail(tmp_path: Path, how: str) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (inside / "link").symlink_to(outside)
    (outside / "f").write_text("x")
    with pytest.raises(AssertionError, match="writes outside"), confined(inside):
        if how == "open":
            (outside / "g").write_text("x")
        elif how == "os.open":
            os.close(os.open(outside / "f", os.O_WRONLY))
        elif how == "mkdir":
            os.mkdir(outside / "d")
        elif how == "rename":
            os.rename(outside / "f", outside / "g")
        elif how == "symlink":
            os.symlink("/etc", outside / "s")
        elif how == "dir_fd":
            handle = os.open(outside, os.O_RDONLY)
            try:
                os.unlink("f", dir_fd=handle)
            finally:
                os.close(handle)
        else:
            (inside / "link" / "h").write_text("x")
