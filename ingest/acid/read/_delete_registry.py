"""The delete half of the merge: keys that hide rows of one bucket (Hive's
`ColumnizedDeleteEventRegistry`), built from visible delete events (and, for Hive 2 "legacy"
deltas, update and delete events inside insert deltas) and probed once per stripe.
Knows event columns, not files or snapshots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format import BUCKET, ROW_ID
from ingest.acid.format import CURRENT_TRANSACTION as CURRENT
from ingest.acid.format import ORIGINAL_TRANSACTION as OTID

# A delete event drops every row with its key whatever that row's write id (Hive 3); stored as
# "supersedes anything written before write id +inf".
_ALWAYS = np.iinfo(np.int64).max
_KEY_DTYPE = np.dtype([("o", "<i8"), ("b", "<i4"), ("r", "<i8")])


def _packed_keys(otid: pa.Array | np.ndarray, bucket: pa.Array | np.ndarray,
                 row_id: pa.Array | np.ndarray) -> pa.Array:
    """The (originalTransaction, bucket, rowId) triples as 20-byte binary values, for hashing."""
    n = len(otid)
    packed = np.empty(n, dtype=_KEY_DTYPE)
    packed["o"] = _np(otid, np.int64)
    packed["b"] = _np(bucket, np.int32)
    packed["r"] = _np(row_id, np.int64)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(_KEY_DTYPE.itemsize), n,
                                                [None, pa.py_buffer(packed)])


def _np(arr: pa.Array | pa.ChunkedArray | np.ndarray, dtype: type[np.generic]) -> np.ndarray:
    if isinstance(arr, np.ndarray):
        return arr.astype(dtype, copy=False)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        arr = arr.fill_null(-1)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=dtype)



_EMPTY = np.empty(0, dtype=np.int64)
# Packing a delete key into one int64 (write id above bit 40, rowId below) lets one plain
# sort order a bucket's events, several times faster than a sort by three columns.
_ROW_BITS = 40
_OTID_LIMIT = 1 << (63 - _ROW_BITS)


def _sorted_delete_keys(otid: np.ndarray, bucket: np.ndarray, row_id: np.ndarray,
                        supersedes: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The distinct keys of split-update delete events in key order, when every event hides
    its key whatever wrote the row, all name one bucket and write ids and rowIds fit the
    packing; else None (the caller sorts by the three columns)."""
    if not (bucket[0] == bucket.min() == bucket.max() and (supersedes == _ALWAYS).all()
            and 0 <= otid.min() and otid.max() < _OTID_LIMIT
            and 0 <= row_id.min() and row_id.max() < (1 << _ROW_BITS)):
        return None
    packed = np.sort((otid << _ROW_BITS) | row_id)
    if len(packed) > 1:
        packed = packed[np.r_[True, packed[1:] != packed[:-1]]]
    return (packed >> _ROW_BITS, np.full(len(packed), bucket[0], dtype=bucket.dtype),
            packed & ((1 << _ROW_BITS) - 1))


class Entries(NamedTuple):
    """Registry entries: keys and the write id each supersedes rows below (numpy arrays)."""

    otid: np.ndarray
    bucket: np.ndarray
    row_id: np.ndarray
    supersedes: np.ndarray

    @property
    def num_rows(self) -> int:
        return len(self.otid)


