"""The foreachBatch sink: each micro-batch becomes one committed Hive ACID transaction.

For micro-batch `batch_id` the driver opens a transaction (target + dead-letter table), the
executors parse the Kafka values and write `delta_W_W_0000/bucket_N` files (mapInArrow, see
`_batch.py` and `_tasks.py`), and the driver commits with `SinkProgress(sink_id,
batch_id)` and the batch's Kafka offset ranges in the same metastore transaction
(docs/invariants.md, 4; Hive's `commitTxnWithKeyValue`). With `txns_per_delta=K` a run of K
micro-batches appends to one `delta_W_{W+K-1}` directory, as Hive Streaming's
TransactionBatch does (docs/format.md, Hive Streaming transaction batches).

Task retries and speculative attempts (why no duplicate or torn rows can become visible):
- K = 1: every task attempt writes hidden staging files `_tmp.bucket_N.<task attempt id>`
  (Hive's hidden-file filter skips them). Spark hands the driver the result of exactly one
  successful attempt per partition; only the files that attempt reports are renamed to
  `bucket_N`, before the commit. Files of failed or speculative attempts stay hidden and are
  deleted after the commit (a zombie attempt can only ever leave a hidden file behind).
  On an object store, where that rename is a copy and a delete, a task's first attempt
  writes `bucket_N` itself instead, created only if no object has the name (S3's
  `If-None-Match`), so no two attempts replace each other's file; later attempts stage as
  above. A first attempt that completed names and then failed is not reported: the driver
  removes those names before putting the retry's staging files in place (docs/invariants.md
  8.4, 8.5).
- K > 1: the run's bucket files are shared, so attempts cannot write private copies. The
  driver passes every task the flush length each file had when the previous micro-batch
  committed; a task cuts the file and side file back to it before appending, so a retried
  attempt overwrites whatever a failed attempt flushed. Two attempts must never append at
  once, so K > 1 refuses to run with `spark.speculation=true`.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ingest.acid import is_side_file, rollback_file, side_file_path
from ingest.acid.format import format_delta
from ingest.errors import CommitConflictError, ConfigError, IngestError, SchemaMismatchError
from ingest.faults import crash_point
from ingest.io import storage
from ingest.kafka import check_not_behind
from ingest.records import avro_format, check_writer_schema
from ingest.spark.options import SinkOptions
from ingest.spark.sink._batch import (
    BatchReport,
    BatchTotals,
    publish_results,
    remove_quietly,
    remove_staging_leftovers,
    run_tasks,
)
from ingest.spark.sink._evolve import (
    Evolved,
    add_columns,
    columns_to_add,
    extends,
    same_columns,
    write_evolving,
)
from ingest.spark.sink._first_records import check_plain_avro_start
from ingest.spark.sink._heartbeat import Heartbeat
from ingest.spark.sink._loss import lost_ranges
from ingest.spark.sink._plans import (
    committed_files,
    keyed_write_set,
    run_keyed_tasks,
    table_codec,
    table_plan,
)
from ingest.spark.sink._results import FileWritten, TaskResult
from ingest.spark.sink._size import after_loss, cover, planned_ranges
from ingest.spark.sink._task_errors import task_error
from ingest.spark.sink._tasks import TaskPlan
from ingest.spark.sink._txn_batches import check_transaction_batches
from ingest.spark.sink._undo import abort_left_open, remove_table_written, remove_written
from ingest.spark.sink.deadletter import dead_letter_location
from ingest.table import Table, TableRef
from ingest.table.core import check_owner, check_written_columns, stream_progress
from ingest.table.write import KeySpec, check_keyed_table
from ingest.txn import (
    Metastore,
    MetastoreError,
    OffsetRange,
    SinkProgress,
    TableDefinition,
    Transaction,
    TransactionInfo,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

# How many micro-batch reports a sink keeps (the log listener and summaries read recent ones).
RECENT_REPORTS = 1000


@dataclass
class _Run:
    """An open transaction batch (K > 1): its transactions and its files' committed lengths."""

    txns: list[Transaction]
    delta_dir: str
    next_index: int = 0
    committed_lengths: dict[str, int] = field(default_factory=dict)

    @property
    def remaining(self) -> list[Transaction]:
        return self.txns[self.next_index:]


