"""TIMESTAMP columns outside pyarrow's nanosecond range (before 1677-09-21, after 2262-04-11).

pyarrow's ORC reader holds timestamps as int64 nanoseconds and refuses a stripe with a value
outside; Hive's TIMESTAMP spans years 0001-9999. A file whose column statistics reach outside
is read here instead: a copy of its tail declares those columns LONG, so pyarrow returns the
DATA stream's seconds, and the SECONDARY stream's nanoseconds are decoded here, giving
timestamp[us] (docs/format.md §19).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.orc as po

from ingest.errors import UnsupportedFormatError
from ingest.orc._protobuf import Message
from ingest.orc._rle import decode_unsigned_v1, decode_unsigned_v2
from ingest.orc.compression import decompress_stream
from ingest.orc.proto_fields import (
    ColumnEncoding,
    ColumnEncodingKind,
    ColumnStatistics,
    Footer,
    Stream,
    StreamKind,
    StripeFooter,
    TimestampStatistics,
    Type,
    TypeKind,
)
from ingest.orc.tail import FileTail, serialize_tail

ORC_EPOCH_S = 1_420_070_400  # 2015-01-01 00:00:00 UTC: the DATA stream counts from here
NS_MIN = -(2**63)  # timestamp[ns] holds 1677-09-21 00:12:43.145224192 ..
NS_MAX = 2**63 - 1  # .. 2262-04-11 23:47:16.854775807
_UTC_NAMES = {"", "UTC", "GMT", "Etc/UTC", "Etc/GMT", "Z", "Zulu", "UCT", "Universal"}

SubMicroseconds = Literal["warn", "error"]
ReadRange = Callable[[int, int], bytes]


class TimestampPrecisionWarning(UserWarning):
    """Timestamps were read as microseconds and some had digits below the microsecond."""


@dataclass(frozen=True)
class WideColumn:
    """A TIMESTAMP column of a file that pyarrow's reader may refuse, and the unit it is
    decoded to here: "us" when its values reach outside timestamp[ns]; "ns" when they reach
    the range's last second (pyarrow checks the seconds alone and refuses some of those)."""

    column_id: int
    path: tuple[str, ...]  # field names from the root struct down to the column
    unit: Literal["us", "ns"] = "us"


def wide_timestamp_columns(tail: FileTail) -> list[WideColumn]:
    """TIMESTAMP columns whose file statistics reach outside timestamp[ns] (unit "us") or
    into its first or last second (unit "ns").

    Raises:
        UnsupportedFormatError: such a column sits inside a list, map or union (only columns
            reached through structs are decoded here).
    """
    known = tail.memo.get("wide_timestamp_columns")
    if known is not None:
        return list(known)  # type: ignore[call-overload]
    found = _wide_timestamp_columns(tail)
    tail.memo["wide_timestamp_columns"] = tuple(found)
    return found


def _wide_timestamp_columns(tail: FileTail) -> list[WideColumn]:
    types = tail.footer.encoded_messages(Footer.TYPES)
    # A cheap byte test first (the common path reads every file through here), then only
    # the candidates are decoded.
    candidates = [i for i, t in enumerate(types) if _is_timestamp(t)]
    stamps = [i for i in candidates if Message.decode(types[i]).uint(Type.KIND)
              == TypeKind.TIMESTAMP]
    if not stamps:
        return []
    statistics = tail.footer.encoded_messages(Footer.STATISTICS)
    paths: dict[int, tuple[str, ...]] | None = None
    out = []
    for column_id in stamps:
        if column_id >= len(statistics):
            continue
        reach = _reach(Message.decode(statistics[column_id]))
        if reach is None:
            continue
        if paths is None:
            paths = _struct_paths([Message.decode(t) for t in types])
        if column_id not in paths:
            raise UnsupportedFormatError(
                f"Cannot read TIMESTAMP column {column_id}: it holds values outside "
                "1677-09-21 .. 2262-04-11 inside a list, map or union, which this reader "
                "decodes only in top-level and struct columns")
        out.append(WideColumn(column_id, paths[column_id], reach))
    return out


def _is_timestamp(encoded_type: bytes) -> bool:
    # Field 1 (kind) as varint 9; a false match only costs the full decode below.
    return bytes((0x08, TypeKind.TIMESTAMP)) in encoded_type


