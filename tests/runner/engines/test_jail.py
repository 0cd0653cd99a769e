"""The OS jail around a private sandbox server, tested alone: a superuser inside reaches nothing.

Each test takes the worst case on purpose: it connects to the jailed PostgreSQL as its
administrator (a superuser) or to the jailed MariaDB as ``root``, then tries, from inside
the server, what desired SQL could try once it became superuser: reach the target's port,
read a file the test put in the runner's temporary folder, read the runner's environment,
write outside the jail's data folder, start many processes, use much memory, and outlive
the runner's SIGKILL. Each must fail; the host is checked from outside afterwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
from harness.mariadb import MariaDBServer
from harness.postgres import PostgresServer

from runner.engines import jail
from runner.engines.mysql import sandbox as mysql_sandbox
from runner.engines.postgresql import sandbox as pg_sandbox
from runner.engines.servers import cache_root

CANARY = "SESHAT_JAIL_CANARY"


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file in the runner's temporary folder, readable by anyone on the host."""
    folder = tmp_path_factory.mktemp("runner-temp")
    folder.chmod(0o755)
    path = folder / "runner-secret.txt"
    path.write_text(f"secret-{secrets.token_hex(8)}\n")
    path.chmod(0o644)
    return path


@pytest.fixture(scope="module")
def pg_admin(secret_file: Path) -> Iterator[psycopg.Connection[Any]]:
    """A superuser session on a jailed private PostgreSQL started while the runner's
    environment held a canary."""
    facts = pg_sandbox.ServerFacts(150000, "UTF8", "C", "C", None, ("public",))
    os.environ[CANARY] = secret_file.read_text().strip()
    try:
        with pg_sandbox.private_sandbox(facts) as sandbox:
            assert sandbox.admin_url is not None
            with psycopg.connect(
                host=sandbox.admin_url.host, user=pg_sandbox.ADMIN, dbname="postgres",
                autocommit=True,
            ) as conn:  # fmt: skip
                yield conn
    finally:
        os.environ.pop(CANARY, None)


