"""Fixtures for the transaction-store suite: one behaviour suite over every store kind
(a SQLite file, SQLite in memory, a PostgreSQL database), and metastore files as older ingest
versions wrote them."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.txn import Metastore, TableDefinition


class FakeClock:
    """A settable wall clock so time-outs are tested without sleeping."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


STORE_KINDS = ["sqlite-file", "sqlite-memory", "postgresql"]


@pytest.fixture(params=STORE_KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of each kind of metastore; the SQLite file and PostgreSQL database are new."""
    if request.param == "sqlite-file":
        return f"sqlite://{tmp_path}/ms/_ingest_metastore.sqlite"
    if request.param == "sqlite-memory":
        return "sqlite://:memory:"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(params=["sqlite-file", "postgresql"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new metastore several processes can open: a SQLite file or a PostgreSQL database."""
    if request.param == "sqlite-file":
        return f"sqlite://{tmp_path}/_ingest_metastore.sqlite"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(store_url: str, clock: FakeClock) -> Iterator[Metastore]:
    with Metastore.open(store_url, clock=clock) as s:
        yield s


# The DDL ingest wrote for SQLite before the schema was declared with SQLAlchemy, kept
# verbatim (comments aside) so files written then are tested as they are.
LEGACY_V1_DDL = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE tables (
    name              TEXT PRIMARY KEY,
    location          TEXT NOT NULL UNIQUE,
    row_schema        BLOB NOT NULL,
    partition_columns TEXT NOT NULL,
    bucket_count      INTEGER NOT NULL,
    bucket_columns    TEXT NOT NULL,
    properties        TEXT NOT NULL,
    next_write_id     INTEGER NOT NULL DEFAULT 1,
    created_at        REAL NOT NULL
);
CREATE TABLE txns (
    txn_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    state        TEXT NOT NULL CHECK (state IN ('open', 'committed', 'aborted')),
    agent        TEXT NOT NULL,
    opened_at    REAL NOT NULL,
    heartbeat_at REAL NOT NULL,
    finished_at  REAL,
    reason       TEXT
);
CREATE INDEX txns_open ON txns (state, heartbeat_at);
CREATE TABLE txn_to_write_id (
    txn_id     INTEGER NOT NULL REFERENCES txns (txn_id),
    table_name TEXT NOT NULL REFERENCES tables (name),
    write_id   INTEGER NOT NULL,
    is_primary INTEGER NOT NULL,
    PRIMARY KEY (table_name, write_id),
    UNIQUE (txn_id, table_name)
);
CREATE TABLE sink_progress (
    sink_id    TEXT NOT NULL,
    batch_id   INTEGER NOT NULL,
    txn_id     INTEGER NOT NULL REFERENCES txns (txn_id),
    table_name TEXT NOT NULL,
    write_id   INTEGER NOT NULL,
    PRIMARY KEY (sink_id, batch_id)
);
CREATE TABLE txn_offsets (
    txn_id       INTEGER NOT NULL REFERENCES txns (txn_id),
    topic        TEXT NOT NULL,
    partition    INTEGER NOT NULL,
    from_offset  INTEGER NOT NULL,
    until_offset INTEGER NOT NULL,
    PRIMARY KEY (txn_id, topic, partition)
);
"""
LEGACY_V2_DDL = """
CREATE TABLE committed_files (
    table_name TEXT NOT NULL REFERENCES tables (name),
    path       TEXT NOT NULL,
    write_id   INTEGER NOT NULL,
    length     INTEGER NOT NULL,
    tail_hash  TEXT NOT NULL,
    rows       INTEGER NOT NULL,
    PRIMARY KEY (table_name, path)
);
CREATE TABLE readers (
    reader_id    INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name   TEXT NOT NULL,
    agent        TEXT NOT NULL,
    min_open_txn INTEGER NOT NULL,
    opened_at    REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);
CREATE TABLE compactions (
    compaction_id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name    TEXT NOT NULL,
    partition     TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('major', 'minor')),
    state         TEXT NOT NULL CHECK (state IN ('working', 'ready for cleaning',
                                                 'succeeded', 'failed')),
    txn_id        INTEGER REFERENCES txns (txn_id),
    highest_write_id INTEGER,
    started_at    REAL NOT NULL,
    finished_at   REAL,
    cleaned_at    REAL,
    rows          INTEGER,
    inputs        TEXT NOT NULL DEFAULT '[]',
    outputs       TEXT NOT NULL DEFAULT '[]',
    error         TEXT
);
"""


@pytest.fixture
def legacy_sqlite() -> Callable[[Path, int], str]:
    """Factory: legacy_sqlite(path, version) writes an empty metastore of schema version 1
    or 2 with the old raw DDL and returns its URL."""

    def make(path: Path, version: int) -> str:
        script = LEGACY_V1_DDL + (LEGACY_V2_DDL if version >= 2 else "")
        conn = sqlite3.connect(path)
        try:
            conn.executescript(script + f"INSERT INTO meta VALUES ('schema_version', '{version}');")
        finally:
            conn.close()
        return f"sqlite://{path}"

    return make


ROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("payload", pa.string()),
        pa.field(
            "tags",
            pa.list_(pa.struct([("k", pa.string()), ("v", pa.map_(pa.string(), pa.int32()))])),
        ),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("amount", pa.decimal128(18, 4)),
    ],
    metadata={b"origin": b"tests"},
)


def _table_def(name: str = "events", location: str | None = None, **kw: object) -> TableDefinition:
    return TableDefinition(
        name=name,
        location=location or f"memory://wh/{name.split('.')[-1]}",
        row_schema=ROW_SCHEMA,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def table_def() -> object:
    """Factory: table_def(name, location=None, **TableDefinition fields)."""
    return _table_def


@pytest.fixture
def events(store: Metastore) -> TableDefinition:
    return store.create_table(_table_def("events", partition_columns=("dt",)))


@pytest.fixture
def dead_letter(store: Metastore) -> TableDefinition:
    return store.create_table(_table_def("events__dead_letter"))
