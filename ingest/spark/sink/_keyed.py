"""The sink's tasks for --mode upsert and cdc: Kafka records -> keyed changes -> split-update files.

The parse stage turns each record into a change event: its image (the new row, or for a delete
the key columns Debezium's `before` or the Kafka record key names), whether it deletes, and its
op rank (c < r < u < d); a record it cannot read goes to the dead letter with the reason. The
rows are then shuffled by (partition, bucket), so one task holds every event of its keys (the
table is bucketed by the key), and the write stage orders them by (Kafka partition, offset),
keeps the last per key (`ingest.table.write.resolve`) and writes its buckets' delete and insert
events with `ingest.table.write.write_changes`, looking up only those buckets' live ROW__IDs.
Files are hidden staging files, renamed by the driver before its commit (docs/invariants.md,
8.4), so a retried or speculative attempt never publishes anything. Never talks to the
metastore.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format import bucket_ids
from ingest.io import storage
from ingest.records import OP_RANK, ChangeBatch, parse_json_values, unwrap_debezium
from ingest.spark.sink._results import (
    ChangesApplied,
    FileWritten,
    Tombstones,
    merge_offsets,
    offsets_read,
    to_arrow,
)
from ingest.spark.sink._tasks import (
    DEAD_LETTER_SCHEMA,
    META_BUCKET,
    META_ERROR,
    META_KEY,
    META_NEW_FIELDS,
    META_OFFSET,
    META_PARTITION,
    META_SLOT,
    META_TOMBSTONE,
    META_TOPIC,
    META_VALUE,
    TaskPlan,
    _TaskWriter,
    judge_new_fields,
    new_fields_column,
    parsed_new_fields,
)
from ingest.table.core import Written
from ingest.table.write import resolve, write_changes

META_DELETE, META_RANK = "__delete", "__op_rank"
KEYED_FIELDS = [pa.field(META_DELETE, pa.bool_()), pa.field(META_RANK, pa.int32())]

_UNSUPPORTED_OPS = {"t": "a truncate", "m": "a logical-decoding message"}


def classify(mode: str, key: bytes | None, value: bytes | None
             ) -> tuple[bytes | None, bool, int, str | None]:
    """One Kafka record as a change event: (image JSON, deletes, op rank, reason if bad).

    upsert: the value is the new image; a tombstone (null value) deletes the key its record
    key names (a JSON object of the key columns). cdc: a Debezium envelope (or its JSON
    converter form `{"schema", "payload"}`): c/r/u upsert `after`, d deletes the row `before`
    names (else the record key); a tombstone deletes as in upsert.
    """
    if value is None:
        if key is None:
            return None, True, OP_RANK["d"], ("a tombstone (null value) without a record key "
                                              "names no row")
        image, reason = _object(key, "record key")
        if image is None:
            return None, True, OP_RANK["d"], (f"{reason}; a tombstone's record key must be a "
                                              "JSON object of the key columns")
        return _encode(image), True, OP_RANK["d"], None
    if mode == "upsert":
        return value, False, 0, None  # parsed (and refused) by the JSON reader with the rest
    envelope, reason = _object(value, "record value")
    if envelope is None:
        return None, False, 0, reason
    op = envelope.get("op")
    if op is None:
        return None, False, 0, ("the Debezium envelope has no 'op' (fields: "
                                f"{', '.join(sorted(envelope)) or 'none'})")
    if op not in OP_RANK:
        what = _UNSUPPORTED_OPS.get(str(op))
        return None, False, 0, (f"op {op!r} is "
                                + (f"{what}, which --mode cdc does not apply" if what
                                   else "not a Debezium op") + "; expected c, r, u or d")
    if op == "d":
        before = envelope.get("before")
        if not isinstance(before, Mapping):
            before, _ = _object(key, "record key") if key is not None else (None, "")
        if before is None:
            return None, True, OP_RANK["d"], ("a delete (op 'd') needs 'before' or a record "
                                              "key to name the deleted row; it has neither")
        return _encode(before), True, OP_RANK["d"], None
    after = envelope.get("after")
    if not isinstance(after, Mapping):
        return None, False, OP_RANK[op], (f"op {op!r} needs the new row in 'after', found "
                                          f"{type(after).__name__}")
    return _encode(after), False, OP_RANK[op], None


def _object(data: bytes, what: str) -> tuple[dict[str, Any] | None, str]:
    """`data` as a JSON object (the JSON converter's payload unwrapped), or the reason."""
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"the {what} is not JSON ({e})"
    parsed = unwrap_debezium(parsed)  # epoch timestamps its schema names become text
    if not isinstance(parsed, dict):
        return None, f"the {what} is not a JSON object (found {type(parsed).__name__})"
    return parsed, ""


def _encode(image: Mapping[str, Any]) -> bytes:
    return json.dumps(image, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_changes_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]
                       ) -> Iterator[pa.RecordBatch]:
    """The parse stage of a keyed plan: Kafka rows -> change events (parse columns, META_FIELDS,
    KEYED_FIELDS); bad records carry their raw bytes and reason."""
    assert plan.parsed_arrow_schema is not None and plan.key is not None
    out_schema = plan.parsed_arrow_schema
    for batch in batches:
        n = batch.num_rows
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        events = [classify(plan.mode, k, v) for k, v in zip(keys, values, strict=True)]
        errors: list[str | None] = [e[3] for e in events]
        # Bad ones are None: the JSON reader skips them (as tombstones) and keeps positions.
        images = pa.array([e[0] if e[3] is None else None for e in events], pa.binary())
        parsed, _ = judge_new_fields(
            plan, parse_json_values(images, plan.parse_schema, skip_tombstones=True), batch)
        for i, reason in parsed.bad:
            errors[i] = reason
        rows = parsed.rows
        good = np.asarray(parsed.good.to_numpy(zero_copy_only=False), dtype=np.int64)
        deletes = np.array([e[1] for e in events], dtype=bool)
        ok = np.ones(rows.num_rows, dtype=bool)
        for j, reason in _key_problems(plan, rows, deletes[good]):
            ok[j] = False
            errors[int(good[j])] = reason
        rows, good = rows.filter(pa.array(ok)), good[ok]
        take = np.full(n, -1, dtype=np.int64)
        take[good] = np.arange(len(good))
        take_arr = pa.array(take, mask=take < 0)
        error = pa.array(errors, pa.string())
        is_bad = pc.is_valid(error)
        null_bin = pa.nulls(n, pa.binary())
        columns: dict[str, Any] = {
            META_KEY: pc.if_else(is_bad, batch.column("key"), null_bin),
            META_VALUE: pc.if_else(is_bad, batch.column("value"), null_bin),
            META_TOPIC: batch.column("topic"), META_PARTITION: batch.column("partition"),
            META_OFFSET: batch.column("offset"), META_ERROR: error,
            META_TOMBSTONE: pc.is_null(batch.column("value")),
            META_SLOT: pa.array(np.zeros(n, dtype=np.int32)),
            META_NEW_FIELDS: new_fields_column(parsed, n),
            META_DELETE: pa.array(deletes), META_RANK: pa.array([e[2] for e in events],
                                                                pa.int32()),
        }
        for f in plan.parse_schema:
            columns[f.name] = rows.column(f.name).combine_chunks().take(take_arr)
        columns[META_BUCKET] = bucket_ids(rows, plan.bucket_columns,
                                          plan.bucket_count).take(take_arr)
        arrays = []
        for f in out_schema:
            values_f = pc.cast(columns[f.name], f.type, safe=False)
            arrays.append(values_f.combine_chunks() if isinstance(values_f, pa.ChunkedArray)
                          else values_f)
        yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def _key_problems(plan: TaskPlan, rows: pa.Table, deletes: np.ndarray
                  ) -> Iterator[tuple[int, str]]:
    """(row, reason) of parsed events whose key column is null, whose partition key is empty
    (Hive's default partition reads back as null), or whose new row lacks the order-by
    value (a delete without it takes its key's previous one: `resolve`)."""
    assert plan.key is not None
    seen: set[int] = set()
    for name in plan.key.columns:
        column = rows.column(name)
        bad = pc.is_null(column)
        if name == plan.partition_column:
            bad = pc.or_(bad, pc.fill_null(pc.equal(column, ""), False))
        for j in pc.indices_nonzero(bad).to_pylist():
            if j not in seen:
                seen.add(j)
                yield j, (f"key column {name!r} is null or missing" if not column[j].is_valid
                          else f"key column {name!r} is empty")
    if plan.key.order_by:
        missing = pc.is_null(rows.column(plan.key.order_by))
        for j in pc.indices_nonzero(missing).to_pylist():
            if j not in seen and not deletes[j]:
                seen.add(j)
                yield j, (f"the new row has no value for the order-by column "
                          f"{plan.key.order_by!r}")


