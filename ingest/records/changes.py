"""Keyed change events as `upsert` consumes them: new images and deletes, in input order.

Builds a `ChangeBatch` from plain rows (each row the new image of its key) or from Debezium
change envelopes (`before`, `after`, `op` c/r/u/d, a tombstone deletes), from Python objects,
an Arrow table of envelopes or a JSON Lines file. Knows no table, metastore or file layout;
the streaming sink can hand its Kafka records here as well (`from_debezium` takes the
record's key for a tombstone).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from ingest.errors import BadRecordError, ConfigError
from ingest.records.input import read_input_bytes

CdcFormat = Literal["debezium"]
"""Change-envelope formats `apply_changes` reads (room for others)."""

OP_RANK = {"c": 0, "r": 1, "u": 2, "d": 3}
"""Debezium's tie-break among events with the same order value: c < r < u < d."""

_UNSUPPORTED_OPS = {"t": "a truncate", "m": "a logical-decoding message"}


@dataclass(frozen=True)
class ChangeBatch:
    """Change events of one call, numbered 0.. in input order.

    Attributes:
        images: the new image of each upsert event (table columns; any order and case).
        image_events: the event number of each row of `images`.
        image_ranks: the op rank (`OP_RANK`) of each image; 0 for plain upserts.
        deletes: what each delete event knows of the deleted row: at least its key columns
            (Debezium's `before`, or a tombstone's record key); other columns may be null.
        delete_events: the event number of each row of `deletes`.
        events: how many events in all.
        unit: what an event is called in errors ("line" for a file, "event" or "row" else).

    Event numbers order the events (input order) and name them in errors; for a file they
    are its line numbers less one, so blank lines leave gaps.
    """

    images: pa.Table
    image_events: np.ndarray
    image_ranks: np.ndarray
    deletes: pa.Table
    delete_events: np.ndarray
    events: int
    unit: str = "event"

    def name(self, event: int) -> str:
        """How errors name event number `event` (0-based): e.g. "line 12"."""
        return f"{self.unit} {event + 1:,}"


def from_rows(data: pa.Table, *, unit: str = "row") -> ChangeBatch:
    """Each row is the new image of its key (`Table.upsert`, `ingest upsert` without
    --cdc-format)."""
    n = data.num_rows
    return ChangeBatch(data, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int8),
                       pa.table({}), np.zeros(0, dtype=np.int64), n, unit)


def from_debezium(envelopes: Iterable[object], *, unit: str = "event") -> ChangeBatch:
    """Debezium change events, in order.

    Each item is one of:
    - an envelope `{"before", "after", "op", ...}` (also wrapped as the JSON converter with
      schemas writes it, `{"schema": ..., "payload": envelope}`);
    - a Kafka record `{"key": {...}, "value": envelope or None}`: a None value is a
      tombstone, which deletes the key the record key names.
    `op` c (create), r (snapshot read) and u (update) upsert `after`; d deletes the row
    `before` names (or, without `before`, the record key).

    Raises:
        BadRecordError: an item is neither of these, lacks `op` or has an unknown one, or an
            image it needs is missing; the message names the item ("event 3").
    """
    return _from_numbered(enumerate(envelopes), unit)


