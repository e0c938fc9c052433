"""Executor side of the "hive-acid" source: one task's bucket groups as Arrow record batches.

Runs the snapshot reader's merge (invalid write ids dropped, delete events applied) on the
files the driver planned, keeps the rows the condition and the streaming write-id bound
select, and casts each batch to the Arrow types Spark expects for the source's schema.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid import ValidWriteIdList
from ingest.acid._merge import ROW_ID_COLUMN, Merger
from ingest.spark._datasource_plan import ReadTask


def read_task(task: ReadTask) -> Iterator[pa.RecordBatch]:
    """The rows of `task`, in `task.output`'s columns and types; empty batches skipped.

    Raises:
        CorruptFileError: a bucket file or side file is damaged (run `ingest recover`).
        UnsupportedFormatError: a file this reader does not handle.
    """
    snapshot = ValidWriteIdList.from_hive_string(task.snapshot)
    streaming = task.write_ids is not None
    merger = Merger(task.fs, snapshot, list(task.read_columns), streaming,
                    task.partition_columns)
    merger.set_row_schema(task.row_schema)
    names = task.output.names
    for group in task.groups:
        for batch in merger.partition_batches(dict(group.values), group.files):
            if task.write_ids is not None:
                inserted_by = batch.column(ROW_ID_COLUMN).field("writeid")
                after, up_to = task.write_ids
                batch = batch.filter(pc.and_(pc.greater(inserted_by, after),
                                             pc.less_equal(inserted_by, up_to)))
            if task.condition is not None and batch.num_rows:
                batch = batch.filter(task.condition)
            if batch.num_rows:
                # Spark keeps microseconds: a nanosecond timestamp is truncated, as Spark's ORC
                # reader does, hence no safe cast.
                yield batch.select(names).cast(task.output, safe=False)


__all__ = ["read_task"]
