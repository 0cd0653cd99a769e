"""The remote branch tip by ``git ls-remote``: what ``seshat run`` compares every --poll."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.gitrepo import GitRemote

from gitops.repo.tip import remote_tip
from runner.errors import CanNotRunError


def test_the_tip_follows_pushes_and_a_missing_branch_has_none(git_remote: GitRemote) -> None:
    git_remote.write_file("README.md", "one\n")
    first = git_remote.commit_all("one")
    assert remote_tip(git_remote.remote_url, "main") == git_remote.remote_head() == first
    git_remote.write_file("README.md", "two\n")
    second = git_remote.commit_all("two")
    assert second != first and remote_tip(git_remote.remote_url, "main") == second
    assert remote_tip(git_remote.remote_url, "nowhere") is None


def test_an_unreadable_remote_says_why_without_a_password(tmp_path: Path) -> None:
    with pytest.raises(CanNotRunError, match="cannot look at branch main: fatal:"):
        remote_tip(str(tmp_path / "missing.git"), "main")
    with pytest.raises(CanNotRunError) as refused:
        remote_tip("http://someone:pa55word-123@127.0.0.1:9/shop.git", "main", timeout=30)
    assert "pa55word-123" not in str(refused.value)
