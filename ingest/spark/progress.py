"""One structured log line per micro-batch (`--log-format text|json`), from Spark's progress.

A `StreamingQueryListener` on the driver joins each `StreamingQueryProgress` (Spark's batch
duration, the source's start, end and latest offsets, the observed metrics of the Kafka
records) with the sink's `BatchReport` of the same batch id (write id, rows committed, dead
letters, bytes), or for a stream of several tables its `ManyBatchView` (each touched table's
rows, the lag per topic), and logs it: a sentence, or one JSON object per line. Knows Spark's
progress format and the sink's report, not the metastore or ORC.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQueryListener

from ingest.spark.options import LogFormat
from ingest.spark.sink import BatchReport, ManyBatchReport

if TYPE_CHECKING:
    from pyspark.sql import Column

log = logging.getLogger(__name__)

OBSERVATION = "ingest_source"
"""The name of the observed metrics of the Kafka records in each progress
(`observedMetrics.ingest_source`: records, tombstones, max_timestamp)."""

_LOGGERS = ("ingest.spark.progress", "ingest.spark.sink", "ingest.spark.job",
            "ingest.spark.maintenance", "ingest.spark.metrics", "ingest.spark.kafka",
            "ingest.kafka")


def source_observations() -> list[Column]:
    """The expressions observed on the Kafka records of each micro-batch, named for
    `observedMetrics` (Spark computes them while the sink reads the batch)."""
    from pyspark.sql import functions as F

    return [F.count(F.lit(1)).alias("records"),
            F.count_if(F.col("value").isNull()).alias("tombstones"),
            F.max("timestamp").alias("max_timestamp")]


@dataclass(frozen=True)
class ManyBatchView:
    """A micro-batch of a stream of several tables as its line shows it: the sink's report and
    each topic's lag after the commit (records on the broker past the stream's committed
    offsets; None when the broker did not answer in time)."""

    report: ManyBatchReport
    lag_by_topic: Mapping[str, int] | None = None

    @property
    def batch_id(self) -> int:
        return self.report.batch_id

    def line(self) -> str:
        """The sink's line, then the lag per topic."""
        lag = self.lag_by_topic
        if self.report.skipped or lag is None:
            return self.report.line()
        behind = ", ".join(f"{topic} {n:,}" for topic, n in sorted(lag.items()))
        return f"{self.report.line()}, kafka lag per topic: {behind or 'none'}"


Report = BatchReport | ManyBatchView
"""What the listener joins with a progress: one table's report, or several tables' view."""


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    """A source offset of the progress (a dict, or its JSON text in `lastProgress`)."""
    if value is None:
        return {}
    parsed = json.loads(value) if isinstance(value, str) else value
    return {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in parsed.items()}


def batch_record(progress: Mapping[str, Any], report: Report | None, *,
                 table: str) -> dict[str, Any]:
    """One micro-batch as a JSON-ready dict: Spark's progress joined with the sink's report.

    Args:
        progress: `StreamingQueryProgress` as JSON (`json.loads(progress.json)`).
        report: the sink's report of the same batch id (a `ManyBatchView` for a stream of
            several tables: `tables` then holds each touched table's counts), or None.
        table: the target table's name (the anchor's, for several tables).

    `lag_records` is the broker's latest offsets when Spark planned the batch (the source's
    `latestOffset`) minus the batch's end offsets, summed over partitions.
    """
    sources = progress.get("sources") or [{}]
    source = sources[0]
    end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
    lag = None
    if latest:
        lag = sum(max(o - end.get(t, {}).get(p, 0), 0)
                  for t, parts in latest.items() for p, o in parts.items())
    observed = dict((progress.get("observedMetrics") or {}).get(OBSERVATION) or {})
    record: dict[str, Any] = {
        "event": "batch", "time": progress.get("timestamp"), "table": table,
        "query": progress.get("name"), "batch_id": progress.get("batchId"),
        "duration_s": round(float(progress.get("batchDuration") or 0) / 1000, 3),
        "input_records": progress.get("numInputRows"),
        "start_offsets": _offsets(source.get("startOffset")), "end_offsets": end,
        "latest_offsets": latest, "lag_records": lag, "observed": observed,
    }
    if isinstance(report, ManyBatchView):
        return _many_record(record, report, latest, end)
    if report is None:
        return record
    record.update({"write_id": report.write_id, "skipped": report.skipped})
    if not report.skipped:
        record.update({
            "rows_committed": report.rows, "records_read": report.records_read,
            "dead_letters": report.dead_letters, "tombstones": report.tombstones,
            "files": report.files, "bytes": report.bytes,
            "sink_seconds": round(report.seconds, 3),
            "commit_seconds": round(report.commit_seconds, 3),
            "lag_after_commit": report.lag})
    return record


