"""The delete events a keyed lookup checks its candidates against: which of given ROW__IDs a
visible delete event of their bucket names, as the merge applies them (docs/format.md §24).
Only the candidates are looked for: each delete-delta file's events are decoded once, sorted
by a hash of the ROW__ID, and probed as a few merged runs (`_runs.py`); the identical ROW__ID
is then compared (hashes collide). Knows no metastore: the view arrives as a value.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import fsspec
import numpy as np
import pyarrow as pa

from ingest.acid.format import BUCKET, ORIGINAL_TRANSACTION, CommittedFile, ValidWriteIdList
from ingest.acid.format import CURRENT_TRANSACTION as CURRENT
from ingest.acid.format import ROW_ID as EVENT_ROW_ID
from ingest.acid.keys._file_cache import FILES
from ingest.acid.keys._runs import HASH, SEALED_ENTRIES, Run, runs_of
from ingest.acid.keys.key_index import probe_sorted, row_hashes
from ingest.acid.read import ReadView, ScanTask, read_events, read_length

WRITE_ID, BUCKET_PROPERTY, ROW_ID = "_writeid", "_bucketid", "_rowid"


def identity(entry: CommittedFile) -> tuple[str, int, int, str, int]:
    """A committed file as its manifest entry names it (files never change once committed)."""
    return (entry.path, entry.write_id, entry.length, entry.tail_hash, entry.rows)


def valid_write_ids(write_ids: np.ndarray, snapshot: ValidWriteIdList) -> np.ndarray:
    """Which write ids are valid in `snapshot` (as `valid_mask`, in numpy)."""
    valid = write_ids <= snapshot.high_watermark
    exceptions = snapshot.open_write_ids + snapshot.aborted_write_ids
    if exceptions:
        valid &= ~np.isin(write_ids, np.asarray(exceptions, dtype=np.int64))
    return valid


_ROW_ID_TYPES = pa.schema([pa.field(WRITE_ID, pa.int64()), pa.field(BUCKET_PROPERTY, pa.int32()),
                          pa.field(ROW_ID, pa.int64())])


def _row_id_hashes(w: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    return row_hashes(pa.table([pa.array(w, pa.int64()), pa.array(b, pa.int32()),
                                pa.array(r, pa.int64())], schema=_ROW_ID_TYPES), _ROW_ID_TYPES)


def deleted(fs: fsspec.AbstractFileSystem, root: str, view: ReadView, task: ScanTask,
             lengths: dict[str, int], w: np.ndarray, b: np.ndarray, r: np.ndarray
             ) -> np.ndarray:
    """Which of the ROW__IDs (w, b, r) a visible delete event of the bucket names (as the
    merge applies them: an event counts when its currentTransaction is valid in the
    snapshot). The bucket's delete-delta files are probed as a few runs (`_runs.py`) when
    the plan checked them against their manifest entries, one by one otherwise."""
    dead = np.zeros(len(w), dtype=bool)
    files = [f for f in task.files if f.kind == "delete_delta"]
    if not files or not len(w):
        return dead
    hashes = _row_id_hashes(w, b, r)
    order = np.argsort(hashes)
    needles = hashes[order]
    members: list[tuple[Hashable, int, Callable[[], dict[str, np.ndarray]]]] = []
    runs: list[Run] = []
    for f in files:
        length = lengths.get(f.path)
        if length is None:
            length = read_length(fs, f.path, view.snapshot)
        entry = view.committed.get(_relative(root, f.path))
        if entry is None or entry.length != length:  # not checked against its commit
            runs.append(Run((None,), _read_delete_events(fs, f.path, length)))
        else:
            members.append((identity(entry), entry.rows, _delete_columns(fs, f.path, entry)))
    runs += runs_of(("delete_events", fs.unstrip_protocol(task.partition.path),
                     task.bucket_id), members, positions=False)
    for run in runs:
        which, at = probe_sorted(run.columns[HASH], needles)
        if not len(which):
            continue
        mine = order[which]
        same = ((run.columns[WRITE_ID][at] == w[mine])
                & (run.columns[BUCKET_PROPERTY][at] == b[mine])
                & (run.columns[ROW_ID][at] == r[mine])
                & valid_write_ids(run.columns[CURRENT][at], view.snapshot))
        dead[mine[same]] = True
    return dead


def _delete_columns(fs: fsspec.AbstractFileSystem, path: str, entry: CommittedFile
                    ) -> Callable[[], dict[str, np.ndarray]]:
    """The events of a delete-delta file the plan read at its committed length (so its size
    and tail were checked against `entry` in this read); a large one is kept in the
    process's cache under that identity (`_file_cache.py`), the others live on in runs."""
    def read() -> dict[str, np.ndarray]:
        if entry.rows < SEALED_ENTRIES:
            return _read_delete_events(fs, path, entry.length)
        key = ("delete_events", fs.unstrip_protocol(path), identity(entry))
        found = FILES.get_or_make(key, lambda: (
            (events := _read_delete_events(fs, path, entry.length)),
            sum(a.nbytes for a in events.values())))
        assert found is not None
        return found
    return read


def _read_delete_events(fs: fsspec.AbstractFileSystem, path: str, length: int
                        ) -> dict[str, np.ndarray]:
    """A delete-delta file's events: the ROW__IDs they name and their currentTransaction,
    sorted by a hash of the ROW__ID (`hash`).

    Raises:
        CorruptFileError: the file cannot be read.
    """
    parts: list[tuple[np.ndarray, ...]] = []
    for b in read_events(path, fs=fs, length=length,
                         columns=[ORIGINAL_TRANSACTION, BUCKET, EVENT_ROW_ID, CURRENT]):
        parts.append(tuple(np.asarray(b.column(c).to_numpy(zero_copy_only=False), dtype)
                           for c, dtype in ((ORIGINAL_TRANSACTION, np.int64),
                                            (BUCKET, np.int32), (EVENT_ROW_ID, np.int64),
                                            (CURRENT, np.int64))))
    if parts:
        w, b, r, c = (np.concatenate(x) for x in zip(*parts, strict=True))
    else:
        w, b, r, c = (np.empty(0, t) for t in (np.int64, np.int32, np.int64, np.int64))
    hashes = _row_id_hashes(w, b, r)
    order = np.argsort(hashes, kind="stable")
    return {HASH: hashes[order], WRITE_ID: w[order], BUCKET_PROPERTY: b[order],
            ROW_ID: r[order], CURRENT: c[order]}


def _relative(root: str, path: str) -> str:
    """`path` relative to the table root, as the manifest names it."""
    return path[len(root.rstrip("/")) + 1:] if path.startswith(root.rstrip("/") + "/") \
        else path


__all__ = ["deleted", "identity", "valid_write_ids"]
