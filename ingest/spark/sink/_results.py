"""What the sink's write tasks report to the driver: typed records, carried as Arrow rows.

A mapInArrow task can hand the driver only rows of one declared schema, so every record
travels as one RESULT_SCHEMA row whose `kind` names its type; `to_arrow` and `from_arrow` are
the only code that knows that encoding. `merge_offsets` is the one place Kafka offset ranges
of a topic partition are combined (across a task's input batches and across tasks).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from ingest.records import FieldSeen
from ingest.txn import OffsetRange

WriteTarget = Literal["table", "dead_letter"]


class ResultKind(StrEnum):
    """The `kind` column of a result row."""

    FILE_WRITTEN = "file"
    OFFSETS_READ = "offsets"
    BAD_RECORDS = "bad"
    TOMBSTONES = "tombstones"
    CHANGES_APPLIED = "changes"
    NEW_FIELDS = "new_fields"


@dataclass(frozen=True)
class FileWritten:
    """A bucket file a task wrote (still at its staging path when `staging` is set).

    Attributes:
        target: which table the file belongs to.
        path: the file's final path.
        staging: the hidden path the attempt wrote, renamed to `path` by the driver; None
            when the task wrote `path` itself (transaction batches; a first attempt on an
            object store).
        rows: rows the task wrote to it.
        bytes: bytes the task added to it.
        length: the file's length after the task's last flush.
        tail_hash: the manifest's hash of the tail ending at `length` (docs/format.md §20).
        events: events the file holds up to `length` (a transaction batch's file: of every
            transaction so far).
    """

    target: WriteTarget
    path: str
    staging: str | None
    rows: int
    bytes: int
    length: int
    tail_hash: str | None = None
    events: int | None = None

    @property
    def directory(self) -> str:
        return self.path.rsplit("/", 1)[0]


@dataclass(frozen=True)
class OffsetsRead:
    """Kafka offsets min_offset..max_offset (inclusive) of one partition that a task consumed.

    Attributes:
        topic, partition: the Kafka topic partition.
        min_offset, max_offset: the lowest and highest offset seen.
        rows: how many records (fewer than the span when the log has gaps).
    """

    topic: str
    partition: int
    min_offset: int
    max_offset: int
    rows: int

    def as_range(self) -> OffsetRange:
        """The metastore's [from_offset, until_offset) form."""
        return OffsetRange(self.topic, self.partition, self.min_offset, self.max_offset + 1)


@dataclass(frozen=True)
class BadRecords:
    """Records a task could not parse with on_bad_record="fail" (the task wrote nothing).

    Attributes:
        topic, partition, offset: where the first of them is.
        error: why it did not parse.
        rows: how many bad records the task's failing input batch held.
    """

    topic: str
    partition: int
    offset: int
    error: str
    rows: int


@dataclass(frozen=True)
class Tombstones:
    """How many records without a value (tombstones) a task read, skipped or dead-lettered.

    Attributes:
        rows: the count.
    """

    rows: int


@dataclass(frozen=True)
class ChangesApplied:
    """What a keyed task's changes did (--mode upsert|cdc), key by key.

    Attributes:
        counts: `ChangeCounts` fields by name (events, keys, inserted, updated, deleted,
            unchanged, stale, absent, rows_scanned, buckets_read, lookup_s).
    """

    counts: dict[str, float]


@dataclass(frozen=True)
class NewFields:
    """Top-level fields a task's records held that the table has no column for.

    Attributes:
        fields: by name: kinds, records and the first record (`ingest.records.FieldSeen`).
        records: how many records held at least one (each counted once).
    """

    fields: dict[str, FieldSeen]
    records: int


TaskResult = FileWritten | OffsetsRead | BadRecords | Tombstones | ChangesApplied | NewFields

RESULT_DDL = ("kind string, target string, path string, staging string, rows long, "
              "bytes long, length long, tail_hash string, events long, topic string, "
              "kafka_partition int, min_offset long, max_offset long, error string, "
              "counts string")
RESULT_SCHEMA = pa.schema([
    ("kind", pa.string()), ("target", pa.string()), ("path", pa.string()),
    ("staging", pa.string()), ("rows", pa.int64()), ("bytes", pa.int64()),
    ("length", pa.int64()), ("tail_hash", pa.string()), ("events", pa.int64()),
    ("topic", pa.string()), ("kafka_partition", pa.int32()),
    ("min_offset", pa.int64()), ("max_offset", pa.int64()), ("error", pa.string()),
    ("counts", pa.string()),
])


