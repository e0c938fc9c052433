"""Spark: the Kafka source, the foreachBatch ACID sink, the streaming job, and the
"hive-acid" source that reads tables back (batch and streaming, `register`).

Knows Spark and Kafka; writes ORC only through `ingest.acid`, commits through `ingest.txn` and
shares table operations (row splitting, table creation, recovery) with the CLI via `ingest.table`.
"""

from ingest.spark.compact_job import CompactJobReport, compact_on_executors
from ingest.spark.job import RunningStream, StreamSummary, check_kafka, ensure_tables, run_stream
from ingest.spark.kafka.source import kafka_dataframe, register_kafka_source
from ingest.spark.maintenance import MaintenanceStats, StreamMaintenance
from ingest.spark.options import SinkOptions, StreamOptions
from ingest.spark.sink.deadletter import dead_letter_location, dead_letter_name
from ingest.spark.sink.driver import AcidSink, BatchReport
from ingest.spark.source.datasource import register

__all__ = [
    "AcidSink",
    "BatchReport",
    "CompactJobReport",
    "MaintenanceStats",
    "RunningStream",
    "SinkOptions",
    "StreamOptions",
    "StreamMaintenance",
    "StreamSummary",
    "check_kafka",
    "compact_on_executors",
    "dead_letter_location",
    "dead_letter_name",
    "ensure_tables",
    "kafka_dataframe",
    "register",
    "register_kafka_source",
    "run_stream",
]
