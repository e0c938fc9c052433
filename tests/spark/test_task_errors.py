"""A Spark task's `ingest` error, read back from the traceback Spark hands the driver
(`ingest.spark.sink._task_errors`); the stream end to end: tests/spark/test_registry_down.py."""

from __future__ import annotations

from ingest.errors import CommitConflictError, IngestError
from ingest.spark.sink._task_errors import error_from_traceback, error_in_traceback, task_error

TRACE = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/x/ingest/spark/sink/_tasks.py", line 584, in write_task
    raise
{last}
"""


def test_the_tasks_class_sentence_and_hint_come_back() -> None:
    found = error_from_traceback(TRACE.format(
        last="ingest.errors.CommitConflictError: the columns changed Hint: run it again"),
        batch_id=4, table="db.t")
    assert type(found) is CommitConflictError
    assert found.message == "Micro-batch 4 of db.t failed in a Spark task: the columns changed"
    assert found.hint == "run it again"


def test_a_class_that_needs_more_than_a_sentence_comes_back_as_the_root() -> None:
    found = error_from_traceback(TRACE.format(
        last="ingest.errors.CorruptFileError: bad bytes in f"), batch_id=0, table="t")
    assert type(found) is IngestError and found.hint is None
    assert found.message.endswith(": bad bytes in f")


def test_other_errors_are_left_as_they_are() -> None:
    for last in ("ValueError: nope", "ingest.errors.NoSuchError: x",
                 "ingest.errors.annotations: x", "pyarrow.lib.ArrowInvalid: y"):
        assert error_from_traceback(TRACE.format(last=last), batch_id=0, table="t") is None
    # Not a Spark task's failure at all: the driver's own errors pass through.
    assert task_error(IngestError("driver"), batch_id=0, table="t") is None


def test_a_sources_error_in_a_failed_querys_trace_comes_back_after_its_context() -> None:
    trace = ("[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data "
             "source perform latestOffset: Traceback (most recent call last):\n"
             '  File "/x/ingest/spark/kafka/source.py", line 150, in latestOffset\n'
             "ingest.errors.IngestError: Kafka partition t-0 went back Hint: a new table\n"
             "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.x(Q.scala:1890)\n")
    found = error_in_traceback(trace, context="The stream into db.t failed")
    assert type(found) is IngestError
    assert found.message == "The stream into db.t failed: Kafka partition t-0 went back"
    assert found.hint == "a new table"
