"""A small Kubernetes API server and kubelet, for the Kubernetes mode's tests.

Test double, and why: no Kubernetes API server or kubelet can run on this machine (no
container runtime, no cluster). This server speaks the API's wire format for the few
resources Seshat uses (ConfigMaps, Jobs, Pods and their logs, Leases, the Seshat custom
resources and their status subresource): JSON bodies, ``Status`` errors, ``resourceVersion``
optimistic concurrency (409 on a stale write), bearer-token authentication (401), label
selectors, merge patches. Every object written to it is validated strictly against the
official Kubernetes OpenAPI schemas (``kubernetes-validate``) or, for the Seshat kinds,
against the committed CRD's schema; an invalid object is refused with 422 as a real API
server would, and recorded in :attr:`FakeKubernetes.invalid` so a test can assert none was.
The controller's token is authorized by the RBAC rules of ``deploy/manifests/rbac.yaml``
(the ClusterRole everywhere, the Role in its namespace): a request they do not allow gets
403 and is recorded in :attr:`FakeKubernetes.forbidden`, so every test here also checks the
shipped role against what the controller actually does. Secrets are never served (the role
grants none): the kubelet alone resolves ``secretKeyRef`` from
:attr:`FakeKubernetes.secrets`.

The kubelet runs a Job's one container as a local process: ConfigMap volumes are written,
bytes exact, at their ``mountPath`` on this filesystem (the executor's ``mount_root`` is a
temporary folder in tests), ``emptyDir`` volumes are created there, the environment is the
container's ``env`` and nothing else (plus ``PATH``), stdout and stderr go to the pod log,
``activeDeadlineSeconds`` is enforced, deleting the Job kills the process (and all it
started: it leads a session of its own). A ``seshat-runner`` command (the image's runner) is
forked from the worker's runner fork server (``harness/forkserver.py``) as the harness's own
runner calls are, rather than started afresh (about a hundred pods in the suite, a third of
a second of imports each); another command (a test's ``command_override``) is a real
process. As the Job
controller does, it makes each Job's pod with the template's labels and annotations plus
``job-name`` and ``controller-uid``, owned by the Job (``ownerReferences``, the Job's uid);
the garbage collector deletes what an object owns with it, and a delete honours the
``preconditions.uid`` of its ``DeleteOptions`` (409 when the object is another by now).

What an attacker who may create objects in a namespace does, a test does with
:meth:`FakeKubernetes.create` (no controller token, no RBAC: the attacker's own rights) and,
to act at the very moment the controller creates something, :attr:`FakeKubernetes.before_create`.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
from ruamel.yaml import YAML

from harness.forkserver import Started, servers
from harness.ports import LOOPBACK
from harness.secret_scan import scan_bytes
from harness.seshat_cli import FORK

# kubernetes_validate reads and parses a schema file and the version's 1.3 MB definitions
# file again for every manifest it checks (8 ms of CPU; with them parsed once, 0.7 ms), and
# the fake API server checks every write. The files never change: each is parsed once per
# process, and every check still runs against the official schemas.
kubernetes_validate.utils.schema_contents = functools.cache(
    kubernetes_validate.utils.schema_contents
)


def _kill_group(pid: int) -> None:
    """SIGKILL to a pod's process group, which may have ended since it was last seen
    running (a pod whose process ends between the look and the kill is no error)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


Json = dict[str, Any]
K8S_VERSION = "1.33.0"
CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
RBAC = Path(__file__).resolve().parents[2] / "deploy" / "manifests" / "rbac.yaml"
_GROUPS = {
    "core": "",
    "batch": "batch",
    "coordination": "coordination.k8s.io",
    "events": "events.k8s.io",
    "seshat": "seshat.dev",
}

