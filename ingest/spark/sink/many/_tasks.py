"""The one pass of a many-table micro-batch (docs/many-tables.md, "Scale"): each Spark task
parses the records it reads and writes every touched table's bucket files, so a micro-batch
is one Spark job whatever the number of tables, and no table filters the micro-batch again.

A `ManyPlan` holds a `TaskPlan` per touched table (as the single-table tasks', `_tasks`) and
which table each routing key (a topic, or the key the key stage added) goes to; the records
of keys routed nowhere (and, by field, those without a key) go to the anchor's plan as dead
letters with the reason (`_unrouted`). A task groups each input batch by key and hands each
group to its table's `TableWrite`, made on the table's first row in the task. Tables parsing
alike (the stream's one `--schema`) share one parse of the batch (`_shared_parse`), and the
tables of a batch write, and at the end finish, side by side in a few threads (each its own
files: `_side_by_side`). It yields its tables' records (`_results`), each tagged with the
index of its plan.

Only plans whose rows need no shuffle run here: unbucketed tables whose partition value is a
record field (or none). Like `--file-layout task`, a table gets a file per read task holding
its rows (per table partition); routed by topic that is one per topic partition read.
Runs on executors; never talks to the metastore.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import numpy as np
import pyarrow as pa

from ingest.records import ParsedValues
from ingest.spark.sink._results import RESULT_DDL, BadRecords, TaskResult, to_arrow
from ingest.spark.sink._tasks import TableWrite, TaskPlan
from ingest.spark.sink.many._route_keys import ROUTE_ERROR
from ingest.spark.sink.many._shared_parse import parse_batch, rows_of, shared_parser
from ingest.spark.sink.many._unrouted import UnroutedWrite

# The index of the plan a result row belongs to (`ManyPlan.plans`, the anchor's last).
PLAN_INDEX = "__plan"
MANY_RESULT_DDL = f"{RESULT_DDL}, {PLAN_INDEX} int"
_KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset")
# Tables of a task written at once: enough to keep a disk's queue busy with fsyncs.
_THREADS = 8
T = TypeVar("T")


@dataclass(frozen=True)
class ManyPlan:
    """Everything a many-table task needs; pickled into each task.

    Attributes:
        plans: a plan per touched table.
        table_of: each routing key with a table: the index of its plan.
        column: the input column holding the routing key ("topic", or the key stage's).
        unrouted: routing keys whose records go to the anchor, with the reason.
        anchor: the plan of records routed nowhere (the anchor's dead letters); None when
            the micro-batch has none (then such a record is a bug, and fails the task).
    """

    plans: tuple[TaskPlan, ...]
    table_of: Mapping[str, int]
    column: str
    unrouted: Mapping[str, str] = field(default_factory=dict)
    anchor: TaskPlan | None = None

    @property
    def anchor_index(self) -> int:
        return len(self.plans)


def one_pass(plans: Sequence[TaskPlan]) -> bool:
    """Whether these tables' rows can all be written where they are read: no bucket needs
    one writer, no partition value needs Spark SQL, nothing is keyed or appended to."""
    return all(p.bucket_count == 0 and p.partition_from != "column" and p.mode == "append"
               and not p.append for p in plans)


def many_write_task(plan: ManyPlan, batches: Iterator[pa.RecordBatch]
                    ) -> Iterator[pa.RecordBatch]:
    """Write each input row to its table (or the anchor); yields the tables' records, each
    batch tagged with its plan's index (MANY_RESULT_DDL)."""
    tables: dict[int, TableWrite] = {}
    anchor: UnroutedWrite | None = None
    parser = shared_parser(plan.plans)
    pool = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="ingest-tables")
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            ordered, groups = _groups(plan, batch)
            # Tables parsing alike share one parse of the batch when it feeds several.
            routed = sum(1 for key, _, _ in groups
                         if key is not None and key in plan.table_of)
            parsed = parse_batch(parser, ordered) if parser is not None and routed > 1 else None
            # Each table's groups of the batch (several keys may route to one table), in
            # key order, with the group's place in the batch.
            adds: dict[int, list[tuple[int, pa.RecordBatch, ParsedValues | None]]] = {}
            for at, (key, start, end) in enumerate(groups):
                rows = ordered if end - start == ordered.num_rows else ordered.slice(
                    start, end - start)
                index = plan.table_of.get(key) if key is not None else None
                if index is None:
                    if plan.anchor is None:
                        raise RuntimeError(f"routing key {key!r} has no table in the "
                                           "micro-batch's plan")
                    if anchor is None:
                        anchor = UnroutedWrite(plan.anchor)
                    anchor.add(_with_reason(plan, key, rows))
                    continue
                if index not in tables:
                    tables[index] = TableWrite(plan.plans[index])
                adds.setdefault(index, []).append(
                    (at, rows, None if parsed is None else rows_of(parsed, start, end)))
            outcomes = _side_by_side(pool, [(index, partial(_add, tables[index], parts))
                                            for index, parts in adds.items()])
            bad = min(((found[0], index, found[1]) for index, found in outcomes
                       if found is not None), key=lambda b: b[0], default=None)
            if bad is not None:  # the bad record of the first group holding one, as before
                _abandon(tables, anchor)
                yield _tagged([bad[2]], bad[1])
                return
        finished = _side_by_side(pool, [
            *((index, task.finish) for index, task in sorted(tables.items())),
            *([(plan.anchor_index, anchor.finish)] if anchor is not None else [])])
        out = [_tagged(results, index) for index, results in finished]
    except BaseException:
        _abandon(tables, anchor)
        raise
    finally:
        pool.shutdown(wait=True)
    yield from out


def _add(task: TableWrite, parts: Sequence[tuple[int, pa.RecordBatch, ParsedValues | None]]
         ) -> tuple[int, BadRecords] | None:
    """Write a table's groups of a batch in order; the first bad record (under
    on_bad_record="fail") with its group's place, which ends the table's part."""
    for at, rows, parsed in parts:
        bad = task.add(rows, parsed)
        if bad is not None:
            return at, bad
    return None


def _side_by_side(pool: ThreadPoolExecutor, calls: Sequence[tuple[int, Callable[[], T]]]
                  ) -> list[tuple[int, T]]:
    """Each call's outcome (in the calls' order), the calls run side by side: each touches
    one table's files alone (no table in two calls), so they share nothing but the disk.

    A table's own steps keep their order in its one thread: a file's stripes, intermediate
    footer, fsync, length in the side file and the side file's fsync (`BucketWriter.flush`,
    then `close`), so invariant 1 (docs/invariants.md) holds for each file; only steps of
    different files overlap. Nothing is committed before the driver has every task's
    results, which the task yields only once every table has finished. The fsyncs (creating
    a side file, flushing, closing) are most of a small table's time and release the GIL:
    side by side, a task of many tables waits for the disk a few times, not once per fsync.
    """
    if len(calls) < 2:
        return [(index, call()) for index, call in calls]
    futures = [(index, pool.submit(call)) for index, call in calls]
    # Every call has ended before an error reaches the task's `_abandon` (wait below), so no
    # file is abandoned while another thread still writes it.
    wait([f for _, f in futures])
    return [(index, future.result()) for index, future in futures]


def _groups(plan: ManyPlan, batch: pa.RecordBatch
            ) -> tuple[pa.RecordBatch, list[tuple[str | None, int, int]]]:
    """The batch's rows ordered by routing key, and each key's run of rows in it (key, start,
    end; None: the key stage found none), each run in the input's order. Routed by topic a
    read task usually holds one topic: no copy then."""
    keys = batch.column(plan.column)
    if keys.null_count == 0:
        first = keys[0].as_py()
        if np.all(keys.to_numpy(zero_copy_only=False) == first):
            return batch, [(first, 0, batch.num_rows)]
    encoded = keys.dictionary_encode()
    ids = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    order = np.argsort(ids, kind="stable")  # stable: each key's rows in offset order
    ordered = batch.take(pa.array(order))
    sorted_ids = ids[order]
    bounds = np.flatnonzero(np.diff(sorted_ids)) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(sorted_ids)]
    names = encoded.dictionary.to_pylist()
    runs: list[tuple[str | None, int, int]] = []
    for start, end in zip(starts, ends, strict=True):
        at = int(sorted_ids[start])
        runs.append(((None if at < 0 else names[at]), start, end))
    return ordered, runs


def _with_reason(plan: ManyPlan, key: str | None, rows: pa.RecordBatch) -> pa.Table:
    """Rows routed nowhere with the reason as `error`: the key stage's, or the plan's."""
    table = pa.Table.from_batches([rows]).select(list(_KAFKA_COLUMNS))
    if key is None:
        return table.append_column("error", rows.column(ROUTE_ERROR))
    return table.append_column("error", pa.array([plan.unrouted[key]] * rows.num_rows,
                                                 pa.string()))


def _tagged(results: list[TaskResult], index: int) -> pa.RecordBatch:
    batch = to_arrow(results)
    return batch.append_column(PLAN_INDEX, pa.array([index] * batch.num_rows, pa.int32()))


def _abandon(tables: Mapping[int, TableWrite], anchor: UnroutedWrite | None) -> None:
    for task in tables.values():
        task.abandon()
    if anchor is not None:
        anchor.abandon()


__all__ = ["MANY_RESULT_DDL", "PLAN_INDEX", "ManyPlan", "many_write_task", "one_pass"]
