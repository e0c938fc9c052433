"""A stream's progress in a Hive Metastore: a hidden ACID table written in the commit's own
transaction (docs/invariants.md, 4 and 8.6).

Hive 4's `commit_txn` can carry one key/value, and only into a `_meta` table parameter; Hive 3
drops the field. What both versions do make atomic is a transaction's write ids: every table
written in one HMS transaction becomes visible at its `commit_txn`, or never. So each target
table `db.t` has a progress table `db.t__ingest_progress`, a full-ACID ORC table at
`<t's location>/_ingest_progress` (hidden: Hive, Trino and our own scans of `t` skip `_`
directories). A micro-batch's transaction allocates a write id P on it next to its data's,
writes one row (sink id, batch id, the data's write id, the Kafka offset ranges) to
`delta_P_P_0000/bucket_00000`, and commits: the row is committed exactly when the data is.
Reading progress is reading the progress table's committed snapshot with our own reader. The
side-table machinery (registration, the one-delta write, the cached reads) is `table.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ingest.acid import ValidWriteIdList
from ingest.txn.hms.side.table import SideRows, SideTable, write_delta
from ingest.txn.hms.thrift import HiveTable, HmsConnection
from ingest.txn.model import OffsetRange, SinkProgress

_OFFSET = pa.struct([("topic", pa.string()), ("kafka_partition", pa.int32()),
                     ("from_offset", pa.int64()), ("until_offset", pa.int64())])
PROGRESS_SCHEMA = pa.schema([
    ("sink_id", pa.string()),
    ("batch_id", pa.int64()),
    ("write_id", pa.int64()),
    ("offsets", pa.list_(_OFFSET)),
])
"""One row per committed micro-batch: which sink and batch, the target's write id, the ranges.
A commit with offsets but no sink has null sink_id and batch_id."""

PROGRESS_OF = "ingest.progress_of"
"""The progress table's parameter naming the table whose progress it holds."""
PROGRESS = SideTable("progress", PROGRESS_SCHEMA, PROGRESS_OF, "the streaming progress")
SUFFIX = PROGRESS.suffix
DIRECTORY = PROGRESS.directory


@dataclass(frozen=True)
class ProgressRow:
    """One committed micro-batch (or offsets-only commit) of a target table."""

    sink_id: str | None
    batch_id: int | None
    write_id: int
    offsets: tuple[OffsetRange, ...]


def progress_name(table: str) -> str:
    """`db.t__ingest_progress` for target `db.t`."""
    return PROGRESS.name(table)


def progress_location(table_location: str) -> str:
    """`<target location>/_ingest_progress`, hidden inside the target's directory."""
    return PROGRESS.location(table_location)


def is_progress_table(name: str) -> bool:
    """Whether `name` names a progress table (by its suffix)."""
    return name.endswith(SUFFIX)


def find_progress_table(conn: HmsConnection, target: HiveTable) -> HiveTable | None:
    """The target's progress table, or None when no sink committed to it yet.

    Raises:
        MetastoreError: the metastore failed.
    """
    return PROGRESS.find(conn, target)


def ensure_progress_table(conn: HmsConnection, target: HiveTable) -> HiveTable:
    """The target's progress table, registered first when missing.

    Raises:
        ConfigError: the server refused the definition.
        MetastoreError: the metastore failed.
    """
    return PROGRESS.ensure(conn, target)


def write_progress(table: HiveTable, write_id: int, sink: SinkProgress | None,
                   data_write_id: int, offsets: list[OffsetRange]) -> str:
    """Write the one-row delta of write id `write_id` of progress table `table`; returns the
    bucket file's path. Durable when this returns (the writer's close flushes it).

    Raises:
        FileExistsError: the delta's bucket file exists (never for a freshly allocated id).
        OSError: the storage failed.
    """
    row = pa.table({
        "sink_id": [None if sink is None else sink.sink_id],
        "batch_id": [None if sink is None else sink.batch_id],
        "write_id": [data_write_id],
        "offsets": [[{"topic": r.topic, "kafka_partition": r.partition,
                      "from_offset": r.from_offset, "until_offset": r.until_offset}
                     for r in offsets]],
    }, schema=PROGRESS_SCHEMA)
    return write_delta(table, write_id, row)


def _rows_of(table: pa.Table) -> list[ProgressRow]:
    return [ProgressRow(row["sink_id"], row["batch_id"], int(row["write_id"]),
                        tuple(OffsetRange(o["topic"], o["kafka_partition"], o["from_offset"],
                                          o["until_offset"]) for o in row["offsets"] or ()))
            for row in table.to_pylist()]


class ProgressCache:
    """Committed progress rows by progress table, each committed delta read once
    (`SideRows`)."""

    def __init__(self) -> None:
        self._rows = SideRows(PROGRESS_SCHEMA, _rows_of)

    def rows(self, table: HiveTable, snapshot: ValidWriteIdList) -> list[ProgressRow]:
        """Every committed row of progress table `table` as of `snapshot` (its own).

        Raises:
            CorruptFileError: a committed delta does not read.
            OSError: the storage failed.
        """
        return self._rows.rows(table, snapshot)


__all__ = [
    "DIRECTORY",
    "PROGRESS",
    "PROGRESS_OF",
    "PROGRESS_SCHEMA",
    "SUFFIX",
    "ProgressCache",
    "ProgressRow",
    "ensure_progress_table",
    "find_progress_table",
    "is_progress_table",
    "progress_location",
    "progress_name",
    "write_progress",
]
