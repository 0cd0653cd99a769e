"""Proof that each harness fixture provides a real, working service.

Each test talks to the service the way Seshat will (psycopg, pymysql, the
registry HTTP API, git, ssh-keygen) and checks behaviour that would break if
the fixture were wrong: wrong port, missing database, auth not enforced, TLS
not verifiable, push not reaching the remote, signatures not checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from urllib.parse import quote

import psycopg
import pymysql
import pytest
from harness.forkserver import ForkServers
from harness.gitrepo import AUTHOR_EMAIL, GitRemote
from harness.mariadb import MariaDBDatabase, MariaDBServer, temporary_mariadb_database
from harness.pids import pid_alive, pid_cmdline
from harness.ports import free_port
from harness.postgres import PostgresDatabase, PostgresServer, temporary_postgres_database
from harness.processes import HarnessError, ManagedProcess, cleanup_guard, require_binary
from harness.registry import AuthRegistryServer, RegistryServer
from harness.sshkeys import SSHKeyFactory, write_allowed_signers

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
NAMESPACE = "seshat-approval"

# --------------------------------------------------------------------------- ports and processes


def test_free_port_is_bindable_and_unique() -> None:
    ports = {free_port() for _ in range(5)}
    assert len(ports) == 5
    assert not ports & {5432, 3306}
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_missing_binary_names_the_debian_package() -> None:
    with pytest.raises(HarnessError, match=r"install the Debian package 'no-such-pkg'"):
        require_binary("seshat-no-such-program", "no-such-pkg")


def test_managed_process_is_stopped_by_pid_when_the_block_fails(tmp_path: Path) -> None:
    sleeper = ManagedProcess(["sleep", "60"], log_path=tmp_path / "sleep.log")
    with pytest.raises(RuntimeError, match="test failure"), cleanup_guard(sleeper.stop):
        assert pid_alive(sleeper.pid)
        raise RuntimeError("test failure")
    assert not pid_alive(sleeper.pid)
    assert sleeper.exit_code() == -signal.SIGTERM


def test_a_started_runner_fork_is_a_pod_process(tmp_path: Path) -> None:
    """What the fake kubelet's forked pods rely on (harness/forkserver.py, ``start``): the
    child leads a session of its own, so killing its group ends it, with the signal as its
    status; its stderr lands in its stdout."""
    runner = str(Path(sys.executable).parent / "seshat-runner")
    env = {"PATH": os.environ["PATH"], "PYTHONHASHSEED": "0"}
    servers = ForkServers()  # of its own: the worker's may have no slot left for a seed
    try:
        fifo = tmp_path / "input.fifo"
        os.mkfifo(fifo)  # nobody writes it: the runner waits in open
        hanging = servers.start(
            "seshat-runner", [runner, "op", "--input", str(fifo)], env=env, cwd=tmp_path,
            session=True, merge_stderr=True,
        )  # fmt: skip
        assert hanging is not None
        assert os.getsid(hanging.pid) == hanging.pid == os.getpgid(hanging.pid)
        with pytest.raises(subprocess.TimeoutExpired):
            hanging.wait(timeout=0.3)
        assert hanging.poll() is None
        os.killpg(hanging.pid, signal.SIGKILL)
        assert hanging.wait(timeout=10) == -signal.SIGKILL == hanging.poll()
        hanging.close()
        assert not pid_alive(hanging.pid)

        failing = servers.start(
            "seshat-runner", [runner, "no-such-command"], env=env, cwd=tmp_path,
            merge_stderr=True,
        )  # fmt: skip
        assert failing is not None
        assert failing.wait(timeout=30) == 2
        assert b"No such command 'no-such-command'" in failing.stdout()
        assert failing.stderr() == b""
        failing.close()
    finally:
        servers.stop()


def test_watchdog_stops_watched_pids_when_pytest_is_killed() -> None:
    """A process that dies by SIGKILL leaves the watchdog to stop what it watched."""
    devnull = subprocess.DEVNULL
    target = subprocess.Popen(["sleep", "61"], stdin=devnull, stdout=devnull, stderr=devnull)
    bystander = subprocess.Popen(["sleep", "62"], stdin=devnull, stdout=devnull, stderr=devnull)
    try:
        script = (
            "import os, signal\n"
            "from harness import watchdog\n"
            f"watchdog.watch({target.pid}, 'sleep 61', signal.SIGTERM)\n"
            # Its command line does not match: a reused PID must be left alone.
            f"watchdog.watch({bystander.pid}, 'not-this-program', signal.SIGTERM)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n"
        )
        victim = subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert victim.returncode == -signal.SIGKILL, victim.stderr
        assert target.wait(timeout=15) == -signal.SIGTERM
        assert bystander.poll() is None
    finally:
        for process in (target, bystander):
            if process.poll() is None:
                process.kill()
            process.wait()


# --------------------------------------------------------------------------- PostgreSQL


def test_postgres_server_is_private_and_answers(postgres_server: PostgresServer) -> None:
    assert postgres_server.port not in (5432, 0)
    assert postgres_server.url("x") == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/x"
    assert str(postgres_server.data_dir) in pid_cmdline(postgres_server.pid)
    with psycopg.connect(postgres_server.url()) as conn:
        row = conn.execute("select version(), inet_server_port(), current_user").fetchone()
    assert row is not None
    version, port, user = row
    assert version.startswith("PostgreSQL")
    assert (port, user) == (postgres_server.port, "postgres")


def test_postgres_database_fixture(postgres_database: PostgresDatabase) -> None:
    with postgres_database.server.connect() as admin:
        found = admin.execute(
            "select pg_get_userbyid(datdba) from pg_database where datname = %s",
            (postgres_database.name,),
        ).fetchall()
    assert found == [(postgres_database.server.app_user,)]
    # The app role owns the database, so it can apply migrations in public.
    with psycopg.connect(postgres_database.url_with_password) as conn:
        conn.execute("create table t (id int primary key)")
        conn.execute("insert into t values (1)")
        row = conn.execute("select current_database(), count(*) from t").fetchone()
    assert row == (postgres_database.name, 1)


def test_postgres_database_is_dropped_afterwards(postgres_server: PostgresServer) -> None:
    def exists(name: str) -> bool:
        with postgres_server.connect() as admin:
            return bool(
                admin.execute("select 1 from pg_database where datname = %s", (name,)).fetchall()
            )

    with temporary_postgres_database(postgres_server) as database:
        assert exists(database.name)
        # A connection left open (as by a failing test) must not block the drop.
        lingering = database.connect_as_app()
    try:
        assert not exists(database.name)
        with pytest.raises(psycopg.OperationalError):
            lingering.execute("select 1")
    finally:
        lingering.close()


def test_postgres_app_role_needs_its_password(
    postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))
    with psycopg.connect(postgres_server.url_with_password()) as conn:
        row = conn.execute("select current_user").fetchone()
    assert row == (postgres_server.app_user,)

    encoded = quote(postgres_server.app_password, safe="")  # the URL holds it percent-encoded
    without = postgres_server.url_with_password().replace(f":{encoded}@", "@")
    assert encoded not in without
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(without).close()
    wrong = postgres_server.url_with_password().replace(encoded, "wrong")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong).close()


# --------------------------------------------------------------------------- MariaDB


def test_mariadb_server_is_private_and_answers(mariadb_server: MariaDBServer) -> None:
    assert mariadb_server.port not in (3306, 0)
    assert mariadb_server.url("x") == f"mysql://root@127.0.0.1:{mariadb_server.port}/x"
    assert pid_alive(mariadb_server.pid)
    with (
        pymysql.connect(
            host="127.0.0.1", port=mariadb_server.port, user="root", password=""
        ) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("SELECT VERSION(), @@port, CURRENT_USER(), @@character_set_server")
        version, port, user, charset = cur.fetchone()
    assert "MariaDB" in version
    assert (port, user, charset) == (mariadb_server.port, "root@127.0.0.1", "utf8mb4")


def test_mariadb_database_fixture(mariadb_database: MariaDBDatabase) -> None:
    with mariadb_database.connect() as admin, admin.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s",
            (mariadb_database.name,),
        )
        assert cur.fetchone() == (1,)
    with mariadb_database.connect_as_app() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO t VALUES (1)")
        cur.execute("SELECT DATABASE(), COUNT(*) FROM t")
        assert cur.fetchone() == (mariadb_database.name, 1)
        # The grant is per database: the app user sees nothing else.
        with pytest.raises(pymysql.err.OperationalError) as denied:
            cur.execute("SELECT COUNT(*) FROM mysql.user")
        assert denied.value.args[0] in (1142, 1044)


def test_mariadb_database_is_dropped_afterwards(mariadb_server: MariaDBServer) -> None:
    with temporary_mariadb_database(mariadb_server) as database:
        name = database.name
        with mariadb_server.connect() as admin, admin.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE %s", (name,))
            assert cur.fetchall() == ((name,),)
    with mariadb_server.connect() as admin, admin.cursor() as cur:
        cur.execute("SHOW DATABASES LIKE %s", (name,))
        assert cur.fetchall() == ()
        cur.execute(f"SHOW GRANTS FOR '{mariadb_server.app_user}'@'127.0.0.1'")
        assert not any(name in grant for (grant,) in cur.fetchall())


def test_mariadb_app_user_needs_its_password(mariadb_server: MariaDBServer) -> None:
    with mariadb_server.connect_as_app() as conn, conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER()")
        assert cur.fetchone() == (f"{mariadb_server.app_user}@127.0.0.1",)
    encoded = quote(mariadb_server.app_password, safe="")
    assert mariadb_server.url_with_password().startswith(
        f"mysql://{mariadb_server.app_user}:{encoded}@127.0.0.1:"
    )
    for password in ("", "wrong"):
        with pytest.raises(pymysql.err.OperationalError) as denied:
            mariadb_server.connect(user=mariadb_server.app_user, password=password).close()
        assert denied.value.args[0] == 1045  # access denied


# --------------------------------------------------------------------------- OCI registry


def _push_blob(registry: RegistryServer, repository: str, blob: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    started = registry.request("POST", f"/v2/{repository}/blobs/uploads/", data=b"")
    assert started.status == 202, started.body
    location = urllib.parse.urljoin(registry.base_url, started.headers["Location"])
    separator = "&" if "?" in location else "?"
    finished = registry.request(
        "PUT",
        f"{location}{separator}digest={urllib.parse.quote(digest)}",
        data=blob,
        headers={"Content-Type": "application/octet-stream"},
    )
    assert finished.status == 201, finished.body
    assert finished.headers["Docker-Content-Digest"] == digest
    return digest


def _manifest_round_trip(registry: RegistryServer, repository: str) -> None:
    config = b'{"seshat": "test config"}'
    layer = os.urandom(1024)
    config_digest = _push_blob(registry, repository, config)
    layer_digest = _push_blob(registry, repository, layer)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest,
                    "size": len(layer),
                }
            ],
        },
        indent=2,
    ).encode()
    manifest_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()

    put = registry.request(
        "PUT",
        f"/v2/{repository}/manifests/v1",
        data=manifest,
        headers={"Content-Type": OCI_MANIFEST},
    )
    assert put.status == 201, put.body
    assert put.headers["Docker-Content-Digest"] == manifest_digest

    got = registry.request(
        "GET", f"/v2/{repository}/manifests/v1", headers={"Accept": OCI_MANIFEST}
    )
    assert got.status == 200
    assert got.body == manifest
    assert got.headers["Docker-Content-Digest"] == manifest_digest
    assert got.headers["Content-Type"] == OCI_MANIFEST

    blob = registry.request("GET", f"/v2/{repository}/blobs/{layer_digest}")
    assert (blob.status, blob.body) == (200, layer)
    missing = registry.request("GET", f"/v2/{repository}/manifests/nope")
    assert missing.status == 404


def test_registry_answers_v2(oci_registry: RegistryServer) -> None:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
        f"http://127.0.0.1:{oci_registry.port}/v2/", timeout=5
    ) as resp:
        assert resp.status == 200
        assert resp.headers["Docker-Distribution-Api-Version"] == "registry/2.0"
    assert oci_registry.address == f"127.0.0.1:{oci_registry.port}"


def test_registry_blob_and_manifest_round_trip(oci_registry: RegistryServer) -> None:
    _manifest_round_trip(oci_registry, "seshat/roundtrip")
    deleted = oci_registry.request(
        "DELETE",
        "/v2/seshat/roundtrip/manifests/"
        + oci_registry.request(
            "HEAD", "/v2/seshat/roundtrip/manifests/v1", headers={"Accept": OCI_MANIFEST}
        ).headers["Docker-Content-Digest"],
    )
    assert deleted.status == 202  # storage.delete.enabled is on


def test_auth_registry_requires_credentials_over_verified_tls(
    oci_registry_auth: AuthRegistryServer,
) -> None:
    url = f"https://127.0.0.1:{oci_registry_auth.port}/v2/"
    verified = ssl.create_default_context(cafile=str(oci_registry_auth.ca_path))
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=verified)
    )

    with pytest.raises(urllib.error.HTTPError) as unauthenticated:
        opener.open(url, timeout=5)
    with unauthenticated.value as err:
        assert err.code == 401
        assert 'realm="seshat-test"' in err.headers["WWW-Authenticate"]

    wrong = oci_registry_auth.request(
        "GET", "/v2/", authenticate=False, headers={"Authorization": "Basic c2VzaGF0Ondyb25n"}
    )
    assert wrong.status == 401

    request = urllib.request.Request(url, headers=oci_registry_auth.auth_headers())
    with opener.open(request, timeout=5) as resp:
        assert resp.status == 200

    # Without the CA the self-signed certificate must not verify.
    untrusting = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        urllib.request.HTTPSHandler(context=ssl.create_default_context()),
    )
    with pytest.raises(urllib.error.URLError) as unverified:
        untrusting.open(request, timeout=5)
    assert isinstance(unverified.value.reason, ssl.SSLCertVerificationError)

    _manifest_round_trip(oci_registry_auth, "seshat/private")


# --------------------------------------------------------------------------- Git


def test_git_commit_push_and_fresh_clone(git_remote: GitRemote, tmp_path: Path) -> None:
    git_remote.write_file("migrations/0001_init.sql", "create table t (id int);\n")
    sha = git_remote.commit_all("Add first migration")
    assert git_remote.remote_head() == sha
    assert git_remote.work.head.commit.author.email == AUTHOR_EMAIL

    with git_remote.fresh_clone(tmp_path / "fresh") as fresh:
        assert fresh.head.commit.hexsha == sha
        assert fresh.active_branch.name == "main"
        assert fresh.working_tree_dir is not None
        cloned = Path(fresh.working_tree_dir) / "migrations" / "0001_init.sql"
        assert cloned.read_text() == "create table t (id int);\n"

    git_remote.write_file("migrations/0002_more.sql", "alter table t add column x int;\n")
    second = git_remote.commit_all("Add second migration")
    assert second != sha
    assert git_remote.remote_head() == second


# --------------------------------------------------------------------------- SSH signing


def _sign(key: Path, data: bytes, namespace: str = NAMESPACE) -> bytes:
    completed = subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", namespace],
        input=data,
        capture_output=True,
        check=True,
    )
    assert completed.stdout.startswith(b"-----BEGIN SSH SIGNATURE-----")
    return completed.stdout


def _verify(allowed: Path, email: str, signature: Path, data: bytes) -> int:
    return subprocess.run(
        [
            *("ssh-keygen", "-Y", "verify", "-f", str(allowed)),
            *("-I", email, "-n", NAMESPACE, "-s", str(signature)),
        ],
        input=data,
        capture_output=True,
        check=False,
    ).returncode


def test_ssh_signatures_verify_only_for_the_right_key_and_data(
    ssh_key_factory: SSHKeyFactory, tmp_path: Path
) -> None:
    alice = ssh_key_factory("alice@example.com")
    mallory = ssh_key_factory("mallory@example.com")
    assert alice.key_type == "ssh-ed25519"
    assert alice.key_base64 != mallory.key_base64
    assert alice.public_key.read_text().split()[:2] == alice.public_key_text.split()
    assert alice.allowed_signers_line() == (
        f'alice@example.com namespaces="seshat-approval" ssh-ed25519 {alice.key_base64}'
    )
    allowed = write_allowed_signers(tmp_path / "allowed_signers", [alice])

    document = b"approve: migrations/0001_init.sql\n"
    signature = tmp_path / "approval.sig"
    signature.write_bytes(_sign(alice.private_key, document))
    assert _verify(allowed, alice.email, signature, document) == 0
    assert _verify(allowed, alice.email, signature, document + b"tampered\n") != 0

    forged = tmp_path / "forged.sig"
    forged.write_bytes(_sign(mallory.private_key, document))
    assert _verify(allowed, alice.email, forged, document) != 0

    other_namespace = tmp_path / "other.sig"
    other_namespace.write_bytes(_sign(alice.private_key, document, namespace="git"))
    assert _verify(allowed, alice.email, other_namespace, document) != 0
