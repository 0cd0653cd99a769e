"""A sandbox template's archive (``runner.engines.servers._archive``): zero-filled stretches
of large files travel as holes, and what is extracted is byte for byte what was archived."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runner.engines.servers import _archive


def test_zero_stretches_travel_as_holes_and_come_back_byte_identical(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "base").mkdir(parents=True)
    big = data / "ibdata1"
    with big.open("wb") as stream:  # written zeros, as a server preallocates them: no holes yet
        stream.write(b"head" * 1024)
        stream.write(bytes(6 << 20))
        stream.write(b"tail" * 1024)
    small = data / "base" / "1255"
    small.write_bytes(b"\0" * 8192 + b"catalog")
    big.chmod(0o600)

    archive = tmp_path / "template.tar"
    _archive(data, archive)

    assert archive.stat().st_size < 1 << 20, "the zeros were archived as data"
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run(["tar", "-xf", str(archive), "-C", str(out)], check=True)
    assert (out / "ibdata1").read_bytes() == big.read_bytes()
    assert (out / "base" / "1255").read_bytes() == small.read_bytes()
    assert os.stat(out / "ibdata1").st_blocks * 512 < 1 << 20, "extracted without its holes"
    assert (out / "ibdata1").stat().st_mode & 0o777 == 0o600


def test_links_in_the_built_folder_are_never_followed(tmp_path: Path) -> None:
    # The build's programs ran as the jail's user in this folder: a link they left, to a
    # large file or where the rewritten copy goes, must not make the runner write elsewhere.
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(bytes(2 << 20))
    data = tmp_path / "data"
    data.mkdir()
    (data / "linked").symlink_to(victim)
    (data / "ib_logfile0").write_bytes(bytes(2 << 20))
    (data / "ib_logfile0.sparse").symlink_to(outside / "written")

    with pytest.raises(FileExistsError):
        _archive(data, tmp_path / "template.tar")

    assert not (outside / "written").exists()
    assert victim.read_bytes() == bytes(2 << 20)
    assert os.stat(victim).st_blocks * 512 >= 2 << 20, "the link's target was rewritten"
