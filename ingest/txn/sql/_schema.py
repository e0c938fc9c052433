"""The metastore's tables, declared once for every database, and their version check.

Mirrors the Hive metastore's transaction tables in miniature: `TXNS` (txns), `NEXT_WRITE_ID`
(a column of tables), `TXN_TO_WRITE_ID` (txn_to_write_id), plus sink progress and Kafka offsets
that Hive keeps in `commitTxnWithKeyValue` table properties. Version 2 adds the committed-file
manifest, registered readers (Hive's MIN_HISTORY_LEVEL) and the compaction history
(`COMPACTION_QUEUE` / `COMPLETED_COMPACTIONS`); version 3 the write set (`WRITE_SET`);
version 4 the tables' schema versions (`table_schemas`); version 5 each table's own offset
ranges in a transaction across several tables (`table_offsets`, docs/many-tables.md).
SQLAlchemy writes the DDL for each dialect.
"""

from __future__ import annotations

import sqlalchemy as sa

from ingest.errors import MetastoreError, UnsupportedFormatError

SCHEMA_VERSION = 5

# 64-bit ids and offsets on PostgreSQL. On SQLite only the exact type name INTEGER makes a
# primary key the rowid (what AUTOINCREMENT needs), and INTEGER holds 64 bits there anyway.
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# Seconds since the epoch: REAL affinity on SQLite, DOUBLE PRECISION on PostgreSQL.
Seconds: sa.Double[float] = sa.Double()

metadata = sa.MetaData()

