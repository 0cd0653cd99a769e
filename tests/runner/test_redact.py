"""Every spelling of every credential is removed from what the runner prints."""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

from runner.redact import MASK, Redactor
from runner.url import parse_url

SECRET = 'p@ss w/rd"é&'


def test_raw_json_escaped_and_url_escaped_spellings_are_redacted() -> None:
    redact = Redactor([SECRET])
    for spelling in (SECRET, json.dumps(SECRET)[1:-1], quote(SECRET, safe=""), quote_plus(SECRET)):
        text = f"error: could not connect with {spelling} (retrying)"
        assert redact(text) == f"error: could not connect with {MASK} (retrying)"
    payload = json.dumps({"message": f"auth failed for {SECRET}"})
    assert SECRET not in redact(payload)
    assert json.dumps(SECRET)[1:-1] not in redact(payload)


def test_a_secret_containing_another_is_removed_whole() -> None:
    assert Redactor(["abc", "abcdef"])("xx abcdef yy abc") == f"xx {MASK} yy {MASK}"


def test_secrets_in_a_url_are_its_password_and_secret_parameters() -> None:
    url = "postgresql://app:s%40cret@db:5432/shop?sslmode=require&sslpassword=keypass"
    assert set(parse_url(url).secrets()) == {"s@cret", "s%40cret", "keypass", "cret"}
    assert parse_url("postgresql://app@db/shop").secrets() == []
    redact = Redactor(parse_url(url).secrets())
    assert redact(f"connecting to {url}") == (
        f"connecting to postgresql://app:{MASK}@db:5432/shop?sslmode=require&sslpassword={MASK}"
    )


def test_a_mask_is_never_matched_again() -> None:
    # "RED" is in the mask; a single pass never turns "[REDACTED]" into "[[REDACTED]ACTED]".
    assert Redactor(["p@RED", "RED"])("a p@RED b RED") == f"a {MASK} b {MASK}"
