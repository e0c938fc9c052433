"""The metastore's SQLite tables and their version check.

Mirrors the Hive metastore's transaction tables in miniature: `TXNS` (txns), `NEXT_WRITE_ID`
(a column of tables), `TXN_TO_WRITE_ID` (txn_to_write_id), plus sink progress and Kafka offsets
that Hive keeps in `commitTxnWithKeyValue` table properties. Version 2 adds the committed-file
manifest, registered readers (Hive's MIN_HISTORY_LEVEL) and the compaction history
(`COMPACTION_QUEUE` / `COMPLETED_COMPACTIONS`). Knows SQL only.
"""

from __future__ import annotations

import os
import sqlite3

from ingest.errors import UnsupportedFormatError
from ingest.txn.errors import MetastoreError

SCHEMA_VERSION = 2

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

# Each entry upgrades a metastore from version i + 1 to i + 2; _DDL above is version 1.
_UPGRADES: tuple[str, ...] = (
    """
-- What each commit promised about the files it wrote: a reader or `verify` that finds a
-- file shorter, emptied or with a different tail knows committed data was damaged.
CREATE TABLE committed_files (
    table_name TEXT NOT NULL REFERENCES tables (name),
    path       TEXT NOT NULL,     -- relative to the table root, '/'-separated
    write_id   INTEGER NOT NULL,  -- the highest write id whose commit recorded this entry
    length     INTEGER NOT NULL,  -- committed length: the file's, or its flush length
    tail_hash  TEXT NOT NULL,     -- hex xxh3_64 of the ORC tail that ends at `length`
    rows       INTEGER NOT NULL,  -- ACID events in the file up to `length`
    PRIMARY KEY (table_name, path)
);
-- Readers that take their snapshot here register while they read, so the cleaner keeps
-- what they may still open. min_open_txn: the lowest txn id open when the snapshot was
-- taken (or the next txn id): every txn below it was already committed or aborted.
CREATE TABLE readers (
    reader_id    INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name   TEXT NOT NULL,
    agent        TEXT NOT NULL,
    min_open_txn INTEGER NOT NULL,
    opened_at    REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);
-- One row per compaction of one partition, kept as its history (SHOW COMPACTIONS).
CREATE TABLE compactions (
    compaction_id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name    TEXT NOT NULL,
    partition     TEXT NOT NULL,   -- relative to the table root, '' when unpartitioned
    kind          TEXT NOT NULL CHECK (kind IN ('major', 'minor')),
    state         TEXT NOT NULL CHECK (state IN ('working', 'ready for cleaning',
                                                 'succeeded', 'failed')),
    txn_id        INTEGER REFERENCES txns (txn_id),  -- the compactor's own transaction
    highest_write_id INTEGER,
    started_at    REAL NOT NULL,
    finished_at   REAL,
    cleaned_at    REAL,
    rows          INTEGER,
    inputs        TEXT NOT NULL DEFAULT '[]',  -- JSON list of directory names
    outputs       TEXT NOT NULL DEFAULT '[]',
    error         TEXT
);
""",
)


def ensure_schema(
    conn: sqlite3.Connection, location: str, *, create: bool, upgrade: bool = False
) -> int:
    """Create the tables in an empty database (`create`), or check the version of an
    existing one and, with `upgrade`, bring it to SCHEMA_VERSION.

    Returns the schema version the database has afterwards: a read-only open of an older
    metastore leaves it as it is, and callers treat the newer tables as absent.

    Must run inside a write transaction when `create` or `upgrade`, so two processes do not
    both create the tables. Without `create` an empty database is an error: a metastore emptied by
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
        for script in (_DDL, *_UPGRADES):
            _run(conn, script)
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        return SCHEMA_VERSION
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
    if upgrade and found < SCHEMA_VERSION:
        for script in _UPGRADES[found - 1 :]:
            _run(conn, script)
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
        )
        return SCHEMA_VERSION
    return found


def _run(conn: sqlite3.Connection, script: str) -> None:
    """Execute a script of ';'-separated statements inside the caller's transaction
    (`executescript` would commit it)."""
    for statement in script.split(";"):
        code = "\n".join(
            line.split("--", 1)[0] for line in statement.splitlines()
        ).strip()
        if code:
            conn.execute(code)