def write_changes_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]
                       ) -> Iterator[pa.RecordBatch]:
    """The write stage of a keyed plan: dead letters, then this task's buckets' changes."""
    assert plan.key is not None and plan.table is not None and plan.view is not None
    # The changes go through `Written`, which stages every file; so do the dead letters.
    writer = _TaskWriter.in_task(plan, publish_directly=False)
    fs, root = storage.url_to_fs(plan.target.root, plan.storage_options)
    written = Written(fs, root, attempt=str(writer.attempt_id))
    try:
        parts = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if not parts:
            yield to_arrow([])
            return
        table = pa.concat_tables(parts)
        read = offsets_read(table.column(META_TOPIC), table.column(META_PARTITION),
                            table.column(META_OFFSET))
        tombstones = pc.sum(pc.cast(table.column(META_TOMBSTONE), pa.int64())).as_py() or 0
        is_bad = pc.is_valid(table.column(META_ERROR))
        bad = table.filter(is_bad)
        writer.write_dead(pa.table({
            "key": bad.column(META_KEY), "value": bad.column(META_VALUE),
            "topic": bad.column(META_TOPIC), "partition": bad.column(META_PARTITION),
            "offset": bad.column(META_OFFSET), "error": bad.column(META_ERROR),
        }, schema=DEAD_LETTER_SCHEMA))
        results: list[Any] = []
        good = table.filter(pc.invert(is_bad))
        if good.num_rows:
            batch = _change_batch(plan, good)
            resolved = resolve(batch, plan.table, plan.key, missing_columns="null")
            counts = write_changes(fs, root, plan.table, plan.view, written, resolved,
                                   spec=plan.key, write_id=plan.target.write_id,
                                   compression=plan.target.compression)  # type: ignore[arg-type]
            for path, entry in zip(written.files, written.committed, strict=True):
                results.append(FileWritten("table", path, written.staged[path], entry.rows,
                                           entry.length, entry.length, entry.tail_hash,
                                           entry.rows))
            results.append(ChangesApplied(asdict(counts)))
        results += writer.finish()
        new = parsed_new_fields(table)
        if new is not None:
            results.append(new)
    except BaseException:
        writer.abandon()
        written.remove()
        raise
    yield to_arrow([*results, *merge_offsets(read),
                    *([Tombstones(tombstones)] if tombstones else [])])


