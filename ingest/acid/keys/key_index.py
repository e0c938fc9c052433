"""The per-bucket key index of a keyed table: key hash -> ROW__ID of every event of one bucket file.

One Arrow IPC file per data file, `_key_index/<partition>/bucket_N/<directory>.arrow` below the
table root (a hidden name: Hive, Trino and our reader skip it, docs/format.md §2), sorted by a
64-bit hash of the key's row columns, holding the key values (a hash collision is resolved by
comparing them), the ROW__ID and a digest of the whole row. Its metadata repeats the data
file's committed-file manifest entry; a lookup trusts the file only when that entry is the one
its snapshot reads (docs/format.md §24), so an index of an uncommitted or aborted write, or of
another metastore's file of the same name, is never used. Knows no metastore.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format import (
    BUCKET,
    OPERATION,
    ORIGINAL_TRANSACTION,
    ROW,
    CommittedFile,
    parse_directory,
)
from ingest.acid.format import ROW_ID as EVENT_ROW_ID
from ingest.acid.keys._file_cache import FILES
from ingest.acid.read import read_events
from ingest.io import has_directories

INDEX_DIRECTORY = "_key_index"
"""Below the table root; hidden from every ACID reader by its leading `_`."""
KEY_FILE = "key.json"
"""In `_key_index/`: the row columns the index hashes (written by the first keyed write)."""
FORMAT_VERSION = 1
"""Binds the file layout and the hash functions: a change to either must bump it, or a
lookup would probe old files with new hashes, miss live keys and insert them twice."""
HASH, KEY_WRITE_ID, KEY_BUCKET, KEY_ROW_ID, DIGEST = (
    "_hash", "_writeid", "_bucketid", "_rowid", "_digest")
_META = b"ingest.key_index"
_CHUNK_ROWS = 65_536  # hash in slices: a string column's bytes are expanded per byte
_PRIME = np.uint64(0x100000001B3)
_NULL = np.uint64(0x9E3779B97F4A7C15)


def index_path(root: str, data_path: str) -> str:
    """The index file of the data file `data_path` (relative to the table root
    `<partition>/<directory>/bucket_N`).

    Raises:
        ValueError: `data_path` is not `[<partition>/]<directory>/bucket_N`.
    """
    *partition, directory, name = data_path.split("/")
    if not name.startswith("bucket_") or not directory:
        raise ValueError(f"{data_path} is not a bucket file path <partition>/<dir>/bucket_N")
    return "/".join([root.rstrip("/"), INDEX_DIRECTORY, *partition, name, f"{directory}.arrow"])


def key_file_path(root: str) -> str:
    """`_key_index/key.json` of the table at `root`."""
    return f"{root.rstrip('/')}/{INDEX_DIRECTORY}/{KEY_FILE}"


def read_key_columns(fs: fsspec.AbstractFileSystem, root: str) -> tuple[str, ...] | None:
    """The row columns the table's key index hashes, None when the table has no index (or its
    key file is unreadable: then nothing is indexed, nothing trusted)."""
    try:
        found = json.loads(fs.cat_file(key_file_path(root)))
        columns = found["columns"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(found, dict) or found.get("version") != FORMAT_VERSION \
            or not isinstance(columns, list):
        return None
    return tuple(str(c) for c in columns)


def declare_key_columns(fs: fsspec.AbstractFileSystem, root: str,
                        columns: Sequence[str]) -> bool:
    """Make `columns` the index's key unless the table's index has one: whether the index is
    (now) of `columns`. A keyed write of another key writes no index (its lookups scan).

    Raises:
        OSError: the key file cannot be written.
    """
    have = read_key_columns(fs, root)
    if have is not None:
        return have == tuple(columns)
    _put_whole(fs, key_file_path(root), json.dumps(
        {"version": FORMAT_VERSION, "columns": list(columns)}).encode())
    return read_key_columns(fs, root) == tuple(columns)


def row_hashes(table: pa.Table, types: pa.Schema) -> np.ndarray:
    """A uint64 hash of each row of `table` over the columns of `types` (cast to those types
    first, so a row hashes alike however it was read). Nulls hash apart from values; columns
    of a type without a hash here (nested) add nothing, which only makes collisions likelier:
    every user compares the values behind an equal hash."""
    n = table.num_rows
    out = np.zeros(n, dtype=np.uint64)
    for field in types:
        column = table.column(field.name)
        if column.type != field.type:
            column = column.cast(field.type)
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        for start in range(0, n, _CHUNK_ROWS):
            part = array.slice(start, _CHUNK_ROWS)
            mixed = out[start:start + len(part)] * _PRIME + _column_hash(part)
            out[start:start + len(part)] = _mix(mixed)
    return out


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (wrapping uint64 arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _column_hash(array: pa.Array) -> np.ndarray:
    n = len(array)
    t = array.type
    if pa.types.is_dictionary(t):
        array = array.dictionary_decode()
        t = array.type
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        array = array.cast(pa.large_binary())
        t = array.type
    if pa.types.is_boolean(t):
        h = np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False),
                       dtype=np.uint64)
    elif pa.types.is_floating(t):
        # -0.0 == 0.0 as values: hash them alike.
        values = np.asarray(pc.fill_null(array, 0).to_numpy(zero_copy_only=False)) + 0.0
        h = _fixed(np.ascontiguousarray(values).view(np.uint8).reshape(n, -1))
    elif (pa.types.is_integer(t) or pa.types.is_temporal(t) or pa.types.is_decimal(t)
          or pa.types.is_fixed_size_binary(t)):
        width = t.bit_width // 8
        data = np.frombuffer(array.buffers()[1], dtype=np.uint8)
        h = _fixed(data[array.offset * width:(array.offset + n) * width].reshape(n, width))
    elif pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) \
            or pa.types.is_large_binary(t):
        h = _bytes_hash(array)
    else:
        h = np.zeros(n, dtype=np.uint64)
    if array.null_count:
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        h = np.where(valid, h, _NULL)
    return h


def _fixed(values: np.ndarray) -> np.ndarray:
    """Hash rows of a (n, width) uint8 matrix."""
    n, width = values.shape
    padded = width + (-width % 8)
    if padded != width:
        values = np.concatenate([values, np.zeros((n, padded - width), np.uint8)], axis=1)
    words = np.ascontiguousarray(values).view(np.uint64).reshape(n, padded // 8)
    h = np.zeros(n, dtype=np.uint64)
    for i in range(words.shape[1]):
        h = _mix(h * _PRIME + words[:, i])
    return h


def _bytes_hash(array: pa.Array) -> np.ndarray:
    """A hash of each value's bytes, vectorized over the value buffer in 8-byte words (read
    at any byte offset; the bytes past a value's end masked off)."""
    n = len(array)
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64 if large else np.int32)[
        array.offset:array.offset + n + 1].astype(np.int64)
    lengths = np.diff(offsets)
    h = np.zeros(n, dtype=np.uint64)
    words = (lengths + 7) // 8
    total = int(words.sum())
    if total:
        low, high = int(offsets[0]), int(offsets[-1])
        data = np.zeros(high - low + 8, dtype=np.uint8)
        data[:high - low] = np.frombuffer(buffers[2], dtype=np.uint8)[low:high]
        windows = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
        firsts = np.cumsum(words) - words
        index = np.arange(total, dtype=np.int64) - np.repeat(firsts, words)
        w = windows[np.repeat(offsets[:-1] - low, words) + 8 * index]
        tail = lengths % 8
        cut = (words > 0) & (tail > 0)
        last = (firsts + words - 1)[cut]
        w[last] &= (np.uint64(1) << (np.uint64(8) * tail[cut].astype(np.uint64))) - np.uint64(1)
        terms = _mix(w ^ (index.astype(np.uint64) * _NULL))
        nonempty = words > 0
        h[nonempty] = np.add.reduceat(terms, firsts[nonempty])
    return _mix(h ^ (lengths.astype(np.uint64) * _NULL))


