"""A sink's totals cover its whole life while it keeps only its recent reports."""

from __future__ import annotations

from ingest.spark.sink._batch import BatchReport, BatchTotals
from ingest.spark.sink.driver import RECENT_REPORTS, AcidSink
from ingest.table import TableRef


def test_totals_sum_written_batches_and_count_replays() -> None:
    totals = BatchTotals()
    for report in (BatchReport(0, 1, rows=10, dead_letters=2, files=3, bytes=100, tombstones=1),
                   BatchReport(1, 1, rows=99, files=9, skipped=True),
                   BatchReport(2, 2, rows=5, files=1, bytes=50)):
        totals.add(report)
    assert totals == BatchTotals(batches=3, skipped=1, rows=15, dead_letters=2, files=4,
                                 bytes=150, tombstones=1)


def test_a_sink_keeps_a_bounded_window_of_reports(tmp_path) -> None:
    sink = AcidSink(TableRef(str(tmp_path / "t"), "sqlite://:memory:"), sink_id="s")
    for batch_id in range(RECENT_REPORTS * 3):  # what __call__ keeps of each batch
        report = BatchReport(batch_id, batch_id + 1, rows=2)
        sink.reports.append(report)
        sink.totals.add(report)
    assert len(sink.reports) == RECENT_REPORTS
    assert sink.reports[0].batch_id == RECENT_REPORTS * 2
    assert sink.totals.rows == RECENT_REPORTS * 6 and sink.totals.batches == RECENT_REPORTS * 3
