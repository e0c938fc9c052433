"""Streaming reads of a Hive ACID table: each micro-batch emits the rows of newly committed
write ids, in write-id order, exactly once across restarts.

An offset is `{"write_id": N}`: every write id up to N has been emitted. A micro-batch
(start, end] ends below the lowest open write id, so no write id is passed over while its
transaction may still commit. It reads with the metastore's snapshot of the moment it is
planned and keeps the rows inserted by write ids in (start, end] that no delete visible then
removed. A delete of a row already emitted is not retracted (the source is append-only, as
Kafka is); a replayed micro-batch may therefore return fewer rows, never other ones.
Each micro-batch is planned from the metastore's read view by the one read planner; its lease
is held (and heartbeated) by this driver-side reader, which lives as long as the query, from
planning until Spark commits the batch's end offset or stops the query (docs/invariants.md, 7).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ingest.acid import ValidWriteIdList
from ingest.errors import ConfigError
from ingest.spark.source._plan import SourceOptions, open_metastore
from ingest.spark.source._read import read_task
from ingest.spark.source._setup import ReadSetup, TaskPartition

OFFSET_KEY = "write_id"


def offset(write_id: int) -> dict[str, int]:
    return {OFFSET_KEY: write_id}


def write_id_of(value: dict[str, Any]) -> int:
    """The write id of an offset from Spark's checkpoint.

    Raises:
        ConfigError: the checkpoint holds an offset of another source.
    """
    found = value.get(OFFSET_KEY) if isinstance(value, dict) else None
    if not isinstance(found, int) or found < 0:
        raise ConfigError(
            f"Cannot use offset {value!r} from the checkpoint: the hive-acid source's offsets "
            f'are {{"{OFFSET_KEY}": N}}', hint="use a new checkpoint for this query")
    return found


def readable_end(snapshot: ValidWriteIdList) -> int:
    """The highest write id with no open write id at or below it."""
    low = snapshot.min_open_write_id
    return snapshot.high_watermark if low is None else min(low - 1, snapshot.high_watermark)


class HiveAcidStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from the metastore (driver) and reads bucket groups (executors)."""

    def __init__(self, options: SourceOptions, schema: StructType | None = None) -> None:
        """Args:
            options: the source's options.
            schema: the stream's schema, as Spark was given it: every micro-batch returns
                these columns, read from the snapshot it pins (docs/format.md §25).

        Raises:
            TableNotFoundError, MetastoreError: the metastore.
            ConfigError: `columns` names an unknown column, or `where` does not parse.
        """
        self.options = options
        with open_metastore(options) as (store, defn):
            self.setup = ReadSetup(options, defn, metastore_url=store.url, schema=schema)
        self._target: int | None = None  # Trigger.AvailableNow: never plan past this
        # The leases of planned micro-batches not yet committed, by their end write id.
        self._leases: dict[int, ExitStack] = {}

    def __getstate__(self) -> dict[str, Any]:
        # The reader is pickled into the tasks' read function: the leases stay here.
        return {**self.__dict__, "_leases": {}}

    def _snapshot(self) -> ValidWriteIdList:
        with open_metastore(self.options) as (store, defn):
            return store.snapshot(defn)

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - Spark's name
        return offset(0)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._target = readable_end(self._snapshot())

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        # Each write id is one delta directory per partition: "files", in Spark's terms.
        limit = self.options.max_write_ids_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxFiles(limit)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:  # noqa: N802
        begin = write_id_of(start)
        end = readable_end(self._snapshot())
        if self._target is not None:
            end = min(end, self._target)
        if isinstance(limit, ReadMaxFiles):
            end = min(end, begin + limit.max_files)
        return offset(max(begin, end))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        begin, until = write_id_of(start), write_id_of(end)
        if until <= begin:
            return []
        held = ExitStack()
        try:
            parts = held.enter_context(self.setup.planned(write_ids=(begin, until),
                                                          keep_lease=False))
        except BaseException:
            held.close()
            raise
        previous = self._leases.pop(until, None)
        if previous is not None:  # the same batch planned again: its earlier lease is done
            previous.close()
        self._leases[until] = held
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, TaskPartition):
            return iter(())  # Spark's one placeholder partition of a batch with no tasks
        return read_task(partition.task)

    def commit(self, end: dict[str, Any]) -> None:
        """The batches up to `end` are done: end their leases (offsets live in Spark's
        checkpoint)."""
        done = write_id_of(end)
        for until in sorted(w for w in self._leases if w <= done):
            self._leases.pop(until).close()

    def stop(self) -> None:
        """The query stops: end every lease still held."""
        while self._leases:
            self._leases.popitem()[1].close()


__all__ = ["OFFSET_KEY", "HiveAcidStreamReader", "readable_end"]
