"""The "hive-acid" source packs scan tasks into few, balanced Spark tasks: four equal buckets
on two cores are two tasks of two buckets (Spark's fill-then-open packing made three, one of
them twice the others), a scan task is never split, and `maxPartitionBytes` still caps a
task unless one scan task alone is larger."""

from __future__ import annotations

from ingest.acid.read import Partition, ScanTask
from ingest.spark.source._plan import OPEN_COST_BYTES, pack

MB = 1 << 20


def scans(*costs: int) -> list[tuple[ScanTask, int]]:
    return [(ScanTask(Partition("/t", ()), i, ()), c) for i, c in enumerate(costs)]


def buckets(packed: list[tuple[ScanTask, ...]]) -> list[list[int]]:
    return [sorted(t.bucket_id for t in group) for group in packed]


def test_four_equal_buckets_make_two_equal_tasks_for_two_partitions() -> None:
    # The spark-read bench's table: 5 deltas and a delete delta per bucket, 0.8 MB each.
    cost = 6 * OPEN_COST_BYTES + 5 * 800_000 + 7_000
    packed = pack(scans(cost, cost, cost, cost), max_partition_bytes=128 * MB,
                  min_partitions=2)
    assert sorted(map(len, packed)) == [2, 2]
    assert sorted(b for group in buckets(packed) for b in group) == [0, 1, 2, 3]


def test_the_largest_go_first_each_to_the_least_loaded_task() -> None:
    costs = (10, 9, 8, 3, 2, 1)
    packed = pack(scans(*costs), max_partition_bytes=128 * MB, min_partitions=2)
    # 10 -> A, 9 -> B, 8 -> B (9 < 10), 3 -> A, 2 -> A (13 < 17), 1 -> A (15 < 17)
    assert buckets(packed) == [[0, 3, 4, 5], [1, 2]]


def test_no_more_tasks_than_scan_tasks() -> None:
    assert buckets(pack(scans(5, 5), max_partition_bytes=128 * MB, min_partitions=8)) == [
        [0], [1]]
    assert pack([], max_partition_bytes=128 * MB, min_partitions=2) == []


def test_max_partition_bytes_caps_a_task_and_a_bigger_scan_task_stands_alone() -> None:
    packed = pack(scans(300, 60, 60, 60, 60), max_partition_bytes=100, min_partitions=1)
    groups = buckets(packed)
    assert [0] in groups  # larger than the cap: alone, never split
    assert all(sum((300, 60, 60, 60, 60)[b] for b in g) <= 100 for g in groups if g != [0])
    assert sorted(b for g in groups for b in g) == [0, 1, 2, 3, 4]
    # One byte each: every scan task its own Spark task.
    assert len(pack(scans(5, 5, 5), max_partition_bytes=1, min_partitions=1)) == 3
