"""The few Kubernetes API calls Seshat makes, as JSON over HTTP.

The official client library loads the credentials (a kubeconfig file, or the pod's service
account in the cluster: host, CA, bearer token and its refresh); the requests themselves are
plain JSON on the REST paths, the API server's own wire format, so what is sent is exactly
the manifest built here. Errors keep the API server's ``Status`` message; a 404 is
:class:`NotFound` and a 409 :class:`Conflict` (an optimistic-concurrency loss).
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import requests

from runner.errors import CanNotRunError

__all__ = ["Conflict", "KubeApi", "KubeError", "NotFound", "load_api"]

Json = dict[str, Any]


class KubeError(CanNotRunError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"Kubernetes API: {status}: {message}")
        self.status = status


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


class KubeApi:
    """A session on one API server; one request at a time (lease renewals run in threads
    beside the executor's polling)."""

    def __init__(
        self,
        host: str,
        headers: dict[str, str] | None = None,
        verify: bool | str = True,
        cert: tuple[str, str] | None = None,
        timeout: float = 30.0,
        refresh: Any = None,
    ) -> None:
        self.host = host.rstrip("/")
        self.session = requests.Session()
        self.session.headers.update(headers or {})
        self.session.verify = verify
        if cert is not None:
            self.session.cert = cert
        self.timeout = timeout
        self._refresh = refresh
        self._lock = threading.Lock()

    def close(self) -> None:
        self.session.close()

    def request(
        self,
        method: str,
        path: str,
        body: Json | None = None,
        *,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        raw: bool = False,
    ) -> Any:
        try:
            with self._lock:
                if self._refresh is not None:
                    self.session.headers.update(self._refresh())
                response = self.session.request(
                    method,
                    self.host + path,
                    data=None if body is None else json.dumps(body),
                    headers={"Content-Type": content_type, "Accept": "application/json"},
                    params=params,
                    timeout=self.timeout,
                )
        except requests.RequestException as error:
            raise KubeError(0, f"{method} {path}: {type(error).__name__}") from None
        if response.status_code >= 400:
            try:
                message = str(response.json().get("message", response.reason))
            except ValueError:
                message = response.reason
            kind = {404: NotFound, 409: Conflict}.get(response.status_code, KubeError)
            raise kind(response.status_code, f"{method} {path}: {message}")
        if raw:
            return response.content
        return response.json() if response.content else {}

    # -- the calls -----------------------------------------------------------------------

    def create(self, path: str, body: Json) -> Json:
        return self.request("POST", path, body)  # type: ignore[no-any-return]

    def get(self, path: str, params: dict[str, str] | None = None) -> Json:
        return self.request("GET", path, params=params)  # type: ignore[no-any-return]

    def replace(self, path: str, body: Json) -> Json:
        return self.request("PUT", path, body)  # type: ignore[no-any-return]

    def merge_patch(self, path: str, body: Json) -> Json:
        return self.request(  # type: ignore[no-any-return]
            "PATCH", path, body, content_type="application/merge-patch+json"
        )

    def delete(self, path: str, propagation: str = "Background", uid: str | None = None) -> None:
        """Delete the object at ``path`` (gone already is fine); with ``uid``, only if it is
        still that object (a precondition: another object of the same name is a 409)."""
        options: Json = {"kind": "DeleteOptions", "apiVersion": "v1"}
        options["propagationPolicy"] = propagation
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        with contextlib.suppress(NotFound):
            self.request("DELETE", path, options)

    def log(self, path: str, limit_bytes: int) -> bytes:
        return self.request(  # type: ignore[no-any-return]
            "GET", path, params={"limitBytes": str(limit_bytes)}, raw=True
        )


def load_api(kubeconfig: Path | None = None, context: str | None = None) -> KubeApi:
    """An API session from the pod's service account (in a cluster, unless ``kubeconfig``
    is given), else from ``kubeconfig`` / ``$KUBECONFIG`` / ``~/.kube/config``."""
    import os

    from kubernetes import client, config

    configuration: Any = client.Configuration()
    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig) if kubeconfig else None,
                context=context,
                client_configuration=configuration,
            )
    except (config.ConfigException, OSError) as error:
        raise CanNotRunError(f"no Kubernetes configuration: {error}") from None

    def headers() -> dict[str, str]:
        hook = getattr(configuration, "refresh_api_key_hook", None)
        if hook is not None:
            hook(configuration)
        return {
            str(s["key"]): str(s["value"])
            for s in configuration.auth_settings().values()
            if s.get("in") == "header" and s.get("value")
        }

    verify: bool | str = configuration.ssl_ca_cert or bool(configuration.verify_ssl)
    cert = (
        (configuration.cert_file, configuration.key_file)
        if configuration.cert_file and configuration.key_file
        else None
    )
    return KubeApi(configuration.host, headers(), verify, cert, refresh=headers)
