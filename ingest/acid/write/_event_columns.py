"""The event columns of an insert stripe, encoded without an ORC writer.

In a stripe of insert events, operation, originalTransaction, bucket and currentTransaction
are constant and rowId counts up by one, so each is a run of RLE v2 DELTA runs with a fixed
delta (ORC spec, "Integer Run Length Encoding, version 2"): a 2-byte header (encoding 3,
bit width 0, run length - 1), the first value and the delta as zigzag varints. Each row
group starts a new run, so its row-index position needs no count of values into a run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ingest.orc import (
    INT64_MAX,
    INT64_MIN,
    ColumnStatistics,
    CompressionKind,
    IntegerStatistics,
    Message,
    RowIndex,
    RowIndexEntry,
    compress_stream,
    compress_stream_with_positions,
    encode_varint,
    length_field,
    varint_field,
    zigzag_encode,
)

MAX_RUN = 512  # values in one RLE v2 run
_DELTA_RUN = 0xC0  # header bits: encoding DELTA (3), bit width 0 (fixed delta)
_VARINT_BYTES = 10


@dataclass(frozen=True)
class EventColumn:
    """One encoded event column of a stripe: its DATA and ROW_INDEX streams and statistics."""

    data: bytes
    index: bytes
    statistics: Message


def event_column(first: int, delta: int, rows: int, *, stride: int, kind: CompressionKind,
                 block: int) -> EventColumn:
    """first, first + delta, ... (`rows` values) as an ORC integer column.

    Args:
        stride: rows per row-index entry.
        kind, block: the file's codec and compression block size.
    """
    if delta == 0:  # the same stripe shapes repeat flush after flush
        return _constant_column(first, rows, stride, kind, block)
    return _column(first, delta, rows, stride, kind, block)


@functools.lru_cache(maxsize=256)
def _constant_column(value: int, rows: int, stride: int, kind: CompressionKind,
                     block: int) -> EventColumn:
    return _column(value, 0, rows, stride, kind, block)


def _column(first: int, delta: int, rows: int, stride: int, kind: CompressionKind,
            block: int) -> EventColumn:
    group_starts = list(range(0, rows, stride))
    raw, group_offsets = _delta_runs(first, delta, rows, group_starts)
    data, positions = compress_stream_with_positions(kind, raw, block, group_offsets)
    entries = b"".join(
        length_field(RowIndex.ENTRY, _index_entry(
            [*position, 0],  # 0 values into the run
            _int_statistics(first + delta * start, delta, min(stride, rows - start))))
        for start, position in zip(group_starts, positions, strict=True))
    index = compress_stream(kind, entries, block)
    return EventColumn(data, index, Message.decode(_int_statistics(first, delta, rows)))


def _delta_runs(first: int, delta: int, rows: int,
                group_starts: list[int]) -> tuple[bytes, list[int]]:
    """The runs' bytes, and the byte offset where each row group's first run starts."""
    lengths: list[int] = []
    first_runs = []
    for start, end in zip(group_starts, [*group_starts[1:], rows], strict=True):
        first_runs.append(len(lengths))
        full, rest = divmod(end - start, MAX_RUN)
        lengths += [MAX_RUN] * full + ([rest] if rest else [])
    run_lengths = np.array(lengths, dtype=np.int64)
    starts = first + delta * (np.cumsum(run_lengths) - run_lengths)
    zigzag = (starts.astype(np.uint64) << np.uint64(1)) ^ (starts >> 63).astype(np.uint64)
    base = _varints(zigzag)
    step = np.frombuffer(encode_varint(zigzag_encode(delta)), dtype=np.uint8)
    header = np.stack([_DELTA_RUN | ((run_lengths - 1) >> 8), (run_lengths - 1) & 0xFF],
                      axis=1).astype(np.uint8)
    runs = np.concatenate([header, base.bytes, np.tile(step, (len(lengths), 1))], axis=1)
    keep = np.concatenate([np.ones_like(header, dtype=bool), base.used,
                           np.ones((len(lengths), len(step)), dtype=bool)], axis=1)
    sizes = keep.sum(axis=1)
    run_offsets = np.cumsum(sizes) - sizes
    return runs[keep].tobytes(), [int(run_offsets[i]) for i in first_runs]


@dataclass(frozen=True)
class _Varints:
    bytes: np.ndarray  # (n, 10) uint8: 7-bit groups, low first, continuation bits set
    used: np.ndarray  # (n, 10) bool: which of the 10 bytes each varint uses


def _varints(values: np.ndarray) -> _Varints:
    """Unsigned LEB128 varints of uint64 values, vectorised."""
    shifts = np.arange(_VARINT_BYTES, dtype=np.uint64) * np.uint64(7)
    groups = (values[:, None] >> shifts) & np.uint64(0x7F)
    width = np.maximum(1, (groups != 0) * (np.arange(_VARINT_BYTES) + 1)).max(axis=1)
    position = np.arange(_VARINT_BYTES)[None, :]
    continued = position < (width - 1)[:, None]
    return _Varints(groups.astype(np.uint8) | (continued * 0x80).astype(np.uint8),
                    position < width[:, None])


def _int_statistics(first: int, delta: int, count: int) -> bytes:
    """ColumnStatistics of first, first + delta, ... (count values, no nulls)."""
    last = first + delta * (count - 1)
    ints = (varint_field(IntegerStatistics.MINIMUM, zigzag_encode(min(first, last)))
            + varint_field(IntegerStatistics.MAXIMUM, zigzag_encode(max(first, last))))
    total = (first + last) * count // 2
    if INT64_MIN <= total <= INT64_MAX:  # writers leave out a sum that overflowed
        ints += varint_field(IntegerStatistics.SUM, zigzag_encode(total))
    return (varint_field(ColumnStatistics.NUMBER_OF_VALUES, count)
            + length_field(ColumnStatistics.INT_STATISTICS, ints)
            + varint_field(ColumnStatistics.HAS_NULL, 0))


def _index_entry(positions: list[int], statistics: bytes) -> bytes:
    packed = b"".join(encode_varint(p) for p in positions)
    return (length_field(RowIndexEntry.POSITIONS, packed)
            + length_field(RowIndexEntry.STATISTICS, statistics))
