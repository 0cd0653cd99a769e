"""The SQLite engine's model of a real database file: every object kind it reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from runner.engines.cache import PlanCache
from runner.engines.model import Database
from runner.engines.scope import EVERYTHING
from runner.engines.sqlite.engine import SqliteEngine, database_path
from runner.errors import CanNotRunError, ConfigurationError
from runner.url import parse_url

SCHEMA = """
CREATE TABLE artist (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL COLLATE NOCASE,
    born INTEGER DEFAULT 1900 CHECK (born > 1000),
    email TEXT UNIQUE,
    CONSTRAINT named_check CHECK (length(name) > 0)
);
CREATE TABLE track (
    id INTEGER,
    artist_id INTEGER REFERENCES artist (id) ON DELETE CASCADE,
    title TEXT,
    seconds INTEGER,
    minutes INTEGER GENERATED ALWAYS AS (seconds / 60) VIRTUAL,
    label TEXT GENERATED ALWAYS AS (upper(title)) STORED,
    PRIMARY KEY (id)
);
CREATE TABLE kv (k TEXT PRIMARY KEY, v ANY) STRICT, WITHOUT ROWID;
CREATE INDEX track_long ON track (seconds) WHERE seconds > 300;
CREATE UNIQUE INDEX track_title_lower ON track (lower(title));
CREATE VIEW long_tracks AS SELECT id, title FROM track WHERE seconds > 300;
CREATE TRIGGER artist_born AFTER INSERT ON artist BEGIN
    UPDATE artist SET born = 1901 WHERE id = new.id AND born IS NULL;
END;
"""


def make(path: Path, sql: str) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(sql)
    conn.commit()
    conn.close()
    return path


def test_every_object_kind_is_read(tmp_path: Path) -> None:
    db = make(tmp_path / "app.db", SCHEMA)
    model = SqliteEngine(parse_url(f"sqlite:///{db}")).inspect()
    assert model.dialect == "sqlite" and model.server_major == 3
    assert sorted(model.tables) == ["table:main.artist", "table:main.kv", "table:main.track"]
    artist = model.tables["table:main.artist"]
    options = dict(artist.options)
    assert options["autoincrement"] == "true" and "strict" not in options
    name = artist.column("name")
    assert name is not None and name.not_null and name.collation == "NOCASE"
    born = artist.column("born")
    assert born is not None and born.default == "1900" and not born.not_null
    kv = dict(model.tables["table:main.kv"].options)
    assert kv["strict"] == "true" and kv["without_rowid"] == "true"
    track = model.tables["table:main.track"]
    minutes, label = track.column("minutes"), track.column("label")
    assert minutes is not None and minutes.generated == "seconds / 60"
    assert dict(minutes.extra)["generated"] == "virtual"
    assert label is not None and dict(label.extra)["generated"] == "stored"
    kinds = {(c.table, c.kind, c.definition) for c in model.constraints.values()}
    assert ("table:main.artist", "p", 'PRIMARY KEY ("id")') in kinds
    assert ("table:main.artist", "u", 'UNIQUE ("email")') in kinds
    assert ("table:main.artist", "c", "CHECK (born > 1000)") in kinds
    assert ("table:main.track", "p", 'PRIMARY KEY ("id")') in kinds
    assert (
        "table:main.track",
        "f",
        'FOREIGN KEY ("artist_id") REFERENCES "artist" ("id") ON DELETE CASCADE',
    ) in kinds
    assert "constraint:main.artist.named_check" in model.constraints
    partial = model.indexes["index:main.track_long"]
    assert partial.table == "table:main.track" and "WHERE seconds > 300" in partial.definition
    expression = model.indexes["index:main.track_title_lower"]
    assert expression.unique and "lower ( title )" in expression.definition
    assert model.definitions["view:main.long_tracks"].kind == "view"
    trigger = model.definitions["trigger:main.artist_born"]
    assert trigger.kind == "trigger" and trigger.table == "table:main.artist"
    assert ("view:main.long_tracks", "table:main.track") in model.depends
    assert ("table:main.track", "table:main.artist") in model.depends


def test_the_same_schema_written_differently_is_the_same_model(tmp_path: Path) -> None:
    one = make(tmp_path / "one.db", SCHEMA)
    rewritten = SCHEMA.replace(
        "CREATE INDEX track_long ON track (seconds)",
        'CREATE INDEX "track_long" ON "track"(  seconds  )',
    ).replace("CHECK (born > 1000)", "CHECK (born>1000) /* comment */")
    two = make(tmp_path / "two.db", rewritten)
    a, b = (
        SqliteEngine(parse_url(f"sqlite:///{one}")).inspect(),
        SqliteEngine(parse_url(f"sqlite:///{two}")).inspect(),
    )
    assert a.indexes == b.indexes and a.constraints == b.constraints


def test_the_cache_answers_only_for_the_very_catalog_it_read(tmp_path: Path) -> None:
    """An unchanged catalog's model comes from the planning cache; a changed schema is read
    again, a damaged entry computed again, and each time the model is what reading gives."""
    db = make(tmp_path / "app.db", SCHEMA)
    url = parse_url(f"sqlite:///{db}")
    cache = PlanCache(tmp_path / "cache" / "plans")
    entries = tmp_path / "cache" / "plans" / "live"

    def observed() -> Database:
        return SqliteEngine(url, cache=cache).observe(EVERYTHING)

    first = observed()
    assert first == SqliteEngine(url).inspect() and len(list(entries.iterdir())) == 1
    assert observed() == first and len(list(entries.iterdir())) == 1
    make(db, "ALTER TABLE artist ADD COLUMN nickname TEXT COLLATE NOCASE;")
    changed = observed()
    nickname = changed.tables["table:main.artist"].column("nickname")
    assert nickname is not None and nickname.collation == "NOCASE"
    assert changed == SqliteEngine(url).inspect() and len(list(entries.iterdir())) == 2
    for entry in entries.iterdir():
        entry.write_text("sha256:" + "0" * 64 + "\n{}")
    assert observed() == changed


def test_urls_name_relative_and_absolute_files(tmp_path: Path) -> None:
    assert database_path(parse_url("sqlite:///data/app.db")) == Path("data/app.db")
    assert database_path(parse_url("sqlite:////var/lib/app.db")) == Path("/var/lib/app.db")
    with pytest.raises(ConfigurationError):
        database_path(parse_url("sqlite://host/app.db"))


def test_a_missing_file_is_not_created_by_inspect(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(CanNotRunError, match="no such SQLite database file"):
        SqliteEngine(parse_url(f"sqlite:///{missing}")).inspect()
    assert not missing.exists()


def test_a_drift_report_of_a_missing_file_is_refused_not_read_as_empty(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "schema.sql").write_text("CREATE TABLE t (id integer PRIMARY KEY);\n")
    with pytest.raises(CanNotRunError, match="no such SQLite database file"):
        SqliteEngine(parse_url(f"sqlite:///{missing}")).drift(desired)
    assert not missing.exists()