def build_entries(rows: pa.Table, *, key_types: pa.Schema, row_types: pa.Schema,
                  write_ids: np.ndarray, bucket_properties: np.ndarray,
                  row_ids: np.ndarray) -> pa.Table:
    """The index entries of one data file's events, sorted by key hash.

    Args:
        rows: the events' rows (at least the columns of `key_types` and `row_types`).
        key_types: the key's row columns and their types.
        row_types: the table's row columns (the digest's).
        write_ids, bucket_properties, row_ids: each row's ROW__ID.
    """
    hashes = row_hashes(rows, key_types)
    order = np.argsort(hashes, kind="stable")
    take = pa.array(order)
    columns = {HASH: pa.array(hashes[order], pa.uint64())}
    for field in key_types:
        columns[field.name] = rows.column(field.name).cast(field.type).take(take)
    columns[KEY_WRITE_ID] = pa.array(np.asarray(write_ids, np.int64)[order])
    columns[KEY_BUCKET] = pa.array(np.asarray(bucket_properties, np.int32)[order])
    columns[KEY_ROW_ID] = pa.array(np.asarray(row_ids, np.int64)[order])
    columns[DIGEST] = pa.array(row_hashes(rows, row_types)[order], pa.uint64())
    return pa.table(columns)


def _binding(data: CommittedFile, key_types: pa.Schema) -> dict[str, object]:
    """What an index file must repeat to be trusted for `data`: the manifest entry, and the
    key's columns with their types (a changed type hashes other bytes)."""
    return {"version": FORMAT_VERSION, "key": [[f.name, str(f.type)] for f in key_types],
            "path": data.path, "write_id": data.write_id, "length": data.length,
            "tail_hash": data.tail_hash, "rows": data.rows}


