"""The Kubernetes executor: each runner invocation is one Job in the resource's namespace
(one operation, or a batch of them for one resource with one credential: Observe, Plan and
Plan of a refresh run in one Job, each answering with a frame of its own).

What the Job gets, and only that:

* the operation input and the files it names (a plan; a local folder of desired SQL or
  migrations, when an operation names one instead of an artifact) as a ConfigMap mounted
  read-only, bytes exact (``binaryData``); the paths in the input are rewritten to the mount;
* the database URL as an environment variable taken by the kubelet from the Secret key the
  declaration's ``secretKeyRef`` names: the control plane never reads a Secret (its role
  has no access to them);
* for an operation that reads an artifact, the registry credential: a docker config Secret
  (``JobSettings.registry_secret``) mounted read-only, ``DOCKER_CONFIG`` pointing at it. The
  artifact itself never passes through the control plane: the runner fetches it by digest;
* no Kubernetes credential (``automountServiceAccountToken: false``, a service account
  with no roles), no retries (``backoffLimit: 0``: an Apply is never started twice), the
  deadline as ``activeDeadlineSeconds``, a non-root, read-only container.

The executor polls the Job until it finishes, reads the framed result from the pod's log
(bounded), and deletes the Job and its ConfigMap. A pod that cannot start (a missing Secret,
an image that cannot be pulled) is ``failed`` (nothing ran); a Job that ends without a
readable frame, or outlives the deadline, is ``lost``, an uncertain outcome for an Apply.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gitops.execution.executor import (
    Asked,
    CredentialUnavailable,
    EnvValue,
    Executor,
    Outcome,
    SecretEnv,
    Started,
    input_document,
    outcomes_from_output,
)
from gitops.kubernetes.api import Json, KubeApi, KubeError, NotFound
from gitops.resources.database import UrlReference
from runner.protocol.messages import OperationInput
from runner.protocol.messages import UrlReference as RunnerUrl

__all__ = ["OPERATION_ID_LABEL", "RESOURCE_LABEL", "JobSettings", "KubernetesExecutor"]

_MAX_LOG = 16 * 1024 * 1024
_MAX_CONFIGMAP = 1000 * 1024  # the API server stores at most about 1 MiB per object
_ENV_NAMES = {"url": "SESHAT_DATABASE_URL", "dev_url": "SESHAT_DEV_URL"}
RESOURCE_LABEL = "seshat.dev/resource-uid"
OPERATION_ID_LABEL = "seshat.dev/operation-id"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
# A pod in one of these states never started its container.
_CANNOT_START = {
    "CreateContainerConfigError",
    "CreateContainerError",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
}


@dataclass(frozen=True)
class JobSettings:
    image: str
    service_account: str = "seshat-runner"
    mount_root: str = "/seshat"  # where the pod sees the operation's input and scratch
    image_pull_policy: str = "IfNotPresent"
    run_as_user: int = 10001
    requests: dict[str, str] = field(default_factory=lambda: {"cpu": "100m", "memory": "256Mi"})
    limits: dict[str, str] = field(default_factory=lambda: {"memory": "1Gi"})
    poll: float = 2.0  # the longest wait between looks at a running Job
    grace: float = 60.0  # beyond the deadline: scheduling, image pull
    cache_claim: str | None = None
    """A PersistentVolumeClaim every Job mounts at ``cache_mount`` for the runner's cache
    (sandbox templates, planning cache); without one, each Job plans cold."""
    cache_mount: str = "/var/cache/seshat"
    registry_secret: str | None = None
    """A ``kubernetes.io/dockerconfigjson`` Secret in the resource's namespace: the registry
    credential of the Jobs that read an artifact (Resolve, Verify, Observe, Plan, the
    migration operations), mounted for them alone; the controller never reads it."""


def _name(request: OperationInput) -> str:
    """A DNS label from the operation id (lower-case, 63 characters at most)."""
    slug = re.sub(r"[^a-z0-9-]", "-", request.id.lower()).strip("-")[:40]
    digest = hashlib.sha256(request.id.encode()).hexdigest()[:8]
    return f"seshat-{slug}-{digest}"


def _files(request: OperationInput) -> list[tuple[str, bytes]]:
    """(path under the input mount, bytes) of every file the operation reads."""
    found: list[tuple[str, bytes]] = []
    for field_name in ("desired", "migrations"):
        folder = getattr(request, field_name)
        if folder is None:
            continue
        root = Path(folder)
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            found.append((f"{field_name}/{path.relative_to(root).as_posix()}", path.read_bytes()))
    if request.plan is not None:
        found.append(("plan/" + Path(request.plan).name, Path(request.plan).read_bytes()))
    return found


class KubernetesExecutor(Executor):
    """Runs each operation as a Job; see the module's documentation."""

    local_files = False
    adopts = True

    def __init__(self, api: KubeApi, settings: JobSettings) -> None:
        self.api = api
        self.settings = settings

    def bind(
        self, reference: UrlReference, slot: Literal["url", "dev_url"]
    ) -> tuple[RunnerUrl, dict[str, EnvValue]]:
        if reference.secret_key_ref is not None:
            name = _ENV_NAMES[slot]
            ref = reference.secret_key_ref
            return RunnerUrl(from_env=name), {name: SecretEnv(ref.name, ref.key)}
        if reference.from_file is not None:
            # A path inside the runner's pod (a volume of the runner image's own).
            return RunnerUrl(from_file=reference.from_file), {}
        raise CredentialUnavailable(
            "fromEnv names a variable of the controller's environment; in Kubernetes mode "
            "it would have to be copied into the Job, where the API server stores it: use "
            "secretKeyRef"
        )

    # -- manifests -----------------------------------------------------------------------

    def manifests(
        self,
        requests: Sequence[OperationInput],
        environment: Mapping[str, EnvValue],
        deadline: float,
        namespace: str,
        resource: str = "",
    ) -> tuple[Json, Json]:
        """The ConfigMap and the Job for ``requests`` (both named after the first
        operation): one Job runs them all, in order, with one credential. The Job is
        labelled with the resource's uid and, for one operation, its id: what a restarted
        controller finds it by (:meth:`adopt`)."""
        s = self.settings
        name = _name(requests[0])
        base = f"{s.mount_root.rstrip('/')}/{name}"
        inputs, scratch = f"{base}/input", f"{base}/work"
        moved: list[OperationInput] = []
        files: list[tuple[str, bytes]] = []
        for index, request in enumerate(requests):
            # A batch's operations each get a folder of their own under the input mount.
            prefix = "" if len(requests) == 1 else f"op{index}/"
            there = f"{inputs}/{prefix}"
            moved.append(
                request.model_copy(
                    update={
                        "desired": f"{there}desired" if request.desired else None,
                        "migrations": f"{there}migrations" if request.migrations else None,
                        "plan": f"{there}plan/{Path(request.plan).name}" if request.plan else None,
                        "journal": f"{scratch}/{prefix}journal" if request.journal else None,
                    }
                )
            )
            files += [(prefix + path, data) for path, data in _files(request)]
        files.insert(0, ("operation.json", input_document(moved).encode()))
        labels = {
            "app.kubernetes.io/name": "seshat-runner",
            "app.kubernetes.io/managed-by": "seshat",
            "seshat.dev/operation": "-".join(r.operation for r in requests)[:63].strip("-"),
        }
        if _LABEL_VALUE.match(resource):
            labels[RESOURCE_LABEL] = resource
        if len(requests) == 1 and _LABEL_VALUE.match(requests[0].id):
            labels[OPERATION_ID_LABEL] = requests[0].id
        annotations = {"seshat.dev/operation-id": ",".join(r.id for r in requests)}
        metadata = {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        }
        configmap: Json = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata,
            "immutable": True,
            "binaryData": {
                f"f{i}": base64.b64encode(data).decode() for i, (_, data) in enumerate(files)
            },
        }
        env: list[Json] = [
            {"name": "HOME", "value": scratch},
            {"name": "TMPDIR", "value": scratch},
        ]
        mounts: list[Json] = [
            {"name": "input", "mountPath": inputs, "readOnly": True},
            {"name": "work", "mountPath": scratch},
        ]
        volumes: list[Json] = [
            {
                "name": "input",
                "configMap": {
                    "name": name,
                    "items": [{"key": f"f{i}", "path": path} for i, (path, _) in enumerate(files)],
                },
            },
            {"name": "work", "emptyDir": {}},
        ]
        if s.cache_claim is not None:
            # The runner keeps its cache in a folder of its own below the mount (it must be
            # the only one able to write it, see docs/engine.md).
            cache = s.cache_mount.rstrip("/")
            env.append({"name": "SESHAT_CACHE_DIR", "value": f"{cache}/runner"})
            mounts.append({"name": "cache", "mountPath": cache})
            volumes.append({"name": "cache", "persistentVolumeClaim": {"claimName": s.cache_claim}})
        if any(r.artifact is not None for r in requests) and s.registry_secret is not None:
            registry = f"{base}/registry"
            env.append({"name": "DOCKER_CONFIG", "value": registry})
            mounts.append({"name": "registry", "mountPath": registry, "readOnly": True})
            volumes.append(
                {
                    "name": "registry",
                    "secret": {
                        "secretName": s.registry_secret,
                        "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
                    },
                }
            )
        for variable, value in sorted(environment.items()):
            if isinstance(value, SecretEnv):
                env.append(
                    {
                        "name": variable,
                        "valueFrom": {"secretKeyRef": {"name": value.secret, "key": value.key}},
                    }
                )
            else:
                raise CredentialUnavailable(
                    f"{variable}: a value from the controller's environment is never copied "
                    "into a Job; use secretKeyRef"
                )
        job: Json = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": metadata,
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": max(1, math.ceil(deadline)),
                "ttlSecondsAfterFinished": 3600,
                "template": {
                    "metadata": {"labels": labels, "annotations": annotations},
                    "spec": {
                        "restartPolicy": "Never",
                        "serviceAccountName": s.service_account,
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": s.run_as_user,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "runner",
                                "image": s.image,
                                "imagePullPolicy": s.image_pull_policy,
                                "command": [
                                    "seshat-runner",
                                    "op",
                                    "--input",
                                    f"{inputs}/operation.json",
                                ],
                                "env": env,
                                "resources": {"requests": s.requests, "limits": s.limits},
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": mounts,
                            }
                        ],
                        "volumes": volumes,
                    },
                },
            },
        }
        return configmap, job

    # -- running -------------------------------------------------------------------------

    def run_batch(
        self,
        requests: Sequence[OperationInput],
        environment: Mapping[str, EnvValue],
        deadline: float,
        *,
        namespace: str = "default",
        resource: str = "",
    ) -> list[Outcome]:
        answered = self._run_job(requests, environment, deadline, namespace, resource)
        # A Job that never ran, or whose log is gone, has the same outcome for each.
        return answered if isinstance(answered, list) else [answered] * len(requests)

    def _run_job(
        self,
        requests: Sequence[OperationInput],
        environment: Mapping[str, EnvValue],
        deadline: float,
        namespace: str,
        resource: str,
    ) -> Outcome | list[Outcome]:
        configmap, job = self.manifests(requests, environment, deadline, namespace, resource)
        size = sum(len(v) for v in configmap["binaryData"].values())
        if size > _MAX_CONFIGMAP:
            return Outcome(
                "failed",
                None,
                f"the operation's files take {size} bytes encoded; a ConfigMap holds about "
                f"{_MAX_CONFIGMAP}: a plan this large cannot travel to a Job",
                None,
            )
        name = job["metadata"]["name"]
        configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
        jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
        try:
            self.api.create(configmaps, configmap)
        except KubeError as error:
            return Outcome("failed", None, f"the operation's ConfigMap: {error}", None)
        try:
            try:
                created = self.api.create(jobs, job)
            except KubeError as error:
                # Not created, so nothing runs; an unanswered create may still have been
                # stored, so it is deleted too.
                with contextlib.suppress(KubeError):
                    self.api.delete(f"{jobs}/{name}")
                return Outcome("failed", None, f"the runner's Job: {error}", None)
            # The ConfigMap belongs to the Job from now on: if this controller dies, the
            # Job's ttlSecondsAfterFinished collects the Job, and the garbage collector its
            # ConfigMap and pod. (An immutable ConfigMap's metadata may still change.)
            with contextlib.suppress(KubeError):
                self.api.merge_patch(f"{configmaps}/{name}", _owned_by(created))
            return self._follow(requests, namespace, name, deadline)
        finally:
            self._remove(namespace, name)

    def _remove(self, namespace: str, name: str) -> None:
        """Delete a Job and its input ConfigMap (gone already is fine)."""
        for path in (
            f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
            f"/api/v1/namespaces/{namespace}/configmaps/{name}",
        ):
            with contextlib.suppress(KubeError):
                self.api.delete(path)

    def adopt(self, started: Started, deadline: float, *, namespace: str) -> Outcome | None:
        """The Job labelled with ``started``'s id, followed to its end and read as if this
        controller had started it, then deleted; None when there is no such Job (it ended
        and was collected, or it was never created)."""
        try:
            found = self.api.get(
                f"/apis/batch/v1/namespaces/{namespace}/jobs",
                params={"labelSelector": f"{OPERATION_ID_LABEL}={started.id}"},
            ).get("items", [])
        except KubeError:
            return None
        if not found:
            return None
        name = found[0]["metadata"]["name"]
        try:
            outcome = self._follow([started], namespace, name, deadline)
        finally:
            self._remove(namespace, name)
        return outcome[0] if isinstance(outcome, list) else outcome

    def _follow(
        self, requests: Sequence[Asked], namespace: str, name: str, deadline: float
    ) -> Outcome | list[Outcome]:
        ends = time.monotonic() + deadline + self.settings.grace
        # Short operations answer in about a second: look again soon at first, then every
        # ``poll`` seconds.
        waits = (min(self.settings.poll, 0.1 * 2 ** min(n, 16)) for n in itertools.count())
        jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
        while True:
            try:
                status = self.api.get(jobs).get("status", {})
                pod = self._pod(namespace, name)
            except NotFound:
                return Outcome("lost", None, f"Job {namespace}/{name} disappeared", None)
            except KubeError as error:
                if time.monotonic() > ends:
                    return Outcome("lost", None, f"Job {namespace}/{name}: {error}", None)
                time.sleep(next(waits))
                continue
            waiting = _waiting(pod)
            if waiting is not None and waiting[0] in _CANNOT_START:
                return Outcome(
                    "failed",
                    None,
                    f"the runner's pod could not start: {waiting[0]}: {waiting[1]}",
                    None,
                )
            finished = _finished(status)
            if finished is not None:
                return self._read(requests, namespace, pod, finished)
            if time.monotonic() > ends:
                return Outcome(
                    "lost", None, f"deadline of {deadline:g} s exceeded; Job {name} deleted", None
                )
            time.sleep(next(waits))

    def _pod(self, namespace: str, job: str) -> Json | None:
        pods = self.api.get(
            f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": f"job-name={job}"}
        ).get("items", [])
        return pods[0] if pods else None

    def _read(
        self, requests: Sequence[Asked], namespace: str, pod: Json | None, finished: str
    ) -> Outcome | list[Outcome]:
        if pod is None:
            return Outcome("lost", None, f"the Job ended ({finished}) and its pod is gone", None)
        name = pod["metadata"]["name"]
        try:
            log = self.api.log(
                f"/api/v1/namespaces/{namespace}/pods/{name}/log", limit_bytes=_MAX_LOG
            )
        except KubeError as error:
            return Outcome("lost", None, f"the pod's log could not be read: {error}", None)
        return [
            outcome
            if outcome.kind != "lost"
            else Outcome("lost", None, f"{outcome.detail}; the Job ended: {finished}", None)
            for outcome in outcomes_from_output(log, requests, _exit_code(pod))
        ]


def _owned_by(job: Json) -> Json:
    meta = job["metadata"]
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    return {"metadata": {"ownerReferences": [owner]}}


def _finished(status: Json) -> str | None:
    """How the Job ended, or None while it runs."""
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            reason = condition.get("reason") or ""
            return f"{condition['type']}" + (f" ({reason})" if reason else "")
    if status.get("succeeded"):
        return "Complete"
    if status.get("failed"):
        return "Failed"
    return None


def _container(pod: Json | None) -> dict[str, Any]:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return next((s for s in statuses if s.get("name") == "runner"), {})


def _waiting(pod: Json | None) -> tuple[str, str] | None:
    waiting = (_container(pod).get("state") or {}).get("waiting")
    if not waiting:
        return None
    return str(waiting.get("reason", "")), str(waiting.get("message", ""))


def _exit_code(pod: Json) -> int | None:
    terminated = (_container(pod).get("state") or {}).get("terminated") or {}
    code = terminated.get("exitCode")
    return int(code) if code is not None else None
