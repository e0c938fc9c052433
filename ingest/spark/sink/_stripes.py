"""A shuffled micro-batch: its rows encoded as ORC where they are parsed, its files written
after the shuffle. It serves every micro-batch that is shuffled so that each table partition
and bucket has one writer (`file_layout="partition"` on unbucketed and bucketed tables alike,
and bucketed tables under `file_layout="task"`), unless its partition column is computed by
a Spark SQL expression (then parsed rows cross the shuffle, `_tasks`) or it is small enough
for one task to read and write it all (`one_task_records`, `_batch`).

The parse stage (`parse_stripes_task`, one task per Kafka read task) splits its records as a
one-stage task does (`_tasks`), groups the good rows by shuffle key (table partition, then
bucket on a bucketed table, else writer slot), buffers each group up to a flush's rows or a
stripe's bytes and encodes it as a stripe piece with the table's codec
(`ingest.acid.encode_piece`): the costly encoding runs in every parse task, and the shuffle
moves compressed ORC, not Arrow. Dead letters and the task's records (offsets read,
tombstones, new fields) follow as Arrow IPC (`_packed`).
The write stage (`write_stripes_task`, one task per shuffle partition) only wraps each piece
into an ACID stripe (event columns, row ids counting on in its file) and appends it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from ingest.acid import BucketFileOptions, encode_piece, piece_encoder
from ingest.records import FieldSeen, merge_fields, split_rows
from ingest.spark.sink._packed import Key, PackKind, from_ipc, packed, to_ipc, unpacked
from ingest.spark.sink._results import (
    BadRecords,
    NewFields,
    OffsetsRead,
    TaskResult,
    Tombstones,
    from_arrow,
    merge_offsets,
    offsets_read,
    to_arrow,
)
from ingest.spark.sink._tasks import TaskPlan, _split_kafka, _TaskWriter


@dataclass
class _Group:
    """A group's rows not yet encoded."""

    tables: list[pa.Table] = field(default_factory=list)
    rows: int = 0
    nbytes: int = 0


class _Pieces:
    """The parse task's groups, encoded into pieces as they fill."""

    def __init__(self, plan: TaskPlan) -> None:
        self.options = BucketFileOptions(write_id=plan.target.write_id, row_schema=plan.row_schema,
                                         compression=plan.target.compression)  # type: ignore[arg-type]
        self.encoder = piece_encoder(self.options)
        # A write task flushes every flush_rows rows of a file, which ends a stripe anyway.
        self.max_rows = plan.options.flush_rows
        self.max_bytes = self.options.tuning.stripe_size_bytes
        self.groups: dict[Key, _Group] = {}
        self.buffered_bytes = 0

    def add(self, key: Key, rows: pa.Table) -> list[tuple[Key, PackKind, pa.Buffer]]:
        """Buffer `rows` in their group; the pieces of the group's full stripes."""
        group = self.groups.setdefault(key, _Group())
        group.tables.append(rows)
        group.rows += rows.num_rows
        group.nbytes += rows.nbytes
        self.buffered_bytes += rows.nbytes
        if self.buffered_bytes >= self.max_bytes:
            # Many small groups: a stripe's bytes in all is what a task holds unencoded.
            return self.finish()
        if group.rows < self.max_rows and group.nbytes < self.max_bytes:
            return []
        return self._encode(key, whole=False)

    def finish(self) -> list[tuple[Key, PackKind, pa.Buffer]]:
        """The pieces of every group's rows still buffered."""
        return [piece for key in list(self.groups) for piece in self._encode(key, whole=True)]

    def _encode(self, key: Key, *, whole: bool) -> list[tuple[Key, PackKind, pa.Buffer]]:
        group = self.groups.pop(key)
        self.buffered_bytes -= group.nbytes
        table = pa.concat_tables(group.tables) if len(group.tables) > 1 else group.tables[0]
        step = max(1, min(self.max_rows, table.num_rows * self.max_bytes // max(group.nbytes, 1)))
        out = []
        start = 0
        while table.num_rows - start >= (1 if whole else step):
            piece = table.slice(start, step)
            out.append((key, PackKind.STRIPE,
                        encode_piece(piece, self.options, encoder=self.encoder)))
            start += piece.num_rows
        if start < table.num_rows:  # less than a piece: keep it for the group's next rows
            rest = table.slice(start)
            self.groups[key] = _Group([rest], rest.num_rows, rest.nbytes)
            self.buffered_bytes += rest.nbytes
        return out


def parse_stripes_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]
                       ) -> Iterator[pa.RecordBatch]:
    """The parse stage: packed rows (`_packed.PACKED_SCHEMA`) of stripe pieces, dead letters
    and, last, this task's records."""
    pieces = _Pieces(plan)
    read: list[OffsetsRead] = []
    tombstones = 0
    seen: dict[str, FieldSeen] = {}
    holding = 0
    good_seen = 0
    every = plan.options.writer_split_rows
    for batch in batches:
        if batch.num_rows == 0:
            continue
        split = _split_kafka(plan, batch)
        read = merge_offsets([*read, *offsets_read(split.topics, split.partitions,
                                                   split.offsets)])
        tombstones += split.tombstones
        if split.new_fields is not None:
            seen = merge_fields(seen, split.new_fields.fields)
            holding += split.new_fields.records
        out: list[tuple[Key, PackKind, pa.Buffer]] = []
        if split.bad.num_rows:
            if plan.options.on_bad_record == "fail":
                first = split.bad.slice(0, 1).to_pylist()[0]
                # The micro-batch fails: nothing else of this task matters.
                yield packed([(_records_key(good_seen, plan), PackKind.RECORDS, to_ipc(to_arrow(
                    [BadRecords(first["topic"], first["partition"], first["offset"],
                                first["error"], split.bad.num_rows)])))])
                return
            out.append((_records_key(good_seen, plan), PackKind.DEAD_LETTERS,
                        to_ipc(split.bad)))
        rows = split.good.select(plan.row_schema.names).cast(plan.row_schema)
        for start, count, slot in _slot_ranges(good_seen, rows.num_rows,
                                               every if not plan.bucket_count else 0):
            out += _grouped(plan, pieces, rows.slice(start, count),
                            _sliced(split.partition, start, count),
                            _sliced(split.bucket, start, count), slot)
        good_seen += rows.num_rows
        if out:
            yield packed(out)
    records: list[TaskResult] = [*read, *([Tombstones(tombstones)] if tombstones else []),
                                 *([NewFields(seen, holding)] if seen else [])]
    last = pieces.finish()
    if records:
        last.append((_records_key(good_seen, plan), PackKind.RECORDS,
                     to_ipc(to_arrow(records))))
    if last:
        yield packed(last)