def _struct_paths(types: list[Message]) -> dict[int, tuple[str, ...]]:
    """Column id -> field names from the root, for columns reached only through structs."""
    paths: dict[int, tuple[str, ...]] = {0: ()}
    for column_id, t in enumerate(types):
        if column_id not in paths or t.uint(Type.KIND) != TypeKind.STRUCT:
            continue
        names = [n.decode("utf-8") if isinstance(n, bytes) else str(n)
                 for n in t.raw(Type.FIELD_NAMES)]
        for child, name in zip(t.packed_uints(Type.SUBTYPES), names, strict=False):
            paths[child] = (*paths[column_id], name)
    return paths


def _reach(stats: Message) -> Literal["us", "ns"] | None:
    """"us" if the column's minimum or maximum lies outside timestamp[ns], "ns" if within a
    second of its ends, else None; statistics give UTC milliseconds and, optionally, the
    nanoseconds below the millisecond plus one."""
    found = stats.messages(ColumnStatistics.TIMESTAMP_STATISTICS)
    if not found:
        return None
    ts = found[0]
    low_ms = ts.sint(TimestampStatistics.MINIMUM_UTC)
    if low_ms is None:
        low_ms = ts.sint(TimestampStatistics.MINIMUM)
    high_ms = ts.sint(TimestampStatistics.MAXIMUM_UTC)
    if high_ms is None:
        high_ms = ts.sint(TimestampStatistics.MAXIMUM)
    low_nanos = max((ts.uint(TimestampStatistics.MINIMUM_NANOS) or 1) - 1, 0)
    high_nanos = max((ts.uint(TimestampStatistics.MAXIMUM_NANOS) or 1) - 1, 0)
    if not ts.has(TimestampStatistics.MAXIMUM_NANOS) and high_ms is not None:
        high_nanos = 999_999  # unknown below the millisecond: assume the worst
    low = None if low_ms is None else low_ms * 1_000_000 + low_nanos
    high = None if high_ms is None else high_ms * 1_000_000 + high_nanos
    if (low is not None and low < NS_MIN) or (high is not None and high > NS_MAX):
        return "us"
    if ((low is not None and low < NS_MIN + 10**9)
            or (high is not None and high > NS_MAX - 10**9)):
        return "ns"
    return None


