"""The schema lifecycle end to end on real components: a Git repository with a bare remote,
an OCI layout holding a signed schema artifact, SQLite databases, the real seshat-runner,
SSH-signed approvals, and the status branch read back from the remote."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from harness.gitrepo import GIT_ENV, GitRemote
from harness.seshat_cli import SeshatRunner
from harness.sshkeys import SSHKeyFactory

from gitops.reconcile.passes import run_pass


def _schema(
    name: str,
    layout: Path,
    *,
    apply: str = "OnApproval",
    engine: str = "sqlite",
    extra: str = "",
    key: str | None = None,
) -> str:
    return f"""\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseSchema
metadata: {{name: {name}, namespace: shop}}
spec:
  target: {{engine: {engine}, url: {{fromEnv: {(key or name).upper()}_URL}},
           coordinationKey: {key or name}}}
  artifact: {{ref: "oci-layout://{layout}:v1", verification: {{policy: ci}}}}
  policy: {{apply: {apply}{extra}}}
"""


POLICIES = """\
apiVersion: seshat.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: ci, namespace: shop}
spec:
  artifactTypes: [application/vnd.seshat.schema.v1]
  signatures:
    count: 1
    authorities: [{name: ci, key: {publicKey: policies/ci.pub}}]
---
apiVersion: seshat.dev/v1alpha1
kind: ApprovalPolicy
metadata: {name: approvers, namespace: shop}
spec:
  rules:
    - approvers: {allowedSigners: policies/allowed_signers}
