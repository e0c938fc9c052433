"""What the AcidSink runs inside Spark tasks (mapInArrow): parse records, write bucket files.

Each task writes the rows it holds with `BucketWriter`, flushing every `flush_rows` rows, and
yields one small Arrow batch describing what it did (files, Kafka offset ranges, bad records).
It never talks to the metastore: the driver commits. Attempt safety (see driver.py):
- one delta per micro-batch: every attempt writes hidden staging files
  (`_tmp.bucket_N.<task attempt id>`), which only the driver renames to `bucket_N`; on an
  object store a task's first attempt writes `bucket_N` itself, created only if no object has
  the name (docs/invariants.md 8.4), and later attempts stage as above;
- transaction batches: a task first cuts each bucket file back to the length the driver says
  was committed before this micro-batch, so a retried attempt never duplicates rows.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid import BucketFileOptions, BucketWriter, rollback_file, side_file_path
from ingest.acid.format import bucket_file_name, bucket_ids
from ingest.io import files, storage
from ingest.records import (
    AvroFormat,
    FieldSeen,
    ParsedValues,
    as_text,
    dead_letters,
    fields_seen,
    from_text,
    holding,
    kept,
    merge_fields,
    parse_values,
    split_rows,
    types_from_text,
)
from ingest.spark.sink._results import (
    BadRecords,
    FileWritten,
    NewFields,
    OffsetsRead,
    TaskResult,
    Tombstones,
    WriteTarget,
    merge_offsets,
    offsets_read,
    to_arrow,
)
from ingest.table.write import KeySpec

if TYPE_CHECKING:
    from ingest.acid.read import ReadView
    from ingest.spark.options import SinkOptions
    from ingest.txn import TableDefinition

log = logging.getLogger(__name__)

# Columns the parse stage adds next to the parsed row columns (two-stage plans only).
META_KEY, META_VALUE = "__kafka_key", "__kafka_value"
META_TOPIC, META_PARTITION, META_OFFSET = "__kafka_topic", "__kafka_partition", "__kafka_offset"
META_ERROR, META_BUCKET, META_TOMBSTONE = "__error", "__bucket", "__tombstone"
# A good record's new top-level fields, {name: JSON kind} as JSON text (null: none).
META_NEW_FIELDS = "__new_fields"
# Under file_layout="partition" the write stage is partitioned by (table partition, slot): the
# row's position in its parse task // writer_split_rows (see `writer_slots`).
META_SLOT = "__slot"
META_FIELDS = [
    pa.field(META_KEY, pa.binary()), pa.field(META_VALUE, pa.binary()),
    pa.field(META_TOPIC, pa.string()), pa.field(META_PARTITION, pa.int32()),
    pa.field(META_OFFSET, pa.int64()), pa.field(META_ERROR, pa.string()),
    pa.field(META_BUCKET, pa.int32()), pa.field(META_TOMBSTONE, pa.bool_()),
    pa.field(META_SLOT, pa.int32()), pa.field(META_NEW_FIELDS, pa.string()),
]

DEAD_LETTER_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()), ("error", pa.string()),
])

@dataclass(frozen=True)
class DeltaTarget:
    """One of the two tables a micro-batch writes (the target, or its dead-letter table):
    where its rows go.

    Attributes:
        root: the table's fsspec URL.
        write_id: the micro-batch's write id in this table.
        delta_dir: the directory name its rows go to (`delta_W_W_0000`, or the run's
            `delta_W_{W+K-1}` with transaction batches).
        compression: the table's ORC codec.
    """

    root: str
    write_id: int
    delta_dir: str
    compression: str = "zlib"


@dataclass(frozen=True)
class TaskPlan:
    """Everything a write (or parse) task needs; pickled into each task.

    Attributes:
        target, dead_letter: the two tables the micro-batch writes (`DeltaTarget`).
        row_schema: the target's row columns (what BucketWriter writes).
        parse_schema: the JSON fields parsed: the row columns plus a bare partition field.
        partition_column: the single partition column, or None.
        partition_from: "field" (a parsed JSON field), "column" (computed before the write
            stage, present in its input) or "none".
        bucket_columns, bucket_count: Hive bucketing of the target (0 = unbucketed).
        append: transaction batches: append to bucket files shared by the run.
        close_files: append mode, last micro-batch of the run: close (final footer, side
            file removed) instead of leaving the files open.
        options: the sink's options (flush_rows, on_bad_record).
        committed_lengths: append mode: file path -> flush length committed before this batch.
        input: "kafka" (raw Kafka rows: parse here) or "parsed" (the parse stage ran
            before; a shuffle of stripe pieces has write tasks of its own, `_stripes`).
        parsed_arrow_schema: the exact Arrow schema the parse stage must yield.
        mode: "append", or keyed changes ("upsert", "cdc": `_keyed`).
        key: keyed modes: the checked key (and order-by column).
        table: keyed modes: the target's definition.
        view: keyed modes: the committed snapshot and manifest to look live rows up in,
            taken after the micro-batch's transaction opened.
        storage_options: the fsspec options of the two tables (the sink's own, nothing else
            of the driver's process): the task makes its filesystems with them (executors
            are other processes).
        avro: --value-format avro: the values' framing and writer schema; None: JSON.
    """

    target: DeltaTarget
    dead_letter: DeltaTarget
    row_schema: pa.Schema
    parse_schema: pa.Schema
    partition_column: str | None
    partition_from: Literal["field", "column", "none"]
    bucket_columns: tuple[str, ...]
    bucket_count: int
    append: bool
    close_files: bool
    options: SinkOptions
    committed_lengths: dict[str, int] = field(default_factory=dict, hash=False)
    # The tables' storage options (credentials among them: never in a repr).
    storage_options: dict[str, Any] = field(default_factory=dict, hash=False, repr=False)
    input: Literal["kafka", "parsed"] = "kafka"
    parsed_arrow_schema: pa.Schema | None = None
    mode: Literal["append", "upsert", "cdc"] = "append"
    key: KeySpec | None = None
    table: TableDefinition | None = field(default=None, hash=False, repr=False)
    view: ReadView | None = field(default=None, hash=False, repr=False)
    avro: AvroFormat | None = field(default=None, hash=False, repr=False)


@dataclass
class _Split:
    """One input batch, split: good rows (+ partition, bucket) and dead letters."""

    good: pa.Table
    partition: pa.Array | None
    bucket: pa.Array | None
    bad: pa.Table
    topics: pa.Array
    partitions: pa.Array
    offsets: pa.Array
    tombstones: int = 0
    new_fields: NewFields | None = None


def known_fields(plan: TaskPlan) -> list[str]:
    """The record fields the table has a place for: the parsed ones and the partition
    column (also when an expression computes it)."""
    names = list(plan.parse_schema.names)
    if plan.partition_column is not None and plan.partition_column not in names:
        names.append(plan.partition_column)
    return names


def judge_new_fields(plan: TaskPlan, parsed: ParsedValues, batch: pa.RecordBatch
                     ) -> tuple[ParsedValues, NewFields | None]:
    """Apply --on-new-field to the good records holding new top-level fields: dead-letter
    those the policy says (`ingest.records.fields.new_field_reason`), and sum up the fields
    of the records still written (what the driver fails on, adds as columns, or counts). The
    returned values' `new_by_field` holds just those fields (what META_NEW_FIELDS carries on).

    By field, with arrays (`ingest.records.new_fields`): the reasons are made once per group
    of records holding the same fields and kinds, not per record.
    """
    if not parsed.new_by_field:
        return parsed, None
    n = batch.num_rows
    known = known_fields(plan)
    good = np.zeros(n, dtype=bool)
    good[_positions(parsed.good)] = True
    # New fields of bad records are not judged; a field named like a partition column that
    # --partition-by computes has its place.
    fields = kept(parsed.new_by_field, good, drop=set(known) - set(plan.parse_schema.names))
    dead = dead_letters(fields, n, known, plan.options.on_new_field)
    if dead is not None:
        keep = pa.array(~dead.mask[_positions(parsed.good)])
        at, reasons = dead.at, dead.reasons
        if parsed.bad:
            before_at, before_reasons = parsed.bad_arrays()
            at = pa.concat_arrays([before_at, at])
            order = pc.sort_indices(at)
            at, reasons = at.take(order), pa.concat_arrays([before_reasons, reasons]).take(order)
        parsed = dataclasses.replace(
            parsed, rows=parsed.rows.filter(keep), good=parsed.good.filter(keep),
            bad=list(heapq.merge(parsed.bad, dead.records)) if parsed.bad else dead.records,
            bad_columns=(at, reasons))
        fields = kept(fields, ~dead.mask)
    parsed = dataclasses.replace(parsed, new_by_field=fields)
    if not fields:
        return parsed, None
    records = int(holding(fields, n).sum()) if len(fields) > 1 else len(
        next(iter(fields.values())).at)
    return parsed, NewFields(fields_seen(fields, _array(batch.column("topic")),
                                         _array(batch.column("partition")),
                                         _array(batch.column("offset")),
                                         types=parsed.new_field_types), records)


def _positions(indices: pa.Array) -> np.ndarray:
    return np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def parse_kafka_batch(plan: TaskPlan, batch: pa.RecordBatch,
                      parsed: ParsedValues | None = None
                      ) -> tuple[pa.Table, pa.Table, NewFields | None]:
    """Parse raw Kafka rows: (parsed good rows with their input index, dead-letter rows,
    the new fields the good records held). `parsed`: the batch's values already parsed
    (a many-table task parses a batch once for all its tables); None: parse them here."""
    if parsed is None:
        parsed = parse_values(plan, batch.column("value"), skip_tombstones=_skip_tombstones(plan))
    parsed, new = judge_new_fields(plan, parsed, batch)
    bad_idx, reasons = parsed.bad_arrays()
    source = pa.Table.from_batches([batch])
    bad = pa.table({
        "key": source.column("key").take(bad_idx),
        "value": source.column("value").take(bad_idx),
        "topic": source.column("topic").take(bad_idx),
        "partition": source.column("partition").take(bad_idx),
        "offset": source.column("offset").take(bad_idx),
        "error": reasons,
    }, schema=DEAD_LETTER_SCHEMA)
    return parsed.rows.append_column("__index", parsed.good), bad, new


def _split_kafka(plan: TaskPlan, batch: pa.RecordBatch,
                 parsed: ParsedValues | None = None) -> _Split:
    good, bad, new = parse_kafka_batch(plan, batch, parsed)
    good = good.drop_columns(["__index"])
    partition = None
    if plan.partition_from == "field":
        assert plan.partition_column is not None
        partition = pc.cast(good.column(plan.partition_column), pa.string()).combine_chunks()
    bucket = None
    if plan.bucket_count:
        bucket = bucket_ids(good, plan.bucket_columns, plan.bucket_count)
    return _Split(good, partition, bucket, bad, batch.column("topic"),
                  batch.column("partition"), batch.column("offset"),
                  batch.column("value").null_count, new)


def _skip_tombstones(plan: TaskPlan) -> bool:
    return plan.options.on_tombstone == "skip"


def _split_parsed(plan: TaskPlan, batch: pa.RecordBatch) -> _Split:
    table = pa.Table.from_batches([batch])
    error = table.column(META_ERROR)
    is_bad = pc.is_valid(error)
    tombstone = pc.fill_null(table.column(META_TOMBSTONE), False)
    bad_rows = table.filter(is_bad)
    bad = pa.table({
        "key": bad_rows.column(META_KEY), "value": bad_rows.column(META_VALUE),
        "topic": bad_rows.column(META_TOPIC), "partition": bad_rows.column(META_PARTITION),
        "offset": bad_rows.column(META_OFFSET), "error": bad_rows.column(META_ERROR),
    }, schema=DEAD_LETTER_SCHEMA)
    all_good = error.null_count == len(error) and not pc.any(tombstone).as_py()
    good_rows = table if all_good else table.filter(pc.and_(pc.invert(is_bad),
                                                            pc.invert(tombstone)))
    good = pa.table({f.name: pc.cast(good_rows.column(f.name), f.type, safe=False)
                     for f in plan.parse_schema}, schema=plan.parse_schema)
    partition = None
    if plan.partition_column is not None:
        partition = pc.cast(good_rows.column(plan.partition_column), pa.string()).combine_chunks()
    bucket = good_rows.column(META_BUCKET).combine_chunks() if plan.bucket_count else None
    return _Split(good, partition, bucket, bad, batch.column(META_TOPIC),
                  batch.column(META_PARTITION), batch.column(META_OFFSET),
                  pc.sum(pc.cast(tombstone, pa.int64())).as_py() or 0,
                  parsed_new_fields(table))


def parsed_new_fields(table: pa.Table) -> NewFields | None:
    """The new fields the parse stage noted on its good rows (META_NEW_FIELDS)."""
    if META_NEW_FIELDS not in table.column_names:
        return None
    texts = _array(table.column(META_NEW_FIELDS))
    if texts.null_count == len(texts):
        return None
    fields = fields_seen(from_text(texts), _array(table.column(META_TOPIC)),
                         _array(table.column(META_PARTITION)),
                         _array(table.column(META_OFFSET)), types=types_from_text(texts))
    return NewFields(fields, len(texts) - texts.null_count)


def parse_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The parse stage of a two-stage plan: Kafka rows -> parsed columns + META_FIELDS."""
    assert plan.parsed_arrow_schema is not None
    out_schema = plan.parsed_arrow_schema
    seen = 0
    for batch in batches:
        n = batch.num_rows
        parsed, _ = judge_new_fields(plan, parse_values(
            plan, batch.column("value"), skip_tombstones=_skip_tombstones(plan)), batch)
        rows = parsed.rows.combine_chunks()
        if rows.num_rows == n:  # every record good: nothing to scatter (the usual batch)
            columns = _all_good_columns(batch)
            for f in plan.parse_schema:
                columns[f.name] = rows.column(f.name)
            columns[META_BUCKET] = (bucket_ids(rows, plan.bucket_columns, plan.bucket_count)
                                    if plan.bucket_count else pa.nulls(n, pa.int32()))
            columns[META_SLOT] = writer_slots(seen, n, plan.options.writer_split_rows)
            columns[META_NEW_FIELDS] = new_fields_column(parsed, n)
            seen += n
            arrays = [_array(pc.cast(columns[f.name], f.type, safe=False)) for f in out_schema]
            yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)
            continue
        bad_at, reasons = parsed.bad_arrays()
        slot = np.full(n, -1, dtype=np.int64)
        slot[_positions(bad_at)] = np.arange(len(bad_at))
        error = reasons.take(pa.array(slot, mask=slot < 0))
        is_bad = pc.is_valid(error)
        # A skipped tombstone is neither good nor bad: the write stage counts and drops it.
        is_bad_or_skipped = pc.or_(is_bad, pc.fill_null(pc.is_null(batch.column("value")),
                                                         False))
        # Good rows never need their raw bytes again: only dead letters carry them on.
        null_bin = pa.nulls(n, pa.binary())
        columns = {
            META_KEY: pc.if_else(is_bad, batch.column("key"), null_bin),
            META_VALUE: pc.if_else(is_bad, batch.column("value"), null_bin),
            META_TOPIC: batch.column("topic"), META_PARTITION: batch.column("partition"),
            META_OFFSET: batch.column("offset"), META_ERROR: error,
            META_TOMBSTONE: pc.is_null(batch.column("value")),
        }
        # Scatter the good rows back to input positions (bad positions stay null).
        positions = pa.array(pc.fill_null(pc.cumulative_sum(
            pc.cast(pc.invert(is_bad_or_skipped), pa.int64())), 0).to_numpy() - 1)
        take = pc.if_else(is_bad_or_skipped, pa.nulls(n, pa.int64()), positions)
        for f in plan.parse_schema:
            columns[f.name] = rows.column(f.name).take(take)
        if plan.bucket_count:
            ids = bucket_ids(rows, plan.bucket_columns, plan.bucket_count)
            columns[META_BUCKET] = ids.take(take)
        else:
            columns[META_BUCKET] = pa.nulls(n, pa.int32())
        columns[META_SLOT] = writer_slots(seen, n, plan.options.writer_split_rows)
        columns[META_NEW_FIELDS] = new_fields_column(parsed, n)
        seen += n
        arrays = [_array(pc.cast(columns[f.name], f.type, safe=False)) for f in out_schema]
        yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def _all_good_columns(batch: pa.RecordBatch) -> dict[str, pa.Array]:
    """The META columns of a batch without dead letters or skipped tombstones."""
    n = batch.num_rows
    return {
        META_KEY: pa.nulls(n, pa.binary()), META_VALUE: pa.nulls(n, pa.binary()),
        META_TOPIC: batch.column("topic"), META_PARTITION: batch.column("partition"),
        META_OFFSET: batch.column("offset"), META_ERROR: pa.nulls(n, pa.string()),
        META_TOMBSTONE: pa.array(np.zeros(n, dtype=bool)),
    }


