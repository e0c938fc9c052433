"""What `run_stream` and `run_many_stream` add around the sink for the people operating it: the
per-batch log line (a `BatchLogListener`), the copy of the committed offsets (every topic's, for
several tables) in a Kafka consumer group (`--commit-offsets-to-group`) and the metrics' view of
maintenance and the metastore.

None of it is on the data path: a failure here is logged (and counted), never raised into a
micro-batch (the table and its sink progress are the truth; docs/invariants.md, 4).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ingest.kafka import GroupCommitter, KafkaConnection
from ingest.spark.metrics import StreamMetrics
from ingest.spark.options import LogFormat
from ingest.spark.progress import BatchLogListener, Report
from ingest.spark.sink import AcidSink, BatchReport, ManyTableSink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("ingest.spark.job")

# Bound on waiting for the listener's last events and the group's last commit at stop.
_STOP_WAIT_S = 15.0


class StreamOperations:
    """The listener and the group committer of one running stream; `close()` ends both.

    Usage::

        ops = StreamOperations.start(spark, sink, table="default.events",
                                     query_name="ingest-default.events", log_format="json")
        batch_fn = ops.wrap(batch_fn)        # before writeStream.foreachBatch(batch_fn)
        ...
        ops.close()                          # after query.stop()
    """

    def __init__(self, spark: SparkSession, listener: BatchLogListener,
                 committer: GroupCommitter | None, sink: AcidSink | ManyTableSink) -> None:
        self.spark, self.listener, self.committer, self.sink = spark, listener, committer, sink

    @classmethod
    def start(cls, spark: SparkSession, sink: AcidSink | ManyTableSink, *, table: str,
              query_name: str, log_format: LogFormat = "text",
              connection: KafkaConnection | None = None, group: str | None = None,
              committed: Mapping[tuple[str, int], int] | None = None,
              timeout_s: float = 10.0, metrics: StreamMetrics | None = None,
              reports: Callable[[int], Report | None] | None = None) -> StreamOperations:
        """Add the batch-log listener to the session and, with `group`, start the committer
        with the table's committed offsets (so a group that lags or is new catches up at
        once). `reports`: what the listener joins with a batch's progress (default: the
        sink's report of it; a stream of several tables passes its `ManyBatchView`s).

        Raises:
            ConfigError: an empty group id.
        """
        committer = None
        if group is not None:
            assert connection is not None
            on_result = None if metrics is None else (
                lambda ok: metrics.group_committed(group, ok))
            committer = GroupCommitter(connection, group, timeout_s=timeout_s,
                                       on_result=on_result)
            committer.submit(committed or {})
        if reports is None:
            if not isinstance(sink, AcidSink):
                raise TypeError("a stream of several tables passes its reports (ManyBatchView)")
            reports = _report_of(sink)
        listener = BatchLogListener(query_name, table, reports=reports,
                                    log_format=log_format)
        spark.streams.addListener(listener)
        return cls(spark, listener, committer, sink)

    def wrap(self, batch_fn: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """The foreachBatch function: `batch_fn`, then the batch's offsets to the group (a
        stream of several tables: every topic's, which the anchor's progress holds)."""
        committer = self.committer
        if committer is None:
            return batch_fn
        sink = self.sink

        def write_batch(batch_df: Any, batch_id: int) -> None:
            batch_fn(batch_df, batch_id)
            report = sink.reports[-1]
            if not report.skipped:  # a replay's offsets went to the group with its commit
                committer.submit({(r.topic, r.partition): r.until_offset
                                  for r in report.offsets})

        return write_batch

    def close(self, *, wait: bool = True) -> None:
        """After the query stopped: wait (bounded; not when it never started) for its last
        progress events to be logged, remove the listener, commit what is pending to the
        group."""
        try:
            if wait and not self.listener.wait_terminated(_STOP_WAIT_S):
                log.warning("The last micro-batch lines may be missing: Spark did not report "
                            "the query's end within %.0f s", _STOP_WAIT_S)
            self.spark.streams.removeListener(self.listener)
        finally:
            if self.committer is not None:
                self.committer.close(timeout_s=_STOP_WAIT_S)


def _report_of(sink: AcidSink) -> Callable[[int], BatchReport | None]:
    def report(batch_id: int) -> BatchReport | None:
        return next((r for r in reversed(list(sink.reports)) if r.batch_id == batch_id), None)

    return report


__all__ = ["StreamOperations"]
