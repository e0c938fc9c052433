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
Reading progress is reading the progress table's committed snapshot with our own reader.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pyarrow as pa

from ingest.acid import (
    BucketFileOptions,
    BucketWriter,
    ValidWriteIdList,
    format_delta,
    read_bucket_file,
    read_table,
    write_acid_version_file,
)
from ingest.errors import TableExistsError, TableNotFoundError
from ingest.io import storage
from ingest.txn.hms.connection import HmsConnection
from ingest.txn.hms.tables import HiveTable, HiveTableSpec, create_table, get_table, hive_columns
from ingest.txn.locations import normalize_location
from ingest.txn.model import OffsetRange, SinkProgress

SUFFIX = "__ingest_progress"
DIRECTORY = "_ingest_progress"
PROGRESS_OF = "ingest.progress_of"
"""The progress table's parameter naming the table whose progress it holds."""

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


@dataclass(frozen=True)
class ProgressRow:
    """One committed micro-batch (or offsets-only commit) of a target table."""

    sink_id: str | None
    batch_id: int | None
    write_id: int
    offsets: tuple[OffsetRange, ...]


def progress_name(table: str) -> str:
    """`db.t__ingest_progress` for target `db.t`."""
    return table + SUFFIX


def progress_location(table_location: str) -> str:
    """`<target location>/_ingest_progress`, hidden inside the target's directory."""
    return table_location.rstrip("/") + "/" + DIRECTORY


def is_progress_table(name: str) -> bool:
    """Whether `name` names a progress table (by its suffix)."""
    return name.endswith(SUFFIX)


def find_progress_table(conn: HmsConnection, target: HiveTable) -> HiveTable | None:
    """The target's progress table, or None when no sink committed to it yet.

    Raises:
        MetastoreError: the metastore failed.
    """
    try:
        return get_table(conn, progress_name(target.name))
    except TableNotFoundError:
        return None


def ensure_progress_table(conn: HmsConnection, target: HiveTable) -> HiveTable:
    """The target's progress table, registered first when missing (another writer may race
    us to it: its table is as good as ours).

    Raises:
        ConfigError: the server refused the definition.
        MetastoreError: the metastore failed.
    """
    found = find_progress_table(conn, target)
    if found is not None:
        return found
    spec = HiveTableSpec(progress_name(target.name), hive_columns(PROGRESS_SCHEMA),
                         location=progress_location(target.location),
                         properties={PROGRESS_OF: target.name,
                                     "comment": f"ingest: the streaming progress of "
                                                f"{target.name}, committed with its data"})
    try:
        return create_table(conn, spec)
    except TableExistsError:
        return get_table(conn, spec.name)


def write_progress(table: HiveTable, write_id: int, sink: SinkProgress | None,
                   data_write_id: int, offsets: list[OffsetRange]) -> str:
    """Write the one-row delta of write id `write_id` of progress table `table`; returns the
    bucket file's path. Durable when this returns (the writer's close flushes it).

    Raises:
        FileExistsError: the delta's bucket file exists (never for a freshly allocated id).
        OSError: the storage failed.
    """
    fs, root = storage.url_to_fs(normalize_location(table.location))
    directory = f"{str(root).rstrip('/')}/{format_delta(write_id, write_id, 0)}"
    row = pa.table({
        "sink_id": [None if sink is None else sink.sink_id],
        "batch_id": [None if sink is None else sink.batch_id],
        "write_id": [data_write_id],
        "offsets": [[{"topic": r.topic, "kafka_partition": r.partition,
                      "from_offset": r.from_offset, "until_offset": r.until_offset}
                     for r in offsets]],
    }, schema=PROGRESS_SCHEMA)
    path = f"{directory}/bucket_00000"
    writer = BucketWriter.create(path, BucketFileOptions(write_id=write_id,
                                                         row_schema=PROGRESS_SCHEMA,
                                                         compression="zlib"), fs=fs)
    try:
        writer.write(row)
    finally:
        writer.close()
    write_acid_version_file(fs, directory)
    return path


def _rows_of(table: pa.Table) -> list[ProgressRow]:
    return [ProgressRow(row["sink_id"], row["batch_id"], int(row["write_id"]),
                        tuple(OffsetRange(o["topic"], o["kafka_partition"], o["from_offset"],
                                          o["until_offset"]) for o in row["offsets"] or ()))
            for row in table.select(PROGRESS_SCHEMA.names).to_pylist()]


class ProgressCache:
    """Committed progress rows by progress table, read once per committed write id.

    A committed delta never changes, so each is read once: a lookup reads the deltas of
    write ids committed since the last one, each straight from `delta_P_P_0000` (one small
    file per micro-batch, not the whole table again). When one is missing (Hive's compactor
    merged it), the whole committed snapshot is read with our reader instead.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, dict[int, list[ProgressRow]]] = {}

    def rows(self, table: HiveTable, snapshot: ValidWriteIdList) -> list[ProgressRow]:
        """Every committed row of progress table `table` as of `snapshot` (its own).

        Raises:
            CorruptFileError: a committed delta does not read.
            OSError: the storage failed.
        """
        location = normalize_location(table.location)
        key = f"{table.name}@{location}"
        committed = [w for w in range(1, snapshot.high_watermark + 1) if snapshot.is_valid(w)]
        with self._lock:
            known = self._rows.setdefault(key, {})
            missing = [w for w in committed if w not in known]
        if missing:
            fresh = self._read(location, snapshot, missing, committed)
            with self._lock:
                known.update(fresh)
        with self._lock:
            return [r for w in committed for r in known.get(w, ())]

    @staticmethod
    def _read(location: str, snapshot: ValidWriteIdList, missing: list[int],
              committed: list[int]) -> dict[int, list[ProgressRow]]:
        fs, root = storage.url_to_fs(location)
        fresh: dict[int, list[ProgressRow]] = {}
        for w in missing:
            path = f"{str(root).rstrip('/')}/{format_delta(w, w, 0)}/bucket_00000"
            if not fs.exists(path):
                break
            struct = read_bucket_file(path, fs=fs).column("row").combine_chunks()
            fresh[w] = _rows_of(pa.Table.from_struct_array(struct)) if len(struct) else []
        else:
            return fresh
        # Compacted (or otherwise laid out differently): the whole snapshot, by write id.
        table = read_table(location, snapshot, with_row_id=True)
        ids = [r["writeid"] for r in table.column("row__id").to_pylist()]
        by_id: dict[int, list[ProgressRow]] = {w: [] for w in committed}
        for w, row in zip(ids, _rows_of(table), strict=True):
            by_id.setdefault(int(w), []).append(row)
        return by_id


__all__ = [
    "DIRECTORY",
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
