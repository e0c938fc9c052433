"""The foreachBatch sink: each micro-batch one committed ACID transaction (`AcidSink` on the
driver; parsing and writing in Spark tasks), and the dead-letter table beside the target.
"""

from ingest.spark.sink._batch import KAFKA_COLUMNS, BatchReport
from ingest.spark.sink._results import FileWritten
from ingest.spark.sink._results import from_arrow as task_results_from_arrow
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

__all__ = [
    "error_in_traceback",
    # for the benchmarks' write-task ceiling (benchmarks/support/parse_write.py, stream.py)
    "KAFKA_COLUMNS",
    "FileWritten",
    "DeltaTarget",
    "TaskPlan",
    "task_results_from_arrow",
    "write_task",
    "DEAD_LETTER_DDL",
    "AcidSink",
    "BatchReport",
    "check_keyed_stream",
    "check_transaction_batches",
    "dead_letter_location",
    "dead_letter_name",
    "dead_letter_schema",
]
