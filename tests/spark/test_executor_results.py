"""What write tasks report: typed records, through Arrow and back; offset ranges merged once."""

from __future__ import annotations

import pyarrow as pa

from ingest.spark.sink._results import (
    RESULT_SCHEMA,
    BadRecords,
    FileWritten,
    OffsetsRead,
    from_arrow,
    merge_offsets,
    offsets_read,
    to_arrow,
)
from ingest.txn import OffsetRange


def test_records_round_trip_through_arrow() -> None:
    records = [
        FileWritten("table", "/t/delta_1_1_0000/bucket_00000",
                    "/t/delta_1_1_0000/_tmp.bucket_00000.7", 10, 800, 800, "00ff00ff00ff00ff",
                    10),
        FileWritten("dead_letter", "/t__dead_letter/delta_1_1_0000/bucket_00001", None, 1, 90,
                    90),
        OffsetsRead("events", 2, 5, 19, 15),
        BadRecords("events", 0, 41, "not JSON", 3),
    ]
    batch = to_arrow(records)
    assert batch.schema == RESULT_SCHEMA
    assert batch.column("kind").to_pylist() == ["file", "file", "offsets", "bad"]
    assert from_arrow(batch) == records
    assert from_arrow(pa.Table.from_batches([batch])) == records
    assert records[0].directory == "/t/delta_1_1_0000"  # type: ignore[union-attr]


def test_offset_ranges_merge_per_topic_partition() -> None:
    reads = [OffsetsRead("b", 0, 10, 19, 10), OffsetsRead("a", 1, 5, 9, 5),
             OffsetsRead("b", 0, 0, 9, 10), OffsetsRead("a", 1, 12, 14, 2)]
    assert merge_offsets(reads) == [OffsetsRead("a", 1, 5, 14, 7),
                                    OffsetsRead("b", 0, 0, 19, 20)]
    assert merge_offsets([]) == []
    assert OffsetsRead("a", 1, 5, 14, 7).as_range() == OffsetRange("a", 1, 5, 15)


def test_offsets_read_groups_one_batch() -> None:
    reads = offsets_read(pa.array(["a", "a", "b", "a"]), pa.array([0, 0, 1, 1], pa.int32()),
                         pa.array([7, 3, 4, 9], pa.int64()))
    assert merge_offsets(reads) == [OffsetsRead("a", 0, 3, 7, 2), OffsetsRead("a", 1, 9, 9, 1),
                                    OffsetsRead("b", 1, 4, 4, 1)]


def test_offsets_read_of_one_topic_partition_and_of_two_topics_on_one_partition() -> None:
    one = offsets_read(pa.array(["a"] * 3), pa.array([2, 2, 2], pa.int32()),
                       pa.array([8, 6, 7], pa.int64()))
    assert one == [OffsetsRead("a", 2, 6, 8, 3)]
    two = offsets_read(pa.array(["a", "b", "a"]), pa.array([2, 2, 2], pa.int32()),
                       pa.array([8, 6, 7], pa.int64()))
    assert merge_offsets(two) == [OffsetsRead("a", 2, 7, 8, 2), OffsetsRead("b", 2, 6, 6, 1)]
