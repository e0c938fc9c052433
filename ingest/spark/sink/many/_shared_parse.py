"""One parse of a many-table task's input batch for every table it feeds (docs/many-tables.md,
"Scale").

Tables of the same columns (the stream's `--schema`) parse their records alike: a task
parses the batch (its rows sorted by routing key) once, and hands each table the part of
the outcome that belongs to its contiguous run of rows (`rows_of`), instead of calling
Arrow's JSON reader once per table and batch. What each table then does with its
part (--on-new-field, dead letters, partitions) stays its own (`TableWrite.add`).

Runs on executors; never talks to the metastore.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ingest.records import NewField, NewFieldsByName, ParsedValues, parse_values
from ingest.spark.sink._tasks import TaskPlan


def shared_parser(plans: Sequence[TaskPlan]) -> TaskPlan | None:
    """A plan whose parse stands for every plan's: all parse raw Kafka JSON values into the
    same fields and treat tombstones alike. None: they do not (each table parses its own).

    Not under --on-new-field evolve: a new field's JSON kind, which Arrow infers over the
    rows parsed together, gives the column's type, and each table must get the kind of its
    own records (an integer field in one table stays BIGINT though another table's records
    hold decimals under that name)."""
    if not plans:
        return None
    first = plans[0]
    for p in plans:
        if (p.input != "kafka" or p.avro is not None or p.parse_schema != first.parse_schema
                or p.options.on_tombstone != first.options.on_tombstone
                or p.options.on_new_field == "evolve"):
            return None
    return first


def parse_batch(plan: TaskPlan, batch: pa.RecordBatch) -> ParsedValues:
    """Parse every value of the batch as `plan`'s tables do (`parse_kafka_batch`)."""
    return parse_values(plan, batch.column("value"),
                        skip_tombstones=plan.options.on_tombstone == "skip")


def rows_of(parsed: ParsedValues, start: int, end: int) -> ParsedValues:
    """The outcome of the input rows `start .. end-1` alone, their indices counted from
    `start`: what parsing just those rows gives (each record parses on its own: good rows,
    bad records with their reasons, tombstones skipped, new fields held)."""
    good = np.asarray(parsed.good.to_numpy(zero_copy_only=False), dtype=np.int64)
    lo, hi = np.searchsorted(good, [start, end])
    bad_at = [i for i, _ in parsed.bad]
    b_lo, b_hi = bisect.bisect_left(bad_at, start), bisect.bisect_left(bad_at, end)
    bad_columns = None
    if parsed.bad_columns is not None:
        at, reasons = parsed.bad_columns
        at_np = np.asarray(at.to_numpy(zero_copy_only=False), dtype=np.int64)
        c_lo, c_hi = np.searchsorted(at_np, [start, end])
        bad_columns = (pa.array(at_np[c_lo:c_hi] - start, pa.int64()),
                       reasons.slice(int(c_lo), int(c_hi - c_lo)))
    return dataclasses.replace(
        parsed,
        rows=parsed.rows.slice(int(lo), int(hi - lo)),
        good=pa.array(good[lo:hi] - start, pa.int64()),
        bad=[(i - start, reason) for i, reason in parsed.bad[b_lo:b_hi]],
        skipped=[i - start for i in parsed.skipped if start <= i < end],
        new_by_field=_new_fields_of(parsed.new_by_field, start, end),
        bad_columns=bad_columns)


def _new_fields_of(fields: NewFieldsByName, start: int, end: int) -> NewFieldsByName:
    out: NewFieldsByName = {}
    for name, f in fields.items():
        at = np.asarray(f.at.to_numpy(zero_copy_only=False), dtype=np.int64)
        inside = (at >= start) & (at < end)
        if not inside.any():
            continue
        kind = f.kind if isinstance(f.kind, str) else f.kind.filter(pa.array(inside))
        out[name] = NewField(pa.array(at[inside] - start, pa.int64()), kind)
    return out


__all__ = ["parse_batch", "rows_of", "shared_parser"]