def _many_record(record: dict[str, Any], view: ManyBatchView,
                 latest: Mapping[str, Mapping[str, int]],
                 end: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """`record` with a stream of several tables' report: the anchor's write id, per touched
    table its write id and counts, the sums, and the lag per topic (Spark's, at planning,
    and the broker's after the commit)."""
    report = view.report
    record["lag_records_by_topic"] = {
        t: sum(max(o - end.get(t, {}).get(p, 0), 0) for p, o in parts.items())
        for t, parts in latest.items()} if latest else None
    record.update({"write_id": report.anchor_write_id, "skipped": report.skipped})
    if report.skipped:
        return record
    tables = {name: {"write_id": r.write_id, "rows": r.rows, "dead_letters": r.dead_letters,
                     "records_read": r.records_read, "files": r.files, "bytes": r.bytes,
                     "topics": sorted({o.topic for o in r.offsets}),
                     "added_columns": list(r.added_columns)}
              for name, r in sorted(report.tables.items())}
    sums = report.sums()
    lag = view.lag_by_topic
    record.update({
        "tables": tables, "rows_committed": sums.rows, "records_read": sums.records_read,
        "dead_letters": sums.dead_letters, "tombstones": sums.tombstones,
        "unrouted_records": report.unrouted_records, "files": sums.files, "bytes": sums.bytes,
        "sink_seconds": round(report.seconds, 3),
        "commit_seconds": round(report.commit_seconds, 3),
        "lag_after_commit": None if lag is None else sum(lag.values()),
        "lag_after_commit_by_topic": None if lag is None else dict(sorted(lag.items()))})
    return record


def batch_text(record: Mapping[str, Any], report: Report | None) -> str:
    """`batch_record` as one sentence: the sink's line, then what Spark measured."""
    head = report.line() if report is not None else f"batch {record['batch_id']}: no sink report"
    lag = record["lag_records"]
    behind = "" if lag is None else f", {lag:,} records behind the latest offset"
    return (f"{head}; spark: {record['input_records']:,} input records in "
            f"{record['duration_s']:.2f} s{behind}")


class BatchLogListener(StreamingQueryListener):
    """Logs one line per micro-batch of the query named `query_name` (logger
    `ingest.spark.progress`, INFO); `wait_terminated` waits for the query's last events.

    Usage::

        listener = BatchLogListener("ingest-default.events", "default.events",
                                    reports=lambda batch_id: ..., log_format="json")
        spark.streams.addListener(listener)
        ...
        listener.wait_terminated(10); spark.streams.removeListener(listener)
    """

    def __init__(self, query_name: str, table: str, *,
                 reports: Callable[[int], Report | None],
                 log_format: LogFormat = "text") -> None:
        """Args:
            query_name: only this query's events are logged (a session may run others).
            table: the target table's name, for the record.
            reports: the sink's report of a batch id (a `ManyBatchView` for a stream of
                several tables), or None.
            log_format: "text" (a sentence) or "json" (one object per line).
        """
        self.query_name = query_name
        self.table = table
        self.log_format = log_format
        self._reports = reports
        self._terminated = threading.Event()
        # The latest records logged, for tests and tools (bounded: a stream runs for months).
        self.records: deque[dict[str, Any]] = deque(maxlen=1000)

    def onQueryStarted(self, event: Any) -> None:
        """Nothing to log: the job logs its own start."""

    def onQueryProgress(self, event: Any) -> None:
        """Log the micro-batch the progress describes (not the idle progress between batches,
        which carries no sink report and no input)."""
        # Called from Spark's listener thread: an error here must never reach the query.
        try:
            progress = json.loads(event.progress.json)
            if progress.get("name") != self.query_name:
                return
            report = self._reports(int(progress["batchId"]))
            if report is None and not progress.get("numInputRows"):
                return
            record = batch_record(progress, report, table=self.table)
            self.records.append(record)
            if self.log_format == "json":
                log.info("batch %s", record["batch_id"], extra={"record": record})
            else:
                log.info("%s", batch_text(record, report))
        except Exception:  # noqa: BLE001 - the log line is informational; the batch committed
            log.exception("Cannot log the progress of a micro-batch of %s", self.table)

    def onQueryIdle(self, event: Any) -> None:
        """Nothing to log: idle progress is not a micro-batch."""

    def onQueryTerminated(self, event: Any) -> None:
        """Every progress event of a query comes before its termination."""
        self._terminated.set()

    def wait_terminated(self, timeout_s: float) -> bool:
        """Wait (bounded) until the listener has seen a query terminate: its progress
        events, delivered asynchronously, have then all been logged."""
        return self._terminated.wait(timeout_s)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: a batch's record as it is, any other log record as
    `{"time", "level", "logger", "message"}` (with `error` when it carries an exception)."""

    def format(self, record: logging.LogRecord) -> str:
        batch = getattr(record, "record", None)
        if isinstance(batch, dict):
            return json.dumps(batch, default=str)
        out: dict[str, Any] = {
            "event": "log",
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(), "logger": record.name,
            "message": record.getMessage()}
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_stream_logging(log_format: LogFormat, *, stream: Any = None) -> logging.Handler:
    """Send the job's loggers (batches, sink, job, maintenance, metrics, Kafka) at INFO to
    `stream` (stderr by default), as sentences or as JSON lines; returns the handler.

    Raises:
        ValueError: `log_format` is neither "text" nor "json".
    """
    if log_format not in ("text", "json"):
        raise ValueError(f"log_format must be text or json, got {log_format!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonLogFormatter() if log_format == "json"
                         else logging.Formatter("%(message)s"))
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    return handler


__all__ = [
    "OBSERVATION",
    "BatchLogListener",
    "JsonLogFormatter",
    "ManyBatchView",
    "batch_record",
    "batch_text",
    "configure_stream_logging",
    "source_observations",
]