def _program(conn: psycopg.Connection[Any], command: str) -> str:
    """What ``command`` prints when the jailed server runs it as its OS user."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS out (line text)")
    conn.execute("TRUNCATE out")
    # Tabs and backslashes would be read as COPY's columns and escapes: made spaces.
    shell = f"{{ {command}; echo rc=$?; }} 2>&1 | tr '\\t\\\\' '  '"
    conn.execute(f"COPY out FROM PROGRAM '{shell.replace(chr(39), chr(39) * 2)}'".encode())
    return "\n".join(str(row[0]) for row in conn.execute("SELECT line FROM out").fetchall())


def _jail_pid(conn: psycopg.Connection[Any]) -> int:
    host = str(conn.info.host)  # /proc/<pid>/root/run/sandbox
    assert host.startswith("/proc/"), host
    return int(host.split("/")[2])


def test_it_is_a_superuser_running_programs_as_a_user_that_owns_nothing(
    pg_admin: psycopg.Connection[Any],
) -> None:
    row = pg_admin.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    assert row.fetchone() == (True,)
    shown = _program(pg_admin, "id -u; hostname; ls /; cat /etc/passwd")
    uid = int(shown.splitlines()[0])
    if os.geteuid() == 0:  # a fresh uid with no account, never nobody, postgres or mysql
        assert uid >= 1_000_000
    assert "sandbox" in shown.splitlines()[1]
    assert "postgres:" not in shown and "mysql:" not in shown  # not the host's accounts
    for absent in ("root", "home", "proc", "work", "var", "opt"):
        assert f"\n{absent}\n" not in f"\n{shown}\n"


def test_the_target_port_cannot_be_reached(
    pg_admin: psycopg.Connection[Any], postgres_server: PostgresServer
) -> None:
    psql = "/usr/lib/postgresql/15/bin/psql"
    shown = _program(
        pg_admin,
        f"{psql} -h {postgres_server.host} -p {postgres_server.port} -U postgres -c 'SELECT 1'",
    )
    assert "rc=0" not in shown
    assert "(1 row)" not in shown
    pg_admin.execute("CREATE EXTENSION IF NOT EXISTS dblink")
    with pytest.raises(psycopg.Error):
        pg_admin.execute(
            "SELECT dblink_connect_u('x', %s)",
            (f"host={postgres_server.host} port={postgres_server.port} user=postgres",),
        )


def test_the_runners_files_and_environment_are_out_of_sight(
    pg_admin: psycopg.Connection[Any], secret_file: Path
) -> None:
    secret = secret_file.read_text().strip()
    with pytest.raises(psycopg.Error):
        pg_admin.execute("SELECT pg_read_file(%s)", (str(secret_file),))
    shown = _program(
        pg_admin,
        f"cat {secret_file}; env; ls /proc; ls {cache_root()}; ls {Path.home()}; ls /tmp",
    )
    assert secret not in shown
    assert CANARY not in shown
    assert "SESHAT" not in shown
    assert "rc=0" not in shown  # the last command of the list failed too


@pytest.mark.parametrize("folder", ["/usr", "/", "/etc", "/dev", "/dev/shm"])
def test_nothing_outside_the_data_folder_can_be_written(
    pg_admin: psycopg.Connection[Any], folder: str
) -> None:
    path = Path(folder) / f"seshat-jail-{secrets.token_hex(6)}"
    with pytest.raises(psycopg.Error):
        pg_admin.execute(f"COPY (SELECT 'x') TO '{path}'".encode())
    assert not path.exists()


def test_a_host_folder_cannot_be_written_even_by_its_path(
    pg_admin: psycopg.Connection[Any], tmp_path: Path
) -> None:
    tmp_path.chmod(0o777)
    target = tmp_path / "written"
    with pytest.raises(psycopg.Error):
        pg_admin.execute(f"COPY (SELECT 'x') TO '{target}'".encode())
    assert not target.exists()


def test_processes_are_bounded(pg_admin: psycopg.Connection[Any]) -> None:
    pid = _jail_pid(pg_admin)
    namespace = os.readlink(f"/proc/{pid}/ns/pid")
    pg_admin.execute("CREATE TEMP TABLE IF NOT EXISTS out (line text)")
    # 300 sleepers in the background; the shell reports each fork it could not make.
    # Their output goes to /dev/null, so COPY returns at once with the sleepers still there.
    forks = (
        "i=0; while [ $i -lt 300 ]; do (sleep 20 >/dev/null 2>&1 &) 2>/dev/null; "
        "i=$((i+1)); done; echo done"
    )
    pg_admin.execute(f"COPY out FROM PROGRAM '{forks}'".encode())
    inside = _in_namespace(namespace)
    sleepers = [p for p in inside if _command(p) == "sleep"]
    for sleeper in sleepers:  # the jail is full: the next tests need their forks back
        with contextlib.suppress(ProcessLookupError):
            os.kill(sleeper, signal.SIGKILL)
    # The sleepers filled the jail up to its limit (and bubblewrap's own init), no further.
    assert jail.LIMITS.processes // 2 < len(inside) <= jail.LIMITS.processes + 2, len(inside)
    assert sleepers
    deadline = time.monotonic() + 10
    while set(sleepers) & set(_in_namespace(namespace)):
        assert time.monotonic() < deadline, "the sleepers outlived SIGKILL"
        time.sleep(0.05)


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""  # it has ended


def _in_namespace(namespace: str) -> list[int]:
    """The processes in the PID namespace ``namespace`` (seen from the host, by pid)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                found.append(int(entry))
        except OSError:
            continue
    return found


def test_memory_and_file_size_are_bounded(pg_admin: psycopg.Connection[Any]) -> None:
    shown = _program(pg_admin, "ulimit -v; ulimit -f; ulimit -n; ulimit -c")
    memory, size, files, core = shown.splitlines()[:4]
    assert int(memory) * 1024 == jail.LIMITS.memory
    assert int(size) * 512 == jail.LIMITS.file_size
    assert int(files) == jail.LIMITS.open_files
    assert core == "0"
    shown = _program(pg_admin, "python3 -c 'bytearray(3 << 30)'")
    assert "MemoryError" in shown


def test_the_template_is_out_of_reach_and_unchanged(pg_admin: psycopg.Connection[Any]) -> None:
    templates = sorted((cache_root() / "sandbox").glob("postgresql-*.tar"))
    assert templates
    before = {t: hashlib.sha256(t.read_bytes()).hexdigest() for t in templates}
    shown = _program(pg_admin, f"ls -la {templates[0].parent}; wc -c {templates[0]}")
    assert "rc=0" not in shown
    assert {t: hashlib.sha256(t.read_bytes()).hexdigest() for t in templates} == before
    assert all(t.stat().st_uid == os.geteuid() and t.stat().st_mode & 0o077 == 0 for t in templates)


_KILLED_RUNNER = textwrap.dedent(
    """
    import sys, time
    from runner.engines.postgresql import sandbox
    facts = sandbox.ServerFacts(150000, "UTF8", "C", "C", None, ("public",))
    with sandbox.private_sandbox(facts) as box:
        print(box.server_url.host, flush=True)
        time.sleep(600)
    """
)


