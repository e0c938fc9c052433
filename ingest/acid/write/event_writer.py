"""A bucket-file writer for whole ACID events, each with its own key: compaction output.

`BucketWriter` numbers the rows it inserts itself and gives delete events its own write id;
compaction must keep every event's (originalTransaction, bucket, rowId, currentTransaction)
as read. This subclass adds `write_events` and encodes the buffered events whole
(`_compact_stripes.event_stripe`); tails, stripes and the side file stay
the base class's. `write_bucket` writes one output file from a stream of events, read on a
thread of its own while it encodes (`prefetched`). Mirrors the writer half of Hive's
compactors (`CompactorMR`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator

import fsspec
import numpy as np
import pyarrow as pa

from ingest.acid.format import (
    BUCKET,
    CURRENT_TRANSACTION,
    DELETE,
    INSERT,
    KEY_COLUMNS,
    OPERATION,
    ORIGINAL_TRANSACTION,
    ROW,
    ROW_ID,
    UPDATE,
    side_file_path,
)
from ingest.acid.write import _event_stripes as _compact_stripes
from ingest.acid.write import _nested_nulls
from ingest.acid.write.options import BucketFileOptions
from ingest.acid.write.writer import BucketWriter
from ingest.errors import EventOrderError, SchemaMismatchError

Key = tuple[int, int, int, int]  # (originalTransaction, bucket, rowId, -currentTransaction)


def event_keys(batch: pa.RecordBatch | pa.Table) -> tuple[np.ndarray, ...]:
    """(originalTransaction, bucket, rowId, -currentTransaction) of each event, as int64."""
    columns = [*KEY_COLUMNS, CURRENT_TRANSACTION]
    arrays = [np.asarray(batch.column(n).to_numpy(zero_copy_only=False), dtype=np.int64)
              for n in columns]
    arrays[3] = -arrays[3]
    return tuple(arrays)


def is_sorted(keys: tuple[np.ndarray, ...]) -> bool:
    """Whether the keys are non-decreasing in lexicographic order."""
    if len(keys[0]) < 2:
        return True
    # Walk the key columns from the last: a later column decides only where earlier ones tie.
    ok = np.ones(len(keys[0]) - 1, dtype=bool)
    for column in reversed(keys):
        d = np.diff(column)
        ok = (d > 0) | ((d == 0) & ok)
    return bool(ok.all())


class EventWriter(BucketWriter):
    """Writes ACID events unchanged, in Hive's order, to a new bucket file.

    Create it with `EventWriter.create(path, BucketFileOptions(...))`: `kind="insert"` for
    a base or an insert delta (`hive.acid.stats` counts the events as inserts),
    `kind="delete"` for a delete delta (counted as deletes).
    """

    _last_event: Key | None = None

    @property
    def events_written(self) -> int:
        """Every event in the file: inserts, updates (Hive 2 deltas) and deletes."""
        return self._inserts + self._updates + self._deletes

    def write_events(self, events: pa.RecordBatch | pa.Table) -> None:
        """Buffer events; each keeps its own key and currentTransaction.

        Args:
            events: batches of the file's event schema (`acid_event_schema(row_schema)`),
                sorted by (originalTransaction, bucket, rowId) ascending, then
                currentTransaction descending, and after every event written before.

        Raises:
            EventOrderError: the events are not in that order.
            SchemaMismatchError: other columns or types than the event schema.
        """
        self._check_open()
        table = events if isinstance(events, pa.Table) else pa.Table.from_batches([events])
        if table.num_rows == 0:
            return
        if table.schema != self.event_schema:
            table = _conform_events(table, self.event_schema, path=self.path)
        keys = event_keys(table)
        first = tuple(int(k[0]) for k in keys)
        if not is_sorted(keys) or (self._last_event is not None and first < self._last_event):
            raise EventOrderError(f"Events for {self.path} are not in Hive's key order")
        self._last_event = (int(keys[0][-1]), int(keys[1][-1]), int(keys[2][-1]),
                            int(keys[3][-1]))
        for batch in table.to_batches():
            if self._fix_nested_nulls:
                index = batch.schema.get_field_index(ROW)
                batch = batch.set_column(index, ROW, _nested_nulls.prepare(batch.column(ROW)))
            self._pending.append(batch)
            self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self.options.tuning.stripe_size_bytes:
            self._write_pending()

    def _write_pending(self) -> None:
        """Encode buffered events into stripes (their keys are not a sequence: encoded as
        values, with the row's columns in parallel groups)."""
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self.event_schema)
        self._pending, self._pending_bytes = [], 0
        for start, rows in self._encoder.stripe_slices(table):
            piece = table.slice(start, rows)
            self._append_stripe(_compact_stripes.event_stripe(self._encoder, piece))
            # The base class counts a stripe as all inserts (or all deletes); a minor
            # compaction of Hive 2 deltas also copies update and delete events, and readers
            # trust `hive.acid.stats` to know whether to look for them.
            ops = np.asarray(piece.column(OPERATION).to_numpy(zero_copy_only=False))
            if self._is_delete:
                self._deletes -= rows
            else:
                self._inserts -= rows
            self._inserts += int((ops == INSERT).sum())
            self._updates += int((ops == UPDATE).sum())
            self._deletes += int((ops == DELETE).sum())


