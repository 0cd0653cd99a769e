"""Reconciler scenarios from the issue, each asserting the database, the status and Git."""

from __future__ import annotations

import secrets
import socket
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.postgres import PostgresDatabase
from harness.reconcile_world import World, schema_yaml, tables
from harness.registry import RegistryServer
from harness.sigstore_root import PrivateSigstore
from harness.sshkeys import SSHKeyFactory

from runner.protocol.messages import RegistrySettings


def _plan_id(world: World, name: str) -> str:
    return str(world.status(name)["status"]["plan"]["id"])  # type: ignore[index]


def test_an_approval_by_a_signer_the_policy_does_not_allow(
    world: World, ssh_key_factory: SSHKeyFactory
) -> None:
    layout = world.artifact("a", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    mallory = ssh_key_factory("mallory@example.com")
    done = world.seshat(
        "approve",
        "shop/orders",
        "--plan",
        _plan_id(world, "orders"),
        "--repo",
        world.remote.work_dir,
        "--key",
        mallory.private_key,
    )
    assert done.returncode == 0
    world.remote.commit_all("an approval by someone not allowed")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    assert tables(database) == []


def test_drift_by_hand_makes_a_new_plan_and_the_old_approval_authorizes_nothing(
    world: World,
) -> None:
    layout = world.artifact("d", "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT);\n")
    database = world.database("orders")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    world.remote.commit_all("declare")
    world.reconcile()
    old_plan = _plan_id(world, "orders")
    assert (
        world.seshat(
            "approve",
            "shop/orders",
            "--plan",
            old_plan,
            "--repo",
            world.remote.work_dir,
            "--key",
            world.alice.private_key,
        ).returncode
        == 0
    )
    world.remote.commit_all("approve")
    with sqlite3.connect(database) as conn:  # someone changes the database by hand
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    conn.close()
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    new_plan = _plan_id(world, "orders")
    assert new_plan != old_plan
    with sqlite3.connect(database) as conn:  # the stale approval applied nothing
        columns = [row[1] for row in conn.execute("PRAGMA table_info(t)")]
    conn.close()
    assert columns == ["id"]


def test_protected_table_and_shared_realm(world: World) -> None:
    layout = world.artifact("p", "CREATE TABLE keep (id INTEGER PRIMARY KEY, note TEXT);\n")
    world.database("guarded", "CREATE TABLE keep (id INTEGER PRIMARY KEY);")
    world.database("shared")
    world.remote.write_file(
        "databases/g.yaml",
        schema_yaml("guarded", layout, apply="Always", extra=", protectedTables: [keep]"),
    )
    world.remote.write_file(
        "databases/s.yaml",
        schema_yaml("one", layout, apply="Always", key="shared", shared=True)
        + "---\n"
        + schema_yaml("two", layout, apply="Never", key="shared", shared=True),
    )
    world.remote.commit_all("declare")
    verdicts = world.reconcile()
    assert verdicts["shop/guarded"] == "Blocked/ProtectedTable"
    assert verdicts["shop/one"] == "InSync/InSync"  # sharedRealm: no RealmConflict
    assert tables(world.tmp / "guarded.db") == ["keep"]


@contextmanager
def _relay(port: int, target: tuple[str, int]) -> Iterator[None]:
    """A TCP relay on 127.0.0.1:port to the real registry: the registry 'comes back'."""
    server = socket.create_server(("127.0.0.1", port))
    stop = threading.Event()

    def pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            b.close()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection(target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        server.close()


def test_registry_down_is_failed_then_recovers(world: World, oci_registry: RegistryServer) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"
    folder = world.tmp / "reg-src"
    folder.mkdir()
    (folder / "schema.sql").write_text("CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    real = f"oci://{oci_registry.address}/shop/down:v1"
    plain = ("--plain-http", oci_registry.address)
    assert (
        world.seshat("artifact", *plain, "push", folder, real, "--type", "schema").returncode == 0
    )
    assert world.seshat("artifact", *plain, "sign", real, "--key", world.ci_key).returncode == 0
    database = world.database("orders")
    world.remote.write_file(
        "databases/o.yaml",
        schema_yaml("orders", world.tmp, apply="Always", ref=f"oci://{address}/shop/down:v1"),
    )
    world.remote.commit_all("declare")
    options = RegistrySettings(plain_http=[address], timeout=5)
    assert world.reconcile(options) == {"shop/orders": "Failed/OperationFailed"}
    ready = world.status("orders")["status"]["conditions"][0]  # type: ignore[index]
    assert "registry_unavailable" in ready["message"]
    with _relay(port, (oci_registry.host, oci_registry.port)):
        assert world.reconcile(options) == {"shop/orders": "InSync/InSync"}
    assert tables(database) == ["t"]


def test_the_database_password_never_reaches_git_or_output(
    world: World, postgres_database: PostgresDatabase
) -> None:
    layout = world.artifact("pg", "CREATE TABLE accounts (id bigint PRIMARY KEY);\n")
    world.monkeypatch.setenv("ORDERS_URL", postgres_database.url_with_password)
    password = postgres_database.url_with_password.split(":")[2].split("@")[0]
    assert password and password not in postgres_database.url
    # The app role may not create databases: planning needs none on the target (the
    # desired schema is loaded in the runner's private sandbox server).
    world.remote.write_file(
        "databases/pg.yaml", schema_yaml("orders", layout, apply="Always", engine="postgresql")
    )
    world.remote.commit_all("declare")
    done = subprocess.run(
        [
            str(Path(__import__("sys").executable).parent / "seshat"),
            "reconcile",
            "--once",
            "-v",
            "--repo",
            world.remote.remote_url,
            "--work",
            str(world.work),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "shop/orders: InSync" in done.stdout
    history = world.git("log", "-p", "--all")
    for text in (done.stdout, done.stderr, history):
        assert password not in text
    for path in world.work.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".yaml", ".sql", ".md"):
            assert password not in path.read_text(errors="replace"), path


def test_no_piece_of_a_password_with_a_raw_at_sign_reaches_git(
    world: World, postgres_database: PostgresDatabase
) -> None:
    """The hardening issue's finding 5: libpq reads ``u:S3c@ret@host`` with the user
    information ending at the first ``@``, and its error named ``ret@host``; the fragment
    landed in the status file, the commit and the review text."""
    layout = world.artifact("pg", "CREATE TABLE accounts (id bigint PRIMARY KEY);\n")
    server = postgres_database.server
    first, second = "Lq" + secrets.token_hex(6), secrets.token_hex(6) + "Wv"
    url = (
        f"postgresql://{server.app_user}:{first}@{second}@{server.host}:{server.port}/"
        f"{postgres_database.name}"
    )
    world.monkeypatch.setenv("ORDERS_URL", url)
    world.remote.write_file(
        "databases/pg.yaml", schema_yaml("orders", layout, apply="Always", engine="postgresql")
    )
    world.remote.commit_all("declare")
    assert world.reconcile() == {"shop/orders": "Failed/OperationFailed"}
    ready = world.status("orders")["status"]["conditions"][0]  # type: ignore[index]
    assert "password authentication failed" in ready["message"]
    history = world.git("log", "-p", "--all")
    for piece in (first, second):
        assert piece not in history
        for path in world.work.rglob("*"):
            if path.is_file():
                assert piece not in path.read_text(errors="replace"), path
    # A URL that cannot be read is a configuration fault: Blocked until someone fixes it.
    world.monkeypatch.setenv("ORDERS_URL", f"postgresql://u:{first}@[::1/db")
    assert world.reconcile() == {"shop/orders": "Blocked/ConfigurationError"}
    assert first not in world.git("log", "-p", "--all")


def test_a_keyless_sigstore_approval_is_accepted_by_the_reconciler(
    world: World, sigstore_instance: PrivateSigstore
) -> None:
    """The approval's bundle is minted by a private Sigstore deployment built in the test."""
    layout = world.artifact("k", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    database = world.database("orders")
    world.remote.write_file("databases/o.yaml", schema_yaml("orders", layout))
    sigstore_instance.write_trusted_root(world.remote.work_dir / "policies/trusted_root.json")
    policies = (world.remote.work_dir / "policies/shop.yaml").read_text()
    keyless_only = policies.replace(
        "    - approvers: {allowedSigners: policies/allowed_signers}",
        "    - approvers:\n        keyless:\n          - {issuer: 'https://issuer.test', "
        "subject: carol@example.com, trustedRoot: policies/trusted_root.json}",
    )
    assert keyless_only != policies
    world.remote.write_file("policies/shop.yaml", keyless_only)
    world.remote.commit_all("declare, keyless approvers only")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    plan = _plan_id(world, "orders")
    # The file is written (and SSH-signed by alice, whom this policy does not list) ...
    assert (
        world.seshat(
            "approve",
            "shop/orders",
            "--plan",
            plan,
            "--repo",
            world.remote.work_dir,
            "--key",
            world.alice.private_key,
        ).returncode
        == 0
    )
    world.remote.commit_all("alice's approval: not enough")
    assert world.reconcile() == {"shop/orders": "AwaitingApproval/AwaitingApproval"}
    # ... and carol signs its bytes keylessly.
    approval = world.remote.work_dir / f"approvals/shop/orders/{plan.removeprefix('sha256:')}.yaml"
    bundle = world.tmp / "carol.sigstore.json"
    bundle.write_bytes(
        sigstore_instance.mint_bundle(
            approval.read_bytes(), "carol@example.com", "https://issuer.test"
        )
    )
    added = world.seshat(
        "approve",
        "shop/orders",
        "--plan",
        plan,
        "--repo",
        world.remote.work_dir,
        "--sigstore-bundle",
        bundle,
    )
    assert added.returncode == 0, added.stderr
    world.remote.commit_all("carol's keyless approval")
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    assert tables(database) == ["t"]


def test_policy_schemas_leave_another_tools_schema_alone(
    world: World, postgres_database: PostgresDatabase
) -> None:
    """``policy.schemas`` reaches the runner: the database's ``audit`` schema, which the
    desired schema does not mention, is neither planned nor dropped, with ``Always``."""
    with postgres_database.connect_as_app() as conn:
        conn.execute("CREATE SCHEMA app; CREATE SCHEMA audit; CREATE TABLE audit.events (id int)")
    layout = world.artifact("sc", "CREATE TABLE app.accounts (id bigint PRIMARY KEY);\n")
    world.monkeypatch.setenv("ORDERS_URL", postgres_database.url_with_password)
    world.remote.write_file(
        "databases/pg.yaml",
        schema_yaml(
            "orders", layout, apply="Always", engine="postgresql", extra=", schemas: [app]"
        ),
    )
    world.remote.commit_all("declare")
    assert world.reconcile() == {"shop/orders": "InSync/InSync"}
    with postgres_database.connect_as_app() as conn:
        found = conn.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables"
            " WHERE table_schema IN ('app', 'audit') ORDER BY 1"
        ).fetchall()
    assert found == [("app.accounts",), ("audit.events",)]


def test_policy_schemas_on_a_target_without_schemas_is_a_clear_failure(world: World) -> None:
    layout = world.artifact("sq", "CREATE TABLE t (id INTEGER PRIMARY KEY);\n")
    world.database("orders")
    world.remote.write_file(
        "databases/o.yaml", schema_yaml("orders", layout, extra=", excludeSchemas: [audit]")
    )
    world.remote.commit_all("declare")
    verdict = world.reconcile()["shop/orders"]
    assert verdict.startswith("Failed/")
    message = str(world.status("orders")["status"])
    assert "--exclude-schema" in message and "PostgreSQL" in message
