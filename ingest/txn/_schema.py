"""The metastore's SQLite tables and their version check.

Mirrors the Hive metastore's transaction tables in miniature: `TXNS` (txns), `NEXT_WRITE_ID`
(a column of tables), `TXN_TO_WRITE_ID` (txn_to_write_id), plus sink progress and Kafka offsets
that Hive keeps in `commitTxnWithKeyValue` table properties. Knows SQL only.
"""

from __future__ import annotations

import os
import sqlite3

from ingest.errors import UnsupportedFormatError
from ingest.txn.errors import MetastoreError

SCHEMA_VERSION = 1

_DDL = """
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


def ensure_schema(conn: sqlite3.Connection, location: str, *, create: bool) -> None:
    """Create the tables in an empty database (`create`), or check the version of an
    existing one.

    Must run inside a write transaction when `create`, so two processes do not both create
    the tables. Without `create` an empty database is an error: a metastore emptied by
    accident must not come back as a new one that knows none of the table's write ids
    (docs/invariants.md, 7).

    Raises:
        UnsupportedFormatError: the file was written by a newer ingest.
        MetastoreError: the database is empty (without `create`), or holds tables but is not
            an ingest metastore.
        sqlite3.Error: the driver failed (the caller translates it).
    """
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not names and not create:
        size = os.path.getsize(location) if os.path.isfile(location) else None
        found = "is empty (0 bytes)" if size == 0 else "holds no tables"
        raise MetastoreError(
            f"Cannot open metastore {location}: the file {found}, so it is not an ingest "
            "metastore; it was not rebuilt",
            location=location,
            hint="restore it from a backup; if it is lost, move it aside and register each "
            "table again with `ingest create PATH --schema ... --adopt`",
        )
    if not names:
        for statement in _DDL.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        return
    if "meta" not in names:
        raise MetastoreError(
            f"Cannot open metastore {location}: it is a SQLite database but not an ingest "
            f"metastore (tables {sorted(names)[:5]}, no 'meta' table)",
            location=location,
            hint="point INGEST_METASTORE at an ingest metastore, or move this file aside",
        )
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    found = int(row[0]) if row else 0
    if found > SCHEMA_VERSION:
        raise UnsupportedFormatError(
            f"Cannot open metastore {location}: its schema version is {found} but this ingest "
            f"supports versions up to {SCHEMA_VERSION}",
            hint="upgrade ingest to the version that wrote this metastore",
        )
    if found < 1:
        raise MetastoreError(
            f"Cannot open metastore {location}: its 'meta' table has no schema_version",
            location=location,
            hint="move this file aside; it was not written by ingest",
        )
