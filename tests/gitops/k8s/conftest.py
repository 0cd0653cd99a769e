"""What the Kubernetes mode tests share: the fake API server (every write valid, no Secret
read, nothing RBAC refuses), a session with it, and ``seshat reconcile --once`` against it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness.kube_api import FakeKubernetes
from harness.reconcile_world import World
from harness.registry import RegistryServer

from gitops.kubernetes.api import KubeApi, load_api


@pytest.fixture
def kube() -> Iterator[FakeKubernetes]:
    fake = FakeKubernetes()
    yield fake
    fake.close()
    assert fake.invalid == [], "an object Seshat wrote is not valid Kubernetes"
    assert fake.secret_requests == 0, "the control plane asked the API for a Secret"
    assert fake.forbidden == [], "deploy/manifests/rbac.yaml does not allow what Seshat does"


@pytest.fixture
def api(kube: FakeKubernetes, tmp_path: Path) -> Iterator[KubeApi]:
    session = load_api(kube.kubeconfig(tmp_path / "kubeconfig"))  # the real kubeconfig loader
    yield session
    session.close()


@pytest.fixture
def kube_reconcile(
    world: World, kube: FakeKubernetes, tmp_path: Path, oci_registry: RegistryServer
) -> Callable[..., str]:
    """``seshat reconcile --once --executor kubernetes --publish-status`` of the world's
    repository (the runners reach ``oci_registry`` over plain HTTP); its output, once it
    succeeded. Keyword arguments are more environment for the controller."""

    def reconcile(**env: str) -> str:
        done = world.seshat(
            "reconcile", "--once", "--publish-status",
            "--repo", world.remote.remote_url, "--work", world.work,
            "--executor", "kubernetes", "--runner-image", "seshat:test",
            "--kubeconfig", kube.kubeconfig(tmp_path / "kubeconfig"),
            "--registry-plain-http", oci_registry.address,
            env=env or None,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return str(done.stdout)

    return reconcile
