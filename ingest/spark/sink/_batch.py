"""One micro-batch of the AcidSink on the executors and back (driver.py owns the transaction).

`run_tasks` runs a `TaskPlan` as one or two mapInArrow stages over `_tasks.py`;
`publish_results` reads what the tasks report (`_results.py` records): it raises on
bad records, puts the winning attempts' files in place before the commit, and sums them into
a `BatchReport`;
`remove_staging_leftovers` deletes the other attempts' staging files after the commit.
It knows Spark, fsspec and the task results; it never calls the metastore.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import TYPE_CHECKING

import fsspec
import pyarrow as pa

from ingest.acid.format import write_acid_version_file
from ingest.errors import BadRecordError, IngestError
from ingest.io import can_append
from ingest.records import merge_fields
from ingest.spark.sink._keyed import KEYED_FIELDS, parse_changes_task, write_changes_task
from ingest.spark.sink._packed import PACK_BUCKET, PACK_PARTITION, PACK_SLOT, PACKED_DDL
from ingest.spark.sink._results import (
    RESULT_DDL,
    BadRecords,
    ChangesApplied,
    FileWritten,
    NewFields,
    OffsetsRead,
    TaskResult,
    Tombstones,
    from_arrow,
    merge_offsets,
)
from ingest.spark.sink._size import planned_records
from ingest.spark.sink._stripes import parse_stripes_task, write_stripes_task
from ingest.spark.sink._tasks import (
    META_BUCKET,
    META_FIELDS,
    META_SLOT,
    TaskPlan,
    parse_task,
    write_task,
)
from ingest.table.write import ChangeCounts
from ingest.txn import OffsetRange

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset"]
# A task attempt's staging files (and their side files): `_tmp.bucket_N.<attempt id>`.
_STAGING_PREFIX = "_tmp.bucket_"


@dataclass(frozen=True)
class BatchReport:
    """What one micro-batch did (also the per-batch log line).

    Attributes:
        batch_id: Spark's micro-batch id.
        write_id: the target's write id, or the committed one when skipped.
        rows: rows written to the target.
        dead_letters: records written to the dead-letter table.
        files: bucket files written (both tables).
        bytes: bytes added to bucket files.
        seconds: wall time of the micro-batch in the sink.
        offsets: the Kafka ranges the batch held.
        lag: records behind the topic's end after this batch, when known.
        skipped: the batch was already committed (a replay).
        tombstones: records without a value, skipped or dead-lettered (on_tombstone).
        on_tombstone: which of the two.
        partition_dirs: the target's partition directories (filesystem paths) it wrote to.
        dead_letter_dirs: the same for the dead-letter table (its root, when the batch held
            dead letters).
        commit_seconds: wall time of the metastore commit alone (progress included).
        changes: --mode upsert|cdc: what the changes did, summed over the tasks (`rows` then
            counts the new rows written, `files` the delete- and insert-event files).
        records_read: Kafka records the tasks read (good, bad and tombstones).
        new_fields: names of top-level fields that written records held and the table has
            no column for (--on-new-field ignore; records dead-lettered for them not
            included).
        new_field_records: written records that held such a field: with --on-new-field
            ignore, the records whose new fields were dropped.
        added_columns: --on-new-field evolve: the columns this micro-batch added, as
            "name TYPE".
        lost: with --fail-on-data-loss false, the offset ranges Kafka removed before the
            table committed them (each from the table's committed end to the broker's
            earliest offset); their records are not in the table.
    """

    batch_id: int
    write_id: int
    rows: int = 0
    dead_letters: int = 0
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    offsets: tuple[OffsetRange, ...] = ()
    lag: int | None = None
    skipped: bool = False
    tombstones: int = 0
    on_tombstone: str = "skip"
    partition_dirs: tuple[str, ...] = ()
    dead_letter_dirs: tuple[str, ...] = ()
    commit_seconds: float = 0.0
    changes: ChangeCounts | None = None
    records_read: int = 0
    new_fields: tuple[str, ...] = ()
    new_field_records: int = 0
    added_columns: tuple[str, ...] = ()
    lost: tuple[OffsetRange, ...] = ()

    @property
    def lost_records(self) -> int:
        """Offsets of `lost` (records, and any markers among them)."""
        return sum(r.until_offset - r.from_offset for r in self.lost)

    def line(self) -> str:
        if self.skipped:
            return (f"batch {self.batch_id}: already committed as write id {self.write_id}, "
                    "skipped (replay)")
        lag = "" if self.lag is None else f", kafka lag {self.lag:,}"
        c = self.changes
        keyed = "" if c is None else (
            f" ({c.events:,} events: {c.inserted:,} inserted, {c.updated:,} updated, "
            f"{c.deleted:,} deleted, {c.unchanged:,} unchanged, {c.stale:,} stale, "
            f"{c.absent:,} deletes of absent keys; {c.buckets_read} buckets read)")
        return (f"batch {self.batch_id}: write id {self.write_id}, {self.rows:,} rows{keyed}, "
                f"{self.dead_letters:,} dead letters, {self.tombstones:,} tombstones "
                f"({'skipped' if self.on_tombstone == 'skip' else 'dead-lettered'}), "
                f"{self.files} files, {self.bytes:,} bytes, "
                f"{self.seconds:.2f} s{lag}{self._fields_note()}")

    def _fields_note(self) -> str:
        added = f"; added columns {', '.join(self.added_columns)}" if self.added_columns else ""
        if self.lost:
            added += (f"; {self.lost_records:,} offsets lost before they were read ("
                      + ", ".join(f"{r.topic}-{r.partition} [{r.from_offset}, "
                                  f"{r.until_offset})" for r in self.lost)
                      + ", --fail-on-data-loss false)")
        if self.new_field_records:
            added += (f"; {self.new_field_records:,} records held fields the table lacks "
                      f"({', '.join(self.new_fields)}), dropped (--on-new-field ignore)")
        return added


@dataclass
class BatchTotals:
    """Sums over every micro-batch of a sink's life (the sink keeps only recent reports)."""

    batches: int = 0
    skipped: int = 0
    rows: int = 0
    dead_letters: int = 0
    files: int = 0
    bytes: int = 0
    tombstones: int = 0

    def add(self, report: BatchReport) -> None:
        self.batches += 1
        if report.skipped:
            self.skipped += 1
            return
        self.rows += report.rows
        self.dead_letters += report.dead_letters
        self.files += report.files
        self.bytes += report.bytes
        self.tombstones += report.tombstones


