"""The import direction DESIGN.md promises: ``runner`` never imports ``gitops``.

Checked twice: statically over every runner module's import statements, and dynamically by
importing every runner module in a fresh interpreter where ``gitops`` and the control
plane's libraries (Git, YAML, JSON Schema) cannot be imported at all.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "runner"


def _imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_runner_module_imports_gitops() -> None:
    modules = sorted(RUNNER.rglob("*.py"))
    assert modules, "runner/ has no modules"
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            n for n in _imported_names(path) if n.split(".")[0] == "gitops"
        )
        for path in modules
    }
    assert {k: v for k, v in offenders.items() if v} == {}


BLOCKER = """
import importlib, importlib.abc, pkgutil, sys
BLOCKED = {"gitops", "git", "ruamel", "jsonschema", "kubernetes"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked import of {name}")
        return None
sys.meta_path.insert(0, Block())
import runner
for info in pkgutil.walk_packages(runner.__path__, "runner."):
    importlib.import_module(info.name)
print("imported", len(list(pkgutil.walk_packages(runner.__path__, "runner."))))
"""


def test_runner_imports_without_the_control_plane_installed() -> None:
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("imported ")


def test_the_blocker_would_catch_an_import_of_gitops() -> None:
    script = BLOCKER.replace("import runner\n", "import runner\nimport gitops\n", 1)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode != 0
    assert "blocked import of gitops" in result.stderr
