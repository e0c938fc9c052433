"""What the batch and streaming readers of the "hive-acid" source share: the table, its
output schema in Spark's and Arrow's terms, the `where` condition and pushed filters, planning
a read view with the one read planner, and turning its scan tasks into input partitions.
Runs on the driver; what it builds pickles to the executors.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import fsspec
import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from ingest.acid import ReadView, ValidWriteIdList
from ingest.acid.predicate import Domain, parse_predicate
from ingest.acid.read import Partition, ScanTask, plan_files
from ingest.errors import SchemaMismatchError
from ingest.io import storage
from ingest.spark.source._filters import PushedFilter, conjunction, tree_conjunction
from ingest.spark.source._plan import (
    Lease,
    ReadTask,
    SourceOptions,
    arrow_schema,
    cost_bytes,
    holding_write_ids,
    lease_store,
    output_schema,
    pack,
)
from ingest.table.core import pinned_definition
from ingest.txn import READER_HEARTBEAT_S, TableDefinition


class TaskPartition(InputPartition):
    """One Spark task: a `ReadTask` (scan tasks of the read view)."""

    def __init__(self, task: ReadTask) -> None:
        super().__init__(len(task.scans))
        self.task = task


def spark_arrow_schema(schema: pa.Schema) -> tuple[StructType, pa.Schema]:
    """The Spark schema of the table's Arrow columns, and the Arrow types Spark takes for it
    (Hive's TIMESTAMP, a date-time without zone, is Spark's TIMESTAMP_NTZ)."""
    spark_schema = from_arrow_schema(schema)
    return spark_schema, to_arrow_schema(spark_schema, timezone="UTC")


def reader_agent() -> str:
    """The agent a Spark read's lease records: host:pid:ingest-spark-read (the planner)."""
    return f"{socket.gethostname()}:{os.getpid()}:ingest-spark-read"


def check_snapshot_columns(spark_schema: StructType, defn: TableDefinition) -> None:
    """Check that the columns Spark was given (when the DataFrame or stream was made) are
    columns of the snapshot a read pins, of the same types, so its tasks return exactly them.

    Columns added since are left out of the read; a column widened since (or one the snapshot
    lacks) cannot be returned as Spark was told, and is refused rather than cut.

    Raises:
        SchemaMismatchError: a column of `spark_schema` the snapshot lacks, or whose type
            there differs (both types named).
    """
    pinned = {f.name: f.dataType for f in spark_arrow_schema(arrow_schema(defn))[0].fields}
    for f in spark_schema.fields:
        found = pinned.get(f.name)
        if found is None or found != f.dataType:
            now = "no such column" if found is None else found.simpleString()
            raise SchemaMismatchError(
                f"Cannot read column {f.name!r} of table {defn.name} as "
                f"{f.dataType.simpleString()}, the type the query was planned with: the "
                f"snapshot read has {now} (schema version {defn.schema_version}; the columns "
                "changed after the DataFrame or stream was made)",
                hint='make the DataFrame again: spark.read.format("hive-acid").load(...)')