def run_tasks(batch_df: DataFrame, plan: TaskPlan, *,
              partition_expression: str | None) -> list[TaskResult]:
    """Parse and write on the executors; what the tasks reported."""
    with warnings.catch_warnings():
        # pyspark 4.3 warns on every mapInArrow that pandas 3 is "not yet fully
        # supported"; mapInArrow never touches pandas.
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support",
                                category=FutureWarning)
        return _run_tasks_quietly(batch_df, plan, partition_expression)


def _run_tasks_quietly(batch_df: DataFrame, plan: TaskPlan,
                       partition_expression: str | None) -> list[TaskResult]:
    kafka = batch_df.select(*KAFKA_COLUMNS)
    if plan.mode != "append":
        return _run_keyed(kafka, plan)
    by_partition = plan.options.file_layout == "partition"
    # A shuffle gives each table partition and bucket (or slot) one writer.
    shuffles = plan.bucket_count > 0 or by_partition
    two_stage = plan.partition_from == "column" or shuffles
    one_task = shuffles and small_batch(batch_df, plan)
    if one_task:
        # One task's files are already one per table partition and bucket: no shuffle, no
        # second Spark job (a narrow coalesce of the read tasks).
        kafka = kafka.coalesce(1)
    if not two_stage or (one_task and plan.partition_from != "column"):
        out = kafka.mapInArrow(partial(write_task, plan), RESULT_DDL)
    else:
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

        spark_schema = from_arrow_schema(pa.schema([*META_FIELDS, *plan.parse_schema]))
        tz = batch_df.sparkSession.conf.get("spark.sql.session.timeZone")
        parse_plan = replace(plan, parsed_arrow_schema=to_arrow_schema(spark_schema,
                                                                       timezone=tz))
        if plan.partition_from != "column":
            # The parse tasks encode their rows as ORC; the pieces cross the shuffle, a
            # group's rows per value (`_stripes`).
            packed = kafka.mapInArrow(partial(parse_stripes_task, plan), PACKED_DDL)
            if plan.bucket_count:
                packed = packed.repartition(plan.bucket_count, PACK_PARTITION, PACK_BUCKET)
            else:
                # No partition count: adaptive execution merges the small shuffle partitions
                # of a small micro-batch into one write task.
                packed = packed.repartition(PACK_PARTITION, PACK_SLOT)
            out = packed.mapInArrow(partial(write_stripes_task, plan), RESULT_DDL)
            return from_arrow(out.toArrow())
        # The partition column is a Spark SQL expression over the parsed rows: rows shuffled.
        parsed = kafka.mapInArrow(partial(parse_task, parse_plan), spark_schema)
        if plan.partition_from == "column":
            assert plan.partition_column is not None and partition_expression
            parsed = parsed.withColumn(plan.partition_column,
                                       F.expr(partition_expression).cast("string"))
        keys = [plan.partition_column] if plan.partition_column else []
        if one_task:
            pass  # the parse and the write in the same task: nothing to shuffle
        elif plan.bucket_count:
            # A bucket file has one writer: every row of a (partition, bucket) in one task.
            parsed = parsed.repartition(plan.bucket_count, *keys, META_BUCKET)
        elif by_partition:
            # No partition count: adaptive execution merges the small shuffle partitions of a
            # small micro-batch into one write task, and splits a large one by data size.
            parsed = parsed.repartition(*keys, META_SLOT)
        out = parsed.mapInArrow(partial(write_task, replace(plan, input="parsed")),
                                RESULT_DDL)
    return from_arrow(out.toArrow())


