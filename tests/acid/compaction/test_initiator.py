"""The initiator: Hive's policy branch by branch, and the numbers it measures on disk."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest
from support import SIMPLE_SCHEMA, delete_keys, snap, write_rows

from ingest.acid.compaction.compact import compact_partition
from ingest.acid.compaction.initiator import (
    Backlog,
    CompactionThresholds,
    Decision,
    decide,
    measure_backlog,
)
from ingest.acid.format.names import encode_bucket_property, format_delta

FS = fsspec.filesystem("file")
HIVE = CompactionThresholds()


def backlog(deltas: int = 0, delete_deltas: int = 0, base: int = 0, delta_bytes: int = 0,
            aborted: int = 0, rows: int = 0, deletes: int = 0) -> Backlog:
    return Backlog(deltas, delete_deltas, "base_0000001" if base else None, base, delta_bytes,
                   aborted, rows, deletes)


@pytest.mark.parametrize(("b", "t", "kind", "reason"), [
    (backlog(), HIVE, None, "no base, 0 deltas <= 10"),
    (backlog(10, 0, 0, 100), HIVE, None, "no base, 10 deltas <= 10"),
    # Hive's thresholds are strict: more than 10 deltas, more than 10 % of the base.
    (backlog(10, 1, 0, 100), HIVE, "major", "no base and 11 deltas > 10"),
    (backlog(2, 0, 1000, 100), HIVE, None, "2 deltas <= 10, delta bytes 10.0% of the base "
                                           "<= 10.0%"),
    (backlog(2, 0, 1000, 101), HIVE, "major", "delta bytes 10.1% of the base > 10.0%"),
    (backlog(9, 2, 100_000, 5000), HIVE, "minor", "11 deltas > 10 (delta bytes 5.0% of the "
                                                  "base)"),
    (backlog(1, 0, 100_000, 10, aborted=1000), HIVE, None,
     "1 deltas <= 10, delta bytes 0.0% of the base <= 10.0%"),
    (backlog(1, 0, 100_000, 10, aborted=1001), HIVE, "major", "1001 aborted write ids > 1000"),
    (backlog(3, 0, 100_000, 10), CompactionThresholds(delta_num=2), "minor",
     "3 deltas > 2 (delta bytes 0.0% of the base)"),
    (backlog(3, 0, 100, 90), CompactionThresholds(delta_pct=1.0), None,
     "3 deltas <= 10, delta bytes 90.0% of the base <= 100.0%"),
    (backlog(3, 0, 0, 90, aborted=5), CompactionThresholds(aborted=4), "major",
     "5 aborted write ids > 4"),
    (backlog(50, 0, 0, 90, aborted=5000), CompactionThresholds(auto=False), None,
     "automatic compaction is off (no_auto_compaction=true)"),
    # Delete events over stored rows (ours, strict): where Hive's rules ask for no major,
    # which delete events (a few bytes each) rarely make them do.
    (backlog(1, 1, 100_000, 10, rows=1000, deletes=100), HIVE, None,
     "2 deltas <= 10, delta bytes 0.0% of the base <= 10.0%"),
    (backlog(1, 1, 100_000, 10, rows=1000, deletes=101), HIVE, "major",
     "101 delete events, 10.1% of 1000 rows > 10.0% (else: 2 deltas <= 10, delta bytes 0.0% "
     "of the base <= 10.0%)"),
    (backlog(9, 2, 100_000, 10, rows=1000, deletes=101), HIVE, "major",
     "101 delete events, 10.1% of 1000 rows > 10.0% (else: 11 deltas > 10 (delta bytes 0.0% "
     "of the base))"),
    (backlog(0, 1, 0, 10, rows=0, deletes=3), HIVE, "major",
     "3 delete events, no rows > 10.0% (else: no base, 1 deltas <= 10)"),
    (backlog(11, 1, 0, 10, rows=10, deletes=5), HIVE, "major", "no base and 12 deltas > 10"),
    (backlog(1, 1, 0, 10, rows=10, deletes=5), CompactionThresholds(auto=False), None,
     "automatic compaction is off (no_auto_compaction=true)"),
    (backlog(1, 1, 100_000, 10, rows=1000, deletes=400), CompactionThresholds(delete_pct=0.5),
     None, "2 deltas <= 10, delta bytes 0.0% of the base <= 10.0%"),
    (backlog(1, 1, 100_000, 10, rows=1000, deletes=400, aborted=9),
     CompactionThresholds(aborted=8), "major", "9 aborted write ids > 8"),
])
def test_decide_follows_hives_policy(b: Backlog, t: CompactionThresholds, kind: str | None,
                                     reason: str) -> None:
    assert decide(b, t) == Decision(kind, reason)  # type: ignore[arg-type]


def test_backlog_counts_what_the_compactor_would_fold(tmp_path: Path) -> None:
    root = tmp_path / "p"
    bp = encode_bucket_property(0, 0)
    write_rows(root / format_delta(1, 1, 0), 1, range(0, 100))
    write_rows(root / format_delta(2, 2, 0), 2, range(100, 150))
    write_rows(root / format_delta(3, 3, 0), 3, range(150, 160))       # aborted
    delete_keys(root / format_delta(4, 4, 0, delete=True), [(1, bp, 0)], write_id=4)
    write_rows(root / format_delta(5, 5, 0), 5, range(160, 170))       # open: not folded
    snapshot = snap(5, (5,), (3,))
    b = measure_backlog(FS, str(root), snapshot)
    sizes = {n: sum(f.stat().st_size for f in (root / n).iterdir() if not f.name.startswith("_"))
             for n in (format_delta(1, 1, 0), format_delta(2, 2, 0),
                       format_delta(4, 4, 0, delete=True))}
    # Rows: the events of deltas 1 and 2 (3 is aborted, 5 open); one delete event.
    assert b == Backlog(2, 1, None, 0, sum(sizes.values()), 1, rows=150, delete_events=1)
    assert decide(b, HIVE).kind is None
    assert decide(b, CompactionThresholds(delta_num=2)).kind == "major"

    compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA, kind="major")
    after = measure_backlog(FS, str(root), snapshot)
    # The base covers write ids 1..4: the aborted one below it no longer counts.
    assert (after.base, after.deltas, after.delete_deltas, after.aborted_write_ids) == (
        "base_0000004", 0, 0, 0)
    assert after.base_bytes > 0 and after.delta_bytes == 0
    assert (after.rows, after.delete_events) == (149, 0)  # the delete is applied
    assert decide(after, CompactionThresholds(delta_num=0)).kind is None


def test_backlog_of_a_missing_partition_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        measure_backlog(FS, str(tmp_path / "nope"), snap(1))


def test_backlog_skips_the_output_of_an_uncommitted_compactor_txn(tmp_path: Path) -> None:
    root = tmp_path / "p"
    for w in (1, 2, 3):
        write_rows(root / format_delta(w, w, 0), w, range(w * 10, w * 10 + 10))
    snapshot = snap(3)
    compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA, kind="major",
                      visibility_txn_id=9)
    assert (root / "base_0000003_v0000009").is_dir()
    # T=9 open or aborted: the deltas are what compaction would fold, as for every reader.
    b = measure_backlog(FS, str(root), snapshot, visible_txn=lambda txn_id: txn_id != 9)
    assert (b.base, b.deltas, b.base_bytes) == (None, 3, 0)
    assert decide(b, CompactionThresholds(delta_num=2)).kind == "major"
    committed = measure_backlog(FS, str(root), snapshot, visible_txn=lambda txn_id: True)
    assert (committed.base, committed.deltas) == ("base_0000003_v0000009", 0)