def from_debezium_arrow(envelopes: pa.Table | pa.RecordBatch, *,
                        unit: str = "event") -> ChangeBatch:
    """Debezium change events already in Arrow, one row each, in order: column `op`
    (string c, r, u or d), `after` (a struct of the new row; needed by c/r/u) and `before`
    (a struct naming the deleted row; needed by d), as a stream holds them after parsing.
    The same events as `from_debezium` takes as dicts, without turning them into Python
    objects.

    Raises:
        BadRecordError: a column is missing or not of those types, or an event has no
            `op`, an unknown one, or lacks the image it needs; the message names the event
            ("event 3").
    """
    table = pa.Table.from_batches([envelopes]) if isinstance(envelopes, pa.RecordBatch) \
        else envelopes
    n = table.num_rows
    names = table.column_names
    if "op" not in names:
        raise BadRecordError(f"Cannot apply the change events: the Arrow table has no 'op' "
                             f"column (columns: {', '.join(names) or 'none'})",
                             hint="give columns op (string), after and before (structs)")
    op = table.column("op").combine_chunks()
    if not (pa.types.is_string(op.type) or pa.types.is_large_string(op.type)):
        raise BadRecordError(f"Cannot apply the change events: column 'op' is {op.type}, "
                             "not a string of c, r, u or d")
    ops = np.asarray(op.to_numpy(zero_copy_only=False), dtype=object)
    ranks = np.full(n, -1, dtype=np.int8)
    for name, rank in OP_RANK.items():
        ranks[ops == name] = rank
    if (bad := np.flatnonzero(ranks < 0)).size:
        first = int(bad[0])
        _refuse_op({c: None for c in names if c != "op"} if ops[first] is None else
                   {"op": ops[first]}, ops[first], first, unit)
    is_delete = ranks == OP_RANK["d"]
    image_events = np.flatnonzero(~is_delete)
    delete_events = np.flatnonzero(is_delete)
    images = _struct_rows(table, "after", image_events, unit,
                          "op {op!r} needs the new row in 'after'", ops)
    deletes = _struct_rows(table, "before", delete_events, unit,
                           "a delete (op 'd') needs 'before' to name the deleted row", ops)
    return ChangeBatch(images, image_events.astype(np.int64), ranks[image_events],
                       deletes, delete_events.astype(np.int64), n, unit)


def _struct_rows(table: pa.Table, name: str, events: np.ndarray, unit: str, need: str,
                 ops: np.ndarray) -> pa.Table:
    """The struct column `name` at `events` as a table of its fields (every one non-null).

    Raises:
        BadRecordError: the column is missing or no struct, or null at one of `events`.
    """
    if not len(events):
        return pa.table({})
    if name not in table.column_names:
        raise BadRecordError(f"Cannot apply {_where(int(events[0]), unit)}: "
                             + need.format(op=ops[events[0]]) + "; the Arrow table has no "
                             f"{name!r} column")
    column = table.column(name).combine_chunks()
    if not pa.types.is_struct(column.type):
        raise BadRecordError(f"Cannot apply the change events: column {name!r} is "
                             f"{column.type}, not a struct of the row's columns")
    rows = column.take(pa.array(events))
    if rows.null_count:
        first = int(events[np.flatnonzero(np.asarray(
            rows.is_null().to_numpy(zero_copy_only=False), dtype=bool))[0]])
        raise BadRecordError(f"Cannot apply {_where(first, unit)}: "
                             + need.format(op=ops[first]) + ", found null")
    return pa.Table.from_arrays(rows.flatten(), names=[f.name for f in column.type])


def _from_numbered(items: Iterable[tuple[int, object]], unit: str) -> ChangeBatch:
    """`from_debezium` over (event number, item) pairs, numbers ascending."""
    images: list[Mapping[str, Any]] = []
    image_events: list[int] = []
    image_ranks: list[int] = []
    deletes: list[Mapping[str, Any]] = []
    delete_events: list[int] = []
    n = 0
    key: Mapping[str, Any] | None
    envelope: Mapping[str, Any] | None
    for number, item in items:
        n += 1
        if type(item) is dict and "op" in item and "payload" not in item:
            key, envelope = None, item  # the common case, without the checks' cost
        else:
            key, envelope = _split_record(item, number, unit)
        if envelope is None:  # a tombstone
            deletes.append(key)  # type: ignore[arg-type]  # _split_record checked it
            delete_events.append(number)
            continue
        op = envelope.get("op")
        if op == "d":
            before = envelope.get("before")
            if not isinstance(before, Mapping):
                before = key
            if not isinstance(before, Mapping):
                raise BadRecordError(f"Cannot apply {_where(number, unit)}: a delete (op 'd') "
                                     "needs 'before' or a record key to name the deleted row; "
                                     "it has neither")
            deletes.append(before)
            delete_events.append(number)
            continue
        rank = OP_RANK.get(op) if isinstance(op, str) else None
        if rank is None:
            _refuse_op(envelope, op, number, unit)
        after = envelope.get("after")
        if type(after) is not dict and not isinstance(after, Mapping):
            raise BadRecordError(f"Cannot apply {_where(number, unit)}: op {op!r} needs the new "
                                 f"row in 'after', found {type(after).__name__}")
        images.append(after)
        image_events.append(number)
        image_ranks.append(rank)  # type: ignore[arg-type]  # _refuse_op raised otherwise
    return ChangeBatch(_table(images, unit), np.array(image_events, dtype=np.int64),
                       np.array(image_ranks, dtype=np.int8), _table(deletes, unit),
                       np.array(delete_events, dtype=np.int64), n, unit)