def new_fields_column(parsed: ParsedValues, n: int) -> pa.Array:
    """META_NEW_FIELDS of n input records: the new fields of each good one, else null."""
    good = np.zeros(n, dtype=bool)
    good[_positions(parsed.good)] = True
    return as_text(kept(parsed.new_by_field, good), n, parsed.new_field_types)


def writer_slots(first: int, count: int, every_rows: int) -> pa.Array:
    """Slots of rows `first .. first+count-1` of a parse task: a new slot every `every_rows`
    rows. While every parse task holds fewer rows than that, a table partition's rows share
    one shuffle key and so one writer; past it, Spark may hand the partition's slots to
    several write tasks (adaptive execution sizes them by bytes), so a large micro-batch
    still writes in parallel."""
    positions = np.arange(first, first + count, dtype=np.int64)
    return pa.array((positions // every_rows).astype(np.int32))


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


class _File:
    """One bucket file this task writes, and what it has written to it."""

    def __init__(self, writer: BucketWriter, path: str, staging: str | None,
                 start_length: int) -> None:
        self.writer, self.path, self.staging = writer, path, staging
        self.start_length = start_length
        self.rows = 0
        self.unflushed = 0


class _TaskWriter:
    """The bucket files of one task, keyed by (partition directory, bucket id)."""

    def __init__(self, plan: TaskPlan, task_index: int, attempt_id: int, *,
                 first_attempt: bool = False) -> None:
        self.plan = plan
        self.task_index, self.attempt_id = task_index, attempt_id
        self.fs, self.root = storage.url_to_fs(plan.target.root, plan.storage_options)
        self.dl_fs, self.dl_root = storage.url_to_fs(plan.dead_letter.root,
                                                     plan.storage_options)
        # On an object store a rename is a copy and a delete of each object: the task's
        # first attempt writes the final names instead. An object appears only when its
        # upload completes and only if the name is free (`files.create_new`), and nothing
        # counts before the commit lists it (docs/invariants.md 8.4, docs/format.md §23).
        # Only where the store refuses a taken name (S3): elsewhere a late attempt could
        # replace a committed object, so other object stores keep staging.
        self.direct = first_attempt and files.creates_exclusively(self.fs)
        self.dl_direct = first_attempt and files.creates_exclusively(self.dl_fs)
        self.files: dict[tuple[str, int], _File] = {}
        self.dead: _File | None = None

    @classmethod
    def in_task(cls, plan: TaskPlan, *, publish_directly: bool = True) -> _TaskWriter:
        """The writer of the running Spark task (task 0, attempt 0 outside one). Its first
        attempt may write final names where `publish_directly` and the store allows it."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return cls(plan, 0, 0)
        return cls(plan, ctx.partitionId(), ctx.taskAttemptId(),
                   first_attempt=publish_directly and ctx.attemptNumber() == 0)

    def _open(self, partition_dir: str, bucket_id: int) -> _File:
        plan, target = self.plan, self.plan.target
        directory = f"{self.root}/{partition_dir}{target.delta_dir}"
        path = f"{directory}/{bucket_file_name(bucket_id)}"
        options = BucketFileOptions(write_id=target.write_id, row_schema=plan.row_schema,
                                    bucket_id=bucket_id, compression=target.compression)  # type: ignore[arg-type]
        if not plan.append and self.direct:
            return _File(BucketWriter.create(path, options, fs=self.fs), path, None, 0)
        if not plan.append:
            staging = f"{directory}/_tmp.{bucket_file_name(bucket_id)}.{self.attempt_id}"
            writer = BucketWriter.create(staging, options, fs=self.fs)
            return _File(writer, path, staging, 0)
        committed = plan.committed_lengths.get(path)
        if committed is not None:
            rollback_file(self.fs, path, committed)
            writer = BucketWriter.open_append(
                path, BucketFileOptions(write_id=target.write_id), fs=self.fs)
            return _File(writer, path, None, committed)
        if self.fs.exists(path):  # left by a failed attempt of this micro-batch: not committed
            self.fs.rm_file(path)
        if self.fs.exists(side_file_path(path)):
            self.fs.rm_file(side_file_path(path))
        writer = BucketWriter.create(path, options, fs=self.fs)
        return _File(writer, path, None, 0)

    def write(self, partition_dir: str, bucket_id: int, rows: pa.Table) -> None:
        if rows.num_rows == 0:
            return
        key = (partition_dir, bucket_id)
        f = self.files.get(key)
        if f is None:
            f = self.files[key] = self._open(partition_dir, bucket_id)
        self._append(f, rows)

    def write_piece(self, partition_dir: str, bucket_id: int,
                    piece: bytes | memoryview | pa.Buffer) -> None:
        """Append a stripe piece (`ingest.acid.encode_piece`) to the bucket file."""
        key = (partition_dir, bucket_id)
        f = self.files.get(key)
        if f is None:
            f = self.files[key] = self._open(partition_dir, bucket_id)
        rows = f.writer.write_piece(piece)
        f.rows += rows
        f.unflushed += rows
        if f.unflushed >= self.plan.options.flush_rows:
            f.writer.flush()
            f.unflushed = 0

    def _append(self, f: _File, rows: pa.Table) -> None:
        step = self.plan.options.flush_rows
        offset = 0
        while offset < rows.num_rows:
            chunk = rows.slice(offset, step - f.unflushed)
            f.writer.write(chunk)
            f.rows += chunk.num_rows
            f.unflushed += chunk.num_rows
            offset += chunk.num_rows
            if f.unflushed >= step:
                f.writer.flush()
                f.unflushed = 0

    def write_dead(self, rows: pa.Table) -> None:
        if rows.num_rows == 0:
            return
        if self.dead is None:
            dead = self.plan.dead_letter
            directory = f"{self.dl_root}/{dead.delta_dir}"
            name = bucket_file_name(self.task_index)
            staging = (None if self.dl_direct
                       else f"{directory}/_tmp.{name}.{self.attempt_id}")
            options = BucketFileOptions(
                write_id=dead.write_id, row_schema=DEAD_LETTER_SCHEMA,
                bucket_id=self.task_index,
                compression=dead.compression)  # type: ignore[arg-type]
            writer = BucketWriter.create(staging or f"{directory}/{name}", options,
                                         fs=self.dl_fs)
            self.dead = _File(writer, f"{directory}/{name}", staging, 0)
        self._append(self.dead, rows)

    def finish(self) -> list[TaskResult]:
        """Flush (and close) every file; one record per file."""
        out: list[TaskResult] = []
        targets: list[tuple[WriteTarget, _File]] = [("table", f) for f in self.files.values()]
        if self.dead is not None:
            targets.append(("dead_letter", self.dead))
        for target, f in targets:
            length = f.writer.flush()
            if not self.plan.append or f is self.dead or self.plan.close_files:
                f.writer.close()
            else:
                f.writer.abandon()
            out.append(FileWritten(target, f.path, f.staging, f.rows, length - f.start_length,
                                   length, f.writer.tail_hash, f.writer.tail_rows))
        return out

    def abandon(self) -> None:
        """After a failure: close handles and remove this attempt's staging files.

        A final name this attempt completed stays: by now another attempt may own the name
        (a zombie must never delete it); uncommitted and unreported, the driver removes it
        before a commit (`publish_results`), an abort or the restart's repair after one."""
        for f in [*self.files.values(), *([self.dead] if self.dead else [])]:
            try:
                f.writer.abandon()
                if f.staging is not None:
                    fs = self.dl_fs if f is self.dead else self.fs
                    for p in (f.staging, side_file_path(f.staging)):
                        if fs.exists(p):
                            fs.rm_file(p)
            except OSError as e:  # the original error matters more; this is cleanup only
                log.warning("Cannot clean up %s after a failed task: %s", f.staging or f.path, e)


def _route(plan: TaskPlan, writer: _TaskWriter, split: _Split) -> None:
    rows = split.good.select(plan.row_schema.names).cast(plan.row_schema)
    partitions = None
    if split.partition is not None:
        assert plan.partition_column is not None
        partitions = pa.table({plan.partition_column: split.partition})
    # Unbucketed rows go to the bucket named after the task, so tasks never share a file.
    for part, bucket, group in split_rows(rows, partitions, bucket_ids=split.bucket,
                                          default_bucket_id=writer.task_index):
        writer.write(f"{part}/" if part else "", bucket, group)


class TableWrite:
    """One table's part of a write task: its bucket files and what its records said (offsets
    read, tombstones, new fields). `write_task` runs one; a many-table task one per table
    its rows route to (`_many_tasks`)."""

    def __init__(self, plan: TaskPlan) -> None:
        self.plan = plan
        self.writer = _TaskWriter.in_task(plan)
        self.read: list[OffsetsRead] = []
        self.tombstones = 0
        self.seen: dict[str, FieldSeen] = {}
        self.holding = 0

    def add(self, batch: pa.RecordBatch, parsed: ParsedValues | None = None
            ) -> BadRecords | None:
        """Parse and write a batch of Kafka rows (input "kafka") or parsed rows; with
        on_bad_record="fail", the first bad record instead (nothing of the batch written).
        `parsed`: the Kafka rows' values already parsed with this plan's parse (input
        "kafka" only)."""
        plan = self.plan
        split = (_split_kafka(plan, batch, parsed) if plan.input == "kafka"
                 else _split_parsed(plan, batch))
        self.read += offsets_read(split.topics, split.partitions, split.offsets)
        self.tombstones += split.tombstones
        if split.new_fields is not None:
            self.seen = merge_fields(self.seen, split.new_fields.fields)
            self.holding += split.new_fields.records
        if split.bad.num_rows and plan.options.on_bad_record == "fail":
            first = split.bad.slice(0, 1).to_pylist()[0]
            return BadRecords(first["topic"], first["partition"], first["offset"],
                              first["error"], split.bad.num_rows)
        _route(plan, self.writer, split)
        self.writer.write_dead(split.bad)
        return None

    def finish(self) -> list[TaskResult]:
        """Flush (and close) every file; the task's records."""
        return [*self.writer.finish(), *merge_offsets(self.read),
                *([Tombstones(self.tombstones)] if self.tombstones else []),
                *([NewFields(self.seen, self.holding)] if self.seen else [])]

    def abandon(self) -> None:
        self.writer.abandon()


def write_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The write stage: yields one RESULT_SCHEMA batch of records (see _results.py)."""
    task = TableWrite(plan)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            bad = task.add(batch)
            if bad is not None:
                task.abandon()
                yield to_arrow([bad])
                return
        results = task.finish()
    except BaseException:
        task.abandon()
        raise
    yield to_arrow(results)


__all__ = [
    "DEAD_LETTER_SCHEMA",
    "META_FIELDS",
    "META_NEW_FIELDS",
    "judge_new_fields",
    "new_fields_column",
    "parsed_new_fields",
    "META_SLOT",
    "TableWrite",
    "TaskPlan",
    "parse_task",
    "write_task",
]
