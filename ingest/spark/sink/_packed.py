"""The parse stage's rows, packed for the shuffle of `file_layout="partition"` and bucketing.

Shuffling the parsed rows one by one cost more than writing them: Spark turns every Arrow
batch the parse stage yields into rows, serialises and reads them back, and turns them into
Arrow again for the write stage. Instead, the parse stage groups each batch's rows by their
shuffle key (table partition, then bucket or slot) and yields one row per group: the key
columns and the group's rows as one Arrow IPC stream. Spark then moves a few large values;
the write stage reads the streams back into the batches the parse stage made.
It knows Arrow and the parse stage's columns, not Spark, ORC or ACID.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# The packed rows' columns: the shuffle key, and the rows as an Arrow IPC stream.
PACK_PARTITION, PACK_BUCKET, PACK_SLOT, PACK_ROWS = "__pack_partition", "__pack_bucket", \
    "__pack_slot", "__pack_rows"
PACKED_SCHEMA = pa.schema([
    pa.field(PACK_PARTITION, pa.string()), pa.field(PACK_BUCKET, pa.int32()),
    pa.field(PACK_SLOT, pa.int32()), pa.field(PACK_ROWS, pa.binary()),
])
PACKED_DDL = (f"{PACK_PARTITION} string, {PACK_BUCKET} int, {PACK_SLOT} int, "
              f"{PACK_ROWS} binary")
# Spark's shuffle compresses its blocks (lz4) already; a second codec here only costs CPU.
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression=None)


def pack(batch: pa.RecordBatch, *, partition: pa.Array | None, bucket: pa.Array,
         slot: pa.Array) -> pa.RecordBatch:
    """One packed row per distinct (partition, bucket, slot) of `batch`'s rows.

    Rows keep their order within a group. Null keys (a dead letter has no partition or
    bucket) form groups like any other value.

    Args:
        batch: the parse stage's rows.
        partition: each row's table partition value (None: unpartitioned).
        bucket: each row's bucket id (null when unbucketed or a dead letter).
        slot: each row's writer slot.

    Returns:
        A batch of PACKED_SCHEMA.
    """
    n = batch.num_rows
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=PACKED_SCHEMA)
    codes = [_codes(bucket), _codes(slot)]
    if partition is not None:
        codes.insert(0, _codes(partition))
    group = np.zeros(n, dtype=np.int64)
    for c in codes:  # mixed radix: each code is in [0, its count]
        group = group * (int(c.max(initial=0)) + 1) + c
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    starts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
    ends = np.r_[starts[1:], n]
    first = pa.array(order[starts])
    one_group = len(starts) == 1
    blobs = [_to_ipc(batch if one_group else batch.take(pa.array(order[s:e])))
             for s, e in zip(starts, ends, strict=True)]
    return pa.RecordBatch.from_arrays([
        (partition.take(first) if partition is not None
         else pa.nulls(len(starts), pa.string())).cast(pa.string()),
        bucket.take(first).cast(pa.int32()), slot.take(first).cast(pa.int32()),
        _binary(blobs),
    ], schema=PACKED_SCHEMA)


def unpack(packed: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """The parse stage's batches back out of packed rows (`pack`), in order."""
    blobs = packed.column(PACK_ROWS)
    for i in range(len(blobs)):
        with pa.ipc.open_stream(blobs[i].as_buffer()) as reader:
            yield from reader


def _codes(values: pa.Array) -> np.ndarray:
    """A small non-negative int per distinct value (null included) of `values`."""
    encoded = pc.dictionary_encode(values).indices
    return np.asarray(pc.fill_null(encoded, -1).to_numpy(zero_copy_only=False),
                      dtype=np.int64) + 1


def _to_ipc(rows: pa.RecordBatch) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema, options=_IPC_OPTIONS) as writer:
        writer.write_batch(rows)
    return sink.getvalue()


def _binary(buffers: list[pa.Buffer]) -> pa.Array:
    """One binary value per buffer, copied once (not through Python bytes)."""
    offsets = np.zeros(len(buffers) + 1, dtype=np.int32)
    np.cumsum([b.size for b in buffers], out=offsets[1:])
    data = b"".join(memoryview(b) for b in buffers) if len(buffers) > 1 else buffers[0]
    return pa.Array.from_buffers(pa.binary(), len(buffers),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])
