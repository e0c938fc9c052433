"""Encoding buffered rows into ACID stripes with pyarrow's ORC writer.

Rows are cut into stripes here (by Arrow bytes), and pyarrow writes each stripe as a small
ORC file of its own, which `_acid_stripes` takes apart. Insert stripes are encoded as groups
of consecutive user columns on a thread pool (pyarrow releases the GIL): unlike cutting rows
into slices, this keeps every core busy however few rows a flush holds, and stripes whole.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.orc as po

from ingest.acid.write import _acid_stripes, _nested_nulls
from ingest.acid.write._acid_stripes import AcidStripe
from ingest.errors import ConfigError
from ingest.orc import CompressionKind, FileTail, parse_tail

_PYARROW_CODEC = {"none": "uncompressed", "zlib": "zlib", "snappy": "snappy", "lz4": "lz4",
                  "zstd": "zstd"}
PYARROW_BLOCK_UNIT = 64 * 1024  # ORC C++ compression blocks are multiples of this
# Handed to pyarrow so it never cuts a stripe itself: column groups must cut alike.
_NO_STRIPE_LIMIT = 1 << 50
# Below this many rows a stripe is encoded in one piece: a thread hand-off costs more.
_MIN_ROWS_TO_SPLIT = 8 * 1024
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()
# Empty files' tails by event schema and encoder settings (`StripeEncoder.empty_tail`): a task
# writing many tables' small files pays an ORC encode per file for the same few tails.
_EMPTY_TAILS: dict[tuple[bytes, str, int, int], FileTail] = {}
_EMPTY_TAILS_LIMIT = 256


def _pool(threads: int) -> ThreadPoolExecutor:
    """One process-wide pool per size: encoders are stateless, threads are cheap to share."""
    with _POOLS_LOCK:
        if threads not in _POOLS:
            _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="orc-encode")
        return _POOLS[threads]


class StripeEncoder:
    """Encodes stripes for one bucket file's codec and settings."""

    def __init__(self, compression: CompressionKind, *, block_size: int, row_index_stride: int,
                 stripe_size_bytes: int, threads: int) -> None:
        if stripe_size_bytes < 1 or threads < 1 or row_index_stride < 1:
            raise ConfigError(
                f"Cannot write ORC with stripe_size_bytes={stripe_size_bytes}, "
                f"encoder_threads={threads}, row_index_stride={row_index_stride}",
                hint="each must be at least 1 (ORC writers always write a row index)")
        self.compression = compression
        self.block_size = block_size
        self.row_index_stride = row_index_stride
        self.stripe_size_bytes = stripe_size_bytes
        self.threads = threads

    def encode_file(self, table: pa.Table) -> tuple[memoryview, FileTail]:
        """`table` as a whole ORC file (all its rows in one stripe), and its tail.

        Raises:
            ConfigError: the ORC encoder refuses the settings.
        """
        sink = pa.BufferOutputStream()
        try:
            po.write_table(
                _nested_nulls.unsliced(table), sink, compression=_PYARROW_CODEC[self.compression],
                stripe_size=_NO_STRIPE_LIMIT, compression_block_size=self.block_size,
                row_index_stride=self.row_index_stride)
        except pa.ArrowException as e:
            raise ConfigError(f"Cannot write ORC with block size {self.block_size} and row "
                              f"index stride {self.row_index_stride}: {e}",
                              hint=f"compression_block_size must be a multiple of "
                                   f"{PYARROW_BLOCK_UNIT:,}") from e
        data = memoryview(sink.getvalue()).cast("B")  # pyarrow exports signed bytes
        return data, parse_tail(data, len(data), check=False)  # our own bytes: skip re-checks

    def empty_tail(self, events: pa.Schema) -> FileTail:
        """The tail of an empty file of `events`, encoded once per schema and settings (a
        tail is never changed in place, so one is shared by every writer that asks).

        Raises:
            ConfigError: the ORC encoder refuses the settings.
        """
        # Serialized: field metadata (Hive types such as varchar(10)) changes the tail too.
        key = (events.serialize().to_pybytes(), self.compression, self.block_size,
               self.row_index_stride)
        tail = _EMPTY_TAILS.get(key)
        if tail is None:
            tail = self.encode_file(events.empty_table())[1]
            if len(_EMPTY_TAILS) >= _EMPTY_TAILS_LIMIT:
                _EMPTY_TAILS.clear()  # a stream of ever-new schemas: start over, stay small
            _EMPTY_TAILS[key] = tail
        return tail

    def stripe_slices(self, table: pa.Table) -> Iterator[tuple[int, int]]:
        """(first row, rows) of each stripe `table` is cut into: about stripe_size_bytes each."""
        stripes = max(1, -(-table.nbytes // self.stripe_size_bytes))
        step = max(1, -(-table.num_rows // stripes))
        for start in range(0, table.num_rows, step):
            yield start, min(step, table.num_rows - start)

    def insert_stripe(self, rows: pa.Table, *, write_id: int, bucket_property: int,
                      first_row_id: int) -> AcidStripe:
        """One stripe of insert events for `rows` (user columns), row ids from first_row_id."""
        groups = _column_groups(rows, self.threads if rows.num_rows >= _MIN_ROWS_TO_SPLIT else 1)
        tables = [rows.select(range(start, end)) for start, end in groups]
        if len(tables) == 1:
            parts = [self.encode_file(tables[0])]
        else:
            parts = list(_pool(len(tables)).map(self.encode_file, tables))
        return _acid_stripes.insert_stripe(
            parts, write_id=write_id, bucket_property=bucket_property,
            first_row_id=first_row_id)

    def event_stripe(self, events: pa.Table) -> AcidStripe:
        """One stripe of whole ACID events (delete events: their keys are not a sequence)."""
        return _acid_stripes.event_stripe(*self.encode_file(events), events)


def _column_groups(rows: pa.Table, groups: int) -> list[tuple[int, int]]:
    """Split the columns into at most `groups` runs of consecutive columns of about equal
    Arrow bytes (a rough measure of encoding work), as [start, end) column ranges."""
    columns = rows.num_columns
    before = [0]  # before[i]: bytes of columns 0 .. i-1
    for column in rows.columns:
        before.append(before[-1] + column.nbytes)
    groups = min(groups, columns)
    cuts = [0]
    for k in range(1, groups):
        target = before[-1] * k / groups
        candidates = range(cuts[-1] + 1, columns)
        if not candidates:
            break
        cuts.append(min(candidates, key=lambda i: abs(before[i] - target)))
    cuts.append(columns)
    return list(zip(cuts, cuts[1:], strict=False))
