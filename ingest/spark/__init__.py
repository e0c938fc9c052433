"""Spark: the Kafka source, the foreachBatch ACID sink, the streaming job, and the
"hive-acid" source that reads tables back (batch and streaming, `register`).

Knows Spark and Kafka; writes ORC only through `ingest.acid`, commits through `ingest.txn` and
shares table operations (row splitting, table creation, recovery) with the CLI via `ingest.table`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ingest.lazy import lazy_names

if TYPE_CHECKING:
    from ingest.spark.avro_columns import with_avro_columns
    from ingest.spark.compact_job import CompactJobReport, compact_on_executors
    from ingest.spark.job import (
        RunningStream,
        StreamSummary,
        check_kafka,
        check_sink_progress,
        check_stream_key,
        ensure_tables,
        run_stream,
        table_layout,
    )
    from ingest.spark.kafka import kafka_dataframe, register_kafka_source
    from ingest.spark.maintenance import MaintenanceStats, StreamMaintenance
    from ingest.spark.many_job import ManyStreamSummary, check_many_options, run_many_stream
    from ingest.spark.metrics import METRIC_NAMES, StreamMetrics
    from ingest.spark.operations import StreamOperations
    from ingest.spark.options import (
        OptionSpec,
        SinkOptions,
        StreamOptions,
        TableOptions,
        add_arguments,
        option_specs,
    )
    from ingest.spark.progress import BatchLogListener, JsonLogFormatter, configure_stream_logging
    from ingest.spark.session import REDACTION_REGEX, job_session, krb5_java_options
    from ingest.spark.sink import (
        AcidSink,
        BatchReport,
        check_transaction_batches,
        dead_letter_location,
        dead_letter_name,
    )
    from ingest.spark.source import register

# Loaded on first use (ingest/lazy.py): Spark's Python workers import single modules of
# this package, and must not import the driver's half with them.
_HOMES = {
    "REDACTION_REGEX": "session",
    "METRIC_NAMES": "metrics",
    "StreamMetrics": "metrics",
    "AcidSink": "sink",
    "BatchLogListener": "progress",
    "JsonLogFormatter": "progress",
    "StreamOperations": "operations",
    "configure_stream_logging": "progress",
    "BatchReport": "sink",
    "CompactJobReport": "compact_job",
    "MaintenanceStats": "maintenance",
    "OptionSpec": "options",
    "RunningStream": "job",
    "SinkOptions": "options",
    "StreamMaintenance": "maintenance",
    "StreamOptions": "options",
    "StreamSummary": "job",
    "TableOptions": "options",
    "add_arguments": "options",
    "check_kafka": "job",
    "check_sink_progress": "job",
    "check_stream_key": "job",
    "check_transaction_batches": "sink",
    "compact_on_executors": "compact_job",
    "dead_letter_location": "sink",
    "dead_letter_name": "sink",
    "ensure_tables": "job",
    "job_session": "session",
    "krb5_java_options": "session",
    "kafka_dataframe": "kafka",
    "option_specs": "options",
    "register": "source",
    "register_kafka_source": "kafka",
    "run_stream": "job",
    "run_many_stream": "many_job",
    "ManyStreamSummary": "many_job",
    "check_many_options": "many_job",
    "table_layout": "job",
    "with_avro_columns": "avro_columns",
}
__getattr__ = lazy_names(__name__, _HOMES)

__all__ = [
    "REDACTION_REGEX",
    "METRIC_NAMES",
    "StreamMetrics",
    "AcidSink",
    "BatchLogListener",
    "JsonLogFormatter",
    "StreamOperations",
    "configure_stream_logging",
    "BatchReport",
    "CompactJobReport",
    "MaintenanceStats",
    "OptionSpec",
    "RunningStream",
    "SinkOptions",
    "StreamMaintenance",
    "StreamOptions",
    "StreamSummary",
    "TableOptions",
    "add_arguments",
    "check_kafka",
    "check_sink_progress",
    "check_stream_key",
    "check_transaction_batches",
    "compact_on_executors",
    "dead_letter_location",
    "dead_letter_name",
    "ensure_tables",
    "job_session",
    "kafka_dataframe",
    "krb5_java_options",
    "option_specs",
    "register",
    "register_kafka_source",
    "run_stream",
    "run_many_stream",
    "ManyStreamSummary",
    "check_many_options",
    "table_layout",
    "with_avro_columns",
]
