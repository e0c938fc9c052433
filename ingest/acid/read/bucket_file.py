"""Reading one ACID bucket file the way Hive does: only up to its last complete flush length.

With a side file, the last complete 8-byte entry is the readable length (a torn trailing entry
is ignored, as OrcAcidUtils.getLastFlushLength does); without one, the whole file. Stripes are
checked against their recorded checksums before any is decoded (docs/format.md §16).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import fsspec
import pyarrow as pa
import pyarrow.orc as po

from ingest.acid.format import ACID_FIELD_NAMES, acid_event_schema, checksums, read_flush_lengths
from ingest.errors import CorruptFileError
from ingest.io import files as _files
from ingest.orc import FileTail, open_orc, read_tail


@dataclass(frozen=True)
class BucketFileInfo:
    """Where a bucket file can be read up to, and the tail found there."""

    path: str
    file_length: int
    flush_lengths: tuple[int, ...] | None
    readable_length: int
    tail: FileTail | None

    @property
    def has_side_file(self) -> bool:
        return self.flush_lengths is not None

    @property
    def number_of_rows(self) -> int:
        return self.tail.number_of_rows if self.tail else 0


def readable_length(fs: fsspec.AbstractFileSystem, path: str) -> tuple[int, int, list[int] | None]:
    """(readable length, file length, side-file entries) for a bucket file.

    Raises:
        FileNotFoundError: no such file.
        CorruptFileError: the side file points past the end of the file.
    """
    size = fs.size(path)
    lengths = read_flush_lengths(fs, path)
    if lengths is None:
        return size, size, None
    length = lengths[-1] if lengths else 0
    if length > size:
        raise CorruptFileError(
            f"Cannot read bucket file {path}: its side file records a flush length of "
            f"{length:,} bytes but the file has only {size:,}", path=path, offset=size,
            hint="run `ingest recover` on its table to go back to the last complete footer")
    return length, size, lengths


def inspect_bucket_file(
    path: str, *, fs: fsspec.AbstractFileSystem | None = None,
) -> BucketFileInfo:
    """Find the readable length of a bucket file and parse the tail that ends there.

    Raises:
        FileNotFoundError: no such file.
        CorruptFileError: not ORC, cut short, or the side file points past the end.
    """
    fs, path = _files.resolve(path, fs)
    length, size, lengths = readable_length(fs, path)
    tail = read_tail(fs, path, length) if length > 0 else None
    return BucketFileInfo(path, size, None if lengths is None else tuple(lengths), length, tail)


_ACID_TYPES = (pa.int32(), pa.int64(), pa.int32(), pa.int64(), pa.int64())


@contextmanager
def _open_events(fs: fsspec.AbstractFileSystem, path: str, length: int,
                 row_schema: pa.Schema | None) -> Iterator[po.ORCFile]:
    """Open a bucket file at `length`, check it is an ACID file, and turn decoding failures
    into CorruptFileError (a damaged footer must never yield wrong rows silently)."""
    try:
        if checksums.checks_enabled():
            checksums.check_stripes(fs, path, read_tail(fs, path, length))
        with open_orc(fs, path, length) as orc:
            schema = orc.schema
            problem = _acid_schema_problem(schema, row_schema)
            if problem:
                raise CorruptFileError(f"Cannot read bucket file {path} at length {length:,}: "
                                       f"{problem}", path=path, offset=length)
            yield orc
    except (OSError, pa.ArrowException, ValueError) as e:  # pyarrow decoding a damaged file
        if isinstance(e, FileNotFoundError):
            raise
        raise CorruptFileError(f"Cannot read bucket file {path} at length {length:,}: {e}",
                               path=path, offset=length,
                               hint=damage_hint(fs, path, length)) from e


def damage_hint(fs: fsspec.AbstractFileSystem, path: str, length: int) -> str:
    """What to do about a bucket file that does not decode at `length`: recovery can act on
    a damaged or cut tail, never on damaged stripe data under a sound tail (then the file is
    named as damaged, and `ingest recover` would exit 1 naming it too)."""
    try:
        read_tail(fs, path, length)
    except (CorruptFileError, OSError, ValueError):
        return "run `ingest recover` on its table"
    return checksums.stripe_damage_hint(path)


def _acid_schema_problem(schema: pa.Schema, row_schema: pa.Schema | None) -> str | None:
    names = tuple(n.lower() for n in schema.names)
    if names != tuple(n.lower() for n in ACID_FIELD_NAMES):
        return f"its root fields are {schema.names}, not Hive's ACID event struct"
    types = tuple(f.type for f in schema)
    if types[:5] != _ACID_TYPES or not pa.types.is_struct(types[5]):
        return f"its ACID fields have types {[str(t) for t in types]}"
    names_in_row = [f.name for f in types[5]]  # decoding the names checks them too
    if row_schema is not None:
        expected = [f.name for f in row_schema]
        if names_in_row != expected:
            return f"its rows have columns {names_in_row}, the table has {expected}"
        found_types = [as_read_back(f.type) for f in types[5]]
        expected_types = [as_read_back(f.type) for f in row_schema]
        if found_types != expected_types:
            return (f"its row types are {[str(t) for t in found_types]}, the table's are "
                    f"{[str(t) for t in expected_types]}")
    return None


def as_read_back(t: pa.DataType) -> pa.DataType:
    """The Arrow type pyarrow's ORC reader returns for a column written as `t`."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("ns")
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, as_read_back(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(as_read_back(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(as_read_back(t.key_type), as_read_back(t.item_type))
    return t


def _canonical_names(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Hive matches the ACID field names case-insensitively; give them one spelling."""
    canonical = {n.lower(): n for n in ACID_FIELD_NAMES}
    names = [canonical.get(n.lower(), n) for n in batch.schema.names]
    return batch if names == batch.schema.names else batch.rename_columns(names)


def read_events(
    path: str,
    *,
    fs: fsspec.AbstractFileSystem | None = None,
    length: int | None = None,
    columns: Sequence[str] | None = None,
    row_schema: pa.Schema | None = None,
) -> Iterator[pa.RecordBatch]:
    """ACID events of a bucket file, one record batch per stripe.

    Args:
        path: the bucket file.
        fs: its filesystem (from the URL when None).
        length: read the file as if it were this long (default: its readable length).
        columns: top-level columns to read (default all six).
        row_schema: when given, the file's row columns must have these names.

    Raises:
        FileNotFoundError: no such file.
        CorruptFileError: as for `inspect_bucket_file`, or the file is not an ACID file, or
            its stripes cannot be decoded or differ from their recorded checksums.
    """
    fs, path = _files.resolve(path, fs)
    if length is None:
        length = readable_length(fs, path)[0]
    if length == 0:
        return
    with _open_events(fs, path, length, row_schema) as orc:
        for i in range(orc.nstripes):
            stripe = orc.read_stripe(i, columns=list(columns) if columns else None)
            if stripe.num_rows:
                yield _canonical_names(stripe)


def read_bucket_file(
    path: str, *, fs: fsspec.AbstractFileSystem | None = None, length: int | None = None,
) -> pa.Table:
    """All readable ACID events of a bucket file as one table (see `read_events`)."""
    fs, path = _files.resolve(path, fs)
    if length is None:
        length = readable_length(fs, path)[0]
    if length == 0:
        return acid_event_schema(pa.schema([])).empty_table()
    with _open_events(fs, path, length, None) as orc:
        return orc.read()
