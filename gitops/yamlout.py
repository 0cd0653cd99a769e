"""Writing YAML for people and for ``kubectl``: block style, keys in the given order."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from ruamel.yaml import YAML

__all__ = ["dump_all"]


def dump_all(documents: Iterable[Any]) -> str:
    """Documents as one multi-document YAML stream, byte-stable for equal input."""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    yaml.width = 4096
    stream = io.StringIO()
    yaml.explicit_start = True
    yaml.dump_all(list(documents), stream)
    return stream.getvalue()
