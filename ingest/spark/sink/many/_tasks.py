"""The one pass of a many-table micro-batch (docs/many-tables.md, "Scale"): each Spark task
parses the records it reads and writes every touched table's bucket files, so a micro-batch
is one Spark job whatever the number of tables, and no table filters the micro-batch again.

A `ManyPlan` holds a `TaskPlan` per touched table (as the single-table tasks', `_tasks`) and
which table each routing key (a topic, or the key the key stage added) goes to; the records
of keys routed nowhere (and, by field, those without a key) go to the anchor's plan as dead
letters with the reason (`_unrouted`). A task groups each input batch by key and hands each
group to its table's `TableWrite`, made on the table's first row in the task. It yields its
tables' records (`_results`), each tagged with the index of its plan.

Only plans whose rows need no shuffle run here: unbucketed tables whose partition value is a
record field (or none). Like `--file-layout task`, a table gets a file per read task holding
its rows (per table partition); routed by topic that is one per topic partition read.
Runs on executors; never talks to the metastore.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ingest.spark.sink._results import RESULT_DDL, TaskResult, to_arrow
from ingest.spark.sink._tasks import TableWrite, TaskPlan
from ingest.spark.sink.many._route_keys import ROUTE_ERROR
from ingest.spark.sink.many._unrouted import UnroutedWrite

# The index of the plan a result row belongs to (`ManyPlan.plans`, the anchor's last).
PLAN_INDEX = "__plan"
MANY_RESULT_DDL = f"{RESULT_DDL}, {PLAN_INDEX} int"
_KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset")


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
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            for key, rows in _groups(plan, batch):
                index = plan.table_of.get(key) if key is not None else None
                if index is None:
                    if plan.anchor is None:
                        raise RuntimeError(f"routing key {key!r} has no table in the "
                                           "micro-batch's plan")
                    if anchor is None:
                        anchor = UnroutedWrite(plan.anchor)
                    anchor.add(_with_reason(plan, key, rows))
                    continue
                task = tables.get(index)
                if task is None:
                    task = tables[index] = TableWrite(plan.plans[index])
                bad = task.add(rows)
                if bad is not None:
                    _abandon(tables, anchor)
                    yield _tagged([bad], index)
                    return
        out = [_tagged(task.finish(), index) for index, task in sorted(tables.items())]
        if anchor is not None:
            out.append(_tagged(anchor.finish(), plan.anchor_index))
    except BaseException:
        _abandon(tables, anchor)
        raise
    yield from out


def _groups(plan: ManyPlan, batch: pa.RecordBatch
            ) -> Iterator[tuple[str | None, pa.RecordBatch]]:
    """The batch's rows by routing key (None: the key stage found none), each group in the
    input's order. Routed by topic a read task usually holds one topic: no copy then."""
    keys = batch.column(plan.column)
    if keys.null_count == 0:
        first = keys[0].as_py()
        if np.all(keys.to_numpy(zero_copy_only=False) == first):
            yield first, batch
            return
    encoded = keys.dictionary_encode()
    ids = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    order = np.argsort(ids, kind="stable")  # stable: each key's rows in offset order
    ordered = batch.take(pa.array(order))
    sorted_ids = ids[order]
    bounds = np.flatnonzero(np.diff(sorted_ids)) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(sorted_ids)]
    names = encoded.dictionary.to_pylist()
    for start, end in zip(starts, ends, strict=True):
        at = int(sorted_ids[start])
        yield (None if at < 0 else names[at]), ordered.slice(start, end - start)


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