class WideTimestampFile:
    """pyarrow's ORCFile with some TIMESTAMP columns read as timestamp[us] (see the module).

    Every stripe of the file reads those columns this way, so its batches share one schema.
    """

    def __init__(self, orc: po.ORCFile, tail: FileTail, columns: list[WideColumn],
                 read_range: ReadRange, *, where: str,
                 sub_microseconds: SubMicroseconds = "warn") -> None:
        self._orc = orc
        self._tail = tail
        self._columns = columns
        self._read_range = read_range
        self._where = where
        self._sub_microseconds = sub_microseconds
        self._as_long: po.ORCFile | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self._orc, name)

    @property
    def schema(self) -> pa.Schema:
        schema: pa.Schema = self._orc.schema
        for column in self._columns:
            schema = _replace_field_type(schema, column.path, pa.timestamp(column.unit))
        return schema

    def read_stripe(self, n: int, columns: list[str] | None = None) -> pa.RecordBatch:
        """Stripe `n` as pyarrow reads it, the wide TIMESTAMP columns as timestamp[us].

        Raises:
            UnsupportedFormatError: the stripe's writer time zone is not UTC, or a digit
                below the microsecond would be dropped and `sub_microseconds` is "error".
            ValueError: a stream cannot be decoded.
        """
        batch = self._long_file().read_stripe(n, columns=columns)
        footer: Message | None = None
        for column in self._columns:
            seconds = _find(batch, column.path)
            if seconds is None:  # not among the columns asked for
                continue
            if footer is None:
                footer = self._stripe_footer(n)
            stamps = self._decode(n, footer, column, seconds)
            batch = _replace(batch, column.path, stamps)
        return batch

    def read(self, columns: list[str] | None = None) -> pa.Table:
        """Every stripe (see `read_stripe`)."""
        batches = [self.read_stripe(i, columns) for i in range(self._orc.nstripes)]
        if batches:
            return pa.Table.from_batches(batches)
        return self.schema.empty_table()

    def _long_file(self) -> po.ORCFile:
        """The same bytes with the wide columns declared LONG: pyarrow reads their seconds."""
        if self._as_long is None:
            wide = {c.column_id for c in self._columns}
            types = []
            for column_id, t in enumerate(self._tail.types):
                if column_id in wide:
                    t = Message(list(t.fields))
                    t.set_uint(Type.KIND, TypeKind.LONG)
                types.append(t)
            footer = Message(list(self._tail.footer.fields))
            footer.set_messages(Footer.TYPES, types)
            tail = serialize_tail(postscript=self._tail.postscript, footer=footer,
                                  metadata=self._tail.metadata,
                                  compression=self._tail.compression,
                                  block_size=self._tail.block_size)
            data = bytes(self._read_range(0, self._tail.start)) + tail
            self._as_long = po.ORCFile(pa.BufferReader(data))
        return self._as_long

    def _stripe_footer(self, n: int) -> Message:
        stripe = self._tail.stripes[n]
        start = stripe.offset + stripe.index_length + stripe.data_length
        raw = self._read_range(start, start + stripe.footer_length)
        footer = Message.decode(decompress_stream(self._tail.compression, raw,
                                                  self._tail.block_size))
        zone = footer.string(StripeFooter.WRITER_TIMEZONE) or ""
        if zone not in _UTC_NAMES:
            raise UnsupportedFormatError(
                f"Cannot read {self._where}: stripe {n} holds timestamps outside "
                f"1677-09-21 .. 2262-04-11 written in time zone {zone!r}; this reader "
                "decodes such values only from files written in UTC")
        return footer

    def _decode(self, n: int, footer: Message, column: WideColumn,
                seconds: pa.Array) -> pa.Array:
        stripe = self._tail.stripes[n]
        offset = stripe.offset
        secondary = None
        for stream in footer.messages(StripeFooter.STREAMS):
            length = stream.uint(Stream.LENGTH, 0) or 0
            if (stream.uint(Stream.COLUMN, 0) == column.column_id
                    and stream.uint(Stream.KIND, 0) == StreamKind.SECONDARY):
                secondary = (offset, offset + length)
                break
            offset += length
        present = seconds.is_valid()
        count = len(seconds) - seconds.null_count
        if count and secondary is None:
            raise ValueError(f"stripe {n} has no SECONDARY stream for column "
                             f"{column.column_id}")
        raw = decompress_stream(self._tail.compression, self._read_range(*secondary),
                                self._tail.block_size) if secondary else b""
        encoding = footer.messages(StripeFooter.COLUMNS)[column.column_id]
        v2 = (encoding.uint(ColumnEncoding.KIND, 0) or 0) != ColumnEncodingKind.DIRECT
        encoded = (decode_unsigned_v2 if v2 else decode_unsigned_v1)(raw, count)
        stored = seconds.filter(present).to_numpy(zero_copy_only=False).astype(np.int64)
        if column.unit == "ns":
            decoded = to_nanoseconds(stored, encoded)
        else:
            decoded, dropped = to_microseconds(stored, encoded)
            if dropped:
                self._dropped(dropped, column)
        values = np.zeros(len(seconds), dtype=np.int64)
        valid = present.to_numpy(zero_copy_only=False)
        values[valid] = decoded
        return pa.array(values, pa.timestamp(column.unit), mask=~valid)

    def _dropped(self, count: int, column: WideColumn) -> None:
        message = (f"{self._where}: column {'.'.join(column.path)} holds timestamps outside "
                   f"1677-09-21 .. 2262-04-11, read as microseconds; {count:,} of them have "
                   "digits below the microsecond")
        if self._sub_microseconds == "error":
            raise UnsupportedFormatError(
                f"Cannot rewrite {message}, which would be lost",
                hint="leave this file uncompacted: readers return its rows to the "
                     "microsecond (docs/format.md §19)")
        warnings.warn(TimestampPrecisionWarning(message + ", which were dropped"), stacklevel=3)


def to_nanoseconds(stored_seconds: np.ndarray, encoded_nanos: np.ndarray) -> np.ndarray:
    """Nanoseconds since 1970 (see `to_microseconds`), for values that fit timestamp[ns]:
    int64 arithmetic wraps, so an intermediate beyond the range still ends right."""
    seconds, nanos = _instants(stored_seconds, encoded_nanos)
    with np.errstate(over="ignore"):
        return seconds * 1_000_000_000 + nanos  # type: ignore[no-any-return]


