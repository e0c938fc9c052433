"""split_rows: the one grouping of rows by partition and bucket (load, delete, the sink)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.records import partition_path, split_rows


def groups(rows: pa.Table, partitions: pa.Table | None = None, **kwargs: Any,
           ) -> list[tuple[str, int, list[int]]]:
    return [(part, bucket, chunk.column("id").to_pylist())
            for part, bucket, chunk in split_rows(rows, partitions, **kwargs)]


def ids(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64())})


def test_one_partition_one_bucket_is_the_input_itself() -> None:
    rows = ids(5)
    [(part, bucket, chunk)] = list(split_rows(rows, default_bucket_id=7))
    assert (part, bucket) == ("", 7) and chunk is rows
    assert list(split_rows(ids(0), bucket_ids=pa.array([], pa.int32()))) == []


def test_buckets_ascend_and_rows_keep_their_order() -> None:
    got = groups(ids(6), bucket_ids=pa.array([3, 1, 3, 0, 1, 3], pa.int32()))
    assert got == [("", 0, [3]), ("", 1, [1, 4]), ("", 3, [0, 2, 5])]


def test_a_single_bucket_id_is_used_not_the_default() -> None:
    assert groups(ids(3), bucket_ids=np.array([2, 2, 2]), default_bucket_id=9) == [
        ("", 2, [0, 1, 2])]


def test_partitions_come_in_order_of_first_appearance_and_empty_is_the_default() -> None:
    dt = pa.array(["b", None, "a", "", "b", "a/x"])
    got = groups(ids(6), pa.table({"dt": dt}), default_bucket_id=4)
    assert got == [("dt=b", 4, [0, 4]), ("dt=__HIVE_DEFAULT_PARTITION__", 4, [1, 3]),
                   ("dt=a", 4, [2]), ("dt=a%2Fx", 4, [5])]


def test_several_partition_columns_and_buckets() -> None:
    parts = pa.table({"dt": ["d2", "d1", "d2", "d1", "d2"], "c": ["x", "y", "y", "y", "x"]})
    got = groups(ids(5), parts, bucket_ids=pa.array([1, 0, 0, 1, 0], pa.int32()))
    assert got == [("dt=d2/c=x", 0, [4]), ("dt=d2/c=x", 1, [0]), ("dt=d1/c=y", 0, [1]),
                   ("dt=d1/c=y", 1, [3]), ("dt=d2/c=y", 0, [2])]


def test_few_rows_over_many_possible_groups() -> None:
    parts = pa.table({"dt": ["a", "b", "a"]})
    got = groups(ids(3), parts, bucket_ids=pa.array([4095, 0, 4095], pa.int32()))
    assert got == [("dt=a", 4095, [0, 2]), ("dt=b", 0, [1])]


def test_mismatched_lengths_and_null_buckets_are_refused() -> None:
    with pytest.raises(ValueError, match="partitions have 2 rows for 3 rows"):
        list(split_rows(ids(3), pa.table({"dt": ["a", "b"]})))
    with pytest.raises(ValueError, match="2 bucket ids for 3 rows"):
        list(split_rows(ids(3), bucket_ids=np.array([0, 1])))
    with pytest.raises(ValueError, match="1 rows have no bucket id"):
        list(split_rows(ids(2), bucket_ids=pa.array([0, None], pa.int32())))


values = st.sampled_from(["a", "b", "", None, "c=d"])


@settings(max_examples=200)
@given(st.lists(st.tuples(values, values, st.integers(0, 5)), max_size=40), st.booleans())
def test_matches_a_dict_of_lists(rows: list[tuple[str | None, str | None, int]],
                                 two_columns: bool) -> None:
    """Every row lands once, in its own group, in input order; groups in the documented order."""
    columns = ["p", "q"] if two_columns else ["p"]
    expected: dict[str, dict[int, list[int]]] = {}
    for i, (p, q, bucket) in enumerate(rows):
        path = partition_path(columns, [p, q][: len(columns)])
        expected.setdefault(path, {}).setdefault(bucket, []).append(i)
    parts = pa.table({"p": pa.array([r[0] for r in rows], pa.string()),
                      "q": pa.array([r[1] for r in rows], pa.string())}).select(columns)
    got = groups(ids(len(rows)), parts, bucket_ids=pa.array([r[2] for r in rows], pa.int32()))
    assert got == [(path, bucket, expected[path][bucket])
                   for path in expected for bucket in sorted(expected[path])]
