"""Kubernetes CustomResourceDefinitions generated from the resource models.

The CRDs are derived from the same pydantic models the loader validates with, so Git, the
CLI and a cluster cannot disagree about a field. pydantic writes JSON Schema; a CRD needs a
*structural* OpenAPI v3 schema: every node typed, no ``$ref``, no ``anyOf`` over types,
``nullable`` instead of a ``null`` alternative, and ``metadata`` left to the API server.
:func:`structural` does that translation. The committed copies live in ``deploy/crds/`` and
a test fails when they are out of date (regenerate with ``seshat render --crds --write
deploy/crds``).
"""

from __future__ import annotations

from typing import Any

from gitops.resources.base import API_GROUP
from gitops.resources.kinds import KINDS, Kind

__all__ = ["VERSION", "crd_for", "crds", "structural"]

VERSION = "v1alpha1"

_DROP = {"title", "additionalProperties", "$defs"}


def structural(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Translate one pydantic JSON Schema node into a structural OpenAPI v3 node."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        merged = {**defs[name], **{k: v for k, v in schema.items() if k != "$ref"}}
        return structural(merged, defs)
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise ValueError(f"cannot express a union of {len(options)} types structurally")
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        node = structural({**options[0], **rest}, defs)
        if len(options) != len(schema["anyOf"]):
            node["nullable"] = True
        if node.get("default") is None:
            node.pop("default", None)  # pydantic writes `default: null` for optional fields
        return node
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROP:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "properties":
            out[key] = {name: structural(child, defs) for name, child in value.items()}
        elif key == "items":
            out[key] = structural(value, defs)
        else:
            out[key] = value
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        out["additionalProperties"] = structural(additional, defs)
    if out.get("x-kubernetes-int-or-string"):
        return out  # Kubernetes' one typeless node: an integer or a string
    if "type" not in out and "enum" in out:
        out["type"] = "string"
    if "type" not in out:
        raise ValueError(f"schema node without a type: {sorted(schema)}")
    return out


def _columns(kind: Kind) -> list[dict[str, Any]]:
    columns: list[dict[str, Any]] = []
    if kind.has_status:
        columns += [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {
                "name": "Reason",
                "type": "string",
                "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
            },
        ]
    if kind.name == "DatabaseFleet":  # how much of the fleet is converged
        columns += [
            {"name": "Members", "type": "integer", "jsonPath": ".status.members"},
            {"name": "InSync", "type": "integer", "jsonPath": ".status.phases.InSync"},
        ]
    columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    return columns


def crd_for(kind: Kind) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind."""
    raw = kind.model.model_json_schema(mode="serialization", by_alias=True)
    defs = raw.get("$defs", {})
    schema = structural(raw, defs)
    properties = schema["properties"]
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = {"type": "object"}
    if not kind.has_status:
        properties.pop("status", None)
    schema["required"] = [r for r in schema.get("required", []) if r != "metadata"]
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": _columns(kind),
    }
    if kind.has_status:
        version["subresources"] = {"status": {}}
    names: dict[str, Any] = {
        "kind": kind.name,
        "listKind": f"{kind.name}List",
        "plural": kind.plural,
        "singular": kind.name.lower(),
        "categories": ["seshat"],
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{API_GROUP}"},
        "spec": {"group": API_GROUP, "names": names, "scope": "Namespaced", "versions": [version]},
    }


def crds() -> list[dict[str, Any]]:
    """Every CRD, in the fixed order of :data:`~gitops.resources.kinds.KINDS`."""
    return [crd_for(kind) for kind in KINDS.values()]