def _digest_of(row_types: pa.Schema) -> list[list[str]]:
    return [[f.name, str(f.type)] for f in row_types]


def write_index(fs: fsspec.AbstractFileSystem, root: str, entries: pa.Table, *,
                data: CommittedFile, key_types: pa.Schema, row_types: pa.Schema) -> str:
    """Write the index file of the data file `data` (its manifest entry) whose `entries`
    `build_entries` made with `key_types` and `row_types`; returns its path. A file cut short
    does not open, and is not trusted.

    Raises:
        OSError: the storage failed.
    """
    meta = {**_binding(data, key_types), "digest": _digest_of(row_types)}
    table = entries.replace_schema_metadata({_META: json.dumps(meta).encode()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as out:
        out.write_table(table)
    path = index_path(root, data.path)
    _put_whole(fs, path, sink.getvalue().to_pybytes())
    return path


def _put_whole(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> None:
    """Write `path` so no reader sees part of it: under a hidden staging name, renamed (two
    writers may write one index file at once); an object store's put is atomic already."""
    if not has_directories(fs):
        fs.pipe_file(path, data)
        return
    directory, name = path.rsplit("/", 1)
    fs.makedirs(directory, exist_ok=True)
    staging = f"{directory}/_tmp.{name}.{uuid.uuid4().hex}"
    fs.pipe_file(staging, data)
    try:
        fs.mv(staging, path)
    except OSError:
        fs.rm_file(staging)
        raise


def remove_index_files(fs: fsspec.AbstractFileSystem, root: str,
                       data_paths: Sequence[str]) -> int:
    """Remove the index files of data files the cleaner removed (`data_paths` relative to the
    table root; paths that are not bucket files are passed over); returns how many went.
    An index file is trusted only beside its committed data file, so this frees space only.

    Raises:
        OSError: the storage failed.
    """
    removed = 0
    for data_path in data_paths:
        try:
            path = index_path(root, data_path)
        except ValueError:
            continue  # a side file, `_orc_acid_version`
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            continue
        removed += 1
    return removed


def index_data_file(fs: fsspec.AbstractFileSystem, root: str, data: CommittedFile, *,
                    row_schema: pa.Schema, key_columns: Sequence[str]) -> str | None:
    """Write the index of a committed insert file by reading it (compaction's output, whose
    events keep their ROW__IDs, docs/format.md §17; a file a write without the index left);
    returns the index path, None for a delete-event file or a Hive 2 delta holding update or
    delete events (its rows are found by scanning).

    Raises:
        CorruptFileError: the file cannot be read.
        OSError: the storage failed.
    """
    *_, directory, _name = data.path.split("/")
    parsed = parse_directory(directory)
    if parsed is None or parsed.kind == "delete_delta":
        return None
    path = f"{root.rstrip('/')}/{data.path}"
    parts = []
    for batch in read_events(path, fs=fs, length=data.length,
                             columns=[OPERATION, ORIGINAL_TRANSACTION, BUCKET, EVENT_ROW_ID,
                                      ROW]):
        if pc.any(pc.not_equal(batch.column(OPERATION), 0)).as_py():
            return None
        row = batch.column(ROW)
        fields = row.flatten()
        names = [row.type.field(i).name for i in range(row.type.num_fields)]
        if len(fields) == len(row_schema) and set(names) != set(row_schema.names):
            names = row_schema.names  # positional names (_col0, ...): Hive's writers
        table = pa.Table.from_arrays(fields, names=names)
        parts.append(table.append_column(KEY_WRITE_ID, batch.column(ORIGINAL_TRANSACTION))
                     .append_column(KEY_BUCKET, batch.column(BUCKET))
                     .append_column(KEY_ROW_ID, batch.column(EVENT_ROW_ID)))
    if not parts:
        return None
    events = pa.concat_tables(parts)
    entries = build_entries(
        events, key_types=pa.schema([row_schema.field(c) for c in key_columns]),
        row_types=row_schema, write_ids=events.column(KEY_WRITE_ID).to_numpy(),
        bucket_properties=events.column(KEY_BUCKET).to_numpy(),
        row_ids=events.column(KEY_ROW_ID).to_numpy())
    return write_index(fs, root, entries, data=data, row_types=row_schema,
                       key_types=pa.schema([row_schema.field(c) for c in key_columns]))


@dataclass(frozen=True)
class IndexFile:
    """A trusted index file: its entries (columns `_hash`, the key, `_writeid`, `_bucketid`,
    `_rowid`, `_digest`, sorted by `_hash`); `digests_valid` when its digests were taken over
    the row columns (and types) asked for (not before an ALTER TABLE). The hash, ROW__ID and
    digest columns also as numpy arrays (a lookup gathers from them without Arrow)."""

    entries: pa.Table
    hashes: np.ndarray
    digests_valid: bool
    write_ids: np.ndarray
    bucket_properties: np.ndarray
    row_ids: np.ndarray
    digests: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.entries.nbytes  # the numpy arrays are views of its columns


def load_index(fs: fsspec.AbstractFileSystem, root: str, data: CommittedFile, *,
               key_types: pa.Schema, row_types: pa.Schema) -> IndexFile | None:
    """The index of the data file `data` (the manifest entry the snapshot reads), or None
    when there is none to trust: missing, unreadable, of another key (or key types), or made
    for a file other than this committed one (an uncommitted write's, another metastore's).
    A trusted one is kept in the process's cache under `data`, the key types and the row
    types (an index is a function of the committed file: `_file_cache.py`), so the next
    lookup of the same committed file decodes nothing."""
    binding = _binding(data, key_types)
    path = index_path(root, data.path)
    key = ("key_index", fs.unstrip_protocol(path), json.dumps(binding, sort_keys=True),
           json.dumps(_digest_of(row_types)))

    def make() -> tuple[IndexFile, int] | None:
        index = _read_index(fs, path, data, binding, row_types)
        return None if index is None else (index, index.nbytes)

    return FILES.get_or_make(key, make)


def _read_index(fs: fsspec.AbstractFileSystem, path: str, data: CommittedFile,
                binding: dict[str, object], row_types: pa.Schema) -> IndexFile | None:
    try:
        raw = fs.cat_file(path)
        table = pa.ipc.open_file(pa.py_buffer(raw)).read_all()
        meta = json.loads((table.schema.metadata or {})[_META])
    except (FileNotFoundError, pa.ArrowInvalid, KeyError, ValueError, OSError):
        return None
    if not isinstance(meta, dict):
        return None
    digest = meta.pop("digest", None)
    if meta != binding or table.num_rows != data.rows:
        return None
    table = table.combine_chunks()
    try:
        arrays = [_numpy(table.column(name), dtype) for name, dtype in (
            (HASH, np.uint64), (KEY_WRITE_ID, np.int64), (KEY_BUCKET, np.int32),
            (KEY_ROW_ID, np.int64), (DIGEST, np.uint64))]
    except (KeyError, ValueError, TypeError):  # a column missing, null or of another type
        return None
    hashes, write_ids, buckets, row_ids, digests = arrays
    if len(hashes) > 1 and bool((hashes[1:] < hashes[:-1]).any()):
        return None  # not sorted: a probe would miss keys
    return IndexFile(table, hashes, digest == _digest_of(row_types), write_ids, buckets,
                     row_ids, digests)


def _numpy(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    """A non-null column as a numpy array of `dtype`.

    Raises:
        ValueError, TypeError: it holds nulls or another type.
    """
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count or np.dtype(array.type.to_pandas_dtype()) != np.dtype(dtype):
        raise ValueError(f"index column of type {array.type}")
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=dtype)


def probe_sorted(hashes: np.ndarray, needles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every position of the sorted `hashes` equal to one of the sorted `needles`:
    (needle positions, hash positions)."""
    lo = np.searchsorted(hashes, needles, side="left")
    hi = np.searchsorted(hashes, needles, side="right")
    counts = hi - lo
    hit = np.flatnonzero(counts)
    if not len(hit):
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    counts, lo = counts[hit], lo[hit]
    total = int(counts.sum())
    which = np.repeat(hit, counts)
    firsts = np.cumsum(counts) - counts
    entries = np.repeat(lo, counts) + (np.arange(total) - np.repeat(firsts, counts))
    return which, entries


def probe(index: IndexFile, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every entry whose hash equals one of `hashes`: (probe positions, entry positions)."""
    order = np.argsort(hashes)  # sorted needles walk the index in order (cache-friendly)
    which, entries = probe_sorted(index.hashes, hashes[order])
    return order[which], entries


__all__ = ["DIGEST", "FORMAT_VERSION", "HASH", "INDEX_DIRECTORY", "KEY_BUCKET", "KEY_FILE",
           "KEY_ROW_ID", "KEY_WRITE_ID", "IndexFile", "build_entries", "declare_key_columns",
           "index_data_file", "index_path", "key_file_path", "load_index", "probe",
           "probe_sorted",
           "read_key_columns", "row_hashes", "write_index"]