meta = sa.Table(
    "meta", metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
tables = sa.Table(
    "tables", metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("location", sa.Text, nullable=False, unique=True),
    sa.Column("row_schema", sa.LargeBinary, nullable=False),  # Arrow IPC schema bytes
    sa.Column("partition_columns", sa.Text, nullable=False),  # JSON list
    sa.Column("bucket_count", sa.Integer, nullable=False),
    sa.Column("bucket_columns", sa.Text, nullable=False),  # JSON list
    sa.Column("properties", sa.Text, nullable=False),  # JSON object
    sa.Column("next_write_id", Id, nullable=False, server_default="1"),
    sa.Column("created_at", Seconds, nullable=False),
)
txns = sa.Table(
    "txns", metadata,
    # AUTOINCREMENT on SQLite: a txn id is never handed out twice, even after deletes.
    sa.Column("txn_id", Id, primary_key=True, autoincrement=True),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("agent", sa.Text, nullable=False),
    sa.Column("opened_at", Seconds, nullable=False),
    sa.Column("heartbeat_at", Seconds, nullable=False),
    sa.Column("finished_at", Seconds),
    sa.Column("reason", sa.Text),
    sa.CheckConstraint("state IN ('open', 'committed', 'aborted')"),
    sa.Index("txns_open", "state", "heartbeat_at"),
    sqlite_autoincrement=True,
)
txn_to_write_id = sa.Table(
    "txn_to_write_id", metadata,
    sa.Column("txn_id", Id, sa.ForeignKey("txns.txn_id"), nullable=False),
    sa.Column("table_name", sa.Text, sa.ForeignKey("tables.name"), nullable=False),
    sa.Column("write_id", Id, nullable=False),
    sa.Column("is_primary", sa.Integer, nullable=False),
    sa.PrimaryKeyConstraint("table_name", "write_id"),
    sa.UniqueConstraint("txn_id", "table_name"),
)
sink_progress = sa.Table(
    "sink_progress", metadata,
    sa.Column("sink_id", sa.Text, nullable=False),
    sa.Column("batch_id", Id, nullable=False),
    sa.Column("txn_id", Id, sa.ForeignKey("txns.txn_id"), nullable=False),
    sa.Column("table_name", sa.Text, nullable=False),
    sa.Column("write_id", Id, nullable=False),
    sa.PrimaryKeyConstraint("sink_id", "batch_id"),
)
txn_offsets = sa.Table(
    "txn_offsets", metadata,
    sa.Column("txn_id", Id, sa.ForeignKey("txns.txn_id"), nullable=False),
    sa.Column("topic", sa.Text, nullable=False),
    sa.Column("partition", sa.Integer, nullable=False),
    sa.Column("from_offset", Id, nullable=False),
    sa.Column("until_offset", Id, nullable=False),
    sa.PrimaryKeyConstraint("txn_id", "topic", "partition"),
)
# What each commit promised about the files it wrote: a reader or `verify` that finds a file
# shorter, emptied or with a different tail knows committed data was damaged.
committed_files = sa.Table(
    "committed_files", metadata,
    sa.Column("table_name", sa.Text, sa.ForeignKey("tables.name"), nullable=False),
    sa.Column("path", sa.Text, nullable=False),  # relative to the table root, '/'-separated
    sa.Column("write_id", Id, nullable=False),  # the highest write id that recorded it
    sa.Column("length", Id, nullable=False),  # committed length: the file's or its flush length
    sa.Column("tail_hash", sa.Text, nullable=False),  # hex xxh3_64 of the tail ending there
    sa.Column("rows", Id, nullable=False),  # ACID events in the file up to `length`
    sa.PrimaryKeyConstraint("table_name", "path"),
)
# Readers that take their snapshot here register while they read, so the cleaner keeps what
# they may still open. min_open_txn: the lowest txn id open when the snapshot was taken (or
# the next txn id): every txn below it was already committed or aborted.
readers = sa.Table(
    "readers", metadata,
    sa.Column("reader_id", Id, primary_key=True, autoincrement=True),
    sa.Column("table_name", sa.Text, nullable=False),
    sa.Column("agent", sa.Text, nullable=False),
    sa.Column("min_open_txn", Id, nullable=False),
    sa.Column("opened_at", Seconds, nullable=False),
    sa.Column("heartbeat_at", Seconds, nullable=False),
    sqlite_autoincrement=True,
)
# One row per compaction of one partition, kept as its history (SHOW COMPACTIONS).
compactions = sa.Table(
    "compactions", metadata,
    sa.Column("compaction_id", Id, primary_key=True, autoincrement=True),
    sa.Column("table_name", sa.Text, nullable=False),
    sa.Column("partition", sa.Text, nullable=False),  # relative to the root, '' if none
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("txn_id", Id, sa.ForeignKey("txns.txn_id")),  # the compactor's transaction
    sa.Column("highest_write_id", Id),
    sa.Column("started_at", Seconds, nullable=False),
    sa.Column("finished_at", Seconds),
    sa.Column("cleaned_at", Seconds),
    sa.Column("rows", Id),
    sa.Column("inputs", sa.Text, nullable=False, server_default="[]"),  # JSON directory names
    sa.Column("outputs", sa.Text, nullable=False, server_default="[]"),
    sa.Column("error", sa.Text),
    sa.CheckConstraint("kind IN ('major', 'minor')"),
    sa.CheckConstraint(
        "state IN ('working', 'ready for cleaning', 'succeeded', 'failed')"),
    sqlite_autoincrement=True,
)
# Hive's WRITE_SET: the partitions and buckets each committed transaction updated or deleted
# in, kept while a transaction open before that commit may still commit (docs/format.md §24).
# commit_id: the highest txn id handed out when it committed, so a transaction conflicts with
# it exactly when its own txn id is not above commit_id (it was open before that commit).
write_set = sa.Table(
    "write_set", metadata,
    sa.Column("table_name", sa.Text, nullable=False),
    sa.Column("partition", sa.Text, nullable=False),  # relative to the root, '' if none
    sa.Column("bucket", sa.Integer, nullable=False),
    sa.Column("txn_id", Id, nullable=False),
    sa.Column("commit_id", Id, nullable=False),
    sa.PrimaryKeyConstraint("table_name", "partition", "bucket", "txn_id"),
    sa.Index("write_set_commits", "table_name", "commit_id"),
)
# Each column change of a table (docs/format.md §25): its schema version and columns, and the
# write id of its own committed transaction (it writes no file), so a snapshot reads the
# newest version whose write id is at or below its high watermark. Version 0 (the columns as
# created, write id 0) is written with the first change; a table without rows is at version
# 0 with the columns of `tables`.
table_schemas = sa.Table(
    "table_schemas", metadata,
    sa.Column("table_name", sa.Text, nullable=False),
    sa.Column("version", Id, nullable=False),
    sa.Column("first_write_id", Id, nullable=False),
    sa.Column("row_schema", sa.LargeBinary, nullable=False),  # Arrow IPC schema bytes
    sa.Column("changed_at", Seconds, nullable=False),
    sa.PrimaryKeyConstraint("table_name", "version"),
)
# Each table's own Kafka ranges in a transaction that wrote several tables from several topics
# (docs/many-tables.md, "Offsets and restarts"): a transaction with rows here gives every table
# it wrote exactly its rows here (the primary's are all of `txn_offsets`'), one without gives
# every table all of `txn_offsets`' (as before version 5).
table_offsets = sa.Table(
    "table_offsets", metadata,
    sa.Column("txn_id", Id, sa.ForeignKey("txns.txn_id"), nullable=False),
    sa.Column("table_name", sa.Text, nullable=False),
    sa.Column("topic", sa.Text, nullable=False),
    sa.Column("partition", sa.Integer, nullable=False),
    sa.Column("from_offset", Id, nullable=False),
    sa.Column("until_offset", Id, nullable=False),
    sa.PrimaryKeyConstraint("txn_id", "table_name", "topic", "partition"),
    sa.Index("table_offsets_table", "table_name", "txn_id"),
)

# The tables each schema version added, in creation order; upgrading from version v creates
# those of versions v + 1 .. SCHEMA_VERSION.
VERSION_TABLES: dict[int, tuple[sa.Table, ...]] = {
    1: (meta, tables, txns, txn_to_write_id, sink_progress, txn_offsets),
    2: (committed_files, readers, compactions),
    3: (write_set,),
    4: (table_schemas,),
    5: (table_offsets,),
}
assert max(VERSION_TABLES) == SCHEMA_VERSION


def ensure_schema(conn: sa.Connection, location: str, *, create: bool,
                  upgrade: bool = False, empty_what: str = "database holds no tables") -> int:
    """Create the tables in an empty database (`create`), or check the version of an
    existing one and, with `upgrade`, bring it to SCHEMA_VERSION.

    Returns the schema version the database has afterwards: a read-only open of an older
    metastore leaves it as it is, and callers treat the newer tables as absent.

    Must run inside a write transaction when `create` or `upgrade`, so two processes do not
    both create the tables. Without `create` an empty database is an error: a metastore emptied by
    accident must not come back as a new one that knows none of the table's write ids
    (docs/invariants.md, 7).

    Args:
        conn: the connection, inside the caller's transaction.
        location: the metastore as error messages name it.
        create: create the tables when the database has none.
        upgrade: bring an older schema to SCHEMA_VERSION.
        empty_what: how the error for an empty database describes it ("file is empty").

    Raises:
        UnsupportedFormatError: the database was written by a newer ingest.
        MetastoreError: the database is empty (without `create`), or holds tables but is not
            an ingest metastore.
        sqlalchemy.exc.SQLAlchemyError: the driver failed (the caller translates it).
    """
    names = set(sa.inspect(conn).get_table_names())
    if not names and not create:
        raise MetastoreError(
            f"Cannot open metastore {location}: the {empty_what}, so it is not an ingest "
            "metastore; it was not rebuilt",
            location=location,
            hint="restore it from a backup; if it is lost, move it aside and register each "
            "table again with `ingest create PATH --schema ... --adopt`",
        )
    if not names:
        _create(conn, 0)
        conn.execute(sa.insert(meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
        return SCHEMA_VERSION
    if "meta" not in names:
        raise MetastoreError(
            f"Cannot open metastore {location}: it is a {conn.dialect.name} database but not "
            f"an ingest metastore (tables {sorted(names)[:5]}, no 'meta' table)",
            location=location,
            hint="point INGEST_METASTORE at an ingest metastore, or at a new empty database",
        )
    value = conn.execute(
        sa.select(meta.c.value).where(meta.c.key == "schema_version")).scalar_one_or_none()
    found = int(value) if value is not None else 0
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
            hint="move it aside; it was not written by ingest",
        )
    if upgrade and found < SCHEMA_VERSION:
        _create(conn, found)
        conn.execute(sa.update(meta).where(meta.c.key == "schema_version")
                     .values(value=str(SCHEMA_VERSION)))
        return SCHEMA_VERSION
    return found


def _create(conn: sa.Connection, after: int) -> None:
    """Create the tables of the versions above `after`, inside the caller's transaction."""
    for version in range(after + 1, SCHEMA_VERSION + 1):
        metadata.create_all(conn, tables=list(VERSION_TABLES[version]), checkfirst=False)
