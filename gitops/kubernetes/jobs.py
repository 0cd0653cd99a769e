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

The executor polls the Job until it finishes, reads the framed result from the log of the
pod the Job owns (its ``ownerReferences`` name the Job's uid: a pod that merely carries the
``job-name`` label is someone else's), and deletes that Job (by its uid) and its ConfigMap.
A pod that cannot start (a missing Secret, an image that cannot be pulled) is ``failed``
(nothing ran); a Job that ends without a readable frame, or outlives the deadline, is
``lost``, an uncertain outcome for an Apply.

Anyone who may create objects in the namespace can label a Job with an operation id (the
status branch publishes them). So each Job carries what only the controller knows: a nonce
(an Apply's from its dispatch record in the state file, any other Job's drawn for it), with
the resource's uid and the plan id as annotations, and it is owned by the custom resource
where that exists in the cluster. A restarted controller adopts a run's Job only when all of
that matches its dispatch record (:meth:`KubernetesExecutor.adopt`); every other Job or pod
passing for it is reported (a Warning Event ``Tampering`` and a log line) and left alone.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import itertools
import math
import re
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from gitops.execution.executor import (
    Asked,
    CredentialUnavailable,
    EnvValue,
    Executor,
    Outcome,
    RunOptions,
    SecretEnv,
    Started,
    input_document,
    outcomes_from_output,
)
from gitops.kubernetes.api import Conflict, Json, KubeApi, KubeError, NotFound
from gitops.kubernetes.events import tampering_event
from gitops.resources.approvals import ResourceRef
from gitops.resources.database import UrlReference
from gitops.resources.kinds import KINDS
from runner.protocol.messages import OperationInput
from runner.protocol.messages import UrlReference as RunnerUrl

__all__ = [
    "NONCE_ANNOTATION",
    "OPERATION_ID_LABEL",
    "PLAN_ANNOTATION",
    "RESOURCE_LABEL",
    "JobSettings",
    "KubernetesExecutor",
    "job_name",
]

_MAX_LOG = 16 * 1024 * 1024
_MAX_CONFIGMAP = 1000 * 1024  # the API server stores at most about 1 MiB per object
_ENV_NAMES = {"url": "SESHAT_DATABASE_URL", "dev_url": "SESHAT_DEV_URL"}
RESOURCE_LABEL = "seshat.dev/resource-uid"  # also an annotation: a label may not hold it
OPERATION_ID_LABEL = "seshat.dev/operation-id"
NONCE_ANNOTATION = "seshat.dev/dispatch-nonce"
PLAN_ANNOTATION = "seshat.dev/plan-id"
_CR_API = "seshat.dev/v1alpha1"
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
    sandbox_security: Json | None = None
    """The container ``securityContext`` fields of a Job that plans (its operations start a
    private sandbox server in a bubblewrap jail, which needs user namespaces): None keeps
    the pod's ``RuntimeDefault`` seccomp profile, which refuses them
    (:func:`sandbox_security`)."""
    registry_secret: str | None = None
    """A ``kubernetes.io/dockerconfigjson`` Secret in the resource's namespace: the registry
    credential of the Jobs that read an artifact (Resolve, Verify, Observe, Plan, the
    migration operations), mounted for them alone; the controller never reads it."""


SANDBOX_OPERATIONS: Final = frozenset({"drift", "plan"})
"""The runner operations that may start a private sandbox server (docs/engine.md)."""


def sandbox_security(choice: str) -> Json | None:
    """``--runner-sandbox-security`` as container ``securityContext`` fields:
    ``runtime-default`` (None: nothing added), ``unconfined`` (seccomp and AppArmor
    unconfined, which lets bubblewrap make user and network namespaces),
    ``localhost:PROFILE`` (a seccomp profile on the node that allows them; AppArmor
    unconfined, since the runtime's default AppArmor profile denies the jail's mounts)."""
    if choice == "runtime-default":
        return None
    unconfined: Json = {"type": "Unconfined"}
    if choice == "unconfined":
        return {"seccompProfile": unconfined, "appArmorProfile": unconfined}
    kind, _, profile = choice.partition(":")
    if kind == "localhost" and profile and not profile.startswith("/") and ".." not in profile:
        return {
            "seccompProfile": {"type": "Localhost", "localhostProfile": profile},
            "appArmorProfile": unconfined,
        }
    raise ValueError(
        f"--runner-sandbox-security {choice!r}: runtime-default, unconfined or "
        "localhost:PROFILE (a path relative to the kubelet's seccomp folder)"
    )


def job_name(op_id: str) -> str:
    """The Job's (and its ConfigMap's) name for the operation ``op_id``: a DNS label
    (lower-case, 63 characters at most). One name per operation, so that another object of
    that name in the namespace is never taken for the controller's."""
    slug = re.sub(r"[^a-z0-9-]", "-", op_id.lower()).strip("-")[:40]
    digest = hashlib.sha256(op_id.encode()).hexdigest()[:8]
    return f"seshat-{slug}-{digest}"


@dataclass(frozen=True, slots=True)
class _Identity:
    """What a Job of this controller carries to be told from any other (see the module)."""

    nonce: str
    resource: ResourceRef | None = None
    plan_id: str | None = None  # an Apply's: its dispatch record's
    owner: Json | None = None  # the ownerReference to the custom resource, if it exists


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

    def __init__(
        self,
        api: KubeApi,
        settings: JobSettings,
        warn: Callable[[str], None] = lambda _: None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.settings = settings
        self.warn = warn  # where tampering is said (besides its Event)
        self.now = now

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
        identity: _Identity | None = None,
    ) -> tuple[Json, Json]:
        """The ConfigMap and the Job for ``requests`` (both named after the first
        operation): one Job runs them all, in order, with one credential. The Job is
        labelled with the resource's uid and, for one operation, its id (what a restarted
        controller looks for); annotated with its ``identity`` (the nonce, the resource's
        uid, an Apply's plan id: what it knows its own Job by, :meth:`adopt`); and owned by
        the custom resource when that exists."""
        s = self.settings
        identity = identity or _Identity(secrets.token_hex(16))
        name = job_name(requests[0].id)
        resource = identity.resource.uid if identity.resource is not None else ""
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
        if resource:
            annotations[RESOURCE_LABEL] = resource
        metadata = {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        }
        # The Job (and its pod) carry the identity; the ConfigMap, readable by whoever may
        # read ConfigMaps there, does not need it.
        identified = {**annotations, NONCE_ANNOTATION: identity.nonce}
        if identity.plan_id is not None:
            identified[PLAN_ANNOTATION] = identity.plan_id
        job_metadata: Json = {**metadata, "annotations": identified}
        if identity.owner is not None:
            job_metadata["ownerReferences"] = [identity.owner]
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
        planning = any(r.operation in SANDBOX_OPERATIONS for r in requests)
        jail = s.sandbox_security if planning else None
        job: Json = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": job_metadata,
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": max(1, math.ceil(deadline)),
                "ttlSecondsAfterFinished": 3600,
                "template": {
                    "metadata": {"labels": labels, "annotations": identified},
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
                                    **(jail or {}),
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

    def run_batch(self, requests: Sequence[OperationInput], options: RunOptions) -> list[Outcome]:
        dispatch, namespace = options.dispatch, options.namespace
        identity = _Identity(
            (dispatch.nonce if dispatch is not None else None) or secrets.token_hex(16),
            options.resource,
            dispatch.plan_id if dispatch is not None else None,
            self._owner(namespace, options.resource),
        )
        answered = self._run_job(
            requests, options.environment, options.deadline, namespace, identity
        )
        # A Job that never ran, or whose log is gone, has the same outcome for each.
        return answered if isinstance(answered, list) else [answered] * len(requests)

    def _owner(self, namespace: str, resource: ResourceRef | None) -> Json | None:
        """The ownerReference to ``resource``'s custom resource, when it exists in the
        cluster (its uid there is the API server's, not Seshat's)."""
        if resource is None:
            return None
        kind, name = resource.kind, resource.name
        if "/" in name:  # a fleet's member (<fleet>/<member>): its fleet's object owns it
            kind, name = "DatabaseFleet", name.split("/", 1)[0]
        plural = KINDS[kind].plural
        try:
            found = self.api.get(f"/apis/{_CR_API}/namespaces/{namespace}/{plural}/{name}")
        except KubeError:  # not applied to the cluster (or not readable): no owner
            return None
        uid = found.get("metadata", {}).get("uid")
        if not uid:
            return None
        return {"apiVersion": _CR_API, "kind": kind, "name": name, "uid": uid, "controller": True}

    def _run_job(
        self,
        requests: Sequence[OperationInput],
        environment: Mapping[str, EnvValue],
        deadline: float,
        namespace: str,
        identity: _Identity,
    ) -> Outcome | list[Outcome]:
        configmap, job = self.manifests(requests, environment, deadline, namespace, identity)
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
            input_map = self.api.create(configmaps, configmap)
        except KubeError as error:
            # A ConfigMap of this name that is not ours (409) is left alone: nothing runs.
            return Outcome("failed", None, f"the operation's ConfigMap: {error}", None)
        created: Json | None = None
        try:
            try:
                created = self.api.create(jobs, job)
            except Conflict as error:
                # A Job of this operation's name that this controller did not create: it
                # was made to pass for this one. Reported, left in place; nothing runs.
                with contextlib.suppress(KubeError):
                    self._report(
                        self.api.get(f"{jobs}/{name}"),
                        identity.resource,
                        (
                            f"a Job named {name} existed before this controller created the one "
                            f"for operation {requests[0].id}; the operation did not run"
                        ),
                    )
                return Outcome("failed", None, f"the runner's Job: {error}", None)
            except KubeError as error:
                # Not created, so nothing runs; an unanswered create may still have been
                # stored, and a Job of this name that carries this nonce is that one.
                with contextlib.suppress(KubeError):
                    stored = self.api.get(f"{jobs}/{name}")
                    if _annotation(stored, NONCE_ANNOTATION) == identity.nonce:
                        created = stored
                return Outcome("failed", None, f"the runner's Job: {error}", None)
            # The ConfigMap belongs to the Job from now on: if this controller dies, the
            # Job's ttlSecondsAfterFinished collects the Job, and the garbage collector its
            # ConfigMap and pod. (An immutable ConfigMap's metadata may still change.)
            with contextlib.suppress(KubeError):
                self.api.merge_patch(f"{configmaps}/{name}", _owned_by(created))
            return self._follow(requests, namespace, created, deadline, identity)
        finally:
            self._remove(namespace, created, input_map)

    def _remove(self, namespace: str, job: Json | None, configmap: Json | None = None) -> None:
        """Delete this controller's Job and input ConfigMap, each only if it is still the
        object created (its uid a precondition); gone already is fine. (An adopted Job's
        ConfigMap is owned by it, and goes with it.)"""
        for found, path in (
            (job, f"/apis/batch/v1/namespaces/{namespace}/jobs"),
            (configmap, f"/api/v1/namespaces/{namespace}/configmaps"),
        ):
            if found is None:
                continue
            meta = found["metadata"]
            with contextlib.suppress(KubeError):
                self.api.delete(f"{path}/{meta['name']}", uid=meta.get("uid"))

    # -- adopting the run of a previous controller ---------------------------------------

    def adopt(self, started: Started, deadline: float, *, namespace: str) -> Outcome | None:
        """The Job this controller created for ``started`` before a restart, followed to its
        end and read as if it had just started it, then deleted; None when there is none
        (it ended and was collected, or it was never created).

        The Job is known by its identity, never by its label alone: its name (one per
        operation), its namespace, the resource's uid, the plan id and the nonce of the
        dispatch record, the runner image. Every other Job labelled with the operation's id
        is reported as tampering and left in place: a forged "applied" result is never read,
        and the real run is still followed while it may write. Without the nonce (the state
        file that held it was lost) a Job that matches all the rest is followed to its end,
        holding the lease meanwhile, but its result is not believed (``lost``)."""
        jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
        found: dict[str, Json] = {}
        with contextlib.suppress(KubeError):
            labelled = self.api.get(
                jobs, params={"labelSelector": f"{OPERATION_ID_LABEL}={started.id}"}
            )
            found |= {str(j["metadata"].get("uid")): j for j in labelled.get("items", [])}
        with contextlib.suppress(KubeError):  # a Job stripped of its label is still found
            named = self.api.get(f"{jobs}/{job_name(started.id)}")
            found[str(named["metadata"].get("uid"))] = named
        ours: Json | None = None
        foreign = 0
        for job in found.values():
            problem = self._not_ours(job, started, namespace)
            if problem is None and ours is None:
                ours = job
                continue
            foreign += 1
            self._report(
                job,
                started.resource,
                (
                    f"Job {job['metadata'].get('name')} carries the label of run {started.id} but "
                    f"is not the Job this controller created for it ({problem or 'a second one'}); "
                    "it was neither followed nor deleted"
                ),
            )
        if ours is None:
            if not foreign:
                return None
            return Outcome(
                "lost",
                None,
                f"no Job this controller created for it was found; {foreign} other Job(s) "
                "carry its label (reported as tampering, left in place)",
                None,
            )
        dispatch = started.dispatch
        if dispatch is None or dispatch.nonce is None:
            self._follow([started], namespace, ours, deadline, None, read=False)
            return Outcome(
                "lost",
                None,
                f"its Job {ours['metadata']['name']} cannot be proven this controller's (no "
                "dispatch record holds its nonce: the state file was lost); it was followed "
                "to its end, and its result is not believed",
                None,
            )
        identity = _Identity(dispatch.nonce, started.resource, dispatch.plan_id)
        try:
            outcome = self._follow([started], namespace, ours, deadline, identity)
        finally:
            self._remove(namespace, ours)
        return outcome[0] if isinstance(outcome, list) else outcome

    def _not_ours(self, job: Json, started: Started, namespace: str) -> str | None:
        """Why ``job`` is not the one this controller created for ``started`` (None: it is,
        as far as the dispatch record can tell)."""
        meta = job.get("metadata") or {}
        if meta.get("namespace") != namespace:
            return f"it is in namespace {meta.get('namespace')}, not {namespace}"
        # The name is the operation's own; a label is anyone's to give, so none is checked.
        if meta.get("name") != job_name(started.id):
            return f"it is named {meta.get('name')}, not {job_name(started.id)}"
        resource = started.resource
        if resource is not None and _annotation(job, RESOURCE_LABEL) != resource.uid:
            return f"it names another resource than {resource.uid}"
        dispatch = started.dispatch
        if dispatch is not None:
            if _annotation(job, PLAN_ANNOTATION) != dispatch.plan_id:
                return f"it runs another plan than {dispatch.plan_id}"
            nonce = _annotation(job, NONCE_ANNOTATION) or ""
            if dispatch.nonce is not None and not hmac.compare_digest(
                nonce.encode(), dispatch.nonce.encode()
            ):
                return "its dispatch nonce is not the one this controller recorded"
        containers = ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get(
            "containers"
        ) or []
        images = [c.get("image") for c in containers if isinstance(c, dict)]
        if images != [self.settings.image]:
            return f"it runs {', '.join(map(str, images)) or 'no image'}, not {self.settings.image}"
        return None

    def _report(self, suspect: Json, resource: ResourceRef | None, note: str) -> None:
        """Say that ``suspect`` passes for one of this controller's objects: a log line and
        a Warning Event (best effort). It is never deleted: it is evidence, and not ours."""
        meta = suspect.get("metadata") or {}
        where = f"{meta.get('namespace')}/{resource.name}: " if resource is not None else ""
        self.warn(f"{where}tampering: {note}")
        event = tampering_event(
            suspect,
            (resource.kind, resource.name) if resource is not None else None,
            note,
            self.now(),
            socket.gethostname(),
        )
        try:
            self.api.create(
                f"/apis/events.k8s.io/v1/namespaces/{meta.get('namespace')}/events", event
            )
        except KubeError as error:
            self.warn(f"{where}the tampering event was not recorded: {error}")

    # -- following a Job -----------------------------------------------------------------

    def _follow(
        self,
        requests: Sequence[Asked],
        namespace: str,
        job: Json,
        deadline: float,
        identity: _Identity | None,
        *,
        read: bool = True,
    ) -> Outcome | list[Outcome]:
        """Poll ``job`` (this very object: its uid) to its end and read its pod's frames
        (``read`` false: only wait for the end)."""
        ends = time.monotonic() + deadline + self.settings.grace
        # Short operations answer in about a second: look again soon at first, then every
        # ``poll`` seconds.
        waits = (min(self.settings.poll, 0.1 * 2 ** min(n, 16)) for n in itertools.count())
        name, uid = job["metadata"]["name"], job["metadata"].get("uid")
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
        reported: set[str] = set()
        while True:
            try:
                current = self.api.get(path)
                pods = self._pods(namespace, current, identity, reported)
            except NotFound:
                return Outcome("lost", None, f"Job {namespace}/{name} disappeared", None)
            except KubeError as error:
                if time.monotonic() > ends:
                    return Outcome("lost", None, f"Job {namespace}/{name}: {error}", None)
                time.sleep(next(waits))
                continue
            if current.get("metadata", {}).get("uid") != uid:
                return Outcome(
                    "lost", None, f"Job {namespace}/{name} was replaced by another object", None
                )
            pod = pods[0] if len(pods) == 1 else None
            waiting = _waiting(pod)
            if read and waiting is not None and waiting[0] in _CANNOT_START:
                return Outcome(
                    "failed",
                    None,
                    f"the runner's pod could not start: {waiting[0]}: {waiting[1]}",
                    None,
                )
            finished = _finished(current.get("status", {}))
            if finished is not None:
                if not read:
                    return Outcome("lost", None, f"the Job ended ({finished}), not read", None)
                if len(pods) > 1:
                    return Outcome(
                        "lost",
                        None,
                        f"the Job ended ({finished}) and {len(pods)} pods claim to be its own; "
                        "which one ran the operation cannot be told (tampering?)",
                        None,
                    )
                return self._read(requests, namespace, pod, finished)
            if time.monotonic() > ends:
                return Outcome(
                    "lost", None, f"deadline of {deadline:g} s exceeded; Job {name} deleted", None
                )
            time.sleep(next(waits))

    def _pods(
        self, namespace: str, job: Json, identity: _Identity | None, reported: set[str]
    ) -> list[Json]:
        """The pods ``job`` owns: a pod whose controller reference is the Job's uid (and,
        when the Job carries a nonce, the same one). Others that carry its ``job-name``
        label are reported once each and never read."""
        name, uid = job["metadata"]["name"], job["metadata"].get("uid")
        listed = self.api.get(
            f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": f"job-name={name}"}
        ).get("items", [])
        nonce = _annotation(job, NONCE_ANNOTATION)
        own: list[Json] = []
        for pod in listed:
            owner = _controller(pod)
            if (
                owner is not None
                and owner.get("kind") == "Job"
                and owner.get("uid") == uid
                and (nonce is None or _annotation(pod, NONCE_ANNOTATION) == nonce)
            ):
                own.append(pod)
                continue
            key = str(pod.get("metadata", {}).get("uid"))
            if key not in reported:
                reported.add(key)
                self._report(
                    pod,
                    identity.resource if identity else None,
                    (
                        f"pod {pod.get('metadata', {}).get('name')} carries the label of Job "
                        f"{name} but is not owned by it; its log is not read, and it is left "
                        "in place"
                    ),
                )
        return own

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


def _annotation(obj: Json, key: str) -> str | None:
    found = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    return str(found) if found is not None else None


def _controller(obj: Json) -> Json | None:
    """The owner reference marked as an object's controller (Kubernetes allows one)."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((o for o in owners if isinstance(o, dict) and o.get("controller")), None)


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