def _conform_events(table: pa.Table, schema: pa.Schema, *, path: str) -> pa.Table:
    """`table` in the event schema: row fields renamed by position (Hive's `_col0` names),
    types cast where ORC stores them alike (widened), trailing row fields a file predates
    (appended columns) filled with nulls.

    Raises:
        SchemaMismatchError: the columns cannot be made to fit.
    """
    if table.num_columns != len(schema) or [n.lower() for n in table.column_names] != [
            n.lower() for n in schema.names]:
        raise SchemaMismatchError(
            f"Cannot write events to {path}: columns {table.column_names}, expected "
            f"{schema.names}")
    row_type = schema.field(ROW).type
    columns = []
    for field, column in zip(schema, table.columns, strict=True):
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if field.name == ROW and column.type != row_type:
            have = column.type.num_fields
            if have > row_type.num_fields:
                raise SchemaMismatchError(
                    f"Cannot write events to {path}: rows have {have} "
                    f"fields, the table {row_type.num_fields}")
            # Fewer fields: written before columns were appended (docs/format.md §25); they
            # read as null, as Hive's positional schema evolution reads them.
            column = pa.StructArray.from_arrays(
                [column.field(i).cast(row_type.field(i).type) if i < have
                 else pa.nulls(len(column), row_type.field(i).type)
                 for i in range(row_type.num_fields)],
                fields=list(row_type), mask=column.is_null() if column.null_count else None)
        elif column.type != field.type:
            column = column.cast(field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


_SORT = [(ORIGINAL_TRANSACTION, "ascending"), (BUCKET, "ascending"), (ROW_ID, "ascending"),
         (CURRENT_TRANSACTION, "descending")]


def write_bucket(fs: fsspec.AbstractFileSystem, path: str, options: BucketFileOptions,
                  batches: Callable[[], Iterator[pa.RecordBatch]], *, keep_empty: bool
                  ) -> tuple[int, int]:
    """Write one output bucket file; (events, bytes).

    Events are streamed while they arrive in key order; if they do not (deltas whose keys
    interleave, delete events of many write ids), the file is started again from the
    bucket's events sorted in memory.
    """
    writer = EventWriter.create(path, options, fs=fs)
    try:
        budget = options.tuning.stripe_size_bytes
        for batch in prefetched(batches(), budget_bytes=budget):
            writer.write_events(batch)
    except EventOrderError:
        writer.abandon()
        _remove(fs, path)
        table = pa.Table.from_batches(list(batches()), schema=writer.event_schema)
        writer = EventWriter.create(path, options, fs=fs)
        try:
            writer.write_events(table.sort_by(_SORT))
        except BaseException:
            writer.abandon()
            raise
    except BaseException:
        writer.abandon()
        raise
    writer.close()
    events = writer.events_written  # update events of Hive 2 deltas too
    if events == 0 and not keep_empty:
        _remove(fs, path)
        return 0, 0
    return events, writer.bytes_written


def prefetched(batches: Iterator[pa.RecordBatch], *, budget_bytes: int
                ) -> Iterator[pa.RecordBatch]:
    """`batches`, produced on a thread of their own while the caller encodes: reading and
    encoding release the GIL, so the two overlap. Batches waiting hold at most about
    `budget_bytes` (one batch always may wait, however large)."""
    waiting: deque[pa.RecordBatch] = deque()
    waiting_bytes = 0
    done = stop = False
    error: BaseException | None = None
    cond = threading.Condition()

    def produce() -> None:
        nonlocal waiting_bytes, done, error
        try:
            for batch in batches:
                with cond:
                    while waiting and waiting_bytes + batch.nbytes > budget_bytes and not stop:
                        cond.wait()
                    if stop:
                        return
                    waiting.append(batch)
                    waiting_bytes += batch.nbytes
                    cond.notify_all()
        except BaseException as e:  # handed to the consumer, raised there
            error = e
        finally:
            with cond:
                done = True
                cond.notify_all()

    thread = threading.Thread(target=produce, name="compaction-read", daemon=True)
    thread.start()
    try:
        while True:
            with cond:
                while not waiting and not done:
                    cond.wait()
                if not waiting:
                    if error is not None:
                        raise error
                    return
                batch = waiting.popleft()
                waiting_bytes -= batch.nbytes
                cond.notify_all()
            yield batch
    finally:
        with cond:
            stop = True
            cond.notify_all()
        thread.join()


def _remove(fs: fsspec.AbstractFileSystem, path: str) -> None:
    for p in (path, side_file_path(path)):
        if fs.exists(p):
            fs.rm_file(p)


__all__ = ["EventWriter", "event_keys", "is_sorted", "prefetched", "write_bucket"]
