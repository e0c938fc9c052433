"""Executor side of the "hive-acid" source: one task's scan tasks as Arrow record batches.

Sets up the snapshot reader's merge as every reader does (`ingest.acid.read.reader.start_merge`:
the planner's checked read lengths pinned), skips stripes whose statistics rule out every row
of the condition, drops invalid write ids and deleted rows, keeps the rows the exact filter and
the streaming write-id bound select, and casts each batch to the Arrow types Spark expects.
The read's lease is renewed while the task reads (`_lease.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid import ReadView
from ingest.acid.read import ROW_ID_COLUMN, FilePlan, ScanCounts, start_merge
from ingest.spark.source._lease import renewing
from ingest.spark.source._plan import ReadTask

log = logging.getLogger(__name__)


def read_task(task: ReadTask, *, counts: ScanCounts | None = None
              ) -> Iterator[pa.RecordBatch]:
    """The rows of `task`, in `task.output`'s columns and types; empty batches skipped.

    Args:
        task: what to read.
        counts: if given, the files, stripes and stripes skipped are added to it when the
            read ends.

    Raises:
        CorruptFileError: a bucket file or side file is damaged (run `ingest recover`).
        FileNotFoundError: a planned file was removed since the read was planned.
        UnsupportedFormatError: a file this reader does not handle.
    """
    with renewing(task.lease):
        plan = FilePlan(ReadView.unchecked(task.snapshot), (), 0, task.partition_columns,
                        task.scans)
        merger = start_merge(task.fs, plan, row_schema=task.row_schema,
                             columns=list(task.read_columns),
                             with_row_id=task.write_ids is not None,
                             condition=task.condition, condition_columns=task.condition_columns)
        names = task.output.names
        stream = merger.read_partitions([(s.values, s.files) for s in task.scans])
        try:
            for batch in stream:
                if task.write_ids is not None:
                    inserted_by = batch.column(ROW_ID_COLUMN).field("writeid")
                    after, up_to = task.write_ids
                    batch = batch.filter(pc.and_(pc.greater(inserted_by, after),
                                                 pc.less_equal(inserted_by, up_to)))
                if task.filter is not None and batch.num_rows:
                    batch = batch.filter(task.filter)
                if batch.num_rows:
                    # Spark keeps microseconds: a nanosecond timestamp is truncated, as
                    # Spark's ORC reader does, hence no safe cast.
                    yield batch.select(names).cast(task.output, safe=False)
        finally:
            stream.close()  # stops the decoding thread and closes the files
            c = merger.counts
            log.debug("hive-acid task: %d files, %d stripes, %d skipped by statistics",
                      c.files, c.stripes, c.stripes_skipped)
            if counts is not None:
                counts.files += c.files
                counts.stripes += c.stripes
                counts.stripes_skipped += c.stripes_skipped


__all__ = ["read_task"]