"""


class World:
    def __init__(
        self,
        tmp_path: Path,
        remote: GitRemote,
        seshat: SeshatRunner,
        keys: SSHKeyFactory,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        self.tmp, self.remote, self.seshat, self.monkeypatch = tmp_path, remote, seshat, monkeypatch
        self.work = tmp_path / "controller"
        self.alice = keys("alice@example.com")
        key = ec.generate_private_key(ec.SECP256R1())
        self.ci_key = tmp_path / "ci.pem"
        self.ci_key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        remote.write_file(
            "policies/ci.pub",
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        )
        remote.write_file("policies/shop.yaml", POLICIES)
        remote.write_file(
            "policies/allowed_signers", self.alice.allowed_signers_line("seshat-approval") + "\n"
        )

    def artifact(self, layout: str, sql: str, *, sign: bool = True) -> Path:
        folder = self.tmp / f"src-{layout}"
        folder.mkdir(exist_ok=True)
        (folder / "schema.sql").write_text(sql)
        path = self.tmp / layout
        ref = f"oci-layout://{path}:v1"
        assert self.seshat("artifact", "push", folder, ref, "--type", "schema").returncode == 0
        if sign:
            assert self.seshat("artifact", "sign", ref, "--key", self.ci_key).returncode == 0
        return path

    def database(self, name: str, sql: str = "") -> Path:
        path = self.tmp / f"{name}.db"
        conn = sqlite3.connect(path)
        if sql:
            conn.executescript(sql)
        conn.commit()
        conn.close()
        self.monkeypatch.setenv(f"{name.upper()}_URL", f"sqlite:///{path}")
        return path

    def reconcile(self) -> dict[str, str]:
        report = run_pass(self.remote.remote_url, self.work)
        return {k: f"{report.phases[k]}/{report.reasons[k]}" for k in report.phases}

    def status_log(self) -> list[str]:
        done = subprocess.run(
            [
                "git",
                "--git-dir",
                str(self.remote.remote_path),
                "log",
                "--format=%s",
                "refs/heads/seshat/status",
            ],
            capture_output=True,
            text=True,
            env=GIT_ENV,
            check=False,
        )
        return done.stdout.splitlines()

    def status(self, name: str) -> dict[str, object]:
        done = subprocess.run(
            [
                "git",
                "--git-dir",
                str(self.remote.remote_path),
                "show",
                f"refs/heads/seshat/status:status/shop/{name}.yaml",
            ],
            capture_output=True,
            text=True,
            env=GIT_ENV,
            check=True,
        )
        from gitops.repo.yamlfile import read_documents

        data = read_documents(done.stdout.encode())[0].data
        assert isinstance(data, dict)
        return data


@pytest.fixture
def world(
    tmp_path: Path,
    git_remote: GitRemote,
    seshat: SeshatRunner,
    ssh_key_factory: SSHKeyFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> World:
    return World(tmp_path, git_remote, seshat, ssh_key_factory, monkeypatch)


def _tables(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    names = [
        r[0]
        for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
    ]
    conn.close()
    return names


def test_plan_approve_apply_in_sync(world: World) -> None:
    layout = world.artifact(
        "orders-v1", "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER);\n"
    )
    database = world.database("orders")
    world.remote.write_file("databases/orders/schema.yaml", _schema("orders", layout))
    world.remote.commit_all("declare orders")

    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert _tables(database) == []  # nothing applied without an approval
    status = world.status("orders")
    plan = status["status"]["plan"]  # type: ignore[index]
    plan_id = plan["id"]
    assert status["resource"]["uid"]  # type: ignore[index]
    assert world.status_log() == ["shop/orders: AwaitingApproval"]

    # What people see: seshat status and seshat plan show, read from the remote.
    listed = world.seshat("status", "--repo", world.remote.remote_url, "--format", "json")
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    assert entry["status"]["phase"] == "AwaitingApproval"
    table = world.seshat("status", "--repo", world.remote.remote_url)
    assert "shop/orders" in table.stdout and "AwaitingApproval" in table.stdout
    shown = world.seshat("plan", "show", "shop/orders", "--repo", world.remote.remote_url)
    assert shown.returncode == 0, shown.stderr
    assert f"plan id      {plan_id}" in shown.stdout and "(verified)" in shown.stdout
    assert "CREATE TABLE orders" in shown.stdout
    assert f"seshat approve shop/orders --plan {plan_id}" in shown.stdout

    # The same pass again: nothing material changed, no new commit.
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert world.status_log() == ["shop/orders: AwaitingApproval"]

    approved = world.seshat(
        "approve",
        "shop/orders",
        "--plan",
        plan_id,
        "--repo",
        world.remote.work_dir,
        "--key",
        world.alice.private_key,
    )
    assert approved.returncode == 0, approved.stderr
    world.remote.commit_all("approve the orders plan")

    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    assert _tables(database) == ["orders"]
    final = world.status("orders")["status"]
    assert final["phase"] == "InSync"  # type: ignore[index]
    assert final["lastApplied"]["planId"] == plan_id  # type: ignore[index]
    assert final["lastApplied"]["outcome"] == "Applied"  # type: ignore[index]
    assert world.status_log() == [
        "shop/orders: InSync",
        "shop/orders: Applying",
        "shop/orders: AwaitingApproval",
    ]
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    assert len(world.status_log()) == 3


def test_apply_policies_and_blocked_verdicts(world: World) -> None:
    v1 = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);\n"
    layout = world.artifact("items", v1)
    unsigned = world.artifact("unsigned", v1, sign=False)
    for name in ("always", "never", "dropper", "unsigned", "weird"):
        world.database(name, "CREATE TABLE legacy (id INTEGER);" if name == "dropper" else "")
    world.remote.write_file("databases/always.yaml", _schema("always", layout, apply="Always"))
    world.remote.write_file("databases/never.yaml", _schema("never", layout, apply="Never"))
    world.remote.write_file("databases/dropper.yaml", _schema("dropper", layout, apply="Always"))
    world.remote.write_file("databases/unsigned.yaml", _schema("unsigned", unsigned))
    world.remote.write_file("databases/weird.yaml", _schema("weird", layout, engine="oracle"))
    world.remote.write_file(
        "databases/twins.yaml",
        _schema("twin-a", layout, key="twin") + "---\n" + _schema("twin-b", layout, key="twin"),
    )
    world.remote.write_file(
        "databases/broken.yaml", _schema("broken", layout).replace("OnApproval", "Sometimes")
    )
    world.remote.commit_all("many resources")
    verdicts = world.reconcile()
    assert verdicts == {
        "shop/always": "InSync/InSync",
        "shop/never": "Blocked/ApplyDisabled",
        "shop/dropper": "Blocked/DestructiveChangesDisallowed",
        "shop/unsigned": "Blocked/ArtifactRefused",
        "shop/weird": "Blocked/UnsupportedEngine",
        "shop/twin-a": "Blocked/RealmConflict",
        "shop/twin-b": "Blocked/RealmConflict",
        "shop/broken": "Blocked/ConfigurationError",
    }
    assert _tables(world.tmp / "always.db") == ["items"]
    assert _tables(world.tmp / "never.db") == []
    assert _tables(world.tmp / "dropper.db") == ["legacy"]
    never = world.status("never")["status"]
    assert never["plan"]["id"].startswith("sha256:")  # type: ignore[index]
    broken = json.dumps(world.status("broken"))
    assert "Sometimes" in broken and "spec.policy.apply" in broken


CONFIG = """\
apiVersion: seshat.dev/v1alpha1
kind: Config
spec:
  reviews: {forge: github, repository: acme/shop, tokenFromEnv: GH_TOKEN,
            apiUrl: "https://api.github.test"}