class ReadSetup:
    """What both readers share: options, the table, the schema Spark was given, the `where`
    condition and the filters Spark pushed."""

    def __init__(self, options: SourceOptions, defn: TableDefinition, *,
                 metastore_url: str | None = None, schema: StructType | None = None) -> None:
        """Args:
            options: the source's options.
            defn: the table (with the columns of the `snapshot` option when given).
            metastore_url: where the table was found.
            schema: the schema Spark was given for the DataFrame or stream (what the tasks
                return, whatever columns the snapshot read has); None: `defn`'s columns.

        Raises:
            ConfigError: `columns` names an unknown column, or `where` does not parse.
        """
        self.options = options
        self.defn = defn
        # Where the table was found: planning opens it again without searching (the lease
        # store); None searches as `open_metastore` does.
        self.metastore_url = metastore_url
        columns = output_schema(defn, options.columns)
        self.output = spark_arrow_schema(columns)[0] if schema is None else schema
        self.conditions: list[PushedFilter] = []
        if options.where is not None:
            predicate = parse_predicate(options.where, arrow_schema(defn), option="where")
            self.conditions.append(PushedFilter(predicate.expression, predicate.columns,
                                             predicate.condition))

    @contextmanager
    def planned(self, *, snapshot: ValidWriteIdList | None = None,
                write_ids: tuple[int, int] | None = None, keep_lease: bool
                ) -> Iterator[list[InputPartition]]:
        """Take the table's read view (leased from the metastore) and plan the read with the
        one read planner; yields the input partitions while the view is held.

        Args:
            snapshot: a snapshot of the caller's own (the `snapshot` option), read unleased.
            write_ids: (after, up to]: keep only rows these write ids inserted (streaming).
            keep_lease: leave the lease registered when the block ends, for the tasks to
                renew while they read (a batch read, whose planner process ends before its
                tasks run); it is ended at once if there is nothing to read.

        Raises:
            TableNotFoundError, MetastoreError: the metastore.
            FileNotFoundError: the path does not exist.
            CorruptFileError: a committed file is missing, emptied, cut or its tail changed.
            NotEnoughHistoryError, UnsupportedFormatError, SchemaMismatchError: see
                `ingest.acid.read.plan.plan_files`.
            SchemaMismatchError: a column Spark was given is not, with its type, a column
                of the snapshot pinned (`check_snapshot_columns`).
        """
        with lease_store(self.options, url=self.metastore_url) as store, store.read_view(
                self.defn, agent=reader_agent(), snapshot=snapshot, heartbeat_s=READER_HEARTBEAT_S,
                keep_lease=keep_lease) as view:
            scans = self._plan(view, write_ids)
            lease = (None if view.lease_id is None
                     else Lease(store.url, view.lease_id, time.time(), READER_HEARTBEAT_S))
            parts = self._input_partitions(
                self._template(view, pinned_definition(self.defn, view), write_ids, lease),
                scans)
            if not parts and keep_lease and view.lease_id is not None:
                store.end_reader(view.lease_id)
            yield parts

    def _plan(self, view: ReadView, write_ids: tuple[int, int] | None) -> list[ScanTask]:
        """The view's scan tasks under the source's path, partitions the conditions rule out
        left unread (and, streaming, only files that may hold `write_ids`)."""
        fs, root = self._table_fs()
        path = storage.path_of(self.options.path)
        tree = tree_conjunction(self.conditions)

        def keep(p: Partition) -> bool:
            return tree is None or tree.may_match(
                {c: Domain.exactly(None if v is None else v.encode("utf-8"))
                 for c, v in p.values})

        tasks = list(plan_files(fs, path, view, root=root, keep=keep).tasks)
        return tasks if write_ids is None else holding_write_ids(tasks, write_ids)

    def _template(self, view: ReadView, pinned: TableDefinition,
                  write_ids: tuple[int, int] | None, lease: Lease | None) -> ReadTask:
        """A task without its scan tasks: the merge reads with the row columns of the view's
        snapshot (`pinned`, docs/format.md §25) and returns the columns Spark was given."""
        check_snapshot_columns(self.output, pinned)
        needed = list(self.output.names)
        columns: list[str] = []
        for c in self.conditions:
            needed += [n for n in c.columns if n not in needed]
            columns += [n for n in c.columns if n not in columns]
        fs, _ = self._table_fs()
        return ReadTask(fs, view.snapshot, pinned.row_schema,
                        tuple(self.defn.partition_columns), tuple(needed),
                        to_arrow_schema(self.output, timezone="UTC"),
                        conjunction(self.conditions), tree_conjunction(self.conditions),
                        tuple(columns), write_ids, lease)

    def _table_fs(self) -> tuple[fsspec.AbstractFileSystem, str]:
        """The table's filesystem, made with the source's storage options, and its root."""
        fs, root = storage.url_to_fs(self.defn.location, self.options.storage_options)
        return fs, str(root).rstrip("/")

    def _input_partitions(self, template: ReadTask, scans: list[ScanTask]
                          ) -> list[InputPartition]:
        """The scan tasks packed into Spark tasks, each a copy of `template`."""
        sized = [(t, cost_bytes(template.fs, t)) for t in scans]
        return [TaskPartition(replace(template, scans=group)) for group in pack(
            sized, max_partition_bytes=self.options.max_partition_bytes,
            min_partitions=self.options.min_partitions)]


__all__ = ["ReadSetup", "TaskPartition", "check_snapshot_columns", "reader_agent",
           "spark_arrow_schema"]
