"""deploy/: the manifests, the image, and the Argo CD / Flux health snippets.

No Kubernetes API server (nor Argo CD, nor Flux) can run on this machine, so the official
schemas are the check: every built-in object validates strictly (unknown fields fail)
against the Kubernetes OpenAPI schemas with ``kubernetes-validate``; Seshat's own resources
against the openAPIV3Schema of the CRDs in deploy/crds with a JSON Schema validator; and the
kinds neither knows (kustomize's ``Kustomization``, Flux's ``Kustomization``) by checking
the fields these files rely on. The Argo CD health script runs in a real Lua 5.1 interpreter
(the language version of Argo CD's gopher-lua) over statuses built by the reconciler's own
condition code. Where ``kubectl`` is installed, its built-in kustomize builds deploy/.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML: YAML 1.1, as kubectl reads it
from lupa.lua51 import LuaRuntime
from ruamel.yaml import YAML

from gitops.reconcile.conditions import summary_conditions
from gitops.reconcile.fleets import fleet_conditions
from gitops.resources.status import Reason

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
MANIFESTS = DEPLOY / "manifests"
CRDS = DEPLOY / "crds"
K8S_VERSION = "1.33.0"
RUNNER_SA = "runner-serviceaccount.yaml"
SNIPPET_FOLDERS = ("manifests", "flux", "argocd")

Doc = dict[str, Any]


def load_all(path: Path) -> list[Doc]:
    documents = YAML(typ="safe", pure=True).load_all(path.read_text())
    return [d for d in documents if d is not None]


def yaml_files() -> list[Path]:
    files = [DEPLOY / "kustomization.yaml"]
    for folder in SNIPPET_FOLDERS:
        files += sorted((DEPLOY / folder).glob("*.yaml"))
    return files


def all_documents() -> list[tuple[str, Doc]]:
    return [
        (f"{path.relative_to(DEPLOY)}#{i}", doc)
        for path in yaml_files()
        for i, doc in enumerate(load_all(path))
    ]


def find(kind: str, name: str, folder: str = "manifests") -> Doc:
    found = [
        doc
        for path in sorted((DEPLOY / folder).glob("*.yaml"))
        for doc in load_all(path)
        if doc["kind"] == kind and doc["metadata"]["name"] == name
    ]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


@cache
def crd_schemas() -> dict[str, Doc]:
    schemas = {}
    for path in sorted(CRDS.glob("*.yaml")):
        (crd,) = load_all(path)
        schemas[crd["spec"]["names"]["kind"]] = crd["spec"]["versions"][0]["schema"][
            "openAPIV3Schema"
        ]
    return schemas


# -- validation, kind by kind -----------------------------------------------------------

KUSTOMIZE_FIELDS = {"apiVersion", "kind", "resources", "images", "patches", "labels"}
FLUX_SPEC_FIELDS = {
    "interval",
    "retryInterval",
    "timeout",
    "sourceRef",
    "path",
    "prune",
    "wait",
    "healthChecks",
    "dependsOn",
    "targetNamespace",
    "serviceAccountName",
    "suspend",
    "force",
    "patches",
    "images",
    "postBuild",
    "decryption",
    "components",
    "commonMetadata",
    "kubeConfig",
    "namePrefix",
    "nameSuffix",
    "deletionPolicy",
}
DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$")


def check_metadata(metadata: Doc) -> None:
    """A valid ObjectMeta, checked strictly by validating it on a ConfigMap."""
    kubernetes_validate.validate(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}, K8S_VERSION, strict=True
    )


def check_kustomize(doc: Doc, where: Path) -> None:
    assert set(doc) <= KUSTOMIZE_FIELDS, set(doc) - KUSTOMIZE_FIELDS
    assert doc["kind"] == "Kustomization"
    assert doc["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    for resource in doc["resources"]:
        target = (where.parent / resource).resolve()
        assert target.exists(), resource
        # kustomize loads files only in or below the kustomization's folder (folders with
        # their own kustomization.yaml may be anywhere).
        if target.is_file():
            assert target.is_relative_to(where.parent.resolve()), resource
        else:
            assert (target / "kustomization.yaml").is_file(), resource


def check_flux(doc: Doc) -> None:
    """Flux's Kustomization v1: the fields these examples use, and no unknown ones."""
    assert doc["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert doc["kind"] == "Kustomization"
    assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
    check_metadata(doc["metadata"])
    spec = doc["spec"]
    assert set(spec) <= FLUX_SPEC_FIELDS, set(spec) - FLUX_SPEC_FIELDS
    assert {"interval", "prune", "sourceRef"} <= set(spec)  # required by the CRD
    assert isinstance(spec["prune"], bool)
    for field in ("interval", "timeout", "retryInterval"):
        if field in spec:
            assert DURATION.match(spec[field]), (field, spec[field])
    assert set(spec["sourceRef"]) <= {"apiVersion", "kind", "name", "namespace"}
    assert spec["sourceRef"]["kind"] in {"GitRepository", "OCIRepository", "Bucket"}
    assert spec["sourceRef"]["name"]
    for check in spec.get("healthChecks", []):
        assert set(check) <= {"apiVersion", "kind", "name", "namespace"}
        assert check["kind"] and check["name"]
    for dependency in spec.get("dependsOn", []):
        assert set(dependency) <= {"name", "namespace"} and dependency["name"]


def validate(doc: Doc, where: Path) -> None:
    group = doc["apiVersion"].split("/")[0]
    if group == "kustomize.config.k8s.io":
        check_kustomize(doc, where)
    elif group == "kustomize.toolkit.fluxcd.io":
        check_flux(doc)
    elif group == "seshat.dev":
        jsonschema.validate(doc, crd_schemas()[doc["kind"]])
        check_metadata(doc["metadata"])
    else:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_document_validates_strictly(path: Path) -> None:
    documents = load_all(path)
    assert documents, f"{path}: no YAML document"
    for doc in documents:
        validate(doc, path)


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_1_1_and_1_2_read_every_file_alike(path: Path) -> None:
    # kubectl, Argo CD and Flux read YAML 1.1: `0400` is octal there, decimal in YAML 1.2.
    older = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert older == load_all(path)


def test_strict_validation_catches_a_typo_in_the_deployment() -> None:
    deployment = find("Deployment", "seshat")
    kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    context = container["securityContext"]
    context["readOnlyRootFileSystem"] = context.pop("readOnlyRootFilesystem")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def test_the_kustomize_checks_catch_a_file_outside_the_folder() -> None:
    broken = {**load_all(MANIFESTS / "kustomization.yaml")[0]}
    broken["resources"] = [*broken["resources"], "../crds/approvals.seshat.dev.yaml"]
    with pytest.raises(AssertionError):
        check_kustomize(broken, MANIFESTS / "kustomization.yaml")


def test_the_flux_checks_catch_a_misspelt_field() -> None:
    broken = find("Kustomization", "databases", folder="flux")
    broken["spec"]["healthcheck"] = broken["spec"].pop("healthChecks")
    with pytest.raises(AssertionError):
        check_flux(broken)


# -- the kustomizations list everything ---------------------------------------------------


def test_the_manifests_kustomization_lists_every_manifest_but_the_runner_template() -> None:
    (kustomization,) = load_all(MANIFESTS / "kustomization.yaml")
    listed = kustomization["resources"]
    present = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml", RUNNER_SA}
    assert len(listed) == len(set(listed))
    assert set(listed) == present
    assert not list(MANIFESTS.glob("*.yml"))


def test_the_deploy_kustomization_lists_every_crd_and_the_manifests() -> None:
    (kustomization,) = load_all(DEPLOY / "kustomization.yaml")
    listed = kustomization["resources"]
    crds = {f"crds/{p.name}" for p in CRDS.glob("*.yaml")}
    assert len(crds) == 7  # one per kind, DatabaseFleet included
    assert len(listed) == len(set(listed))
    assert set(listed) == crds | {"manifests"}


# -- RBAC: no Secret, no token for the runner --------------------------------------------


def _rules() -> list[tuple[str, Doc]]:
    return [
        (f"{where} {doc['kind']} {doc['metadata']['name']}", rule)
        for where, doc in all_documents()
        if doc["kind"] in {"Role", "ClusterRole"}
        for rule in doc.get("rules", [])
    ]


def test_no_rule_grants_secrets_or_a_wildcard() -> None:
    rules = _rules()
    assert len(rules) >= 7
    for where, rule in rules:
        assert "secrets" not in rule.get("resources", []), where
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert not any("*" in value for value in rule.get(field, [])), (where, field)
        assert "nonResourceURLs" not in rule, where
    for _, doc in all_documents():
        assert doc["kind"] != "Secret", "no Secret object (and no secret value) in deploy/"


def test_the_controller_gets_exactly_what_the_executor_needs() -> None:
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in find("ClusterRole", "seshat-controller")["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    status = {"get", "patch", "update"}
    assert grants == {
        ("batch", "jobs"): {"create", "get", "list", "watch", "delete"},
        ("", "configmaps"): {"create", "get", "patch", "delete"},
        ("", "pods"): {"get", "list"},
        ("", "pods/log"): {"get"},
        ("seshat.dev", "databaseschemas"): {"get", "list", "watch"},
        ("seshat.dev", "databasemigrations"): {"get", "list", "watch"},
        ("seshat.dev", "databasefleets"): {"get", "list", "watch"},
        ("seshat.dev", "databaseschemas/status"): status,
        ("seshat.dev", "databasemigrations/status"): status,
        ("seshat.dev", "databasefleets/status"): status,
        ("events.k8s.io", "events"): {"create"},  # verdict changes, never read back
    }
    (leases,) = find("Role", "seshat-leases")["rules"]
    assert find("Role", "seshat-leases")["metadata"]["namespace"] == "seshat-system"
    assert leases == {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update", "delete"],
    }
    subject = {"kind": "ServiceAccount", "name": "seshat", "namespace": "seshat-system"}
    for kind, name, role in (
        ("ClusterRoleBinding", "seshat-controller", "ClusterRole"),
        ("RoleBinding", "seshat-leases", "Role"),
    ):
        binding = find(kind, name)
        assert binding["subjects"] == [subject]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role,
            "name": name,
        }


def test_the_runner_service_account_has_no_token_and_no_binding() -> None:
    (account,) = load_all(MANIFESTS / RUNNER_SA)
    assert account["kind"] == "ServiceAccount"
    assert account["metadata"]["name"] == "seshat-runner"
    assert account["automountServiceAccountToken"] is False
    text = (MANIFESTS / RUNNER_SA).read_text()
    assert "every namespace" in text  # the comment saying it is needed per namespace
    bindings = [d for _, d in all_documents() if d["kind"] in {"RoleBinding", "ClusterRoleBinding"}]
    assert bindings
    for binding in bindings:
        for subject in binding["subjects"]:
            assert subject["name"] != "seshat-runner", binding["metadata"]["name"]


# -- the Deployment ----------------------------------------------------------------------


def _container() -> Doc:
    (container,) = find("Deployment", "seshat")["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def _flag_of(argument: str) -> str:
    return argument.split("=", 1)[0]


def test_the_deployment_args_are_flags_seshat_run_accepts() -> None:
    seshat = Path(sys.executable).parent / "seshat"
    command = (
        [str(seshat)]
        if seshat.exists()
        else [sys.executable, "-c", "from gitops.cli import main; main()"]
    )
    result = subprocess.run([*command, "run", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    accepted = set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", result.stdout, re.M))
    assert "--repo" in accepted
    container = _container()
    assert container["command"] == ["seshat"]
    args = container["args"]
    assert args[0] == "run"
    flags = [_flag_of(a) for a in args if a.startswith("--")]
    assert {"--repo", "--work", "--executor", "--runner-image", "--publish-status"} <= set(flags)
    missing = sorted(set(flags) - accepted)
    assert missing == [], f"seshat run does not accept {missing}"


def _arg(name: str) -> str:
    args = _container()["args"]
    return str(args[args.index(name) + 1])


def test_the_deployment_args_agree_with_the_other_manifests() -> None:
    container = _container()
    pod = find("Deployment", "seshat")["spec"]["template"]["spec"]
    env = {e["name"]: e for e in container["env"]}
    assert _arg("--repo") == "$(SESHAT_REPO)"
    assert env["SESHAT_REPO"]["valueFrom"]["configMapKeyRef"] == {
        "name": "seshat-config",
        "key": "repo",
    }
    assert "repo" in find("ConfigMap", "seshat-config")["data"]
    assert _arg("--executor") == "kubernetes"
    assert _arg("--runner-image") == container["image"] == "seshat:0.1.0"
    assert _arg("--lease-namespace") == find("Role", "seshat-leases")["metadata"]["namespace"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["state"] == _arg("--work") == "/var/lib/seshat"
    assert volumes["state"]["persistentVolumeClaim"]["claimName"] == "seshat-state"
    pvc = find("PersistentVolumeClaim", "seshat-state")
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert pod["serviceAccountName"] == "seshat"
    deployment = find("Deployment", "seshat")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_the_git_key_is_a_0400_volume_named_by_git_ssh_command() -> None:
    container = _container()
    pod = find("Deployment", "seshat")["spec"]["template"]["spec"]
    secret = {v["name"]: v for v in pod["volumes"]}["git-ssh"]["secret"]
    assert secret["secretName"] == "seshat-git"
    items = {i["key"]: i for i in secret["items"]}
    assert items["ssh-privatekey"]["mode"] == secret["defaultMode"] == 0o400
    mount = {m["name"]: m for m in container["volumeMounts"]}["git-ssh"]
    assert mount["readOnly"] is True
    where = mount["mountPath"]
    assert where == "/etc/seshat/git"
    command = {e["name"]: e for e in container["env"]}["GIT_SSH_COMMAND"]["value"].split()
    assert command[:3] == ["ssh", "-i", f"{where}/{items['ssh-privatekey']['path']}"]
    options = [command[i + 1] for i, word in enumerate(command) if word == "-o"]
    assert options == [
        "IdentitiesOnly=yes",
        "StrictHostKeyChecking=yes",
        f"UserKnownHostsFile={where}/{items['known_hosts']['path']}",
    ]
    # The pod's group can read the key: fsGroup is the group the kubelet gives the volume.
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"]


def test_the_only_secrets_the_controller_names_are_volumes_and_the_optional_forge_token() -> None:
    container = _container()
    references = [
        e["valueFrom"]["secretKeyRef"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    ]
    assert references == [{"name": "seshat-forge", "key": "token", "optional": True}]
    forge = [e["name"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    assert forge == ["GITHUB_TOKEN"]
    assert "envFrom" not in container
    for entry in container["env"]:
        assert set(entry) in ({"name", "value"}, {"name", "valueFrom"}), entry


def test_the_controller_runs_unprivileged_on_a_read_only_root() -> None:
    pod = find("Deployment", "seshat")["spec"]["template"]["spec"]
    container = _container()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    home = {e["name"]: e.get("value") for e in container["env"]}["HOME"]
    assert home in mounts  # git and ssh may write under $HOME: it must be writable
    resources = container["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"])
    assert "memory" in resources["limits"]


# -- Flux --------------------------------------------------------------------------------


def test_flux_gates_the_app_on_a_schema_health_check() -> None:
    databases = find("Kustomization", "databases", folder="flux")
    app = find("Kustomization", "orders-app", folder="flux")
    assert databases["spec"]["wait"] is False
    (check,) = databases["spec"]["healthChecks"]
    group, version = check["apiVersion"].split("/")
    schema_crd = load_all(CRDS / "databaseschemas.seshat.dev.yaml")[0]
    assert (group, check["kind"]) == ("seshat.dev", "DatabaseSchema")
    assert version in [v["name"] for v in schema_crd["spec"]["versions"] if v["served"]]
    assert check["name"] and check["namespace"]
    assert {"name": "databases"} in app["spec"]["dependsOn"]
    assert databases["metadata"]["namespace"] == app["metadata"]["namespace"]
    assert "kstatus" in (DEPLOY / "flux" / "databases.yaml").read_text()


# -- Argo CD: the Lua health script ------------------------------------------------------


def health_script() -> str:
    return (DEPLOY / "argocd" / "health.lua").read_text()


def to_lua(lua: Any, value: Any) -> Any:
    """A Python value as Argo CD hands it to Lua: objects and arrays become tables."""
    if isinstance(value, dict):
        table = lua.table()
        for key, item in value.items():
            table[key] = to_lua(lua, item)
        return table
    if isinstance(value, list):
        table = lua.table()
        for index, item in enumerate(value, start=1):
            table[index] = to_lua(lua, item)
        return table
    return value


def health(obj: Doc) -> tuple[str, str]:
    lua = LuaRuntime()
    assert str(lua.eval("_VERSION")) == "Lua 5.1"
    lua.globals().obj = to_lua(lua, obj)
    hs = lua.execute(health_script())
    return str(hs["status"]), str(hs["message"])


def resource(
    kind: str = "DatabaseSchema",
    phase: str | None = None,
    reason: str = "",
    message: str = "",
    generation: int = 2,
    observed: int | None = 2,
    suspend: bool = False,
) -> Doc:
    """A custom resource as the cluster holds it, its status as the reconciler writes it."""
    doc: Doc = {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "orders", "namespace": "shop", "generation": generation},
        "spec": {
            "target": {
                "engine": "postgresql",
                "url": {"secretKeyRef": {"name": "orders-db", "key": "url"}},
                "coordinationKey": "orders-prod",
            },
            "artifact": {
                "ref": "oci://registry.example.internal/acme/orders-schema:v5",
                "verification": {"policy": "signed-by-ci"},
            },
            "suspend": suspend,
        },
    }
    if phase is not None:
        now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
        conditions = summary_conditions(phase, reason, message, now)
        status: Doc = {
            "phase": phase,
            "conditions": [
                c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in conditions
            ],
        }
        if observed is not None:
            status["observedGeneration"] = observed
        doc["status"] = status
    jsonschema.validate(doc, crd_schemas()[kind])  # the shape the CRD admits
    return doc


BLOCKED = [
    Reason.CONFIGURATION_ERROR,
    Reason.REALM_CONFLICT,
    Reason.UNSUPPORTED_ENGINE,
    Reason.ARTIFACT_REFUSED,
    Reason.PROTECTED_TABLE,
    Reason.DESTRUCTIVE_DISALLOWED,
    Reason.APPLY_DISABLED,
    Reason.HISTORY_DIRTY,
    Reason.CHECKSUM_MODIFIED,
    Reason.HISTORY_OUT_OF_ORDER,
    Reason.DATABASE_AHEAD,
    Reason.RUN_UNRESOLVED,
]
FAILED = [
    Reason.DISPATCH_FAILED,
    Reason.OPERATION_FAILED,
    Reason.APPLY_FAILED,
    Reason.LEASE_CONTINUITY_LOST,
]


def test_no_status_is_progressing_waiting_for_the_controller() -> None:
    status, message = health(resource())
    assert status == "Progressing"
    assert "Waiting for the controller" in message


def test_in_sync_is_healthy() -> None:
    assert health(resource(phase="InSync", reason=Reason.IN_SYNC)) == ("Healthy", "InSync")


@pytest.mark.parametrize("kind", ["DatabaseSchema", "DatabaseMigration"])
def test_awaiting_approval_is_progressing_and_says_so(kind: str) -> None:
    plan = "sha256:" + "ab" * 32
    doc = resource(kind, "AwaitingApproval", Reason.AWAITING_APPROVAL, f"plan {plan} awaits")
    ready = [c for c in doc["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "False"
    status, message = health(doc)
    assert status == "Progressing"
    assert message == f"AwaitingApproval: plan {plan} awaits"


@pytest.mark.parametrize("phase", ["Pending", "Planning", "Applying", "VerifyingHistory"])
def test_work_under_way_is_progressing(phase: str) -> None:
    status, message = health(resource("DatabaseMigration", phase, Reason.PROGRESSING, "busy"))
    assert (status, message) == ("Progressing", "Progressing: busy")


@pytest.mark.parametrize("reason", BLOCKED, ids=str)
def test_blocked_is_degraded_with_its_reason(reason: Reason) -> None:
    kind = "DatabaseMigration" if "History" in reason or "Checksum" in reason else "DatabaseSchema"
    status, message = health(resource(kind, "Blocked", reason, "an input must change"))
    assert status == "Degraded"
    assert message == f"Blocked: {reason}: an input must change"


@pytest.mark.parametrize("reason", FAILED, ids=str)
def test_failed_is_degraded_while_it_is_retried(reason: Reason) -> None:
    status, message = health(resource("DatabaseSchema", "Failed", reason, "connection refused"))
    assert status == "Degraded"
    assert message == f"Failed (retrying): {reason}: connection refused"


def test_suspend_is_suspended_with_or_without_a_status() -> None:
    suspended = resource(phase="Suspended", reason=Reason.SUSPENDED, suspend=True)
    assert health(suspended)[0] == "Suspended"
    assert health(resource(suspend=True))[0] == "Suspended"


@pytest.mark.parametrize("observed", [1, None])
def test_a_status_for_an_older_spec_is_progressing_not_healthy(observed: int | None) -> None:
    doc = resource(phase="InSync", reason=Reason.IN_SYNC, generation=3, observed=observed)
    status, message = health(doc)
    assert status == "Progressing"
    assert message == "Waiting for the controller to observe generation 3"
    doc["status"]["observedGeneration"] = 3
    assert health(doc)[0] == "Healthy"


def test_a_status_without_summary_conditions_is_progressing() -> None:
    doc = resource(phase="InSync", reason=Reason.IN_SYNC)
    doc["status"]["conditions"] = [
        c for c in doc["status"]["conditions"] if c["type"] != "Ready" and c["status"] != "True"
    ]
    assert health(doc) == ("Progressing", "Waiting for the controller: no Ready condition yet")


def fleet(phase: str, message: str) -> Doc:
    """A ``DatabaseFleet`` as the cluster holds it, its status as the reconciler publishes
    it (the conditions of its phase, made by the code the reconciler uses)."""
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    doc: Doc = {
        "apiVersion": "seshat.dev/v1alpha1",
        "kind": "DatabaseFleet",
        "metadata": {"name": "tenants", "namespace": "shop", "generation": 3},
        "spec": {
            "template": {
                "kind": "DatabaseSchema",
                "spec": {
                    "target": {
                        "engine": "postgresql",
                        "url": {"secretKeyRef": {"name": "tenant-{{ member.name }}", "key": "url"}},
                        "coordinationKey": "tenant-{{ member.name }}",
                    },
                    "artifact": {
                        "ref": "oci://registry.example.internal/acme/tenant-schema:v3",
                        "verification": {"policy": "signed-by-ci"},
                    },
                },
            },
            "members": {"list": [{"name": "acme", "labels": {"wave": "canary"}}]},
        },
        "status": {
            "observedGeneration": 3,
            "phase": phase,
            "message": message,
            "conditions": [
                c.model_dump(mode="json", by_alias=True, exclude_none=True)
                for c in fleet_conditions(phase, message, now)
            ],
        },
    }
    jsonschema.validate(doc, crd_schemas()["DatabaseFleet"])  # the shape the CRD admits
    return doc


@pytest.mark.parametrize(
    ("phase", "message", "expected"),
    [
        ("InSync", "every member is InSync", ("Healthy", "InSync: every member is InSync")),
        ("Halted", "acme failed", ("Degraded", "Blocked: RolloutHalted: acme failed")),
        ("Paused", "after step 1", ("Progressing", "RolloutPaused: after step 1")),
        ("AwaitingApproval", "1 plan waits", ("Progressing", "AwaitingApproval: 1 plan waits")),
        ("Progressing", "1 of 3 InSync", ("Progressing", "Progressing: 1 of 3 InSync")),
    ],
)
def test_a_fleet_reads_as_its_rollout_stands(
    phase: str, message: str, expected: tuple[str, str]
) -> None:
    """A halted rollout is what an Argo CD sync wave must not pass; a paused one waits."""
    assert health(fleet(phase, message)) == expected


def test_the_argocd_cm_patch_embeds_the_script_verbatim() -> None:
    (patch,) = load_all(DEPLOY / "argocd" / "argocd-cm-patch.yaml")
    assert (patch["kind"], patch["metadata"]["name"]) == ("ConfigMap", "argocd-cm")
    prefix = "resource.customizations.health.seshat.dev_"
    kinds = ("DatabaseSchema", "DatabaseMigration", "DatabaseFleet")
    assert set(patch["data"]) == {f"{prefix}{kind}" for kind in kinds}
    for key, embedded in patch["data"].items():
        assert embedded == health_script(), f"{key} differs from deploy/argocd/health.lua"


# -- the image ---------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) per instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    instructions = [line.split(None, 1) for line in lines if line and not line.startswith("#")]
    return [(parts[0].upper(), parts[1] if len(parts) > 1 else "") for parts in instructions]


def test_the_image_is_python_slim_with_git_ssh_and_the_whole_distribution() -> None:
    instructions = dockerfile()
    assert instructions[0] == ("FROM", "python:3.11-slim")
    runs = " ".join(arguments for op, arguments in instructions if op == "RUN")
    assert re.search(r"apt-get install [^&]*\bgit\b[^&]*\bopenssh-client\b", runs)
    assert "pip install --no-cache-dir '.[all]'" in runs
    copied = [
        source
        for op, arguments in instructions
        if op == "COPY"
        for source in arguments.split()[:-1]  # the last word is the destination
    ]
    # What building the distribution reads: its metadata, its readme, both packages.
    assert {"pyproject.toml", "README.md", "gitops", "runner"} <= set(copied)
    for source in copied:
        assert (ROOT / source).exists(), source
    # Copying the whole context would take .git and .venv along without a .dockerignore.
    assert (ROOT / ".dockerignore").exists() or not any(c == "." for c in copied)


def test_the_image_carries_the_sandbox_servers_and_their_jail() -> None:
    """A plan's private sandbox server runs only inside bubblewrap (docs/engine.md): an image
    without it would refuse every plan (sandbox_unavailable)."""
    runs = " ".join(arguments for op, arguments in dockerfile() if op == "RUN")
    installed = re.search(r"apt-get install ([^&]*)", runs)
    assert installed is not None
    packages = set(installed.group(1).split())
    assert {"postgresql-15", "mariadb-server", "bubblewrap", "util-linux"} <= packages


def test_the_image_runs_as_the_manifests_non_root_uid_and_holds_no_secret() -> None:
    instructions = dockerfile()
    users = [arguments for op, arguments in instructions if op == "USER"]
    assert users, "no USER: the image would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    pod = find("Deployment", "seshat")["spec"]["template"]["spec"]
    assert int(uid) == pod["securityContext"]["runAsUser"]
    for op, arguments in instructions:
        if op in {"ENV", "ARG", "LABEL", "ENTRYPOINT", "CMD"}:
            assert not re.search(r"token|password|secret|private|credential", arguments, re.I)
    text = (DEPLOY / "Dockerfile").read_text()
    assert "PRIVATE KEY" not in text
    assert all(op != "ADD" for op, _ in instructions)


def test_no_file_under_deploy_carries_a_secret_value() -> None:
    files = [DEPLOY / "Dockerfile", *yaml_files(), DEPLOY / "argocd" / "health.lua"]
    for path in files:
        text = path.read_text()
        assert "-----BEGIN" not in text, path
        assert not re.search(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16})", text), path
        assert not re.search(r"://[^/\s:@]+:[^/\s@]+@", text), f"{path}: a URL with a password"


def test_the_jobs_that_plan_may_make_the_sandbox_jail() -> None:
    """The controller tells the Jobs that plan to allow user namespaces (their private
    sandbox server runs in a bubblewrap jail); with the default they would all be refused
    (docs/kubernetes.md, "The sandbox jail")."""
    from gitops.kubernetes.jobs import sandbox_security

    args = _container()["args"]
    choice = args[args.index("--runner-sandbox-security") + 1]
    assert sandbox_security(choice) == {
        "seccompProfile": {"type": "Unconfined"},
        "appArmorProfile": {"type": "Unconfined"},
    }