def to_microseconds(stored_seconds: np.ndarray,
                    encoded_nanos: np.ndarray) -> tuple[np.ndarray, int]:
    """Microseconds since 1970 from the DATA and SECONDARY values of non-null rows, and how
    many values had digits below the microsecond (dropped: the result is floored).

    SECONDARY holds the nanoseconds with their trailing decimal zeros cut: the low 3 bits
    count the zeros removed (0, or 2..8 for a code of 1..7), the rest are the digits left.
    Before 1970, ORC Java stores the seconds rounded toward zero when the nanoseconds reach
    a millisecond, and readers take one second off again (so -0.5 s, stored as second 0,
    reads as +0.5 s in every ORC reader); ORC C++ stores truncated seconds with negative
    nanoseconds instead. Both are read as ORC's readers read them.
    """
    seconds, nanos = _instants(stored_seconds, encoded_nanos)
    return seconds * 1_000_000 + nanos // 1000, int(np.count_nonzero(nanos % 1000))


def _instants(stored_seconds: np.ndarray,
              encoded_nanos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(seconds since 1970, nanoseconds, maybe negative) as ORC's readers take them.

    Signed: ORC C++ (pyarrow) stores seconds truncated toward zero and negative nanos before
    1970, two's complement in the unsigned stream; its readers shift arithmetically.
    """
    signed = encoded_nanos.astype(np.int64)
    zeros = signed & 7
    nanos = signed >> 3
    with np.errstate(over="ignore"):  # negative nanos scaled up wrap back, as in ORC C++
        nanos = np.where(zeros > 0, nanos * 10 ** np.where(zeros > 0, zeros + 1, 0), nanos)
    seconds = stored_seconds + ORC_EPOCH_S
    return np.where((seconds < 0) & (nanos > 999_999), seconds - 1, seconds), nanos


def _find(batch: pa.RecordBatch, path: tuple[str, ...]) -> pa.Array | None:
    if path[0] not in batch.schema.names:
        return None
    array = batch.column(path[0])
    for name in path[1:]:
        if not pa.types.is_struct(array.type) or array.type.get_field_index(name) < 0:
            return None
        array = array.field(name)
    return array


def _replace(batch: pa.RecordBatch, path: tuple[str, ...], new: pa.Array) -> pa.RecordBatch:
    index = batch.schema.get_field_index(path[0])
    column = _replace_in(batch.column(index), path[1:], new)
    return batch.set_column(index, batch.schema.field(index).with_type(column.type), column)


def _replace_in(array: pa.Array, path: tuple[str, ...], new: pa.Array) -> pa.Array:
    if not path:
        return new
    struct: pa.StructArray = array
    fields = list(struct.type)
    children = [struct.field(i) for i in range(len(fields))]
    i = struct.type.get_field_index(path[0])
    children[i] = _replace_in(children[i], path[1:], new)
    fields[i] = fields[i].with_type(children[i].type)
    mask = struct.is_null() if struct.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _replace_field_type(schema: pa.Schema, path: tuple[str, ...],
                        new: pa.DataType) -> pa.Schema:
    index = schema.get_field_index(path[0])
    if index < 0:
        return schema
    field = schema.field(index)
    return schema.set(index, field.with_type(_replace_type(field.type, path[1:], new)))


def _replace_type(t: pa.DataType, path: tuple[str, ...], new: pa.DataType) -> pa.DataType:
    if not path:
        return new
    fields = list(t)
    i = t.get_field_index(path[0])
    fields[i] = fields[i].with_type(_replace_type(fields[i].type, path[1:], new))
    return pa.struct(fields)


def with_wide_timestamps(orc: po.ORCFile, tail: FileTail, read_range: ReadRange, *,
                         where: str, sub_microseconds: SubMicroseconds = "warn",
                         columns: list[WideColumn] | None = None
                         ) -> po.ORCFile | WideTimestampFile:
    """`orc` itself when every TIMESTAMP value fits timestamp[ns] (by the file statistics),
    else a `WideTimestampFile` over it.

    Args:
        read_range: bytes [start, end) of the file.
        where: the file, for messages.
        sub_microseconds: "warn" (drop digits below the microsecond with a
            TimestampPrecisionWarning) or "error" (refuse: e.g. to rewrite the rows).
        columns: `wide_timestamp_columns(tail)` when the caller knows it already.

    Raises:
        UnsupportedFormatError: see `wide_timestamp_columns`.
    """
    if columns is None:
        columns = wide_timestamp_columns(tail)
    if not columns:
        return orc
    return WideTimestampFile(orc, tail, columns, read_range, where=where,
                             sub_microseconds=sub_microseconds)


__all__ = ["NS_MAX", "NS_MIN", "ORC_EPOCH_S", "TimestampPrecisionWarning", "WideColumn",
           "WideTimestampFile", "to_microseconds", "to_nanoseconds", "wide_timestamp_columns",
           "with_wide_timestamps"]
