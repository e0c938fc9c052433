"""The rules of a keyed write, and a change batch resolved to one final event per key.

`check_keyed_table` refuses, up front, a table whose keys could not be found cheaply: it must
be bucketed by (a subset of) the key, so Hive's murmur3 bucketing (docs/format.md §12) puts a
key in one bucket, and its partition columns must be part of the key. `resolve` conforms the
events to the table's columns, refuses null keys naming the event, and keeps the last event
per key: input order, or `order_by` with Debezium's tie-break (c < r < u < d). Knows no files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.errors import BadRecordError, ConfigError
from ingest.records import OP_RANK, ChangeBatch
from ingest.table.write.load import MissingColumns, conform_rows
from ingest.txn import TableDefinition

SEQ, RANK, ORDER, DELETE, SOURCE = "_seq", "_rank", "_order", "_delete", "_source"
"""The bookkeeping columns of `Resolved.winners`, after the key columns."""


@dataclass(frozen=True)
class KeySpec:
    """A checked key: the table's own column names.

    Attributes:
        columns: the key columns, in the order given.
        order_by: the row column that orders events and guards against stale ones, or None.
    """

    columns: tuple[str, ...]
    order_by: str | None = None


def check_keyed_table(defn: TableDefinition, key: object, order_by: object = None) -> KeySpec:
    """Check that `key` (and `order_by`) fit the table and that the table keeps keys findable.

    Raises:
        ConfigError: `key` is not a non-empty list of the table's columns; the table is not
            bucketed, or bucketed by a column outside the key; a partition column is not in
            the key; `order_by` is not a row column outside the key of an orderable type.
    """
    if isinstance(key, str) or not isinstance(key, Sequence) or not key \
            or not all(isinstance(k, str) for k in key):
        raise ConfigError(f"Cannot upsert into {defn.name}: key={key!r} is not a list of "
                          "column names", hint="for example key=['id'] (CLI: --key id or "
                                               "--key id,region)")
    known = [*defn.row_schema.names, *defn.partition_columns]
    columns = tuple(_resolve(defn, str(k), known, "key") for k in key)
    if len(set(columns)) != len(columns):
        raise ConfigError(f"Cannot upsert into {defn.name}: key {list(key)} names a column "
                          "twice")
    if not defn.bucket_count:
        raise ConfigError(
            f"Cannot upsert into {defn.name}: the table is not bucketed, so the current row "
            f"of a key could be in any file; keyed writes need a table bucketed by the key "
            f"({', '.join(columns)})",
            hint=f"create the table with --buckets N --bucketed-by "
                 f"{' --bucketed-by '.join(c for c in columns if c in defn.row_schema.names)}")
    outside = [c for c in defn.bucket_columns if c not in columns]
    if outside:
        raise ConfigError(
            f"Cannot upsert into {defn.name}: it is bucketed by {list(defn.bucket_columns)}, "
            f"and {outside} are not in the key {list(columns)}, so one key's rows could lie in "
            "several buckets",
            hint="use a key that contains every bucket column, or a table bucketed by the key")
    missing = [c for c in defn.partition_columns if c not in columns]
    if missing:
        raise ConfigError(
            f"Cannot upsert into {defn.name}: partition columns {missing} are not in the key "
            f"{list(columns)}, so one key could have rows in several partitions",
            hint=f"add them to the key: --key {','.join([*columns, *missing])}")
    if order_by is None:
        return KeySpec(columns)
    if not isinstance(order_by, str):
        raise ConfigError(f"Cannot upsert into {defn.name}: order_by={order_by!r} is not a "
                          "column name")
    order = _resolve(defn, order_by, list(defn.row_schema.names), "order-by")
    if order in columns:
        raise ConfigError(f"Cannot upsert into {defn.name}: order-by column {order!r} is part "
                          "of the key, so it cannot order a key's events",
                          hint="order by a version or timestamp column, e.g. updated_at")
    t = defn.row_schema.field(order).type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_string(t)):
        raise ConfigError(f"Cannot upsert into {defn.name}: order-by column {order!r} is {t}, "
                          "which has no order", hint="order by a number, date, timestamp or "
                                                     "string column")
    return KeySpec(columns, order)


def _resolve(defn: TableDefinition, name: str, known: list[str], what: str) -> str:
    if name in known:
        return name
    folded = [c for c in known if c.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    raise ConfigError(f"Cannot upsert into {defn.name}: {what} column {name!r} is not a "
                      f"column of the table", hint=f"its columns are: {', '.join(known)}")


@dataclass(frozen=True)
class Resolved:
    """A change batch conformed to the table and reduced to one final event per key.

    Attributes:
        rows: every image conformed to the row schema; partitions: their partition columns
            (strings), row for row.
        winners: one row per key, sorted by key: the key columns (partition columns as
            strings), `_seq` (event number), `_rank`, `_order` (the order-by value, null if
            unknown or no order-by), `_delete`, `_source` (the row of `rows` holding the
            image; -1 for a delete).
        events: how many events the batch had.
    """

    rows: pa.Table
    partitions: pa.Table
    winners: pa.Table
    events: int


def resolve(batch: ChangeBatch, defn: TableDefinition, spec: KeySpec, *,
            missing_columns: MissingColumns = "error") -> Resolved:
    """Conform `batch` to the table and keep the last event per key.

    Within a key, events are ordered by event number, or with `spec.order_by` by its value,
    then op rank, then event number. A delete whose image lacks the order-by value (a
    tombstone, a `before` holding only the key) takes the value of the event of its key just
    before it in the input; with none, it is the newest of its key.

    Raises:
        SchemaMismatchError: images do not fit the table's columns (see `load`).
        BadRecordError: an event has a null key column (or an empty partition-key value), or
            an image has no order-by value; the message names the first such event.
    """
    # With no image at all (only deletes) there is no column to miss.
    rows, partitions = conform_rows(batch.images, defn,
                                    missing_columns if batch.images.num_rows else "null")
    keys = _key_columns(rows, partitions, spec)
    order = rows.column(spec.order_by) if spec.order_by else None
    _check_keys(keys, batch.image_events, batch, spec, defn)
    if order is not None and order.null_count:
        first = int(batch.image_events[pc.indices_nonzero(pc.is_null(order))[0].as_py()])
        raise BadRecordError(f"Cannot upsert {batch.name(first)}: its new row has no value for "
                             f"the order-by column {spec.order_by!r}",
                             hint="every image must carry the column that orders its key's "
                                  "events")
    n_images = rows.num_rows
    parts = [keys]
    if batch.deletes.num_rows:
        d_rows, d_parts = conform_rows(_key_and_order(batch.deletes, defn, spec), defn, "null")
        d_keys = _key_columns(d_rows, d_parts, spec).cast(keys.schema)
        _check_keys(d_keys, batch.delete_events, batch, spec, defn)
        parts.append(d_keys)
        if order is not None:
            order = pa.chunked_array([*order.chunks, *d_rows.column(spec.order_by).cast(
                order.type).chunks], type=order.type)
    n = n_images + batch.deletes.num_rows
    events = pa.concat_tables(parts)
    events = events.append_column(SEQ, pa.array(np.concatenate(
        [batch.image_events, batch.delete_events]).astype(np.int64)))
    events = events.append_column(RANK, pa.array(np.concatenate(
        [batch.image_ranks, np.full(batch.deletes.num_rows, OP_RANK["d"], np.int8)])))
    events = events.append_column(ORDER, order if order is not None else pa.nulls(n, pa.int64()))
    events = events.append_column(DELETE, pa.array(np.arange(n) >= n_images))
    events = events.append_column(SOURCE, pa.array(np.where(np.arange(n) < n_images,
                                                            np.arange(n), -1)))
    if spec.order_by and batch.deletes.num_rows:
        events = _inherit_order(events, spec.columns)
    return Resolved(rows, partitions, _last_per_key(events, spec), batch.events)


def _key_columns(rows: pa.Table, partitions: pa.Table, spec: KeySpec) -> pa.Table:
    return pa.table({c: (partitions if c in partitions.column_names else rows).column(c)
                     for c in spec.columns})


def _key_and_order(deletes: pa.Table, defn: TableDefinition, spec: KeySpec) -> pa.Table:
    """The columns of delete images `resolve` uses: key and order-by, matched as `load`
    matches names (other fields of `before` are neither needed nor checked)."""
    wanted = {c.lower() for c in (*spec.columns, *([spec.order_by] if spec.order_by else []))}
    return deletes.select([c for c in deletes.column_names if c.lower() in wanted])


def _check_keys(keys: pa.Table, event_numbers: np.ndarray, batch: ChangeBatch,
                spec: KeySpec, defn: TableDefinition) -> None:
    """Refuse a null key column, or an empty partition value (it would land in Hive's
    default partition, which reads back as null)."""
    for name in spec.columns:
        column = keys.column(name)
        bad = pc.is_null(column)
        if name in defn.partition_columns:
            bad = pc.or_(bad, pc.fill_null(pc.equal(column, ""), False))
        if pc.any(bad).as_py():
            first = int(event_numbers[pc.indices_nonzero(bad)[0].as_py()])
            count = pc.sum(bad).as_py()
            raise BadRecordError(
                f"Cannot upsert {batch.name(first)}: key column {name!r} is "
                + ("empty" if column[pc.indices_nonzero(bad)[0].as_py()].is_valid else "null")
                + (f" ({count:,} such events)" if count > 1 else ""),
                hint="every event must name its key: key columns may not be null"
                     + (" or empty (a partition column)" if name in defn.partition_columns
                        else ""))


def _inherit_order(events: pa.Table, key: Sequence[str]) -> pa.Table:
    """Fill a null `_order` with the order of the previous event of the same key (by event
    number); the rest stay null (newest of their key)."""
    by_key = events.sort_by([*((c, "ascending") for c in key), (SEQ, "ascending")])
    order = by_key.column(ORDER).combine_chunks()
    if not order.null_count:
        return events
    n = by_key.num_rows
    idx = np.arange(n)
    group_start = np.maximum.accumulate(np.where(_first_of_group(by_key, key), idx, 0))
    valid = np.asarray(order.is_valid().to_numpy(zero_copy_only=False))
    last_valid = np.maximum.accumulate(np.where(valid, idx, -1))
    source = np.where(~valid & (last_valid >= group_start), last_valid, idx)
    return by_key.set_column(by_key.schema.get_field_index(ORDER), ORDER,
                             order.take(pa.array(source)))


def _first_of_group(table: pa.Table, key: Sequence[str]) -> np.ndarray:
    """True where a row's key differs from the row before (rows sorted by key)."""
    n = table.num_rows
    first = np.ones(n, dtype=bool)
    if n < 2:
        return first
    first[1:] = False
    for name in key:
        column = table.column(name).combine_chunks()
        differs = pc.not_equal(column.slice(1), column.slice(0, n - 1))
        first[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=bool)
    return first


def _last_per_key(events: pa.Table, spec: KeySpec) -> pa.Table:
    """One event per key, the last by (order, rank, event number) or event number; sorted by
    key."""
    sort = [*((c, "ascending") for c in spec.columns)]
    if spec.order_by:
        sort += [(ORDER, "ascending"), (RANK, "ascending")]
    sort.append((SEQ, "ascending"))
    ordered = events.sort_by(sort)  # nulls last: an unordered delete is the newest
    n = ordered.num_rows
    last = np.ones(n, dtype=bool)
    if n:
        last[:-1] = _first_of_group(ordered, spec.columns)[1:]
    return ordered.filter(pa.array(last))


__all__ = ["DELETE", "ORDER", "RANK", "SEQ", "SOURCE", "KeySpec", "Resolved",
           "check_keyed_table", "resolve"]