def to_arrow(results: Sequence[TaskResult]) -> pa.RecordBatch:
    """One RESULT_SCHEMA row per record (columns a record does not have are null)."""
    rows: list[dict[str, object]] = []
    for r in results:
        match r:
            case FileWritten():
                rows.append({"kind": ResultKind.FILE_WRITTEN.value, "target": r.target,
                             "path": r.path, "staging": r.staging, "rows": r.rows,
                             "bytes": r.bytes, "length": r.length, "tail_hash": r.tail_hash,
                             "events": r.events})
            case OffsetsRead():
                rows.append({"kind": ResultKind.OFFSETS_READ.value, "topic": r.topic,
                             "kafka_partition": r.partition, "min_offset": r.min_offset,
                             "max_offset": r.max_offset, "rows": r.rows})
            case BadRecords():
                rows.append({"kind": ResultKind.BAD_RECORDS.value, "topic": r.topic,
                             "kafka_partition": r.partition, "min_offset": r.offset,
                             "error": r.error, "rows": r.rows})
            case Tombstones():
                rows.append({"kind": ResultKind.TOMBSTONES.value, "rows": r.rows})
            case ChangesApplied():
                rows.append({"kind": ResultKind.CHANGES_APPLIED.value,
                             "counts": json.dumps(r.counts, sort_keys=True)})
            case NewFields():  # the fields travel as JSON in `counts`
                rows.append({"kind": ResultKind.NEW_FIELDS.value, "rows": r.records,
                             "counts": json.dumps({n: asdict(f) for n, f in r.fields.items()},
                                                  sort_keys=True)})
    return pa.RecordBatch.from_pylist(rows, schema=RESULT_SCHEMA)


def from_arrow(data: pa.Table | pa.RecordBatch) -> list[TaskResult]:
    """The records of RESULT_SCHEMA rows (the inverse of `to_arrow`).

    Raises:
        ValueError: a row's kind is not a ResultKind.
    """
    out: list[TaskResult] = []
    for row in data.to_pylist():
        kind = ResultKind(row["kind"])
        if kind is ResultKind.FILE_WRITTEN:
            out.append(FileWritten(row["target"], row["path"], row["staging"], row["rows"],
                                   row["bytes"], row["length"], row["tail_hash"],
                                   row["events"]))
        elif kind is ResultKind.OFFSETS_READ:
            out.append(OffsetsRead(row["topic"], row["kafka_partition"], row["min_offset"],
                                   row["max_offset"], row["rows"]))
        elif kind is ResultKind.TOMBSTONES:
            out.append(Tombstones(row["rows"]))
        elif kind is ResultKind.CHANGES_APPLIED:
            out.append(ChangesApplied(json.loads(row["counts"])))
        elif kind is ResultKind.NEW_FIELDS:
            fields = {n: FieldSeen(**f) for n, f in json.loads(row["counts"]).items()}
            out.append(NewFields(fields, row["rows"]))
        else:
            out.append(BadRecords(row["topic"], row["kafka_partition"], row["min_offset"],
                                  row["error"], row["rows"]))
    return out


def offsets_read(topics: pa.Array, partitions: pa.Array, offsets: pa.Array) -> list[OffsetsRead]:
    """The offset range of each topic partition among the given records (one input batch)."""
    if len(offsets) and not (topics.null_count or partitions.null_count or offsets.null_count):
        # A batch usually holds one topic partition (one read task's): no grouping needed.
        low, high = pc.min_max(partitions).values()
        if low == high and pc.all(pc.equal(topics, topics[0])).as_py():
            first, last = pc.min_max(offsets).values()
            return [OffsetsRead(topics[0].as_py(), low.as_py(), first.as_py(), last.as_py(),
                                len(offsets))]
    table = pa.table({"t": topics, "p": partitions, "o": offsets})
    grouped = table.group_by(["t", "p"]).aggregate([("o", "min"), ("o", "max"), ("o", "count")])
    return [OffsetsRead(r["t"], r["p"], r["o_min"], r["o_max"], r["o_count"])
            for r in grouped.to_pylist()]


def merge_offsets(reads: Iterable[OffsetsRead]) -> list[OffsetsRead]:
    """One range per topic partition: lowest min, highest max, rows summed; sorted."""
    merged: dict[tuple[str, int], OffsetsRead] = {}
    for r in reads:
        key = (r.topic, r.partition)
        cur = merged.get(key)
        merged[key] = r if cur is None else OffsetsRead(
            r.topic, r.partition, min(cur.min_offset, r.min_offset),
            max(cur.max_offset, r.max_offset), cur.rows + r.rows)
    return [merged[key] for key in sorted(merged)]


__all__ = [
    "RESULT_DDL",
    "RESULT_SCHEMA",
    "BadRecords",
    "ChangesApplied",
    "FileWritten",
    "NewFields",
    "OffsetsRead",
    "ResultKind",
    "TaskResult",
    "Tombstones",
    "from_arrow",
    "merge_offsets",
    "offsets_read",
    "to_arrow",
]
