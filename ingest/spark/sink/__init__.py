"""The foreachBatch sink: each micro-batch one committed ACID transaction (`AcidSink` on the
driver; parsing and writing in Spark tasks), and the dead-letter table beside the target;
`ManyTableSink` writes a micro-batch of several topics into several tables (the room `many`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.lazy import lazy_names

if TYPE_CHECKING:
    from ingest.spark.sink._batch import KAFKA_COLUMNS, BatchReport
    from ingest.spark.sink._evolve import extends, same_columns
    from ingest.spark.sink._results import FileWritten
    from ingest.spark.sink._results import from_arrow as task_results_from_arrow
    from ingest.spark.sink._size import planned_ranges
    from ingest.spark.sink._task_errors import error_in_traceback
    from ingest.spark.sink._tasks import DeltaTarget, TaskPlan, write_task
    from ingest.spark.sink._txn_batches import check_transaction_batches
    from ingest.spark.sink.deadletter import (
        DEAD_LETTER_DDL,
        dead_letter_location,
        dead_letter_name,
        dead_letter_schema,
    )
    from ingest.spark.sink.driver import AcidSink, check_keyed_stream
    from ingest.spark.sink.many import ManyBatchReport, ManyTableSink

# Loaded on first use (ingest/lazy.py): Spark's Python workers import single modules of
# this package, and must not import the driver's half with them.
_HOMES = {
    "error_in_traceback": "_task_errors",
    "KAFKA_COLUMNS": "_batch",
    "FileWritten": "_results",
    "DeltaTarget": "_tasks",
    "TaskPlan": "_tasks",
    "task_results_from_arrow": "_results:from_arrow",
    "write_task": "_tasks",
    "DEAD_LETTER_DDL": "deadletter",
    "AcidSink": "driver",
    "ManyTableSink": "many",
    "ManyBatchReport": "many",
    "BatchReport": "_batch",
    "check_keyed_stream": "driver",
    "check_transaction_batches": "_txn_batches",
    "dead_letter_location": "deadletter",
    "dead_letter_name": "deadletter",
    "dead_letter_schema": "deadletter",
    "planned_ranges": "_size",
    "same_columns": "_evolve",
    "extends": "_evolve",
}
__getattr__ = lazy_names(__name__, _HOMES)

__all__ = [
    "error_in_traceback",
    # for the benchmarks' write-task ceiling (ingest/bench/support/parse_write.py, stream.py)
    "KAFKA_COLUMNS",
    "FileWritten",
    "DeltaTarget",
    "TaskPlan",
    "task_results_from_arrow",
    "write_task",
    "DEAD_LETTER_DDL",
    "AcidSink",
    "ManyTableSink",
    "ManyBatchReport",
    "BatchReport",
    "check_keyed_stream",
    "check_transaction_batches",
    "dead_letter_location",
    "dead_letter_name",
    "dead_letter_schema",
    # a micro-batch's planned offset ranges, for the many-table job's Avro tables
    "planned_ranges",
    # row schemas compared as the sinks compare them, for the job's checks of a found table
    "same_columns",
    "extends",
]