"""


def test_review_branch_and_pull_request(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """GitHub itself cannot run here: its REST API is played by ``responses``; the review
    branch is pushed to the real bare remote."""
    import responses
    from responses import matchers

    token = "ghp_" + "s3cr3t" * 6
    monkeypatch.setenv("GH_TOKEN", token)
    layout = world.artifact("rv", "CREATE TABLE orders (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file("seshat.yaml", CONFIG)
    world.remote.write_file("databases/orders/schema.yaml", _schema("orders", layout))
    world.remote.commit_all("declare orders")
    api = "https://api.github.test/repos/acme/shop"
    head = {"head": "acme:seshat/review/shop/orders", "state": "open"}
    pr = {"number": 7, "html_url": "https://github.test/acme/shop/pull/7", "state": "open"}

    with responses.RequestsMock(assert_all_requests_are_fired=True) as api_mock:
        api_mock.get(f"{api}/pulls", json=[], match=[matchers.query_param_matcher(head)])
        created = api_mock.post(f"{api}/pulls", json=pr, status=201)
        assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
        body = json.loads(created.calls[0].request.body or b"{}")
        plan_id = world.status("orders")["status"]["plan"]["id"]  # type: ignore[index]
        assert body["head"] == "seshat/review/shop/orders" and body["base"] == "main"
        assert body["title"] == "Seshat: shop/orders AwaitingApproval"
        assert f"seshat approve shop/orders --plan {plan_id}" in body["body"]
        assert "CREATE TABLE orders" in body["body"]
        assert created.calls[0].request.headers["Authorization"] == f"Bearer {token}"

    shown = subprocess.run(
        [
            "git",
            "--git-dir",
            str(world.remote.remote_path),
            "show",
            "refs/heads/seshat/review/shop/orders:.seshat/reviews/shop/orders.md",
        ],
        capture_output=True,
        text=True,
        env=GIT_ENV,
        check=True,
    ).stdout
    assert f"`{plan_id}`" in shown

    approved = world.seshat(
        "approve",
        "shop/orders",
        "--plan",
        plan_id,
        "--repo",
        world.remote.work_dir,
        "--key",
        world.alice.private_key,
    )
    assert approved.returncode == 0
    world.remote.commit_all("approve")
    with responses.RequestsMock(assert_all_requests_are_fired=True) as api_mock:
        api_mock.get(f"{api}/pulls", json=[pr], match=[matchers.query_param_matcher(head)])
        comment = api_mock.post(f"{api}/issues/7/comments", json={}, status=201)
        closed = api_mock.patch(f"{api}/pulls/7", json=pr | {"state": "closed"})
        assert world.reconcile() == {"shop/orders": "InSync/InSync"}
        assert json.loads(closed.calls[0].request.body or b"{}") == {"state": "closed"}
        assert "InSync" in json.loads(comment.calls[0].request.body or b"{}")["body"]
    assert _tables(database) == ["orders"]
    log = subprocess.run(
        ["git", "--git-dir", str(world.remote.remote_path), "log", "-p", "--all"],
        capture_output=True,
        text=True,
        env=GIT_ENV,
        check=True,
    ).stdout
    assert token not in log
