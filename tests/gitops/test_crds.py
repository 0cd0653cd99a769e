"""The CRDs: generated from the models, committed, structural, valid for Kubernetes.

No Kubernetes API server can run on this machine, so manifests are checked against the
official Kubernetes OpenAPI schemas (``kubernetes-validate``, strict: unknown fields fail),
and rendered resources against the CRDs' own schemas with a JSON Schema validator.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from ruamel.yaml import YAML

from gitops.crds import crds

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "deploy" / "crds"
SESHAT = [sys.executable, "-c", "from gitops.cli import main; main()"]
K8S_VERSION = "1.33.0"


def load_all(text: str) -> list[Any]:
    return [d for d in YAML(typ="safe", pure=True).load_all(text) if d is not None]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SESHAT, *args], capture_output=True, text=True, timeout=60)


def test_committed_crds_are_up_to_date(tmp_path: Path) -> None:
    result = run("render", "--crds", "--write", str(tmp_path))
    assert result.returncode == 0, result.stderr
    generated = {p.name: p.read_text() for p in tmp_path.iterdir()}
    committed = {p.name: p.read_text() for p in COMMITTED.iterdir()}
    assert generated == committed, "run: seshat render --crds --write deploy/crds"


def test_render_crds_prints_every_crd_valid_under_kubernetes_strict_schemas() -> None:
    result = run("render", "--crds")
    documents = load_all(result.stdout)
    assert [d["spec"]["names"]["kind"] for d in documents] == [
        "DatabaseSchema",
        "DatabaseMigration",
        "DatabaseFleet",
        "VerificationPolicy",
        "ApprovalPolicy",
        "Approval",
        "RunAcknowledgment",
    ]
    for document in documents:
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)


def test_strict_validation_would_catch_a_bad_crd() -> None:
    broken = crds()[0]
    broken["spec"]["versions"][0]["servedd"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def _walk(node: dict[str, Any], where: str) -> list[str]:
    typed = "type" in node or node.get("x-kubernetes-int-or-string") is True
    faults = [] if typed else [f"{where}: no type"]
    faults += [f"{where}: {k}" for k in ("$ref", "anyOf", "oneOf", "allOf") if k in node]
    for name, child in node.get("properties", {}).items():
        faults += _walk(child, f"{where}.{name}")
    if "items" in node:
        faults += _walk(node["items"], f"{where}[]")
    if isinstance(node.get("additionalProperties"), dict):
        faults += _walk(node["additionalProperties"], f"{where}{{}}")
    return faults


@pytest.mark.parametrize("crd", crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_schemas_are_structural(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _walk(schema, crd["spec"]["names"]["kind"]) == []


def test_database_crds_have_status_and_phase_and_reason_columns() -> None:
    by_kind = {c["spec"]["names"]["kind"]: c["spec"]["versions"][0] for c in crds()}
    for kind in ("DatabaseSchema", "DatabaseMigration"):
        version = by_kind[kind]
        assert version["subresources"] == {"status": {}}
        columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
        assert columns["Phase"] == ".status.phase"
        assert columns["Reason"] == '.status.conditions[?(@.type=="Ready")].reason'
        phases = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        assert "InSync" in phases["phase"]["enum"]
    assert "subresources" not in by_kind["Approval"]


def test_rendered_example_resources_match_their_crd_schemas() -> None:
    result = run("render", str(ROOT / "examples" / "repo"))
    assert result.returncode == 0, result.stderr
    schemas = {
        c["spec"]["names"]["kind"]: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for c in crds()
    }
    documents = load_all(result.stdout)
    assert len(documents) == 7  # the fleet, not its members: they are no objects of their own
    for document in documents:
        jsonschema.validate(document, schemas[document["kind"]])
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": document["metadata"]},
            K8S_VERSION,
            strict=True,
        )  # metadata is a valid Kubernetes ObjectMeta
        assert document["metadata"]["uid"]


def test_a_resource_violating_its_crd_schema_is_caught() -> None:
    schema = crds()[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    bad = {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "DatabaseSchema",
        "metadata": {},
        "spec": {"policy": {"apply": "Sometimes"}},
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_the_database_schema_crd_takes_the_drop_policy() -> None:
    schema = next(
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for c in crds()
        if c["spec"]["names"]["kind"] == "DatabaseSchema"
    )
    rendered = run("render", str(ROOT / "examples" / "repo"))
    assert rendered.returncode == 0, rendered.stderr
    resource = next(d for d in load_all(rendered.stdout) if d["kind"] == "DatabaseSchema")
    assert resource["spec"]["policy"]["drops"] == "Plan"  # the default, rendered
    for value in ("Plan", "Skip"):
        resource["spec"]["policy"]["drops"] = value
        jsonschema.validate(resource, schema)
    resource["spec"]["policy"]["drops"] = "Keep"
    with pytest.raises(jsonschema.ValidationError, match="Keep"):
        jsonschema.validate(resource, schema)