def test_the_jail_dies_with_a_runner_killed_by_sigkill() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUNNER],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        host = process.stdout.readline().strip()
        pid = int(host.split("/")[2])
        namespace = os.readlink(f"/proc/{pid}/ns/pid")
        assert Path(host, ".s.PGSQL.5432").exists()
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        if process.stdout is not None:
            process.stdout.close()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        left = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                        left.append(entry)
                except OSError:
                    continue
        if not left:
            break
        time.sleep(0.1)
    assert not left, f"processes of the killed runner's jail still run: {left}"


# -- MariaDB --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mariadb_root() -> Iterator[Any]:
    """``root`` on a jailed private mariadbd."""
    facts = mysql_sandbox.ServerFacts(
        "mariadb", _mariadb_version(), "STRICT_TRANS_TABLES", 0, "utf8mb4", "", "x", "root@%"
    )
    with mysql_sandbox.private_sandbox(facts) as sandbox:
        assert sandbox.admin is not None
        conn = pymysql.connect(
            unix_socket=sandbox.admin.param("unix_socket"), user="root", autocommit=True
        )
        try:
            yield conn
        finally:
            conn.close()


def _mariadb_version() -> str:
    done = subprocess.run(
        ["/usr/sbin/mariadbd", "--version"], capture_output=True, text=True, check=True
    )
    return done.stdout.split("Ver ")[1].split()[0]


def _one(conn: Any, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
    return row[0] if row else None


def test_mariadb_root_in_the_jail_reads_and_writes_nothing_of_the_host(
    mariadb_root: Any, secret_file: Path, tmp_path: Path, mariadb_server: MariaDBServer
) -> None:
    assert _one(mariadb_root, "SELECT LOAD_FILE('/etc/hostname')") is None
    assert _one(mariadb_root, f"SELECT LOAD_FILE('{secret_file}')") is None
    assert _one(mariadb_root, "SELECT @@hostname") == "sandbox"
    assert _one(mariadb_root, "SELECT @@datadir").startswith(jail.RUN)
    tmp_path.chmod(0o777)
    with mariadb_root.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS attack")
        cur.execute(
            f"CREATE TABLE attack.t (a int) ENGINE=MyISAM DATA DIRECTORY='{tmp_path}' "
            f"INDEX DIRECTORY='{tmp_path}'"
        )
        cur.execute(f"CREATE TABLE attack.u (a int) ENGINE=InnoDB DATA DIRECTORY='{tmp_path}'")
        cur.execute("INSERT INTO attack.t VALUES (1)")
        with pytest.raises(pymysql.MySQLError):
            cur.execute(f"SELECT 1 INTO OUTFILE '{tmp_path}/out.txt'")
    assert list(tmp_path.iterdir()) == []
    # No network: the target's port is not reachable from inside (FEDERATED/CONNECT are
    # not installed; a program cannot start from MariaDB at all).
    assert _one(mariadb_root, "SELECT @@skip_networking") == 1


# -- what a server extracts -------------------------------------------------------------------


def _used_bytes(folder: str) -> int:
    """What a jail's memory-backed folder holds (the tmpfs behind ``folder``, seen from the
    host through ``/proc/<pid>/root``)."""
    found = os.statvfs(folder)
    return (found.f_blocks - found.f_bfree) * found.f_frsize


def test_a_mariadb_server_holds_its_data_not_the_preallocated_zeros(mariadb_root: Any) -> None:
    # InnoDB's system tablespace and redo log are preallocated (12 and 8 MiB, mostly zeros):
    # they arrive as holes, so the jail's folder holds the data, about 7 MiB, and the
    # temporary tablespace's 5 (28 MiB when the zeros were written out).
    socket = Path(mariadb_root.unix_socket)
    assert socket.parts[1] == "proc", socket
    data = socket.parent / "data"
    apparent = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    assert apparent > 20 << 20
    assert _used_bytes(str(socket.parent)) < 16 << 20, "the template's zeros were written"
    assert _one(mariadb_root, "SELECT COUNT(*) FROM mysql.help_topic") > 0  # the data is there


def test_a_postgresql_server_extracts_no_template0(pg_admin: psycopg.Connection[Any]) -> None:
    names = {row[0] for row in pg_admin.execute("SELECT datname FROM pg_database").fetchall()}
    assert "template0" not in names
    assert {"postgres", "template1"} <= names
    # A database beyond the ready ones is still made (from template1), as a plan's third is.
    pg_admin.execute("CREATE DATABASE seshat_extra")
    assert pg_admin.execute(
        "SELECT datname FROM pg_database WHERE datname = 'seshat_extra'"
    ).fetchone()