def _change_batch(plan: TaskPlan, good: pa.Table) -> ChangeBatch:
    """The task's events in (Kafka topic, partition, offset) order, numbered 0.. in it."""
    assert plan.key is not None
    ordered = good.sort_by([(META_TOPIC, "ascending"), (META_PARTITION, "ascending"),
                            (META_OFFSET, "ascending")])
    columns = pa.table({f.name: pc.cast(ordered.column(f.name), f.type, safe=False)
                        for f in plan.parse_schema}, schema=plan.parse_schema)
    is_delete = np.asarray(ordered.column(META_DELETE).to_numpy(zero_copy_only=False),
                           dtype=bool)
    ranks = np.asarray(ordered.column(META_RANK).to_numpy(zero_copy_only=False),
                       dtype=np.int8)
    number = np.arange(ordered.num_rows, dtype=np.int64)
    wanted = [*plan.key.columns, *([plan.key.order_by] if plan.key.order_by else [])]
    return ChangeBatch(
        images=columns.filter(pa.array(~is_delete)), image_events=number[~is_delete],
        image_ranks=ranks[~is_delete],
        deletes=columns.select(wanted).filter(pa.array(is_delete)),
        delete_events=number[is_delete], events=ordered.num_rows, unit="record")


__all__ = ["KEYED_FIELDS", "classify", "parse_changes_task", "write_changes_task"]