class AcidSink:
    """A `foreachBatch` function writing each micro-batch as one ACID transaction.

    Usage::

        sink = AcidSink(ingest.open_table("/wh/events"), sink_id="events@/ckpt/events",
                        options=SinkOptions(flush_rows=10_000))
        query = df.writeStream.foreachBatch(sink).option("checkpointLocation", ...).start()
        ...
        sink.close()   # aborts the unused write ids of an open transaction batch

    The table (and `<table>__dead_letter` beside it) must exist in the metastore; their
    definitions (row schema, partition and bucket columns) come from there.
    """

    def __init__(
        self,
        table: Table | TableRef,
        *,
        sink_id: str,
        options: SinkOptions | None = None,
        row_schema: pa.Schema | None = None,
        partition_columns: Sequence[str] | None = None,
        partition_expression: str | None = None,
        compression: str | None = None,
        lag_fn: Callable[[Mapping[tuple[str, int], int]], int | None] | None = None,
        earliest_fn: Callable[[Sequence[tuple[str, int]]], Mapping[tuple[str, int], int]]
        | None = None,
        fail_on_data_loss: bool = True,
    ) -> None:
        """Check the options; nothing is opened until the first micro-batch.

        Args:
            table: the target table (its root), resolved: a `Table` or its `TableRef`, whose
                metastore the sink commits to and whose storage options it and its tasks
                reach the table's files and the dead-letter table's beside it with (each
                task receives exactly these, as a value). Only its location, metastore URL
                and options are kept: the definitions are read at the first micro-batch.
            sink_id: names this query in the metastore's sink progress; a restarted query
                must use the same id (batch ids come from its checkpoint).
            options: txns_per_delta (K micro-batches per delta directory, as a Hive
                Streaming transaction batch), flush_rows (rows per intermediate footer and
                side-file entry in each bucket file) and on_bad_record ("dead-letter", or
                "fail": BadRecordError and the batch aborted); default `SinkOptions()`.
            row_schema: if given, must equal the table's row schema.
            partition_columns: if given, must equal the table's partition columns.
            partition_expression: Spark SQL computing the (single) partition column from
                the parsed columns, e.g. "date_format(ts, 'yyyy-MM-dd')". None: the
                partition column is a JSON field of the record.
            compression: ORC codec of the bucket files; default each table's
                `orc.compress` property (zlib when unset, which Hive 3 reads).
            lag_fn: maps the batch's end offsets to the records still behind, for the log.
            earliest_fn: each topic partition's earliest offset on the broker: records the
                table has not committed below it are lost (retention removed them). None:
                loss is not looked for.
            fail_on_data_loss: lost records stop the stream, naming every lost range,
                before anything of the micro-batch is written; False records them in the
                report (`lost`), skips them and goes on.

        Raises:
            ConfigError: `table` was opened without a metastore; K > 1 on a filesystem that
                cannot append or with a metastore that refuses transaction batches (a Hive
                Metastore); an --avro-schema file that cannot be read or is not an Avro
                record schema.
        """
        self.options = options if options is not None else SinkOptions()
        self._avro = avro_format(self.options)  # the --avro-schema file is read here, once
        txns_per_delta = self.options.txns_per_delta
        ref = table.ref if isinstance(table, Table) else table
        if ref.metastore is None:
            raise ConfigError(f"Cannot stream into {ref.location}: it was opened without a "
                              "metastore, and the sink commits to one",
                              hint="open it with its metastore (ingest.open_table(location))")
        self.table_ref = ref
        self.dead_letter_ref = ref.at(dead_letter_location(ref.location))
        self.sink_id = sink_id
        self.compression = compression
        self.partition_expression = partition_expression
        self.lag_fn = lag_fn
        self.earliest_fn = earliest_fn
        self.fail_on_data_loss = fail_on_data_loss
        # Each topic partition's committed end: where the next micro-batch must begin.
        self._committed_until: dict[tuple[str, int], int] | None = None
        self._start_checked = self._avro is None  # see _first_records
        self.agent = f"{socket.gethostname()}:{os.getpid()}:ingest-stream:{sink_id}"
        self._agent_tag = f":ingest-stream:{sink_id}"
        self._expected_schema = row_schema
        self._expected_partitions = None if partition_columns is None else tuple(
            partition_columns)
        check_transaction_batches(ref.location, self.metastore_url, txns_per_delta)
        self.fs, self.root = storage.url_to_fs(ref.location, self.storage_options)
        self.dl_fs, self.dl_root = storage.url_to_fs(self.dead_letter_location,
                                                     self.storage_options)
        self._store: Metastore | None = None
        self._table: TableDefinition | None = None
        self._dead_letter: TableDefinition | None = None
        self._run: _Run | None = None
        self._heartbeat: Heartbeat | None = None
        self._codecs = ("zlib", "zlib")
        self._key: KeySpec | None = None
        self._speculation = False
        # A stream runs for months: the last reports only, and totals over all of them.
        self.reports: deque[BatchReport] = deque(maxlen=RECENT_REPORTS)
        self.totals = BatchTotals()
        self.failure: BaseException | None = None

    # ------------------------------------------------------------------ set-up
    # Read from the refs, which hold them once.
    @property
    def table_location(self) -> str:
        return self.table_ref.location

    @property
    def dead_letter_location(self) -> str:
        return self.dead_letter_ref.location

    @property
    def metastore_url(self) -> str:
        assert self.table_ref.metastore is not None  # refused in __init__
        return self.table_ref.metastore

    @property
    def storage_options(self) -> Mapping[str, Any]:
        """The fsspec options of the table and its dead-letter table (secrets included)."""
        return self.table_ref.storage_options

    def _open(self, batch_df: DataFrame) -> Metastore:
        if self._store is not None:
            return self._store
        # The tables must exist: an empty or missing metastore is an error, never a new one.
        store = Metastore.open(self.metastore_url, create=False)
        try:
            self._table = store.get_table(self.table_location)
            self._dead_letter = store.get_table(self.dead_letter_location)
            for defn in (self._table, self._dead_letter):
                check_owner(defn, store.url, self.storage_options)  # one metastore per location (7)
            self._check_definition(self._table)
            check_writer_schema(self._avro, self._table.row_schema)
            if self.options.keyed:
                self._key = check_keyed_stream(self._table, self.options,
                                               self.partition_expression)
            self._codecs = (table_codec(self._table, self.compression),
                            table_codec(self._dead_letter, self.compression))
            if batch_df is not None:
                conf = batch_df.sparkSession.conf.get("spark.speculation", "false")
                # Speculative attempts may leave staging files behind a reported first one.
                self._speculation = str(conf).lower() == "true"
            if self.options.txns_per_delta > 1:
                if self._speculation:
                    raise ConfigError(
                        f"Cannot use txns_per_delta={self.options.txns_per_delta} with "
                        "spark.speculation=true: two attempts of a task would append to the "
                        "same bucket file at once",
                        hint="set spark.speculation=false or use txns_per_delta=1")
            self._recover(store)
        except BaseException:
            store.close()
            raise
        self._store = store
        self._heartbeat = Heartbeat(self.metastore_url,
                                    [self._table.name, self._dead_letter.name], self._agent_tag)
        self._heartbeat.start()
        return store

    def _check_definition(self, table: TableDefinition) -> None:
        if self._expected_schema is not None and not same_columns(
                table.row_schema, self._expected_schema) and not (
                self.options.on_new_field == "evolve"
                and extends(table.row_schema, self._expected_schema)):
            raise SchemaMismatchError(
                f"Cannot write to {table.location}: the table's columns are "
                f"{_describe(table.row_schema)} but the sink was given "
                f"{_describe(self._expected_schema)}")
        if (self._expected_partitions is not None
                and tuple(table.partition_columns) != self._expected_partitions):
            raise SchemaMismatchError(
                f"Cannot write to {table.location}: it is partitioned by "
                f"{list(table.partition_columns)} but the sink was given "
                f"{list(self._expected_partitions)}")
        if len(table.partition_columns) > 1:
            raise ConfigError(f"Cannot stream into {table.location}: tables with more than one "
                              "partition column are not supported yet")

    def _recover(self, store: Metastore) -> None:
        """Abort what an earlier run of this sink left open (it crashed before committing)
        and remove the files it left in those write ids' directories (docs/invariants.md,
        8.1)."""
        assert self._table is not None and self._dead_letter is not None
        tables = {t.name: t for t in (self._table, self._dead_letter)}
        # Listed before any abort: one transaction holds a write id in both tables.
        left: dict[int, list[TransactionInfo]] = {}
        for table in tables.values():
            for info in store.transactions(table, states=("open",)):
                if info.agent.endswith(self._agent_tag):
                    left.setdefault(info.txn_id, []).append(info)
        dead = abort_left_open(store, left, sink_id=self.sink_id, table_of=tables.__getitem__,
                               storage_options=self.storage_options)
        if self._table.name in dead:
            # Files of the earlier run's transaction batch were live until now: repair them.
            self.table_ref.open(store).recover()

    # ------------------------------------------------------------------ the micro-batch
    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """Write micro-batch `batch_id` (the foreachBatch function)."""
        try:
            report = self._process(batch_df, int(batch_id))
        except BaseException as e:
            ours = task_error(e, batch_id=int(batch_id), table=self._table.name
                              if self._table is not None else self.table_location)
            self.failure = e if ours is None else ours
            if ours is not None:
                raise ours from e
            raise
        self.reports.append(report)
        self.totals.add(report)
        # run_stream's listener logs the line with Spark's progress (ingest/spark/progress.py)
        log.debug("%s", report.line())

    def _process(self, batch_df: DataFrame, batch_id: int) -> BatchReport:
        started = time.monotonic()
        store = self._open(batch_df)
        assert self._table is not None
        done = store.committed_write_id(self.sink_id, batch_id, table=self._table.name)
        if done is not None:
            return BatchReport(batch_id, done, skipped=True)
        planned = planned_ranges(batch_df)
        if planned:
            # Spark's own source plans on from a re-created topic's new offsets (told
            # failOnDataLoss false): the table's end says the topic went back.
            check_not_behind({(r.topic, r.partition): r.from_offset for r in planned},
                             self._committed_ends(store), what=f"micro-batch {batch_id} reads from",
                             known_as=f"table {self._table.name} already committed")
        if not self._start_checked:
            # The table's first records of a plain-Avro stream (none of its offsets yet).
            self._start_checked = bool(self._committed_ends(store)) or check_plain_avro_start(
                batch_df, self._avro, self._table.row_schema, self._table.name)
        lost = self._lost(store, planned, batch_id)
        # --on-new-field evolve: a round that met new fields aborts its transaction, adds
        # their columns and runs again with the new schema; the next round finds none.
        report, added = write_evolving(
            lambda: self._write(store, batch_df, batch_id, planned, lost), batch_id=batch_id,
            into=self._table.name)
        if report.skipped:
            return report
        if self._committed_until is not None:
            for r in report.offsets:
                key = (r.topic, r.partition)
                self._committed_until[key] = max(self._committed_until.get(key, 0),
                                                 r.until_offset)
        lag = self.lag_fn({(r.topic, r.partition): r.until_offset for r in report.offsets}) \
            if self.lag_fn is not None and report.offsets else None
        return replace(report, seconds=time.monotonic() - started, lag=lag,
                       added_columns=tuple(c for cs in added.values() for c in cs))

    def _committed_ends(self, store: Metastore) -> dict[tuple[str, int], int]:
        """Each topic partition's end the table committed: read once, then kept up to date
        by this sink's commits."""
        assert self._table is not None
        if self._committed_until is None:
            progress = stream_progress(store, self._table)
            self._committed_until = dict(progress.offsets) if progress else {}
        return self._committed_until

    def _lost(self, store: Metastore, planned: Sequence[OffsetRange] | None,
              batch_id: int) -> tuple[OffsetRange, ...]:
        """The offsets Kafka removed before the table committed them (`lost_ranges`, against
        the table's committed ends, whichever source, whatever its failOnDataLoss did).

        Raises:
            IngestError: some were lost and fail_on_data_loss: every lost range named,
                nothing of the micro-batch written.
        """
        if self.earliest_fn is None or not planned:
            return ()
        assert self._table is not None
        return lost_ranges(planned, self._committed_ends(store), self.earliest_fn,
                           fail=self.fail_on_data_loss, batch_id=batch_id, of=self._table.name)

    def _write(self, store: Metastore, batch_df: DataFrame, batch_id: int,
               planned: Sequence[OffsetRange] | None = None,
               lost: Sequence[OffsetRange] = ()) -> BatchReport | Evolved:
        """One transaction for the micro-batch: its report once committed (or skipped as
        committed by another writer), or the columns it added (then it was aborted and must
        run again)."""
        assert self._table is not None
        txn, plan = self._begin(store)
        results: list[TaskResult] = []
        try:
            if self._key is None:
                results = run_tasks(batch_df, plan,
                                    partition_expression=self.partition_expression)
            else:
                results = run_keyed_tasks(store, batch_df, plan, agent=self.agent)
            columns = columns_to_add(store, self._table, plan.row_schema, results, self.options,
                                     batch_id)
            if columns is not None:
                # Aborted before the columns change: no transaction of ours holds the table
                # (if the abort fails, the columns stay as they are and the micro-batch fails).
                stop = IngestError(f"micro-batch {batch_id} held new fields; it is written "
                                   f"again after adding columns "
                                   f"{[f'{n} {t}' for n, t in columns]}")
                if not self._abort(store, txn, plan, stop, results):
                    raise stop
                return self._evolve(store, columns, batch_id)
            report = publish_results(results, plan=plan, batch_id=batch_id, fs=self.fs,
                                     dl_fs=self.dl_fs)
            # The ranges planned, not only the records seen: markers, aborted records and a
            # compacted topic's gaps are read, not skipped (ingest verify, ingest status).
            report = replace(report, offsets=after_loss(cover(report.offsets, planned), lost),
                             lost=tuple(lost))
            crash_point("sink.before_commit")
            committing = time.monotonic()
            assert self._table is not None and self._dead_letter is not None
            files = committed_files(
                {"table": (self._table, plan.target.write_id),
                 "dead_letter": (self._dead_letter, plan.dead_letter.write_id)}, results)
            # A keyed micro-batch declares its write set: a concurrent keyed writer of the
            # same buckets that committed first makes this commit fail (docs/format.md §24).
            updated = None if self._key is None else keyed_write_set(files[self._table.name])
            # Written with the columns read before the transaction opened: refused if they no
            # longer read as the table's (changed since by another process, §25).
            check_written_columns(store, self._table.name, [plan.row_schema],
                                  began=self._table, what=f"micro-batch {batch_id}")
            store.commit(txn, sink=SinkProgress(self.sink_id, batch_id), offsets=report.offsets,
                         files=files, updated=updated)
            commit_s = time.monotonic() - committing
        except CommitConflictError as e:
            self._abort(store, txn, plan, e, results)
            done = store.committed_write_id(self.sink_id, batch_id, table=self._table.name)
            if done is None:
                raise
            log.warning("batch %d was committed by another writer as write id %d while this "
                        "one wrote it; this attempt is aborted", batch_id, done)
            return BatchReport(batch_id, done, skipped=True)
        except BaseException as e:
            self._abort(store, txn, plan, e, results)
            raise
        self._committed(plan, results)
        return replace(report, commit_seconds=commit_s)

    def _evolve(self, store: Metastore, columns: list[tuple[str, str]],
                batch_id: int) -> Evolved:
        """Add `columns` to the table (`_evolve.add_columns`) and take the table as stored
        afterwards, for the next round.

        Raises:
            ConfigError: the metastore refuses to change the columns.
        """
        assert self._table is not None
        self._table, added = add_columns(store, self._table, columns, batch_id)
        crash_point("sink.after_evolve")
        return Evolved({self._table.name: added})

    def _begin(self, store: Metastore) -> tuple[Transaction, TaskPlan]:
        assert self._table is not None and self._dead_letter is not None
        if self.options.txns_per_delta == 1:
            txn = store.open_transaction(self._table, agent=self.agent,
                                         also=[self._dead_letter])
            delta_dir = format_delta(txn.write_id, txn.write_id, 0)
            committed: dict[str, int] = {}
            last = True
        else:
            if self._run is None:
                txns = store.allocate_write_ids(self._table, self.options.txns_per_delta,
                                                agent=self.agent)
                self._run = _Run(txns, format_delta(txns[0].write_id, txns[-1].write_id, None))
            run = self._run
            txn = run.txns[run.next_index]
            for other in run.remaining[1:]:
                store.heartbeat(other)
            txn = store.allocate_write_id(txn, self._dead_letter)
            run.txns[run.next_index] = txn
            delta_dir = run.delta_dir
            committed = dict(run.committed_lengths)
            last = run.next_index == len(run.txns) - 1
        return txn, self._plan(txn, delta_dir, committed, last)

    def _plan(self, txn: Transaction, delta_dir: str, committed: dict[str, int],
              last: bool) -> TaskPlan:
        assert self._table is not None and self._dead_letter is not None
        dead_write_id = txn.write_id_for(self._dead_letter)
        plan = table_plan(self._table, self._dead_letter, target=(txn.write_id, delta_dir),
                          dead_letter=(dead_write_id,
                                       format_delta(dead_write_id, dead_write_id, 0)),
                          codecs=self._codecs, options=self.options,
                          storage_options=self.storage_options,
                          partition_expression=self.partition_expression)
        batches = self.options.txns_per_delta > 1
        return replace(plan, append=batches, close_files=batches and last,
                       committed_lengths=committed, mode=self.options.mode, key=self._key,
                       table=self._table if self._key else None, avro=self._avro)

    def _committed(self, plan: TaskPlan, results: list[TaskResult]) -> None:
        """After the commit: staging leftovers go; a transaction batch moves on."""
        remove_staging_leftovers(results, fs=self.fs, dl_fs=self.dl_fs,
                                 speculation=self._speculation)
        run = self._run
        if run is None:
            return
        files = [r for r in results if isinstance(r, FileWritten)]
        for f in files:
            if f.target == "table":
                run.committed_lengths[f.path] = f.length
        run.next_index += 1
        if run.next_index == len(run.txns):
            touched = {f.path for f in files}
            self._close_run_files(run, skip=touched)
            self._run = None

    # ------------------------------------------------------------------ failure and shutdown
    def _abort(self, store: Metastore, txn: Transaction, plan: TaskPlan,
               error: BaseException, results: Sequence[TaskResult]) -> bool:
        """Abort the batch's transaction and remove what its tasks reported writing (never
        committed data, never files it did not write); False when the abort failed (a note
        on `error` says why)."""
        try:
            store.abort(txn, reason=f"micro-batch failed: {type(error).__name__}: {error}"[:500])
        except CommitConflictError as e:  # already committed: nothing of ours to undo
            error.add_note(f"Could not abort transaction {txn.txn_id}: {e}")
            return False
        except MetastoreError as e:
            # The metastore is unreachable: the transaction may even have committed (a commit
            # whose answer was lost), so no file goes; the metastore's timeout or the
            # restart's repair (8.1) aborts it, and the restart's replay check decides.
            error.add_note(f"Could not abort transaction {txn.txn_id}, its files stay: {e}")
            return False
        assert self._table is not None
        written = [r for r in results if isinstance(r, FileWritten)]
        remove_written(self.dl_fs, self.dl_root, 0, plan.dead_letter.delta_dir,
                        [r for r in written if r.target == "dead_letter"])
        if self._run is None:
            remove_table_written(self.fs, self.root, len(self._table.partition_columns),
                                 delta_dir=plan.target.delta_dir,
                                 write_id=plan.target.write_id,
                                 files=[r for r in written if r.target == "table"],
                                 keyed=self._key is not None)
            return True
        # A transaction batch cannot go on after a failed micro-batch: end it here.
        run, self._run = self._run, None
        for other in run.remaining[1:]:
            store.abort(other, reason="an earlier micro-batch of its transaction batch failed")
        self._close_run_files(run, skip=set(), drop_unknown=True)
        return True

    def _close_run_files(self, run: _Run, *, skip: set[str],
                         drop_unknown: bool = False) -> None:
        """Close the run's files: cut to the committed length, remove the side file."""
        for path, length in run.committed_lengths.items():
            if path in skip or not self.fs.exists(path):
                continue
            if self.fs.size(path) != length:
                rollback_file(self.fs, path, length)
            side = side_file_path(path)
            if self.fs.exists(side):
                self.fs.rm_file(side)
        if not drop_unknown:
            return
        assert self._table is not None
        depth = len(self._table.partition_columns)
        pattern = "/".join([self.root, *["*"] * depth, run.delta_dir, "bucket_*"])
        for path in self.fs.glob(pattern):
            if is_side_file(path):
                continue
            if path not in run.committed_lengths:  # created by the failed micro-batch only
                remove_quietly(self.fs, path)
                remove_quietly(self.fs, side_file_path(path))

    def close(self) -> None:
        """End an open transaction batch (abort its unused write ids) and the metastore."""
        store, run = self._store, self._run
        self._run = None
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        if store is None:
            return
        try:
            if run is not None:
                for txn in run.remaining:
                    store.abort(txn, reason="the stream stopped before using this write id")
                self._close_run_files(run, skip=set())
                log.info("Stream stopped: aborted %d unused write ids of %s", len(run.remaining),
                         run.delta_dir)
        finally:
            store.close()
            self._store = None

    def __enter__(self) -> AcidSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_keyed_stream(table: TableDefinition, options: SinkOptions,
                       partition_expression: str | None) -> KeySpec:
    """Check that a keyed stream (--mode upsert|cdc) can find its keys in `table`.

    Raises:
        ConfigError: the key does not fit the table (`ingest.table.write.check_keyed_table`: not
            bucketed by the key, a partition column outside it, an unknown column), or the
            partition column is computed by a --partition-by expression (a delete's key
            could not name its partition).
    """
    if partition_expression is not None:
        raise ConfigError(
            f"Cannot stream --mode {options.mode} into {table.name}: --partition-by "
            f"{partition_expression!r} computes the partition from the row, which a delete "
            "(a tombstone, or Debezium's 'before' holding only the key) does not carry",
            hint="partition by a JSON field that is part of --key, e.g. --partition-by dt "
                 "--key id,dt")
    return check_keyed_table(table, list(options.key_columns), options.order_by)


def _describe(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name} {f.type}" for f in schema) + ")"


__all__ = ["AcidSink", "BatchReport", "check_keyed_stream"]