def small_batch(batch_df: DataFrame, plan: TaskPlan) -> bool:
    """Whether the micro-batch is known, from its offset ranges, to hold at most
    `one_task_records` records (and no more than `writer_split_rows`, which would split a
    table partition's rows among writers): then one task reads, parses and writes it all,
    which spares a small micro-batch the shuffle and its second Spark job
    (docs/architecture.md §3.1)."""
    limit = min(plan.options.one_task_records, plan.options.writer_split_rows)
    if limit <= 0:
        return False
    records = planned_records(batch_df)
    return records is not None and records <= limit


def _run_keyed(kafka: DataFrame, plan: TaskPlan) -> list[TaskResult]:
    """Keyed changes: parse, shuffle by (partition, bucket) so one task holds every event of
    its keys, then write each task's buckets (`_keyed`)."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    spark_schema = from_arrow_schema(pa.schema([*META_FIELDS, *KEYED_FIELDS,
                                                *plan.parse_schema]))
    tz = kafka.sparkSession.conf.get("spark.sql.session.timeZone")
    parse_plan = replace(plan, parsed_arrow_schema=to_arrow_schema(spark_schema, timezone=tz))
    parsed = kafka.mapInArrow(partial(parse_changes_task, parse_plan), spark_schema)
    keys = [plan.partition_column] if plan.partition_column else []
    parsed = parsed.repartition(plan.bucket_count, *keys, META_BUCKET)
    out = parsed.mapInArrow(partial(write_changes_task, replace(plan, input="parsed")),
                            RESULT_DDL)
    return from_arrow(out.toArrow())


def publish_results(results: Sequence[TaskResult], *, plan: TaskPlan, batch_id: int,
                    fs: fsspec.AbstractFileSystem,
                    dl_fs: fsspec.AbstractFileSystem) -> BatchReport:
    """Check the task results, put the winning attempts' files in place (before commit).

    Args:
        results: the rows `run_tasks` collected.
        plan: the plan the tasks ran.
        batch_id: Spark's micro-batch id (for the report and the error).
        fs: the target table's filesystem.
        dl_fs: the dead-letter table's filesystem.

    Raises:
        BadRecordError: a task reported records it could not parse (on_bad_record="fail").
    """
    bad = [r for r in results if isinstance(r, BadRecords)]
    if bad:
        first = min(bad, key=lambda r: (r.topic, r.partition, r.offset))
        raise BadRecordError(
            f"Cannot parse Kafka record {first.topic}-{first.partition} offset "
            f"{first.offset} in micro-batch {batch_id}: {first.error} (the "
            f"micro-batch held at least {sum(r.rows for r in bad)} bad records; "
            "nothing of it was committed)",
            hint="fix the producer, or run with --on-bad-record dead-letter to keep such "
                 "records in the dead-letter table")
    files = [r for r in results if isinstance(r, FileWritten)]
    _check_one_writer_per_file(files)
    if any(f.staging is not None for f in files):
        # A task's reported attempt was not its first: a first attempt that failed may have
        # completed final names it never reported; none may be in place at the commit.
        _remove_unreported(files, fs=fs, dl_fs=dl_fs)
    directories: set[tuple[str, str]] = set()
    for f in files:
        target_fs = fs if f.target == "table" else dl_fs
        if f.staging is not None:
            target_fs.mv(f.staging, f.path)
        directories.add((f.target, f.directory))
    for target, directory in sorted(directories):
        write_acid_version_file(fs if target == "table" else dl_fs, directory)
    reads = merge_offsets(r for r in results if isinstance(r, OffsetsRead))
    offsets = tuple(r.as_range() for r in reads)
    applied = [r.counts for r in results if isinstance(r, ChangesApplied)]
    changes = None
    if plan.mode != "append":
        zero = ChangeCounts()  # each count summed in its field's type (lookup_s a float)
        changes = ChangeCounts(**{f.name: type(getattr(zero, f.name))(
            sum(c.get(f.name, 0) for c in applied)) for f in fields(ChangeCounts)})
    new = [r for r in results if isinstance(r, NewFields)]
    seen = merge_fields(*(r.fields for r in new))
    return BatchReport(
        batch_id, plan.target.write_id, changes=changes, new_fields=tuple(seen),
        new_field_records=(sum(r.records for r in new)
                           if plan.options.on_new_field == "ignore" else 0),
        rows=sum(f.rows for f in files if f.target == "table" and not _deletes(f)),
        dead_letters=sum(f.rows for f in files if f.target == "dead_letter"),
        files=len(files), bytes=sum(f.bytes for f in files), offsets=offsets,
        records_read=sum(r.rows for r in reads),
        tombstones=sum(r.rows for r in results if isinstance(r, Tombstones)),
        on_tombstone=plan.options.on_tombstone,
        partition_dirs=_partition_dirs(files, "table"),
        dead_letter_dirs=_partition_dirs(files, "dead_letter"))


def _deletes(f: FileWritten) -> bool:
    """Whether `f` holds delete events (a keyed micro-batch's delete_delta)."""
    return f.directory.rsplit("/", 1)[-1].startswith("delete_delta_")


def _check_one_writer_per_file(files: Sequence[FileWritten]) -> None:
    """Two reported files with one final path would overwrite each other at the rename.

    Raises:
        IngestError: naming the path (a bucket written by two tasks: a bug, or rows stored
            under another bucketing whose delete events fell into another task's bucket).
    """
    seen: set[str] = set()
    for f in files:
        if f.path in seen:
            raise IngestError(
                f"Cannot publish {f.path}: two tasks of the micro-batch wrote it, so one "
                "would replace the other; nothing of the micro-batch is committed",
                hint="check that the table's rows are bucketed as its definition says "
                     "(`ingest verify`)")
        seen.add(f.path)


def _partition_dirs(files: Sequence[FileWritten], target: str) -> tuple[str, ...]:
    """The partition directories of the delta directories `files` of `target` sit in."""
    return tuple(sorted({f.directory.rsplit("/", 1)[0] for f in files if f.target == target}))


def _remove_unreported(files: Sequence[FileWritten], *, fs: fsspec.AbstractFileSystem,
                       dl_fs: fsspec.AbstractFileSystem) -> None:
    """Before the commit, on object stores: delete each bucket file (and side file) in the
    micro-batch's directories that no reported attempt wrote (docs/invariants.md 8.5)."""
    reported = {f.path for f in files}
    for target, directory in sorted({(f.target, f.directory) for f in files}):
        target_fs = fs if target == "table" else dl_fs
        if can_append(target_fs):
            continue  # only staging files there: every attempt but the reported one is hidden
        for path in target_fs.ls(directory, detail=False):
            name = str(path).rstrip("/").rsplit("/", 1)[-1]
            # (No side files on object stores: every `bucket_*` name is a bucket file.)
            if name.startswith("bucket_") and f"{directory}/{name}" not in reported:
                remove_quietly(target_fs, str(path))


def remove_staging_leftovers(results: Sequence[TaskResult], *, fs: fsspec.AbstractFileSystem,
                             dl_fs: fsspec.AbstractFileSystem, speculation: bool = False,
                             ) -> None:
    """After the commit: delete the staging files of attempts that did not win. Only a
    micro-batch whose reported attempts staged, or a speculating Spark, can leave any: a
    task's first attempt writes final names on object stores, and a failed attempt removes
    its own staging files."""
    staged = any(isinstance(r, FileWritten) and r.staging is not None for r in results)
    dirs = {(r.target, r.directory) for r in results
            if isinstance(r, FileWritten) and (staged or speculation)}
    for target, directory in dirs:
        target_fs = fs if target == "table" else dl_fs
        # The directory listed, not globbed: a glob compiles a pattern for each directory
        # (a many-table micro-batch has two a table).
        try:
            listed = target_fs.ls(directory, detail=False)
        except FileNotFoundError:
            continue  # nothing there (an object store has no empty directories)
        for path in listed:
            if str(path).rstrip("/").rsplit("/", 1)[-1].startswith(_STAGING_PREFIX):
                remove_quietly(target_fs, str(path))


def remove_quietly(fs: fsspec.AbstractFileSystem, path: str) -> None:
    """Delete a file that may already be gone."""
    try:
        fs.rm_file(path)
    except FileNotFoundError:
        pass
