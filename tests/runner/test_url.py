"""Database URLs are parsed once; drivers connect from the parts; nothing secret is printed.

The end-to-end cases use a real PostgreSQL role whose password holds a raw ``@`` (written
unencoded in the URL, as people do): the runner must connect with it, and when the
connection fails, no piece of the password may appear in what the runner prints.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.postgres import PostgresDatabase
from harness.runner_cli import RunnerCLI, write
from psycopg import sql

from runner.protocol.frame import Found, find_last_frame
from runner.redact import Redactor
from runner.url import DatabaseURL, InvalidURL, UnsupportedScheme, fragments, parse_url


@pytest.mark.parametrize(
    ("text", "parts", "shown"),
    [
        (
            "postgresql://app:S3c@ret@db.example:6432/shop?sslmode=require",
            ("app", "S3c@ret", "db.example", 6432, "shop"),
            "postgresql://app@db.example:6432/shop?sslmode=require",
        ),
        (
            "postgres://app:p%2Fw%3Fd%23@[::1]:5432/shop",
            ("app", "p/w?d#", "::1", 5432, "shop"),
            "postgres://app@[::1]:5432/shop",
        ),
        (
            "postgresql://%2Fvar%2Frun%2Fpostgresql/shop",
            ("", "", "/var/run/postgresql", None, "shop"),
            "postgresql://%2Fvar%2Frun%2Fpostgresql/shop",
        ),
        (
            "mariadb://root@127.0.0.1/app?password=hunter2x",
            ("root", "", "127.0.0.1", None, "app"),
            "mariadb://root@127.0.0.1/app",
        ),
        ("sqlite:////var/lib/app.db", ("", "", "", None, "/var/lib/app.db"), None),
        ("sqlite:///data/app.db", ("", "", "", None, "data/app.db"), None),
    ],
)
def test_urls_are_parsed_into_parts_and_shown_without_credentials(
    text: str, parts: tuple[str, str, str, int | None, str], shown: str | None
) -> None:
    url = parse_url(text)
    assert (url.user, url.password, url.host, url.port, url.database) == parts
    assert str(url) == url.display() == (shown or text)
    for secret in url.secrets():
        assert secret not in str(url) and secret not in repr(url)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("postgresql://u@[::1/db", "never closed"),
        ("postgresql://u:Zq9@host:abc/db", "port is not a number"),
        ("postgresql://u:Zq9@host:99999/db", "port is not a number"),
        ("postgresql://u:Zq9w/Kx7@host/db", "must be percent-encoded"),
        ("postgresql://u:Zq9@host/db#Kx7", "fragment"),
        ("postgresql://u:Zq9\n@host/db", "control characters"),
        ("postgresql://u@host/db?Kx7", "name=value"),
        ("postgresql://u@host/db?a=1&a=2", "twice"),
        ("not a url", "SCHEME://"),
    ],
)
def test_malformed_urls_are_refused_without_quoting_them(text: str, says: str) -> None:
    with pytest.raises(InvalidURL) as caught:
        parse_url(text)
    message = str(caught.value)
    assert says in message
    for piece in ("Zq9", "Kx7"):
        assert piece not in message


def test_unknown_engines_are_refused_by_name() -> None:
    with pytest.raises(UnsupportedScheme, match="'cockroach'"):
        parse_url("cockroach://u@h/db")


def test_fragments_cover_what_any_parser_could_split_out() -> None:
    assert set(fragments("S3c@ret:x/yzw")) >= {"S3c", "ret", "yzw", "S3c@ret", "ret:x/yzw"}
    assert fragments("plain") == []
    # A one- or two-character piece would mask every line it occurs in: not listed.
    assert "x" not in fragments("S3c@ret:x/yzw")


def test_the_redactor_masks_every_fragment_of_a_split_password() -> None:
    url = parse_url("postgresql://app:S3c@ret@host/db")
    redact = Redactor(url.secrets())
    # libpq reads this URL with the user information ending at the first "@".
    said = 'could not translate host name "ret@host" to address; password S3c'
    assert "ret" not in redact(said) and "S3c" not in redact(said)


def test_with_database_keeps_the_server_and_credential() -> None:
    url = parse_url("postgresql://app:pw@db:5433/shop")
    other = url.with_database("scratch")
    assert isinstance(other, DatabaseURL)
    assert (other.host, other.port, other.user, other.password) == ("db", 5433, "app", "pw")
    assert other.database == "scratch"


# -- against a real server -------------------------------------------------------------------


@pytest.fixture
def at_role(postgres_database: PostgresDatabase) -> Iterator[tuple[str, str, str]]:
    """A login role whose password has a raw '@' between two distinctive halves."""
    first, second = "Lq" + secrets.token_hex(6), secrets.token_hex(6) + "Wv"
    role = "at_" + secrets.token_hex(4)
    server = postgres_database.server
    with server.connect() as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(f"{first}@{second}")
            )
        )
    yield role, first, second
    with server.connect() as admin:
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def _url(db: PostgresDatabase, role: str, password: str, port: int | None = None) -> str:
    server = db.server
    return f"postgresql://{role}:{password}@{server.host}:{port or server.port}/{db.name}"


def test_a_raw_at_sign_in_the_password_connects(
    postgres_database: PostgresDatabase, at_role: tuple[str, str, str]
) -> None:
    role, first, second = at_role
    runner = RunnerCLI(secrets=[f"{first}@{second}", first, second])
    url = _url(postgres_database, role, f"{first}@{second}")
    done = runner("schema", "inspect", "--url-env", "DB_URL", env={"DB_URL": url})
    assert done.returncode == 0, done.stderr
    assert runner.leaks() == []


def test_a_failed_connection_prints_no_piece_of_the_password(
    postgres_database: PostgresDatabase, at_role: tuple[str, str, str], tmp_path: Path
) -> None:
    role, first, second = at_role
    runner = RunnerCLI(secrets=[f"{first}@{second}", first, second])
    wrong = _url(postgres_database, role, f"{first}@{second}x")
    closed = _url(postgres_database, role, f"{first}@{second}", port=1)
    for url in (wrong, closed):
        done = runner("schema", "inspect", "--url-env", "DB_URL", env={"DB_URL": url})
        assert done.returncode == 2 and "cannot connect" in done.stderr, done.stderr
        request = {"operation": "inspect", "id": "op-1", "url": {"from_env": "DB_URL"}}
        path = write(tmp_path / "op.json", json.dumps(request))
        framed = runner("op", "--input", str(path), env={"DB_URL": url})
        frame = find_last_frame(framed.stdout)
        assert isinstance(frame, Found) and frame.payload["error"]["code"] == "cannot_connect"
    assert runner.leaks() == []


@pytest.mark.parametrize(
    "text", ["postgresql://u:Zq9@[::1/db", "postgresql://u:Zq9@host:abc/db", "mysql:/x"]
)
def test_a_malformed_url_exits_2_with_a_message(text: str, tmp_path: Path) -> None:
    runner = RunnerCLI(secrets=["Zq9"])
    done = runner("schema", "inspect", "--url-env", "DB_URL", env={"DB_URL": text})
    assert done.returncode == 2
    assert "malformed" in done.stderr and "Traceback" not in done.stderr
    request = {"operation": "inspect", "id": "op-1", "url": {"from_env": "DB_URL"}}
    path = write(tmp_path / "op.json", json.dumps(request))
    framed = runner("op", "--input", str(path), env={"DB_URL": text})
    frame = find_last_frame(framed.stdout)
    assert isinstance(frame, Found) and frame.payload["error"]["code"] == "invalid_url"
    assert runner.leaks() == []
