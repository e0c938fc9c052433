"""Split rows by partition and bucket: the one place that groups rows for bucket files.

`load`, `delete` and the streaming sink's write tasks all hand their rows here. Vectorised:
one sort and one gather per call, no loop over rows. Knows Hive's partition directory names
(`FileUtils.makePartName`), not the metastore, files or Spark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format import format_partition


def partition_path(columns: Sequence[str], values: Sequence[str | None]) -> str:
    """Hive's partition directory, e.g. ``dt=2026-01-01/country=__HIVE_DEFAULT_PARTITION__``.

    Names and values are escaped as Hive's FileUtils.escapePathName does (``/`` → ``%2F``);
    a null or empty value is the default partition (`ingest.acid.format.names.format_partition`).

    Raises:
        ValueError: `columns` and `values` differ in length.
    """
    return "/".join(format_partition(c, v) for c, v in zip(columns, values, strict=True))


def split_rows(
    rows: pa.Table,
    partitions: pa.Table | None = None,
    *,
    bucket_ids: pa.Array | pa.ChunkedArray | np.ndarray | None = None,
    default_bucket_id: int = 0,
) -> Iterator[tuple[str, int, pa.Table]]:
    """Group rows by partition and bucket: (partition path, bucket id, rows) per group.

    Groups come partition by partition, in the order each partition first appears in the
    input, and by ascending bucket id within one; rows keep their input order inside a
    group. A null or empty partition value is Hive's default partition.

    Args:
        rows: the rows to split (any columns).
        partitions: one string column per partition column, outermost first, row for row
            with `rows`; its column names are the partition columns. None or no columns:
            unpartitioned, every group's path is "".
        bucket_ids: the bucket id of every row (non-negative, no nulls); None: every row
            goes to `default_bucket_id`.
        default_bucket_id: the bucket of every row when `bucket_ids` is None.

    Raises:
        ValueError: `partitions` or `bucket_ids` do not have one value per row, or a bucket
            id is null or negative.
    """
    n = rows.num_rows
    if n == 0:
        return
    part_of_row, names = _partition_ids(partitions, n)
    buckets, default_bucket_id = _bucket_array(bucket_ids, n, default_bucket_id)
    if buckets is None:
        width = 1
        key = part_of_row
    else:
        width = int(buckets.max()) + 1
        key = buckets if part_of_row is None else part_of_row * width + buckets
    if key is None:  # one partition, one bucket: nothing to group
        yield names[0], default_bucket_id, rows
        return
    # Groups in ascending key order. Arrow's stable sort counts small integer keys (about 10x
    # faster here than numpy's int64 argsort); one gather serves every group, each group is
    # then a zero-copy slice of it.
    if len(names) * width <= 4 * n:
        counts = np.bincount(key, minlength=len(names) * width)
        keys = np.flatnonzero(counts)
        sizes = counts[keys]
    else:  # few rows over many possible keys: count only the keys present
        keys, sizes = np.unique(key, return_counts=True)
    grouped = rows.take(pc.sort_indices(pa.array(key)))
    start = 0
    for k, size in zip(keys.tolist(), sizes.tolist(), strict=True):
        bucket = default_bucket_id if buckets is None else k % width
        yield names[k // width], bucket, grouped.slice(start, size)
        start += size


def _partition_ids(partitions: pa.Table | None, n: int) -> tuple[np.ndarray | None, list[str]]:
    """(dense partition number of every row, numbered in order of first appearance, or None
    when there is at most one partition; the partition path of each number)."""
    if partitions is None or partitions.num_columns == 0:
        return None, [""]
    if partitions.num_rows != n:
        raise ValueError(f"partitions have {partitions.num_rows} rows for {n} rows")
    codes: list[np.ndarray] = []
    values: list[list[str | None]] = []
    for column in partitions.columns:
        column = column.combine_chunks()
        # '' and null are the same partition (Hive's default one): encode them alike.
        column = pc.if_else(pc.equal(column, ""), pa.scalar(None, column.type), column)
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        codes.append(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64))
        values.append(encoded.dictionary.to_pylist())
    # dictionary_encode numbers values by first appearance, so one column is already dense
    # and ordered; further columns are folded in one at a time and renumbered.
    ids, first_rows = codes[0], None
    for column_codes, column_values in zip(codes[1:], values[1:], strict=True):
        ids, first_rows = _renumber(ids * len(column_values) + column_codes)
    columns = partitions.column_names
    if first_rows is None:
        names = [partition_path(columns, [v]) for v in values[0]]
    else:
        names = [partition_path(columns, [vals[c[r]] for vals, c in zip(values, codes,
                                                                          strict=True)])
                 for r in first_rows.tolist()]
    return (None if len(names) == 1 else ids), names


def _renumber(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense numbers for `keys` in order of first appearance, and each number's first row."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    by_appearance = np.argsort(first, kind="stable")
    rank = np.empty_like(by_appearance)
    rank[by_appearance] = np.arange(len(by_appearance))
    return rank[inverse.reshape(-1)], first[by_appearance]


def _bucket_array(bucket_ids: pa.Array | pa.ChunkedArray | np.ndarray | None, n: int,
                  default: int) -> tuple[np.ndarray | None, int]:
    """(the bucket ids as int64, or None when every row has the same one; that one)."""
    if bucket_ids is None:
        return None, default
    if isinstance(bucket_ids, pa.ChunkedArray | pa.Array):
        if bucket_ids.null_count:
            raise ValueError(f"{bucket_ids.null_count} rows have no bucket id")
        bucket_ids = bucket_ids.to_numpy() if isinstance(bucket_ids, pa.ChunkedArray) else \
            bucket_ids.to_numpy(zero_copy_only=False)
    buckets = np.asarray(bucket_ids, dtype=np.int64)
    if len(buckets) != n:
        raise ValueError(f"{len(buckets)} bucket ids for {n} rows")
    low, high = int(buckets.min()), int(buckets.max())
    if low < 0:
        raise ValueError(f"bucket id {low} is negative")
    return (None, low) if low == high else (buckets, default)


__all__ = ["partition_path", "split_rows"]
