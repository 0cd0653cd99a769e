"""``seshat demo``: the whole loop, offline, in a temporary directory, in under a minute.

It builds a Git repository (with a bare remote) from ``examples/repo``'s shop catalogue,
pushes signed schema artifacts into a local OCI layout, generates a CI signing key and two
approvers' SSH keys, points the declaration at an SQLite database, and runs the real
reconciler and runner:

1. plan -> AwaitingApproval (a status commit with the plan);
2. ``seshat approve`` -> apply -> InSync;
3. a new artifact that drops a column -> Blocked (DestructiveChangesDisallowed);
4. ``allowDestructive: true`` -> AwaitingApproval; two approvals (a destructive plan needs
   two distinct approvers) -> InSync;
5. beside it, a ``DatabaseMigration`` (the shop's ledger, a second SQLite file) with two
   migration files -> AwaitingApproval (the plan names the files) -> approved -> InSync;
6. an artifact that edits an applied file -> Blocked (ChecksumModified); one that keeps the
   applied files and adds a third -> AwaitingApproval -> approved -> InSync.

``seshat demo --fleet`` shows a fleet instead (examples/repo's ``shop/tenants``: three
tenants, one database each, the canary first): one distinct plan for the three, one
approval, the canary applies and the rollout pauses, a resume commit, the other two apply.

Nothing outside the temporary directory is touched; ``--keep`` leaves it for inspection.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import git
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from gitops.approvals.write import approve
from gitops.reconcile.passes import run_pass
from gitops.repo.loader import load_repository
from gitops.resources.approvals import ResourceRef
from gitops.resources.status import FleetStatus
from gitops.writeback.batch import change_lines
from runner.artifacts.format import package_folder
from runner.artifacts.layout import LayoutStore
from runner.artifacts.push import push
from runner.artifacts.reference import parse_reference
from runner.artifacts.signing import sign

__all__ = ["run_demo"]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "repo"
_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"}

V1 = """\
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    legacy_code TEXT
);
CREATE TABLE orders_archive (id INTEGER PRIMARY KEY, payload TEXT NOT NULL);
CREATE INDEX products_name ON products (name);
"""
V2 = V1.replace("    name TEXT NOT NULL,\n    legacy_code TEXT\n", "    name TEXT NOT NULL\n")

DECLARATION = """\
# The shop's {name} (from examples/repo), {about}.
apiVersion: seshat.dev/v1alpha1
kind: {kind}
metadata:
  name: {name}
  namespace: shop
spec:
  target:
    engine: sqlite
    url: {{fromEnv: {url}}}
    coordinationKey: shop-{name}
  artifact:
    ref: oci-layout://{layout}:{tag}
    verification: {{policy: signed-by-ci}}
  policy:
    apply: OnApproval
{policy}"""
"""The shop's two databases (from examples/repo) are declared alike, pointed at the demo's
OCI layout and SQLite files; only the catalogue's policy says more (:data:`SCHEMA_POLICY`)."""
SCHEMA_POLICY = "    allowDestructive: {destructive}\n    protectedTables: [orders_archive]\n"

LEDGER_V1 = {
    "1_accounts.sql": "CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n",
    "2_entries.sql": (
        "CREATE TABLE entries (\n    id INTEGER PRIMARY KEY,\n"
        "    account_id INTEGER NOT NULL REFERENCES accounts (id),\n"
        "    amount_cents INTEGER NOT NULL\n);\n"
    ),
}
LEDGER_EDITED = {**LEDGER_V1, "2_entries.sql": LEDGER_V1["2_entries.sql"] + "-- edited later\n"}
LEDGER_V2 = {
    **LEDGER_V1,
    "3_entries_index.sql": "CREATE INDEX entries_account ON entries (account_id);\n",
}

TENANTS = ("acme", "globex", "initech")  # examples/repo/fleets/tenants.yaml
TENANT_V1 = "CREATE TABLE accounts (\n    id INTEGER PRIMARY KEY,\n    name TEXT NOT NULL\n);\n"
_EXAMPLE_TENANT_REF = "oci://localhost:5000/acme/tenant-schema:v3"

_URLS = ("SHOP_CATALOGUE_URL", "SHOP_LEDGER_URL", *(f"TENANT_{t}_URL" for t in TENANTS))


