"""Vectorised pieces of the snapshot reader: write-id visibility, the delete-event registry,
synthetic ROW__IDs for original files, and turning event batches into user rows.

Mirrors Hive's `VectorizedOrcAcidRowBatchReader` (`ColumnizedDeleteEventRegistry`,
`findRecordsWithInvalidTransactionIds`). Knows Arrow arrays and write-id lists, not files.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.writeids import ValidWriteIdList

OTID, BUCKET, ROW_ID, CURRENT, OPERATION, ROW = (
    "originalTransaction", "bucket", "rowId", "currentTransaction", "operation", "row")
KEY_COLUMNS = (OTID, BUCKET, ROW_ID)

# Hive 3 `RecordIdentifier.StructInfo`: ROW__ID is struct<writeid:bigint,bucketid:int,rowid:bigint>.
ROW_ID_COLUMN = "row__id"
ROW_ID_TYPE = pa.struct([("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])

# A delete event drops every row with its key whatever that row's write id (Hive 3); stored as
# "supersedes anything written before write id +inf".
_ALWAYS = np.iinfo(np.int64).max
_KEY_DTYPE = np.dtype([("o", "<i8"), ("b", "<i4"), ("r", "<i8")])


def _packed_keys(otid: pa.Array, bucket: pa.Array, row_id: pa.Array) -> pa.Array:
    """The (originalTransaction, bucket, rowId) triples as 20-byte binary values, for hashing."""
    n = len(otid)
    packed = np.empty(n, dtype=_KEY_DTYPE)
    packed["o"] = _np(otid, np.int64)
    packed["b"] = _np(bucket, np.int32)
    packed["r"] = _np(row_id, np.int64)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(_KEY_DTYPE.itemsize), n,
                                                [None, pa.py_buffer(packed)])


def _np(arr: pa.Array | pa.ChunkedArray, dtype: type[np.generic]) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        arr = arr.fill_null(-1)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=dtype)


def valid_mask(current: pa.Array, snapshot: ValidWriteIdList) -> pa.BooleanArray:
    """Which events' currentTransaction is valid in `snapshot` (invariant 2)."""
    mask = pc.less_equal(current, pa.scalar(snapshot.high_watermark, pa.int64()))
    exceptions = snapshot.open_write_ids + snapshot.aborted_write_ids
    if exceptions:
        mask = pc.and_(mask, pc.invert(pc.is_in(current, value_set=pa.array(exceptions,
                                                                               pa.int64()))))
    return pc.fill_null(mask, False)


class DeleteRegistry:
    """Keys that hide rows of one bucket: Hive's `ColumnizedDeleteEventRegistry`.

    Each key carries the write id it supersedes rows below: +inf for a split-update delete
    event (it hides the key whatever wrote it), the event's currentTransaction for an update or
    delete event found in an insert delta (Hive 2 "legacy" ACID without split-update).
    Held in memory per bucket; lookups are one hash probe per row (`pyarrow.compute.index_in`).
    """

    def __init__(self, parts: Sequence[pa.Table]) -> None:
        parts = [p for p in parts if p.num_rows]
        self._size = 0
        self._keys: pa.Array | None = None
        self._supersedes: np.ndarray | None = None
        self._only_deletes = True
        if not parts:
            return
        table = pa.concat_tables(parts)
        table = table.group_by(list(KEY_COLUMNS), use_threads=False).aggregate(
            [("supersedes", "max")])
        self._keys = _packed_keys(table[OTID], table[BUCKET], table[ROW_ID])
        self._supersedes = _np(table["supersedes_max"], np.int64)
        self._only_deletes = bool((self._supersedes == _ALWAYS).all())
        self._size = table.num_rows

    @staticmethod
    def delete_events(batch: pa.RecordBatch | pa.Table) -> pa.Table:
        """Registry entries for split-update delete events (already filtered for visibility)."""
        return pa.table({
            OTID: batch[OTID], BUCKET: batch[BUCKET], ROW_ID: batch[ROW_ID],
            "supersedes": pa.array(np.full(batch.num_rows, _ALWAYS, dtype=np.int64)),
        })

    @staticmethod
    def superseding_events(batch: pa.RecordBatch | pa.Table) -> pa.Table:
        """Registry entries for update/delete events of an insert delta (legacy ACID)."""
        return pa.table({
            OTID: batch[OTID], BUCKET: batch[BUCKET], ROW_ID: batch[ROW_ID],
            "supersedes": batch[CURRENT],
        })

    def __len__(self) -> int:
        return self._size

    @property
    def only_deletes(self) -> bool:
        """True when no entry depends on the row's write id (no legacy update events)."""
        return self._only_deletes

    def keep_mask(self, batch: pa.RecordBatch) -> np.ndarray | None:
        """Boolean mask of rows of `batch` no key hides, or None when none is hidden.

        `batch` needs the three key columns, and currentTransaction unless `only_deletes`.
        """
        if self._keys is None or batch.num_rows == 0:
            return None
        probe = _packed_keys(batch[OTID], batch[BUCKET], batch[ROW_ID])
        if self._only_deletes:
            hit = pc.is_in(probe, value_set=self._keys)
            if not pc.any(hit).as_py():
                return None
            return ~_np(hit, np.bool_)
        index = pc.index_in(probe, value_set=self._keys)
        if index.null_count == len(index):
            return None
        assert self._supersedes is not None
        idx = _np(index, np.int64)
        found = idx >= 0
        supersedes = np.where(found, self._supersedes[np.where(found, idx, 0)], np.int64(-1))
        return ~(supersedes > _np(batch[CURRENT], np.int64))


def synthetic_keys(
    batch_rows: int, *, write_id: int, bucket_property: int, first_row_id: int,
) -> dict[str, pa.Array]:
    """ACID key columns for rows of an original (pre-ACID) or raw file.

    Hive 3 gives such rows ROW__ID (write id of their directory, or 0 for original files;
    the file's bucket with statement id; their position among the bucket's files in path order).
    """
    return {
        OTID: pa.array(np.full(batch_rows, write_id, dtype=np.int64)),
        BUCKET: pa.array(np.full(batch_rows, bucket_property, dtype=np.int32)),
        ROW_ID: pa.array(np.arange(first_row_id, first_row_id + batch_rows, dtype=np.int64)),
        CURRENT: pa.array(np.full(batch_rows, write_id, dtype=np.int64)),
    }


def row_id_array(otid: pa.Array, bucket: pa.Array, row_id: pa.Array) -> pa.StructArray:
    """Hive's ROW__ID struct from the key columns."""
    return pa.StructArray.from_arrays(
        [otid.cast(pa.int64()), bucket.cast(pa.int32()), row_id.cast(pa.int64())],
        fields=list(ROW_ID_TYPE))


def conform(columns: dict[str, pa.Array], schema: pa.Schema, n: int) -> list[pa.Array]:
    """Arrays in `schema`'s order and types; a column a file lacks comes back as nulls.

    Raises:
        pyarrow.ArrowInvalid: a column's values cannot be cast to the table's type.
    """
    out = []
    for field in schema:
        arr = columns.get(field.name)
        if arr is None:
            out.append(pa.nulls(n, field.type))
        elif arr.type != field.type:
            out.append(arr.cast(field.type))
        else:
            out.append(arr)
    return out


__all__ = [
    "BUCKET",
    "CURRENT",
    "KEY_COLUMNS",
    "OPERATION",
    "OTID",
    "ROW",
    "ROW_ID",
    "ROW_ID_COLUMN",
    "ROW_ID_TYPE",
    "DeleteRegistry",
    "conform",
    "row_id_array",
    "synthetic_keys",
    "valid_mask",
]