_ROUTES = [
    (
        "core",
        re.compile(r"^/api/v1/namespaces/([^/]+)/(configmaps|pods|secrets)(?:/([^/]+))?(/log)?$"),
    ),
    ("batch", re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/(jobs)(?:/([^/]+))?()$")),
    (
        "coordination",
        re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/(leases)(?:/([^/]+))?()$"),
    ),
    (
        "events",
        re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/(events)(?:/([^/]+))?()$"),
    ),
    (
        "seshat",
        re.compile(
            r"^/apis/seshat\.dev/v1alpha1/namespaces/([^/]+)/"
            r"(databaseschemas|databasemigrations|databasefleets)(?:/([^/]+))?(/status)?$"
        ),
    ),
]
_KINDS = {
    "configmaps": ("v1", "ConfigMap"),
    "pods": ("v1", "Pod"),
    "jobs": ("batch/v1", "Job"),
    "leases": ("coordination.k8s.io/v1", "Lease"),
    "events": ("events.k8s.io/v1", "Event"),
}


RUNNER = str(Path(sys.executable).parent / "seshat-runner")
"""The image's runner: this checkout's console script, the program the fork servers run."""
POD_SEEDS = ("0", "1")
"""The hash seeds of forked pods, in turn. A real pod's interpreter draws a random seed; a
runner fork server is started with one seed (``PYTHONHASHSEED``, at most
``ForkServers.MAX_RUNNER_SEEDS`` servers per worker), so pods alternate between two: two
pods in a row never share one (what one pod wrote in hash order is read by another with
another order, as between two real pods). 0 and 1 are the seeds the runner's own CLI tests
use most, so the pods share those tests' servers instead of taking more of the few slots."""


class PodProcess(Protocol):
    """What the kubelet and the tests use of a pod's process: a :class:`subprocess.Popen`
    or a forked :class:`harness.forkserver.Started` (its pid leads its process group)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


class FakeKubernetes:
    """The API server (:attr:`url`) and its kubelet; see the module's documentation."""

    def __init__(self, token: str = "controller-token", path: Sequence[str] = ()) -> None:
        self.token = token
        self.objects: dict[tuple[str, str, str], Json] = {}
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        self.invalid: list[str] = []  # every refused write: a test asserts this stays empty
        self.forbidden: list[str] = []  # every request the RBAC rules refused
        self._grants = _grants(RBAC)
        self.secret_requests = 0
        self.unauthorized = 0
        self.jobs_created: list[Json] = []  # each Job as it was posted
        self.configmaps_created: list[Json] = []
        # Each status merge patch of a custom resource, as (resource, namespace, name, the
        # phase it set or None): what a test reads to see intermediate phases published.
        self.status_patches: list[tuple[str, str, str, str | None]] = []
        self.processes: dict[str, PodProcess] = {}  # pod name -> its process
        # When set, the kubelet runs this instead of the container's command (a test that
        # needs a runner that hangs, say).
        self.command_override: list[str] | None = None
        self.logs: dict[str, bytearray] = {}
        # Called (resource, namespace, body) as the controller creates an object, before it
        # is stored: a test's attacker acting first.
        self.before_create: Callable[[str, str, Json], None] | None = None
        self.path = os.pathsep.join([*path, str(Path(sys.executable).parent), "/usr/bin:/bin"])
        self._lock = threading.RLock()
        self._versions = itertools.count(1)
        self._seeds = itertools.cycle(POD_SEEDS)
        self._crd_schemas = _crd_schemas(CRDS)
        handler = self._handler()
        self.server = ThreadingHTTPServer((LOOPBACK, 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.server.server_address[1]}"

    def close(self) -> None:
        with self._lock:
            running = list(self.processes.values())
        for process in running:
            if process.poll() is None:
                _kill_group(process.pid)
                process.wait()
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self, path: Path, token: str | None = None) -> Path:
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "test", "cluster": {"server": self.url}}],
                    "users": [{"name": "seshat", "user": {"token": token or self.token}}],
                    "contexts": [
                        {"name": "test", "context": {"cluster": "test", "user": "seshat"}}
                    ],
                    "current-context": "test",
                }
            )
        )
        return path

    # -- what tests look at --------------------------------------------------------------

    def list(self, resource: str, namespace: str | None = None) -> list[Json]:
        with self._lock:
            return [
                json.loads(json.dumps(obj))
                for (r, ns, _), obj in sorted(self.objects.items())
                if r == resource and (namespace is None or ns == namespace)
            ]

    def get(self, resource: str, namespace: str, name: str) -> Json | None:
        with self._lock:
            found = self.objects.get((resource, namespace, name))
            return json.loads(json.dumps(found)) if found is not None else None

    def put_custom(self, resource: str, obj: Json, generation: int = 1) -> None:
        """A Seshat custom resource as Argo CD or Flux would have applied it."""
        meta = obj["metadata"]
        stored = {
            **obj,
            "metadata": {
                **meta,
                "uid": str(uuid.uuid4()),
                "generation": generation,
                "resourceVersion": str(next(self._versions)),
                "creationTimestamp": _now(),
            },
        }
        self._validate_custom(resource, stored)
        with self._lock:
            self.objects[(resource, meta["namespace"], meta["name"])] = stored

    def create(self, resource: str, namespace: str, body: Json) -> Json:
        """Create ``body`` as someone else than the controller would (an attacker with
        rights in ``namespace``): validated and stored as the API server does, a Job run by
        the kubelet; a pod's log is :attr:`logs` (a test writes what its container said)."""
        with self._lock:
            created = self._store(resource, namespace, body)
            return json.loads(json.dumps(created))  # type: ignore[no-any-return]

    def wait_for_process(self, timeout: float = 60.0) -> str:
        """The name of a pod whose process is running (the first one seen)."""
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            with self._lock:
                for name, process in self.processes.items():
                    if process.poll() is None:
                        return name
            time.sleep(0.02)
        raise AssertionError("no runner pod started")

    # -- validation ----------------------------------------------------------------------

    def _validate(self, resource: str, obj: Json) -> None:
        try:
            if resource in _KINDS:
                kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
            else:
                self._validate_custom(resource, obj)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as error:
            message = f"{resource}: {getattr(error, 'message', error)}"
            self.invalid.append(message)
            raise ApiError(422, "Invalid", message) from None

    def _validate_custom(self, resource: str, obj: Json) -> None:
        schema = self._crd_schemas[resource]
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        jsonschema.validate(
            body,
            {
                **schema,
                "properties": {
                    k: v
                    for k, v in schema["properties"].items()
                    if k not in ("apiVersion", "kind", "metadata")
                },
            },
        )

    # -- the API -------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:
                pass

            def _answer(self, code: int, body: Any, content_type: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    if self.headers.get("Authorization") != f"Bearer {fake.token}":
                        fake.unauthorized += 1
                        raise ApiError(401, "Unauthorized", "Unauthorized")
                    url = urlparse(self.path)
                    query = {k: v[0] for k, v in parse_qs(url.query).items()}
                    body = json.loads(raw) if raw else None
                    code, answer = fake._route(method, url.path, query, body, self.headers)
                except ApiError as error:
                    status = {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": error.message,
                        "reason": error.reason,
                        "code": error.code,
                    }
                    self._answer(error.code, status)
                    return
                if isinstance(answer, bytes):
                    self._answer(code, answer, "text/plain")
                else:
                    self._answer(code, answer)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

        return Handler

    def _route(
        self, method: str, path: str, query: dict[str, str], body: Any, headers: Any
    ) -> tuple[int, Any]:
        for api_group, pattern in _ROUTES:
            match = pattern.match(path)
            if match:
                namespace, resource, name, sub = match.groups()
                group = _GROUPS[api_group]
                break
        else:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource {path}"
            )
        if resource == "secrets":
            self.secret_requests += 1
        verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update"}.get(
            method, method.lower()
        )
        full = resource + (sub or "")
        if not self._allowed(group, full, verb, namespace):
            message = f'{full} is forbidden: User "seshat" cannot {verb} {full} in {namespace}'
            self.forbidden.append(message)
            raise ApiError(403, "Forbidden", message)
        with self._lock:
            if sub == "/log":
                return 200, self._log(namespace, name, query)
            if sub == "/status":
                return self._status(method, resource, namespace, name, body, headers)
            if name is None and method == "GET":
                return 200, self._list(resource, namespace, query)
            if name is None and method == "POST":
                if self.before_create is not None:
                    self.before_create(resource, namespace, body)
                return 201, self._store(resource, namespace, body)
            key = (resource, namespace, name)
            if method == "GET":
                if key not in self.objects:
                    raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
                return 200, self.objects[key]
            if method == "PUT":
                return 200, self._replace(key, body)
            if method == "PATCH":
                return 200, self._patch(key, body, headers)
            if method == "DELETE":
                return 200, self._delete(key, body)
        raise ApiError(405, "MethodNotAllowed", f"{method} {path}")

    def _allowed(self, group: str, resource: str, verb: str, namespace: str) -> bool:
        return any(
            (scope is None or scope == namespace) and verb in verbs
            for (g, r, scope), verbs in self._grants.items()
            if g == group and r == resource
        )

    def _list(self, resource: str, namespace: str, query: dict[str, str]) -> Json:
        wanted = dict(
            part.split("=", 1) for part in query.get("labelSelector", "").split(",") if part
        )
        items = [
            obj
            for (r, ns, _), obj in sorted(self.objects.items())
            if r == resource
            and ns == namespace
            and all(obj["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
        ]
        api_version, kind = _KINDS.get(resource, ("seshat.dev/v1alpha1", resource))
        return {"apiVersion": api_version, "kind": f"{kind}List", "metadata": {}, "items": items}

    def _stamp(self, obj: Json, namespace: str) -> Json:
        meta = obj.setdefault("metadata", {})
        meta["namespace"] = namespace
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta["resourceVersion"] = str(next(self._versions))
        return obj

    def _store(self, resource: str, namespace: str, body: Json) -> Json:
        self._validate(resource, body)
        name = body["metadata"]["name"]
        key = (resource, namespace, name)
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f'{resource} "{name}" already exists')
        obj = self._stamp(json.loads(json.dumps(body)), namespace)
        self.objects[key] = obj
        if resource == "jobs":
            self.jobs_created.append(json.loads(json.dumps(body)))
            obj["status"] = {}
            threading.Thread(target=self._kubelet, args=(namespace, name), daemon=True).start()
        if resource == "configmaps":
            self.configmaps_created.append(json.loads(json.dumps(body)))
        return obj

    def _replace(self, key: tuple[str, str, str], body: Json) -> Json:
        current = self.objects.get(key)
        if current is None:
            raise ApiError(404, "NotFound", f'{key[0]} "{key[2]}" not found')
        self._validate(key[0], body)
        if (
            body.get("metadata", {}).get("resourceVersion")
            != current["metadata"]["resourceVersion"]
        ):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {key[0]} "{key[2]}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )
        obj = self._stamp(json.loads(json.dumps(body)), key[1])
        self.objects[key] = obj
        return obj

    def _patch(self, key: tuple[str, str, str], body: Json, headers: Any) -> Json:
        current = self.objects.get(key)
        if current is None:
            raise ApiError(404, "NotFound", f'{key[0]} "{key[2]}" not found')
        if headers.get("Content-Type") != "application/merge-patch+json":
            raise ApiError(415, "UnsupportedMediaType", "only merge patches here")
        if current.get("immutable") and any(k in body for k in ("data", "binaryData")):
            raise ApiError(422, "Invalid", "field is immutable when `immutable` is set")
        updated = _merge(current, body)
        self._validate(key[0], updated)
        self.objects[key] = self._stamp(updated, key[1])
        return self.objects[key]

    def _delete(self, key: tuple[str, str, str], options: Json | None = None) -> Json:
        if key not in self.objects:
            raise ApiError(404, "NotFound", f'{key[0]} "{key[2]}" not found')
        uid = self.objects[key]["metadata"]["uid"]
        wanted = ((options or {}).get("preconditions") or {}).get("uid")
        if wanted is not None and wanted != uid:
            raise ApiError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {uid}",
            )
        self._collect(key)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    def _collect(self, key: tuple[str, str, str]) -> None:
        """Delete ``key`` and, as the garbage collector does, everything it owns (a pod's
        process is killed with it)."""
        obj = self.objects.pop(key, None)
        if obj is None:
            return
        if key[0] == "pods":
            process = self.processes.get(key[2])
            if process is not None and process.poll() is None:
                _kill_group(process.pid)
        uid = obj["metadata"]["uid"]
        for other, found in list(self.objects.items()):
            owners = found["metadata"].get("ownerReferences") or []
            if other[1] == key[1] and any(o.get("uid") == uid for o in owners):
                self._collect(other)

    def _status(
        self, method: str, resource: str, namespace: str, name: str, body: Any, headers: Any
    ) -> tuple[int, Json]:
        key = (resource, namespace, name)
        current = self.objects.get(key)
        if current is None:
            raise ApiError(404, "NotFound", f'{resource} "{name}" not found')
        if method == "GET":
            return 200, current
        if method != "PATCH" or headers.get("Content-Type") != "application/merge-patch+json":
            raise ApiError(415, "UnsupportedMediaType", "only merge patches here")
        updated = dict(current)
        updated["status"] = _merge(current.get("status"), body.get("status"))
        self._validate(resource, updated)
        phase = (body.get("status") or {}).get("phase")
        self.status_patches.append((resource, namespace, name, phase))
        updated["metadata"] = {**current["metadata"], "resourceVersion": str(next(self._versions))}
        self.objects[key] = updated
        return 200, updated

    def _log(self, namespace: str, name: str, query: dict[str, str]) -> bytes:
        if ("pods", namespace, name) not in self.objects:
            raise ApiError(404, "NotFound", f'pods "{name}" not found')
        data = bytes(self.logs.get(name, b""))
        limit = int(query.get("limitBytes", "0") or 0)
        return data[:limit] if limit else data

    # -- the kubelet ---------------------------------------------------------------------

    def _set_pod(self, namespace: str, pod: str, status: Json) -> None:
        with self._lock:
            found = self.objects.get(("pods", namespace, pod))
            if found is not None:
                found["status"] = status
                found["metadata"]["resourceVersion"] = str(next(self._versions))

    def _set_job(self, namespace: str, job: str, status: Json) -> None:
        with self._lock:
            found = self.objects.get(("jobs", namespace, job))
            if found is not None:
                found["status"] = status

    def _kubelet(self, namespace: str, job_name: str) -> None:
        with self._lock:
            job = json.loads(json.dumps(self.objects[("jobs", namespace, job_name)]))
            template = job["spec"]["template"]
            pod_name = f"{job_name}-{uuid.uuid4().hex[:5]}"
            uid = job["metadata"]["uid"]
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "labels": {
                        **template.get("metadata", {}).get("labels", {}),
                        "job-name": job_name,
                        "batch.kubernetes.io/job-name": job_name,
                        "controller-uid": uid,
                        "batch.kubernetes.io/controller-uid": uid,
                    },
                    "annotations": dict(template.get("metadata", {}).get("annotations", {})),
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": job_name,
                            "uid": uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": template["spec"],
                "status": {"phase": "Pending"},
            }
            self.objects[("pods", namespace, pod_name)] = self._stamp(pod, namespace)
            self.logs[pod_name] = bytearray()
        spec = template["spec"]
        (container,) = spec["containers"]
        env, problem = self._environment(namespace, container)
        if problem is None:
            problem = self._mount(namespace, spec, container)
        if problem is not None:
            waiting = {"reason": "CreateContainerConfigError", "message": problem}
            self._set_pod(
                namespace,
                pod_name,
                {
                    "phase": "Pending",
                    "containerStatuses": [
                        {
                            "name": container["name"],
                            "ready": False,
                            "restartCount": 0,
                            "image": container["image"],
                            "imageID": "",
                            "state": {"waiting": waiting},
                        }
                    ],
                },
            )
            return
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
        cwd = mounts.get("work", "/")
        command = self.command_override or container["command"]
        # The image's programs are this checkout's (PYTHONPATH, when the tests set it).
        environment = {**env, "PATH": self.path, **_python_path()}
        process: PodProcess
        forked = self._fork(command, environment, cwd)
        if forked is not None:
            process = forked
        else:
            process = popen = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,  # one log, as the kubelet keeps it
                env=environment,
                cwd=cwd,
                start_new_session=True,
            )
            reader = threading.Thread(target=self._read_log, args=(pod_name, popen), daemon=True)
            reader.start()
        with self._lock:
            self.processes[pod_name] = process
        self._set_pod(
            namespace,
            pod_name,
            self._container_status(container, {"running": {"startedAt": _now()}}, "Running"),
        )
        self._set_job(namespace, job_name, {"active": 1, "startTime": _now()})
        deadline = job["spec"].get("activeDeadlineSeconds")
        try:
            process.wait(timeout=deadline)
            exceeded = False
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.wait()
            exceeded = True
        if forked is not None:
            # A forked pod's log is read once it ended, not as it grows: the controller reads
            # a pod's log only once its Job has ended (gitops/kubernetes/jobs.py, _follow),
            # which the kubelet says below, after this; no test reads a running pod's log.
            output = forked.stdout()
            forked.close()
            with self._lock:
                self.logs[pod_name].extend(output)
        else:
            reader.join()
            assert popen.stdout is not None
            popen.stdout.close()
        # Every pod's output goes through the secret scan, as every process's does.
        with self._lock:
            scan_bytes(bytes(self.logs[pod_name]), f"the log of pod {pod_name}")
        assert process.returncode is not None
        code = process.returncode if process.returncode >= 0 else 128 - process.returncode
        terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
        phase = "Succeeded" if code == 0 and not exceeded else "Failed"
        self._set_pod(
            namespace,
            pod_name,
            self._container_status(container, {"terminated": terminated}, phase),
        )
        if phase == "Succeeded":
            condition = {"type": "Complete", "status": "True"}
            self._set_job(namespace, job_name, {"succeeded": 1, "conditions": [condition]})
        else:
            reason = "DeadlineExceeded" if exceeded else "BackoffLimitExceeded"
            condition = {"type": "Failed", "status": "True", "reason": reason}
            self._set_job(namespace, job_name, {"failed": 1, "conditions": [condition]})

    def _fork(self, command: Sequence[str], env: dict[str, str], cwd: str) -> Started | None:
        """The image's runner forked from the worker's runner fork server, leading a session
        of its own (``os.killpg(pid)`` ends it and all it started, as for a process started
        with ``start_new_session``), its stderr merged into its stdout; ``None`` for any
        other command, with ``SESHAT_TEST_FORK=0``, or when the server cannot fork it (an
        unusual ``PYTHON*`` variable, no server slot for the seed): the caller starts it."""
        if not FORK or self.command_override is not None or not command:
            return None
        if command[0] != "seshat-runner" or shutil.which(command[0], path=self.path) != RUNNER:
            return None
        # The child's environment is the pod's plus the server's PYTHON* variables, the
        # worker's (on this machine PYTHONDONTWRITEBYTECODE and PYTHONUNBUFFERED, which the
        # runner's image sets as well: deploy/Dockerfile).
        with self._lock:
            seed = next(self._seeds)
        return servers.start(
            "seshat-runner",
            [RUNNER, *command[1:]],
            env={**env, "PYTHONHASHSEED": seed},
            cwd=Path(cwd),
            session=True,
            merge_stderr=True,
        )

    @staticmethod
    def _container_status(container: Json, state: Json, phase: str) -> Json:
        return {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": container["name"],
                    "ready": phase == "Running",
                    "restartCount": 0,
                    "image": container["image"],
                    "imageID": "",
                    "state": state,
                }
            ],
        }

    def _read_log(self, pod: str, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        descriptor = process.stdout.fileno()
        for chunk in iter(lambda: os.read(descriptor, 65536), b""):
            with self._lock:
                self.logs[pod].extend(chunk)

    def _environment(self, namespace: str, container: Json) -> tuple[dict[str, str], str | None]:
        env: dict[str, str] = {}
        for variable in container.get("env", []):
            if "value" in variable:
                env[variable["name"]] = variable["value"]
                continue
            ref = variable["valueFrom"]["secretKeyRef"]
            secret = self.secrets.get((namespace, ref["name"]))
            if secret is None:
                return {}, f'secret "{ref["name"]}" not found'
            if ref["key"] not in secret:
                return {}, f"couldn't find key {ref['key']} in Secret {namespace}/{ref['name']}"
            env[variable["name"]] = secret[ref["key"]]
        return env, None

    def _mount(self, namespace: str, spec: Json, container: Json) -> str | None:
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            target = Path(mount["mountPath"])
            volume = volumes[mount["name"]]
            target.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                with self._lock:
                    configmap = self.objects.get(
                        ("configmaps", namespace, volume["configMap"]["name"])
                    )
                if configmap is None:
                    return f'configmap "{volume["configMap"]["name"]}" not found'
                binary = configmap.get("binaryData", {})
                for item in volume["configMap"]["items"]:
                    path = target / item["path"]
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(base64.b64decode(binary[item["key"]]))
            if "secret" in volume:  # the kubelet reads Secrets; the control plane never does
                name = volume["secret"]["secretName"]
                secret = self.secrets.get((namespace, name))
                if secret is None:
                    return f'secret "{name}" not found'
                for item in volume["secret"]["items"]:
                    if item["key"] not in secret:
                        return f"couldn't find key {item['key']} in Secret {namespace}/{name}"
                    (target / item["path"]).write_text(secret[item["key"]])
        return None


def _python_path() -> dict[str, str]:
    found = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": found} if found else {}


# The shipped CRDs and roles are read once per worker, not once per fake API server: ruamel
# parses YAML in pure Python, and reading them for each of the Kubernetes tests' servers was
# about a tenth of those tests' CPU. Both are only ever read.


@functools.cache
def _crd_schemas(folder: Path) -> dict[str, Json]:
    """plural -> the openAPIV3Schema of each CRD in ``folder``."""
    return {
        doc["spec"]["names"]["plural"]: doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for doc in (YAML(typ="safe").load(p.read_text()) for p in sorted(folder.glob("*.yaml")))
    }


@functools.cache
def _grants(path: Path) -> dict[tuple[str, str, str | None], set[str]]:
    """(group, resource, namespace or None for cluster-wide) -> verbs, from the shipped roles."""
    grants: dict[tuple[str, str, str | None], set[str]] = {}
    for doc in YAML(typ="safe").load_all(path.read_text()):
        if doc is None or doc["kind"] not in ("ClusterRole", "Role"):
            continue
        scope = doc["metadata"].get("namespace") if doc["kind"] == "Role" else None
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    grants.setdefault((group, resource, scope), set()).update(rule["verbs"])
    return grants
