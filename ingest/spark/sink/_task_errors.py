"""An `ingest` error raised in a Spark task, back on the driver as itself.

Spark hands the driver a task's Python exception as a `PythonException` whose text is the
worker's traceback; its last line is the error's class and sentence (`ingest.errors.
IngestError: Cannot read schema id 7 ...`). Re-raised as that class, the stream's caller
(and the CLI's exit code) sees the error the task decided on, not a Spark wrapper that reads
as a bug.
"""

from __future__ import annotations

import re

from ingest import errors
from ingest.errors import IngestError

# The traceback's last line for an error of ours: module path, class name, sentence.
_LAST_LINE = re.compile(r"^ingest(?:\.\w+)*\.([A-Z]\w*): (.+)$", re.MULTILINE)


def task_error(e: BaseException, *, batch_id: int, table: str) -> IngestError | None:
    """The `IngestError` a Spark task raised, if `e` carries one, for the driver to raise.

    Args:
        e: what the Spark action raised on the driver.
        batch_id: the micro-batch the task wrote (named in the message).
        table: the table it wrote (named in the message).

    Returns:
        The task's error class (`IngestError` when that class needs more than a message and
        a hint) with its sentence and hint, prefixed with the micro-batch and the table; None
        when `e` is not a Spark task's failure or the task's error is not one of ours.
    """
    try:
        from pyspark.errors.exceptions.captured import CapturedException
    except ImportError:  # no Spark, so no Spark task
        return None
    if not isinstance(e, CapturedException):
        return None
    return error_from_traceback(str(e), batch_id=batch_id, table=table)


def error_from_traceback(text: str, *, batch_id: int, table: str) -> IngestError | None:
    """The `IngestError` whose class and sentence end a task's traceback `text` (see
    `task_error`), or None if no error of ours does."""
    return error_in_traceback(
        text, context=f"Micro-batch {batch_id} of {table} failed in a Spark task")


def error_in_traceback(text: str, *, context: str) -> IngestError | None:
    """The `IngestError` whose class and sentence end the Python traceback in `text` (a
    task's, or the `ingest-kafka` source's as a failed query reports it), its sentence after
    `context`; None if no error of ours does."""
    found = _LAST_LINE.findall(text)
    if not found:
        return None
    name, sentence = found[-1]
    message, _, hint = sentence.partition(" Hint: ")
    cls = getattr(errors, name, None)  # every error class of ours is in ingest.errors
    if not (isinstance(cls, type) and issubclass(cls, IngestError)):
        return None
    text = f"{context}: {message}"
    try:
        return cls(text, hint=hint or None)
    except TypeError:  # a class with more required fields (a table, a path): the root
        return IngestError(text, hint=hint or None)
