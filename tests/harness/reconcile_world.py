"""A small world for reconciler tests: a Git remote, signed OCI-layout artifacts, SQLite
databases and an approver, with helpers to run passes and read the status branch back."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import git
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from gitops.reconcile.passes import run_pass
from gitops.writeback.commits import parse_trailers
from runner.protocol.messages import RegistrySettings

from .gitrepo import GIT_ENV, GitRemote
from .seshat_cli import SeshatRunner
from .sshkeys import SSHKeyFactory

__all__ = [
    "POLICIES",
    "SignedLayouts",
    "World",
    "fleet_yaml",
    "migration_yaml",
    "schema_yaml",
    "tables",
]


def schema_yaml(
    name: str,
    layout: Path,
    *,
    apply: str = "OnApproval",
    engine: str = "sqlite",
    extra: str = "",
    key: str | None = None,
    ref: str | None = None,
    shared: bool = False,
    dev_env: str | None = None,
) -> str:
    return f"""\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseSchema
metadata: {{name: {name}, namespace: shop}}
spec:
  target: {{engine: {engine}, url: {{fromEnv: {(key or name).upper()}_URL}},
           coordinationKey: {key or name}, sharedRealm: {str(shared).lower()}}}
  artifact: {{ref: "{ref or f"oci-layout://{layout}:v1"}", verification: {{policy: ci}}}}
  policy: {{apply: {apply}{extra}}}
""" + (f"  dev: {{url: {{fromEnv: {dev_env}}}}}\n" if dev_env else "")


def migration_yaml(
    name: str,
    layout: Path,
    *,
    apply: str = "OnApproval",
    engine: str = "sqlite",
    key: str | None = None,
    extra: str = "",
) -> str:
    return f"""\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseMigration
metadata: {{name: {name}, namespace: shop}}
spec:
  target: {{engine: {engine}, url: {{fromEnv: {(key or name).upper()}_URL}},
           coordinationKey: {key or name}}}
  artifact: {{ref: "oci-layout://{layout}:v1", verification: {{policy: ci}}}}
  policy: {{apply: {apply}{extra}}}
"""


def fleet_yaml(
    layout: Path,
    members: str,
    *,
    steps: str = "",
    apply: str = "OnApproval",
    resume: str = "",
    tag: str = "v1",
    engine: str = "sqlite",
) -> str:
    """A ``DatabaseFleet`` shop/tenants of ``engine`` members (``TENANT_<member>_URL``) on
    the artifact ``tag`` of ``layout``; ``members`` is its ``spec.members`` body."""
    rollout = ""
    if steps or resume:
        rollout = "  rollout:\n" + (f"    steps: {steps}\n" if steps else "")
        rollout += f"    resume: {resume}\n" if resume else ""
    return f"""\
apiVersion: seshat.dev/v1alpha1
kind: DatabaseFleet
metadata: {{name: tenants, namespace: shop}}
spec:
  template:
    kind: DatabaseSchema
    spec:
      target: {{engine: {engine}, url: {{fromEnv: "TENANT_{{{{ member.name }}}}_URL"}},
               coordinationKey: "tenant-{{{{ member.name }}}}"}}
      artifact: {{ref: "oci-layout://{layout}:{tag}", verification: {{policy: ci}}}}
      policy: {{apply: {apply}}}
  members:
{members}
{rollout}"""


POLICIES = """\
apiVersion: seshat.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: ci, namespace: shop}
spec:
  artifactTypes: [application/vnd.seshat.schema.v1, application/vnd.seshat.migrations.v1]
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


class SignedLayouts:
    """OCI-layout artifacts pushed and signed by the real ``seshat artifact`` once per content,
    then copied into each test that asks for the same content.

    Why: a push and a signature are two ``seshat`` processes (about two seconds of CPU), and
    the reconciler tests make some 90 artifacts, most of them the same few schemas. What a test
    gets is byte for byte what the CLI wrote (``SOURCE_DATE_EPOCH`` is fixed and a layout does
    not depend on its folder's name), signed with the session's CI key, which every world
    trusts (``policies/ci.pub``); the CLI's own behaviour is tested in ``tests/gitops/artifacts``.
    One per xdist worker, in its own folder: nothing is shared between processes.
    """

    def __init__(self, folder: Path, seshat: SeshatRunner) -> None:
        self.folder, self.seshat = folder, seshat
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.key_file = folder / "ci.pem"
        self.key_file.write_bytes(self.private_pem())
        self.built: dict[str, Path] = {}

    def private_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def public_pem(self) -> bytes:
        return self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def copy(self, kind: str, files: Mapping[str, bytes], sign: bool, destination: Path) -> None:
        """The layout of ``files`` (name -> bytes) as a ``kind`` artifact tagged ``v1``, signed
        unless not ``sign``, copied to ``destination`` (which must not exist)."""
        identity = hashlib.sha256(repr((kind, sign, sorted(files.items()))).encode()).hexdigest()
        layout = self.built.get(identity)
        if layout is None:
            source = self.folder / f"src-{identity[:16]}"
            source.mkdir()
            for name, data in files.items():
                (source / name).write_bytes(data)
            layout = self.folder / identity[:16]
            ref = f"oci-layout://{layout}:v1"
            done = self.seshat("artifact", "push", source, ref, "--type", kind)
            assert done.returncode == 0, done.stderr
            if sign:
                done = self.seshat("artifact", "sign", ref, "--key", self.key_file)
                assert done.returncode == 0, done.stderr
            self.built[identity] = layout
        shutil.copytree(layout, destination, symlinks=True)


class World:
    def __init__(
        self,
        tmp_path: Path,
        remote: GitRemote,
        seshat: SeshatRunner,
        keys: SSHKeyFactory,
        monkeypatch: pytest.MonkeyPatch,
        layouts: SignedLayouts,
    ) -> None:
        self.tmp, self.remote, self.seshat, self.monkeypatch = tmp_path, remote, seshat, monkeypatch
        self.layouts = layouts
        self.work = tmp_path / "controller"
        self._tampers = 0
        self.alice = keys("alice@example.com")
        self.ci_key = tmp_path / "ci.pem"  # the session's CI key, which signed every layout
        self.ci_key.write_bytes(layouts.private_pem())
        remote.write_file("policies/ci.pub", layouts.public_pem())
        remote.write_file("policies/shop.yaml", POLICIES)
        remote.write_file(
            "policies/allowed_signers",
            self.alice.allowed_signers_line("seshat-approval,seshat-acknowledgment") + "\n",
        )

    def artifact(self, layout: str, sql: str, *, sign: bool = True) -> Path:
        """A schema artifact of ``sql`` (signed unless not ``sign``) at the OCI layout
        ``layout``, tagged ``v1``: a copy of the one :class:`SignedLayouts` built for the same
        SQL; pushed into the layout with the CLI when the layout exists already (a new
        manifest behind the same tag, beside the old one)."""
        folder = self.tmp / f"src-{layout}"
        folder.mkdir(exist_ok=True)
        (folder / "schema.sql").write_text(sql)
        path = self.tmp / layout
        if not path.exists():
            self.layouts.copy("schema", {"schema.sql": sql.encode()}, sign, path)
            return path
        ref = f"oci-layout://{path}:v1"
        assert self.seshat("artifact", "push", folder, ref, "--type", "schema").returncode == 0
        if sign:
            assert self.seshat("artifact", "sign", ref, "--key", self.ci_key).returncode == 0
        return path

    def migrations(self, layout: str, files: dict[str, str]) -> Path:
        """A signed migrations artifact of ``files`` (name -> text) at a new OCI layout (a
        copy of the one :class:`SignedLayouts` built for the same files)."""
        folder = self.tmp / f"src-{layout}"
        folder.mkdir()
        content = {name: text.encode("utf-8") for name, text in files.items()}  # bytes as given
        for name, data in content.items():
            (folder / name).write_bytes(data)
        path = self.tmp / layout
        self.layouts.copy("migrations", content, True, path)
        return path

    def publish(
        self,
        ref: str,
        files: dict[str, bytes],
        kind: str = "schema",
        *,
        registry: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> str:
        """Push ``files`` (name -> bytes) as a signed ``kind`` artifact to the registry
        reference ``ref`` (``registry``: options of ``seshat artifact``); returns ``ref``."""
        folder = self.tmp / f"src-{len(list(self.tmp.glob('src-*')))}"
        folder.mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        for command in (
            ("push", folder, ref, "--type", kind),
            ("sign", ref, "--key", self.ci_key),
        ):
            done = self.seshat("artifact", *registry, *command, env=env)
            assert done.returncode == 0, done.stderr
        return ref

    def approve(self, name: str, plan_id: str, key: Path | None = None) -> None:
        """``seshat approve`` (by Alice unless ``key``), committed and pushed."""
        self._sign("approve", name, "--plan", plan_id, key)
        self.remote.commit_all(f"approve {name}")

    def acknowledge(self, name: str, operation_id: str, key: Path | None = None) -> None:
        """``seshat acknowledge`` of a run (by Alice unless ``key``), committed and pushed."""
        self._sign("acknowledge", name, "--operation", operation_id, key)
        self.remote.commit_all(f"acknowledge {operation_id} of {name}")

    def _sign(self, command: str, name: str, option: str, value: str, key: Path | None) -> None:
        done = self.seshat(
            command,
            f"shop/{name}",
            option,
            value,
            "--repo",
            self.remote.work_dir,
            "--key",
            key or self.alice.private_key,
        )
        assert done.returncode == 0, done.stderr

    def database(self, name: str, sql: str = "", env: str | None = None) -> Path:
        """A SQLite database ``name`` (holding ``sql``), its URL in ``env`` (default
        ``<NAME>_URL``)."""
        path = self.tmp / f"{name}.db"
        conn = sqlite3.connect(path)
        if sql:
            conn.executescript(sql)
        conn.commit()
        conn.close()
        self.monkeypatch.setenv(env or f"{name.upper()}_URL", f"sqlite:///{path}")
        return path

    def reconcile(
        self, registry: RegistrySettings | None = None, *, workers: int | None = None
    ) -> dict[str, str]:
        """A pass (``workers``: the default, the CPU count; 1 for a test of what one
        resource's pass leaves for the next); each resource's ``phase/reason``."""
        report = run_pass(self.remote.remote_url, self.work, registry=registry, workers=workers)
        return {k: f"{report.phases[k]}/{report.reasons[k]}" for k in report.phases}

    def controller(self, *options: str, **popen: Any) -> subprocess.Popen[Any]:
        """``seshat reconcile --once`` on this world (and ``options``) as a process of its
        own, the console script itself (never forked: crash tests kill it and its runners);
        ``popen`` goes to :class:`subprocess.Popen`."""
        seshat = str(Path(sys.executable).parent / "seshat")
        command = [seshat, "reconcile", "--once", "--repo", self.remote.remote_url]
        return subprocess.Popen([*command, "--work", str(self.work), *options], **popen)

    def until_phase(
        self, name: str, phase: str, controller: subprocess.Popen[Any], seconds: float = 120
    ) -> None:
        """Wait until a status commit gave ``shop/<name>`` ``phase`` (e.g. the dispatch
        marker's ``Applying``), while ``controller`` still runs."""
        deadline = time.monotonic() + seconds
        while phase not in self.phases(name):
            assert controller.poll() is None, f"the reconciler ended before {name} was {phase}"
            assert time.monotonic() < deadline, f"{name} never became {phase}"
            time.sleep(0.2)

    def git(self, *args: str, check: bool = True) -> str:
        """``git`` on the bare remote (what everyone sees); its stdout."""
        done = subprocess.run(
            ["git", "--git-dir", str(self.remote.remote_path), *args],
            capture_output=True,
            text=True,
            env=GIT_ENV,
            check=check,
        )
        return done.stdout

    def show(self, branch: str, path: str) -> str:
        """A file as committed on ``branch`` of the remote."""
        return self.git("show", f"refs/heads/{branch}:{path}")

    @contextlib.contextmanager
    def tamper(self, branch: str, message: str = "tamper") -> Iterator[Path]:
        """A clone at ``branch`` for an attacker with push access: whatever the block does
        to the work tree is committed (symlinks included) and pushed, without force."""
        self._tampers += 1
        folder = self.tmp / f"attacker-{self._tampers}"
        repo = git.Repo.clone_from(self.remote.remote_url, folder, env=GIT_ENV)
        try:
            repo.git.update_environment(**GIT_ENV)
            with repo.config_writer() as config:
                config.set_value("user", "name", "Mallory")
                config.set_value("user", "email", "mallory@example.invalid")
                config.set_value("commit", "gpgsign", "false")
            repo.git.checkout("--quiet", branch)
            yield folder
            repo.git.add("--all")
            repo.git.commit("--quiet", "--allow-empty", "--message", message)
            repo.git.push("--quiet", "origin", f"HEAD:refs/heads/{branch}")
        finally:
            repo.close()

    def entry(self, branch: str, path: str) -> str:
        """The mode of ``path`` on ``branch`` of the remote ("100644" a regular file,
        "120000" a symlink, "" absent)."""
        listed = self.git("ls-tree", f"refs/heads/{branch}", "--", path, check=False)
        return listed.split(" ", 1)[0] if listed else ""

    def status_log(self) -> list[str]:
        """The status branch's commit subjects, newest first."""
        return self.git("log", "--format=%s", "refs/heads/seshat/status", check=False).splitlines()

    def status_messages(self) -> list[str]:
        """The status branch's whole commit messages, newest first."""
        text = self.git("log", "--format=%B%x1e", "refs/heads/seshat/status", check=False)
        return [m.strip() for m in text.split("\x1e") if m.strip()]

    def phases(self, name: str) -> list[str]:
        """Each phase the status commits gave ``shop/<name>`` (their trailers), newest first."""
        return [
            r.phase
            for m in self.status_messages()
            for r in parse_trailers(m).resources
            if r.resource.endswith(f" shop/{name}")
        ]

    def status(self, name: str) -> dict[str, object]:
        from gitops.repo.yamlfile import read_documents

        text = self.show("seshat/status", f"status/shop/{name}.yaml")
        data = read_documents(text.encode())[0].data
        assert isinstance(data, dict)
        return data


def tables(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    names = [
        r[0]
        for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
    ]
    conn.close()
    return names
