"""examples/ci/: the GitHub Actions workflow and the GitLab CI job run ``seshat preview``
with options it accepts, on full history, with the status branch fetched."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gitops.preview.cli import preview

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "ci"


def _commands(node: object) -> list[str]:
    """Every shell line in the file that runs ``seshat preview``."""
    if isinstance(node, dict):
        return [c for value in node.values() for c in _commands(value)]
    if isinstance(node, list):
        return [c for value in node for c in _commands(value)]
    if isinstance(node, str) and node.lstrip().startswith("seshat preview --"):
        return [node]
    return []


@pytest.mark.parametrize("name", ["github-actions.yaml", "gitlab-ci.yml"])
def test_the_example_runs_seshat_preview_as_it_parses(name: str) -> None:
    text = (EXAMPLES / name).read_text()
    [command] = _commands(YAML(typ="safe").load(text))
    words = shlex.split(command.replace("${{", "'${{").replace("}}", "}}'"))[2:]
    known = {option for param in preview.params for option in param.opts}

    given = [w for w in words if w.startswith("--")]

    assert set(given) <= known
    assert {"--repo", "--base", "--head"} <= set(given)
    assert ("--github-repo" in given) == ("--pull" in given)
    assert ("--gitlab-project" in given) == ("--merge-request" in given)
    assert "seshat/status" in text  # the recorded digests are read from it
    assert "fetch-depth: 0" in text or 'GIT_DEPTH: "0"' in text  # uids come from history