def _records_key(good_seen: int, plan: TaskPlan) -> Key:
    """The key of dead letters and records: no table partition or bucket."""
    return (None, None, None if plan.bucket_count
            else good_seen // plan.options.writer_split_rows)


def _slot_ranges(first: int, count: int, every_rows: int) -> Iterator[tuple[int, int, int | None]]:
    """(start, rows, slot) of the runs of rows `first .. first+count-1` of a parse task that
    share a writer slot (`_tasks.writer_slots`); one run, slot None, when every_rows is 0."""
    if not every_rows:
        if count:
            yield 0, count, None
        return
    start = 0
    while start < count:
        slot = (first + start) // every_rows
        rows = min(count - start, (slot + 1) * every_rows - first - start)
        yield start, rows, slot
        start += rows


def _sliced(values: pa.Array | None, start: int, count: int) -> pa.Array | None:
    return None if values is None else values.slice(start, count)


def _grouped(plan: TaskPlan, pieces: _Pieces, rows: pa.Table, partition: pa.Array | None,
             bucket: pa.Array | None, slot: int | None
             ) -> list[tuple[Key, PackKind, pa.Buffer]]:
    """Buffer `rows` (of one slot) by (partition, bucket); the pieces that filled."""
    partitions = None
    if partition is not None:
        assert plan.partition_column is not None
        partitions = pa.table({plan.partition_column: partition})
    out = []
    for part, bucket_id, group in split_rows(rows, partitions, bucket_ids=bucket):
        out += pieces.add((part, bucket_id if plan.bucket_count else None, slot), group)
    return out


def write_stripes_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]
                       ) -> Iterator[pa.RecordBatch]:
    """The write stage: appends each piece to its bucket file, writes the dead letters, and
    yields one RESULT_SCHEMA batch of what it wrote and what the parse tasks reported."""
    writer = _TaskWriter.in_task(plan)
    reported: list[TaskResult] = []
    try:
        for batch in batches:
            for (part, bucket, _), kind, data in unpacked(batch):
                if kind is PackKind.STRIPE:
                    # Unbucketed rows go to the bucket named after the task: tasks never
                    # share a file.
                    writer.write_piece(f"{part}/" if part else "",
                                       writer.task_index if bucket is None else bucket, data)
                elif kind is PackKind.DEAD_LETTERS:
                    writer.write_dead(from_ipc(data))
                else:
                    records = from_arrow(from_ipc(data))
                    bad = [r for r in records if isinstance(r, BadRecords)]
                    if bad:
                        writer.abandon()
                        yield to_arrow(bad)
                        return
                    reported += records
        results = writer.finish()
    except BaseException:
        writer.abandon()
        raise
    yield to_arrow([*results, *_merged(reported)])


def _merged(records: list[TaskResult]) -> list[TaskResult]:
    """The parse tasks' records summed: offsets by topic partition, tombstones, new fields."""
    tombstones = sum(r.rows for r in records if isinstance(r, Tombstones))
    new = [r for r in records if isinstance(r, NewFields)]
    seen = merge_fields(*(r.fields for r in new))
    return [*merge_offsets(r for r in records if isinstance(r, OffsetsRead)),
            *([Tombstones(tombstones)] if tombstones else []),
            *([NewFields(seen, sum(r.records for r in new))] if seen else [])]


__all__ = ["parse_stripes_task", "write_stripes_task"]