class _Demo:
    def __init__(self, root: Path, say: Callable[[str], None]) -> None:
        self.root, self.say = root, say
        self.started = time.monotonic()
        self.remote = root / "remote.git"
        self.work = root / "repo"
        self.layout = root / "oci"
        self.database = root / "catalogue.db"
        self.ledger = root / "ledger.db"
        self.controller = root / "controller"
        self.fleets: dict[str, FleetStatus] = {}  # each fleet's status after the last pass

    def step(self, text: str) -> None:
        self.say(f"\n[{time.monotonic() - self.started:5.1f}s] {text}")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=self.work,
            env={**os.environ, **_ENV},
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def setup(self) -> None:
        self.step("a Git repository with a bare remote, from examples/repo")
        subprocess.run(
            ["git", "init", "-q", "--bare", "-b", "main", str(self.remote)],
            check=True,
            env={**os.environ, **_ENV},
        )
        git.Repo.clone_from(self.remote.as_uri(), self.work, env=_ENV).close()
        self.git("symbolic-ref", "HEAD", "refs/heads/main")
        self.git("config", "user.name", "Demo Person")
        self.git("config", "user.email", "demo@example.com")
        self.git("config", "commit.gpgsign", "false")
        for name in ("seshat.yaml", "policies/verification.yaml", "policies/approval.yaml"):
            target = self.work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(EXAMPLES / name, target)
        # Fresh keys: the CI signing key and two approvers' SSH keys.
        key = ec.generate_private_key(ec.SECP256R1())
        self.ci_key = key
        (self.work / "policies/keys").mkdir(parents=True)
        (self.work / "policies/keys/artifact-signing.pub").write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self.approvers: dict[str, Path] = {}
        lines = []
        for person in ("alice", "bob"):
            private = self.root / "keys" / person
            private.parent.mkdir(exist_ok=True)
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", person, "-f", str(private)],
                check=True,
            )
            public = private.with_suffix(".pub").read_text().split()
            lines.append(
                f'{person}@example.com namespaces="seshat-approval" {public[0]} {public[1]}'
            )
            self.approvers[person] = private
        (self.work / "policies/allowed_signers").write_text("\n".join(lines) + "\n")
        sqlite3.connect(self.database).close()
        sqlite3.connect(self.ledger).close()
        os.environ["SHOP_CATALOGUE_URL"] = f"sqlite:///{self.database}"
        os.environ["SHOP_LEDGER_URL"] = f"sqlite:///{self.ledger}"
        self.say(f"  repository {self.work}, database {self.database}")

    def publish(self, tag: str, files: dict[str, str], kind: str = "schema") -> None:
        folder = self.root / "artifacts" / tag
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text)
        reference = parse_reference(f"oci-layout://{self.layout}:{tag}")
        store = LayoutStore(str(self.layout))
        packaged = package_folder(
            folder,
            kind,
            {
                "org.opencontainers.image.source": "https://example.com/shop",
                "org.opencontainers.image.created": "2026-01-01T00:00:00Z",
            },
        )
        digest = push(store, reference, packaged)
        sign(store, reference, digest, self.ci_key)
        self.say(f"  pushed and signed oci-layout://{self.layout.name}:{tag} ({digest[:19]}...)")

    def declare(self, tag: str, destructive: bool, message: str) -> None:
        policy = SCHEMA_POLICY.format(destructive=str(destructive).lower())
        about = "pointed at the demo's OCI layout and SQLite file"
        self._declare("schema.yaml", "DatabaseSchema", "catalogue", about, tag, message, policy)

    def declare_ledger(self, tag: str, message: str) -> None:
        about = "evolved by versioned migration files"
        self._declare("migrations.yaml", "DatabaseMigration", "ledger", about, tag, message)

    def _declare(
        self, file: str, kind: str, name: str, about: str, tag: str, message: str, policy: str = ""
    ) -> None:
        """Write ``databases/shop/<file>``, the resource of the shop's ``name`` database, at
        artifact ``tag`` (its URL in ``SHOP_<NAME>_URL``), and commit it."""
        path = self.work / "databases" / "shop" / file
        path.parent.mkdir(parents=True, exist_ok=True)
        text = DECLARATION.format(
            name=name,
            about=about,
            kind=kind,
            url=f"SHOP_{name.upper()}_URL",
            layout=self.layout,
            tag=tag,
            policy=policy,
        )
        path.write_text(text)
        self.commit(message)

    def commit(self, message: str) -> None:
        self.git("add", "--all")
        self.git("commit", "-q", "-m", message)
        self.git("push", "-q", "origin", "HEAD:refs/heads/main")
        self.say(f"  committed: {message}")

    def reconcile(self, name: str = "catalogue") -> str:
        """One pass; prints every resource's verdict and returns ``shop/<name>``'s phase."""
        return self.reconcile_all()[f"shop/{name}"]

    def reconcile_all(self) -> dict[str, str]:
        """One pass; prints every resource's verdict (and each fleet's) and returns each
        resource's phase."""
        report = run_pass(self.remote.as_uri(), self.controller)
        for key in sorted(report.phases):
            verdict = f"{report.phases[key]} ({report.reasons[key]})"
            self.say(f"  seshat reconcile --once: {key} is {verdict}")
        for key, fleet in sorted(report.fleets.items()):
            self.say(f"  fleet {key}: {fleet.phase}: {fleet.message}")
            self.fleets[key] = fleet
        return report.phases

    def status_file(self, path: str) -> str:
        """A file on the remote's status branch."""
        status = git.Repo(self.remote)
        try:
            return str(status.git.show(f"seshat/status:{path}"))
        finally:
            status.close()

    def plan_id(self, name: str = "catalogue") -> str:
        text = self.status_file(f"status/shop/{name}.yaml")
        line = next(x for x in text.splitlines() if x.strip().startswith("id: sha256:"))
        return line.split(":", 1)[1].strip()

    def show_plan(self, plan: str) -> None:
        sql = self.status_file(f"plans/shop/catalogue/{plan[7:]}.sql")
        self.say("  the plan (plans/shop/catalogue/<id>.sql on the status branch):")
        for line in sql.splitlines():
            self.say(f"    {line}")

    def show_migration_plan(self, plan: str) -> None:
        text = self.status_file(f"plans/shop/ledger/{plan[7:]}.json")
        files = [f["name"] for f in json.loads(text)["files"]]
        self.say(f"  the plan (plans/shop/ledger/<id>.json, no SQL): apply {', '.join(files)}")

    def approve(self, person: str, plan: str, name: str = "catalogue") -> None:
        kind = "DatabaseMigration" if name == "ledger" else "DatabaseSchema"
        ref = self._ref(kind, name)
        approve(self.work, ref, plan, self.approvers[person], comment=f"approved by {person}")
        self.say(
            f"  {person}: seshat approve shop/{name} --plan {plan[:19]}... --key keys/{person}"
        )

    def _ref(self, kind: str, name: str) -> ResourceRef:
        """What an approval of the shop's ``name`` (a ``kind``) names, its uid included."""
        loaded = load_repository(self.work).find(kind, "shop", name)
        assert loaded is not None
        uid = str(loaded.resource.metadata.uid)
        return ResourceRef(kind=kind, namespace="shop", name=name, uid=uid)

    def approve_plan(
        self,
        message: str,
        name: str = "catalogue",
        people: tuple[str, ...] = ("alice",),
        step: str = "",
    ) -> None:
        """How each round that yields a plan ends: ``shop/<name>`` awaits approval, the plan
        is shown, signed by ``people`` and committed, and the next pass applies it."""
        assert self.reconcile(name) == "AwaitingApproval"
        plan = self.plan_id(name)
        if name == "ledger":
            self.show_migration_plan(plan)
        else:
            self.show_plan(plan)
        if step:
            self.step(step)
        for person in people:
            self.approve(person, plan, name)
        self.commit(message)
        assert self.reconcile(name) == "InSync"

    def run(self) -> None:
        self.setup()
        self.step("version 1 of the catalogue schema")
        self.publish("v1", {"catalogue.sql": V1})
        self.declare("v1", False, "Declare the shop catalogue")
        self.approve_plan("Approve the catalogue plan", step="approve the exact plan")
        self.say(f"  tables now: {', '.join(self._tables())}")
        self.step("version 2 drops products.legacy_code: destructive")
        self.publish("v2", {"catalogue.sql": V2})
        self.declare("v2", False, "Catalogue v2")
        assert self.reconcile() == "Blocked"
        self.step("allow destructive changes for this resource")
        self.declare("v2", True, "Allow dropping legacy_code")
        self.approve_plan(
            "Approve dropping legacy_code",
            people=("alice", "bob"),
            step="a destructive plan needs two distinct approvers",
        )
        self.migrations()
        self.step("the status branch's history (git log seshat/status)")
        status = git.Repo(self.remote)
        for commit in status.iter_commits("seshat/status"):
            raw = commit.message
            text = raw.decode() if isinstance(raw, bytes) else raw
            lines = change_lines(text)
            self.say(f"  {commit.hexsha[:10]} {text.splitlines()[0]}")
            for line in lines if len(lines) > 1 else []:
                self.say(f"             {line}")
        status.close()
        self.say(f"\ndone in {time.monotonic() - self.started:.1f}s")

    def migrations(self) -> None:
        self.step("beside it, the ledger: a DatabaseMigration with two migration files")
        self.publish("ledger-v1", LEDGER_V1, "migrations")
        self.declare_ledger("ledger-v1", "Declare the ledger's migrations")
        self.approve_plan("Approve the ledger's migrations", "ledger")
        self.say(f"  ledger tables now: {', '.join(self._tables(self.ledger))}")
        self.step("an artifact that edits an applied migration file is refused")
        self.publish("ledger-edited", LEDGER_EDITED, "migrations")
        self.declare_ledger("ledger-edited", "Ledger: edit 2_entries.sql")
        assert self.reconcile("ledger") == "Blocked"
        self.step("keep the applied files as they were and add a third")
        self.publish("ledger-v2", LEDGER_V2, "migrations")
        self.declare_ledger("ledger-v2", "Ledger: index entries by account")
        self.approve_plan("Approve the ledger's index", "ledger")

    def fleet(self) -> None:
        """``seshat demo --fleet``: examples/repo's fleet of three tenants, rolled out in
        two waves with one approval."""
        self.setup()
        self.step("a fleet: one declaration for three tenants' databases (examples/repo)")
        self.publish("tenants-v1", {"tenants.sql": TENANT_V1})
        for tenant in TENANTS:
            database = self.root / f"tenant-{tenant}.db"
            sqlite3.connect(database).close()
            os.environ[f"TENANT_{tenant}_URL"] = f"sqlite:///{database}"
        (self.work / "fleets").mkdir()
        shutil.copy(EXAMPLES / "fleets/tenants.yaml", self.work / "fleets/tenants.yaml")
        self.declaration = (EXAMPLES / "databases/tenants/fleet.yaml").read_text()
        self.declaration = self.declaration.replace(
            _EXAMPLE_TENANT_REF, f"oci-layout://{self.layout}:tenants-v1"
        )
        self._declare_fleet("Declare the tenants fleet: acme is the canary")
        phases = self.reconcile_all()
        assert {phases[f"shop/tenants/{t}"] for t in TENANTS} == {"AwaitingApproval"}
        [plan] = self.fleets["shop/tenants"].plans
        self.say(
            f"  one distinct plan for {plan.members} members ({', '.join(plan.names)}): "
            f"fleet plan {plan.id[:19]}..."
        )
        self.step("one approval of the fleet plan covers every member whose plan is the same")
        ref = self._ref("DatabaseFleet", "tenants")
        approve(self.work, ref, plan.id, self.approvers["alice"], comment="approved by alice")
        self.say(f"  alice: seshat approve shop/tenants --plan {plan.id[:19]}... --key keys/alice")
        self.commit("Approve the tenants' plan")
        self.step("wave 1: the canary applies; the rollout pauses until someone resumes it")
        phases = self.reconcile_all()
        assert phases["shop/tenants/acme"] == "InSync", phases
        assert phases["shop/tenants/globex"] == "Pending", phases
        self.say(f"  tables of acme: {', '.join(self._tables(self.root / 'tenant-acme.db'))}")
        token = self.fleets["shop/tenants"].resume
        assert token is not None
        self.step("wave 2: commit the token the fleet status names; the others apply")
        self.declaration = self.declaration.replace(
            "    onFailure: Halt\n", f"    onFailure: Halt\n    resume: {token}\n"
        )
        self._declare_fleet(f"Resume the tenants rollout ({token})")
        phases = self.reconcile_all()
        assert {phases[f"shop/tenants/{t}"] for t in TENANTS} == {"InSync"}, phases
        for tenant in TENANTS:
            tables = self._tables(self.root / f"tenant-{tenant}.db")
            self.say(f"  tables of {tenant}: {', '.join(tables)}")
        self.say(f"\ndone in {time.monotonic() - self.started:.1f}s")

    def _declare_fleet(self, message: str) -> None:
        path = self.work / "databases/tenants/fleet.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.declaration)
        self.commit(message)

    def _tables(self, database: Path | None = None) -> list[str]:
        conn = sqlite3.connect(database or self.database)
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name"
            )
        ]
        conn.close()
        return names


def run_demo(say: Callable[[str], None], keep: bool = False, fleet: bool = False) -> Path:
    """Run the demo (``fleet``: the fleet's); the temporary directory is removed unless
    ``keep``."""
    root = Path(tempfile.mkdtemp(prefix="seshat-demo-"))
    previous = {name: os.environ.get(name) for name in _URLS}
    try:
        demo = _Demo(root, say)
        if fleet:
            demo.fleet()
        else:
            demo.run()
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return root
