"""The target identity digest names a database without its password."""

from __future__ import annotations

import pytest

from runner.digests import Digest, digest
from runner.identity import target_identity as identity_of
from runner.url import UnsupportedScheme, parse_url


def target_identity(text: str) -> Digest:
    return identity_of(parse_url(text))


def test_the_password_does_not_change_the_identity() -> None:
    assert target_identity("postgresql://app:one@db:5432/shop") == target_identity(
        "postgresql://app:two@db:5432/shop"
    )


def test_equal_targets_spelled_differently_share_one_identity() -> None:
    assert target_identity("postgres://app@DB/shop") == target_identity(
        "postgresql://app@db:5432/shop"
    )
    assert target_identity("mariadb://root@h/x") == target_identity("mysql://root@h:3306/x")


@pytest.mark.parametrize(
    "other",
    [
        "postgresql://app@db:5433/shop",
        "postgresql://app@db2:5432/shop",
        "postgresql://app@db:5432/orders",
        "postgresql://admin@db:5432/shop",
        "mysql://app@db:5432/shop",
    ],
)
def test_each_identity_field_matters(other: str) -> None:
    assert target_identity(other) != target_identity("postgresql://app@db:5432/shop")


def test_identity_is_pinned() -> None:
    assert target_identity("postgresql://app:pw@db/shop") == digest(
        "target-identity",
        {"engine": "postgresql", "host": "db", "port": 5432, "database": "shop", "user": "app"},
    )
    assert target_identity("sqlite:////var/lib/a.db") != target_identity("sqlite:///var/lib/a.db")


def test_unknown_schemes_are_refused() -> None:
    with pytest.raises(UnsupportedScheme, match="cockroach"):
        parse_url("cockroach://x")


def test_a_raw_at_sign_in_the_password_does_not_move_the_host() -> None:
    assert target_identity("postgresql://u:S3c@ret@host/db") == target_identity(
        "postgresql://u@host/db"
    )