def _where(number: int, unit: str) -> str:
    """How an error names the item: "event 3" (made only when one is raised)."""
    return f"{unit} {number + 1:,}"


def _refuse_op(envelope: Mapping[str, Any], op: object, number: int, unit: str) -> None:
    """Raise for an envelope without `op` or with one upsert does not apply."""
    where = _where(number, unit)
    if op is None:
        raise BadRecordError(f"Cannot apply {where}: the Debezium envelope has no 'op' "
                             f"(fields: {', '.join(sorted(envelope)) or 'none'})",
                             hint="each line must be a Debezium change event with op "
                                  "c, r, u or d, or a Kafka record {\"key\", \"value\"}")
    what = _UNSUPPORTED_OPS.get(str(op))
    raise BadRecordError(
        f"Cannot apply {where}: op {op!r} is "
        + (f"{what}, which upsert does not apply" if what else "not a Debezium op")
        + "; expected c, r, u or d")


def _split_record(item: object, number: int, unit: str
                  ) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """(record key or None, envelope or None for a tombstone)."""
    where = _where(number, unit)
    if item is None:
        raise BadRecordError(f"Cannot apply {where}: a bare null is a tombstone without its "
                             "key, so it names no row",
                             hint='give a tombstone as a Kafka record: {"key": {"id": 1}, '
                                  '"value": null}')
    if not isinstance(item, Mapping):
        raise BadRecordError(f"Cannot apply {where}: expected a JSON object, found "
                             f"{type(item).__name__}")
    key: Mapping[str, Any] | None = None
    if set(item) == {"key", "value"}:
        key = _payload(item["key"])
        if not isinstance(key, Mapping) and key is not None:
            raise BadRecordError(f"Cannot apply {where}: the record key must be an object "
                                 f"of key columns, found {type(key).__name__}")
        value = _payload(item["value"])
        if value is None:
            if key is None:
                raise BadRecordError(f"Cannot apply {where}: a tombstone (null value) "
                                     "without a record key names no row")
            return key, None
        item = value
        if not isinstance(item, Mapping):
            raise BadRecordError(f"Cannot apply {where}: the record value must be a Debezium "
                                 f"envelope, found {type(item).__name__}")
    envelope = _payload(item)
    if envelope is None and key is not None:
        return key, None  # a JSON-converter tombstone under a record key
    if not isinstance(envelope, Mapping):  # a JSON-converter payload that is no object
        raise BadRecordError(f"Cannot apply {where}: expected a Debezium envelope object, "
                             f"found {type(envelope).__name__}")
    return key, envelope


def _payload(value: Any) -> Any:
    """Unwrap the JSON converter's `{"schema": ..., "payload": ...}` form."""
    return unwrap_debezium(value)


# Debezium's epoch timestamps (zone-less, as a TIMESTAMP column holds them): ticks a second.
_EPOCH_UNITS = {"io.debezium.time.Timestamp": 10**3, "io.debezium.time.MicroTimestamp": 10**6,
                "io.debezium.time.NanoTimestamp": 10**9}