class DeleteRegistry:
    """Keys that hide rows of one bucket: Hive's `ColumnizedDeleteEventRegistry`.

    Each key carries the write id it supersedes rows below: +inf for a split-update delete
    event (it hides the key whatever wrote it), the event's currentTransaction for an update or
    delete event found in an insert delta (Hive 2 "legacy" ACID without split-update).
    Held in memory per bucket, sorted; a stripe of one write id and bucket with ascending rowIds
    (the usual one) finds its group's keys inside its rowId range (by their distance from its
    first rowId when its rowIds run without gaps, else by binary search), any other stripe by
    one hash probe per row (`pyarrow.compute.index_in`).
    """

    def __init__(self, parts: Sequence[Entries]) -> None:
        parts = [p for p in parts if p.num_rows]
        self._size = 0
        self._hashed: pa.Array | None = None  # the keys as binary values, built when probed
        self._otid = self._bucket = self._row_id = self._supersedes = _EMPTY
        self._only_deletes = True
        self._groups: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        if not parts:
            return
        otid = np.concatenate([p.otid for p in parts])
        bucket = np.concatenate([p.bucket for p in parts])
        row_id = np.concatenate([p.row_id for p in parts])
        supersedes = np.concatenate([p.supersedes for p in parts])
        sorted_keys = _sorted_delete_keys(otid, bucket, row_id, supersedes)
        if sorted_keys is not None:
            otid, bucket, row_id = sorted_keys
            supersedes = np.full(len(otid), _ALWAYS, dtype=np.int64)
        else:
            # Sorted by key with numpy, one entry per key with the highest write id any of
            # its events supersedes.
            order = np.lexsort((row_id, bucket, otid))
            otid, bucket, row_id = otid[order], bucket[order], row_id[order]
            supersedes = supersedes[order]
            first = np.r_[True, (otid[1:] != otid[:-1]) | (bucket[1:] != bucket[:-1])
                          | (row_id[1:] != row_id[:-1])]
            if not first.all():
                supersedes = np.maximum.reduceat(supersedes, np.flatnonzero(first))
                otid, bucket, row_id = otid[first], bucket[first], row_id[first]
        self._otid, self._bucket, self._row_id = otid, bucket, row_id
        self._supersedes = supersedes
        self._only_deletes = bool((supersedes == _ALWAYS).all())
        self._size = len(otid)
        # Per (originalTransaction, bucket): the sorted rowIds, for the one-group fast path.
        starts = np.flatnonzero(np.r_[True, (otid[1:] != otid[:-1]) | (bucket[1:] != bucket[:-1])])
        ends = np.r_[starts[1:], len(otid)]
        self._groups = {
            (int(otid[s]), int(bucket[s])): (row_id[s:e], supersedes[s:e])
            for s, e in zip(starts, ends, strict=True)
        }

    @property
    def _keys(self) -> pa.Array:
        """Every key as one binary value, for a hash probe of stripes the sorted path does
        not serve (several write ids or buckets in a stripe, rowIds out of order)."""
        if self._hashed is None:
            self._hashed = _packed_keys(self._otid, self._bucket, self._row_id)
        return self._hashed

    @staticmethod
    def delete_events(batch: pa.RecordBatch | pa.Table,
                      keep: np.ndarray | None = None) -> Entries:
        """Registry entries for split-update delete events: the rows of `batch` that `keep`
        (their currentTransaction's validity) keeps, all when None."""
        return _entries(batch, np.full(batch.num_rows, _ALWAYS, dtype=np.int64), keep)

    @staticmethod
    def superseding_events(batch: pa.RecordBatch | pa.Table,
                           keep: np.ndarray | None = None) -> Entries:
        """Registry entries for update/delete events of an insert delta (legacy ACID)."""
        return _entries(batch, _np(batch[CURRENT], np.int64), keep)

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
        if not self._size or batch.num_rows == 0:
            return None
        otid, bucket = _np(batch[OTID], np.int64), _np(batch[BUCKET], np.int32)
        if otid[0] == otid.min() == otid.max() and bucket[0] == bucket.min() == bucket.max():
            # The usual stripe: one write id, one bucket, rowIds ascending. Look the group's
            # few deleted rowIds up in the stripe instead of hashing every row.
            if (int(otid[0]), int(bucket[0])) not in self._groups:
                return None  # no key of this write id and bucket: nothing hidden
            row_id = _np(batch[ROW_ID], np.int64)
            if len(row_id) < 2 or bool((row_id[1:] > row_id[:-1]).all()):
                return self._keep_sorted(int(otid[0]), int(bucket[0]), row_id, batch)
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

    def keep_run(self, otid: int, bucket: int, first: int, n: int) -> np.ndarray | None:
        """`keep_mask` of a stripe whose ROW__IDs are (otid, bucket, first + i) for row i,
        from those numbers alone (its key columns need no decoding), or None when none is
        hidden.

        Raises:
            ValueError: the registry holds legacy update events, which also need each row's
                currentTransaction.
        """
        if not self._only_deletes:
            raise ValueError("legacy update events need the rows' currentTransaction")
        in_range = self._in_range(otid, bucket, first, first + n - 1)
        if in_range is None:
            return None
        keep = np.ones(n, dtype=np.bool_)
        keep[in_range[0] - first] = False
        return keep

    def _in_range(self, otid: int, bucket: int, low: int, high: int
                  ) -> tuple[np.ndarray, np.ndarray] | None:
        """The group's keys (rowIds, what each supersedes) with rowIds in low..high, or None
        when there are none: a group spans every stripe of its file."""
        group = self._groups.get((otid, bucket))
        if group is None:
            return None
        deleted, supersedes = group
        lo = int(np.searchsorted(deleted, low, side="left"))
        hi = int(np.searchsorted(deleted, high, side="right"))
        if lo == hi:
            return None
        return deleted[lo:hi], supersedes[lo:hi]

    def _keep_sorted(self, otid: int, bucket: int, row_id: np.ndarray, batch: pa.RecordBatch
                     ) -> np.ndarray | None:
        in_range = self._in_range(otid, bucket, int(row_id[0]), int(row_id[-1]))
        if in_range is None:
            return None
        deleted, supersedes = in_range
        first = int(row_id[0])
        hit: np.ndarray | None = None
        if int(row_id[-1]) - first == len(row_id) - 1:
            # Ascending without gaps (as writers number rows): each key's row is found by
            # its distance from the first, and every key in range has one.
            pos = deleted - first
        else:
            pos = np.searchsorted(row_id, deleted)
            hit = row_id[pos] == deleted
        if not self._only_deletes:
            current = _np(batch[CURRENT], np.int64)
            newer = supersedes > current[pos]
            hit = newer if hit is None else hit & newer
        if hit is not None:
            if not hit.any():
                return None
            pos = pos[hit]
        keep = np.ones(len(row_id), dtype=np.bool_)
        keep[pos] = False
        return keep


def _entries(batch: pa.RecordBatch | pa.Table, supersedes: np.ndarray,
             keep: np.ndarray | None) -> Entries:
    """The key columns of `batch` and the write id each key supersedes rows below."""
    entries = Entries(_np(batch[OTID], np.int64), _np(batch[BUCKET], np.int32),
                      _np(batch[ROW_ID], np.int64), supersedes)
    if keep is None or keep.all():
        return entries
    return Entries(*(column[keep] for column in entries))


__all__ = ["DeleteRegistry", "Entries"]
