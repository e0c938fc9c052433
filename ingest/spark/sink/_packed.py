"""The rows the parse stage of a shuffled micro-batch sends to its write stage.

Shuffling the parsed rows one by one cost more than writing them: Spark turns every Arrow
batch the parse stage yields into rows, serialises and reads them back, and turns them into
Arrow again for the write stage. Instead the parse stage sends a few large values, each a
packed row: the shuffle key (table partition, then bucket or slot), what the value is, and
its bytes: a stripe piece (a group's rows encoded as ORC for the table, `_stripes`), dead
letters or the parse task's records (offsets read, tombstones, new fields, bad records), both
as Arrow IPC streams.
It knows Arrow and the packed columns, not Spark, ORC or ACID.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import IntEnum

import numpy as np
import pyarrow as pa

# The packed rows' columns: the shuffle key, the kind of value, the value.
# PACK_PARTITION: the rows' partition directory ("" unpartitioned), null for a row that is
# not the table's; PACK_BUCKET: the bucket id, null on an unbucketed table (the write task
# names the file); PACK_SLOT: the writer slot (`writer_slots`), null on a bucketed table.
PACK_PARTITION, PACK_BUCKET, PACK_SLOT, PACK_KIND, PACK_DATA = (
    "__pack_partition", "__pack_bucket", "__pack_slot", "__pack_kind", "__pack_data")
PACKED_SCHEMA = pa.schema([
    pa.field(PACK_PARTITION, pa.string()), pa.field(PACK_BUCKET, pa.int32()),
    pa.field(PACK_SLOT, pa.int32()), pa.field(PACK_KIND, pa.int8()),
    pa.field(PACK_DATA, pa.binary()),
])
PACKED_DDL = (f"{PACK_PARTITION} string, {PACK_BUCKET} int, {PACK_SLOT} int, "
              f"{PACK_KIND} tinyint, {PACK_DATA} binary")
# Spark's shuffle compresses its blocks (lz4) already; a second codec here only costs CPU.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression=None)


class PackKind(IntEnum):
    """What a packed row's PACK_DATA holds."""

    STRIPE = 0  # a stripe piece of the table's rows (`ingest.acid.encode_piece`)
    DEAD_LETTERS = 1  # dead-letter rows, an Arrow IPC stream
    RECORDS = 2  # the parse task's records (`_results.to_arrow`), an Arrow IPC stream


Key = tuple[str | None, int | None, int | None]  # (partition directory, bucket, slot)


def packed(rows: Sequence[tuple[Key, PackKind, pa.Buffer]]) -> pa.RecordBatch:
    """One packed row per (key, kind, bytes), in order."""
    if not rows:
        return pa.RecordBatch.from_pylist([], schema=PACKED_SCHEMA)
    return pa.RecordBatch.from_arrays([
        pa.array([k[0] for k, _, _ in rows], pa.string()),
        pa.array([k[1] for k, _, _ in rows], pa.int32()),
        pa.array([k[2] for k, _, _ in rows], pa.int32()),
        pa.array([int(kind) for _, kind, _ in rows], pa.int8()),
        _binary([data for _, _, data in rows]),
    ], schema=PACKED_SCHEMA)


def unpacked(batch: pa.RecordBatch) -> Iterator[tuple[Key, PackKind, pa.Buffer]]:
    """The (key, kind, bytes) of each packed row of `batch` (the inverse of `packed`)."""
    keys = zip(batch.column(PACK_PARTITION).to_pylist(), batch.column(PACK_BUCKET).to_pylist(),
               batch.column(PACK_SLOT).to_pylist(), strict=True)
    kinds = batch.column(PACK_KIND).to_pylist()
    data = batch.column(PACK_DATA)
    for i, (key, kind) in enumerate(zip(keys, kinds, strict=True)):
        yield key, PackKind(kind), data[i].as_buffer()


def to_ipc(rows: pa.Table | pa.RecordBatch) -> pa.Buffer:
    """`rows` as an Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema, options=_IPC_OPTIONS) as writer:
        writer.write(rows)
    return sink.getvalue()


def from_ipc(data: pa.Buffer) -> pa.Table:
    """The rows of an Arrow IPC stream (`to_ipc`)."""
    with pa.ipc.open_stream(data) as reader:
        return reader.read_all()


def _binary(buffers: list[pa.Buffer]) -> pa.Array:
    """One binary value per buffer, copied once (not through Python bytes)."""
    offsets = np.zeros(len(buffers) + 1, dtype=np.int32)
    np.cumsum([b.size for b in buffers], out=offsets[1:])
    data = b"".join(memoryview(b) for b in buffers) if len(buffers) > 1 else buffers[0]
    return pa.Array.from_buffers(pa.binary(), len(buffers),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])