_EPOCH = datetime.datetime(1970, 1, 1)


def unwrap_debezium(value: Any) -> Any:
    """`value` without the JSON converter's `{"schema": ..., "payload": ...}` wrapping, with
    the epoch timestamps its schema names as text a TIMESTAMP column takes: a number alone
    does not say its unit, the schema does (`io.debezium.time.Timestamp` milliseconds,
    `MicroTimestamp` microseconds, `NanoTimestamp` nanoseconds). Fields of the payload
    itself (a record key) and of an envelope's `before` and `after` are converted."""
    if not (isinstance(value, Mapping) and set(value) == {"schema", "payload"}):
        return value
    payload = value["payload"]
    fields = _schema_fields(value["schema"])
    if not isinstance(payload, Mapping) or not fields:
        return payload
    out = _with_epoch_text(payload, fields)
    for image in ("before", "after"):
        inner = _schema_fields(fields.get(image))
        if inner and isinstance(out.get(image), Mapping):
            out[image] = _with_epoch_text(out[image], inner)
    return out


def _schema_fields(schema: Any) -> dict[str, Any]:
    """A Kafka Connect struct schema's fields by name ({} for anything else)."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("fields"), list):
        return {}
    return {f["field"]: f for f in schema["fields"]
            if isinstance(f, Mapping) and isinstance(f.get("field"), str)}


def _with_epoch_text(row: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for name, value in row.items():
        field = fields.get(name)
        unit = (_EPOCH_UNITS.get(str(field.get("name"))) if isinstance(field, Mapping)
                else None)
        if unit is None or type(value) is not int:
            continue
        seconds, ticks = divmod(value, unit)
        try:
            when = _EPOCH + datetime.timedelta(seconds=seconds)
        except OverflowError:
            continue  # beyond any TIMESTAMP: left as the number, which loading refuses
        out[name] = f"{when:%Y-%m-%d %H:%M:%S}.{ticks * (10**9 // unit):09d}"
    return out


def _table(rows: Sequence[Mapping[str, Any]], unit: str) -> pa.Table:
    """The images as columns: every field any image has, in order of first appearance
    (`pa.Table.from_pylist` takes the first row's fields only and would drop, for every
    image, a field the first one lacks, e.g. the order-by value of a later `before`)."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    try:
        return pa.Table.from_pydict({name: [row.get(name) for row in rows] for name in names})
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise BadRecordError(f"Cannot apply the change events: their images do not make "
                             f"columns of one type each ({e})",
                             hint=f"every {unit} must give a column's values in one JSON "
                                  "type") from e


def read_debezium_file(path: str, *, storage_options: Mapping[str, Any] | None = None,
                       ) -> ChangeBatch:
    """`from_debezium` over a JSON Lines file (maybe .gz/.bz2/.zst/.lz4), one event per
    non-blank line; errors name the line.

    Raises:
        FileNotFoundError: no such file.
        BadRecordError: a line is not JSON, or as `from_debezium`.
    """
    data = read_input_bytes(path, storage_options=storage_options)
    lines: list[tuple[int, object]] = []
    for number, line in enumerate(data.splitlines()):
        if not line.strip():
            continue
        try:
            lines.append((number, json.loads(line)))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BadRecordError(f"Cannot read {path} line {number + 1:,}: not a JSON value "
                                 f"({e})") from e
    return _from_numbered(lines, "line")


def check_cdc_format(value: object) -> CdcFormat:
    """Refuse a change format other than "debezium".

    Raises:
        ConfigError: an unknown format.
    """
    if value != "debezium":
        raise ConfigError(f"Cannot apply changes: cdc_format={value!r} is not a known change "
                          "format", hint='the formats are: "debezium"')
    return "debezium"


__all__ = ["OP_RANK", "CdcFormat", "ChangeBatch", "check_cdc_format", "from_debezium",
           "from_debezium_arrow",
           "from_rows", "read_debezium_file", "unwrap_debezium"]
