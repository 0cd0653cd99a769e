"""Fixtures for the artifact tests: a folder to package and ``seshat`` run as a user would."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.seshat_cli import SeshatRunner, seshat_runner


@pytest.fixture
def seshat(tmp_path: Path) -> SeshatRunner:
    return seshat_runner(tmp_path)


@pytest.fixture
def schema_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "schema"
    (folder / "tables").mkdir(parents=True)
    (folder / "tables" / "orders.sql").write_text("CREATE TABLE orders (id bigint);\n")
    (folder / "types.sql").write_text("CREATE TYPE status AS ENUM ('new');\n")
    (folder / "README.md").write_text("not packaged\n")
    return folder
