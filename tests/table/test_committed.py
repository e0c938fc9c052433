"""`verify` and `recover` against the committed-file manifest: which files count as damaged
(a file whose directory was compacted and cleaned is not missing), and recovery held back
from any cut below a committed length, whatever its own plan says."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pyarrow as pa

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.committed import CommittedFile, CommittedFiles
from ingest.acid.recovery.recover import FileRecovery, RecoveryReport
from ingest.table.core._committed import (
    directory_entries,
    find_damage,
    guard_recovery,
    keeping,
    mark_unrecoverable,
)

LOCAL = fsspec.filesystem("file")
SCHEMA = pa.schema([("id", pa.int64())])


def write(path: Path, write_id: int, rows: int) -> None:
    with BucketWriter.create(str(path), BucketFileOptions(write_id=write_id,
                                                          row_schema=SCHEMA)) as w:
        w.write(pa.table({"id": list(range(rows))}, schema=SCHEMA))


def test_damage_found_and_cleaned_directories_are_not_missing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    for name, w in (("delta_0000001_0000001_0000", 1), ("delta_0000002_0000002_0000", 2),
                    ("delta_0000003_0000003_0000", 3)):
        write(root / name / "bucket_00000", w, 10 * w)
    entries = directory_entries(LOCAL, str(root), [str(p) for p in sorted(root.iterdir())])
    assert [(e.path, e.write_id, e.rows) for e in entries] == [
        ("delta_0000001_0000001_0000/bucket_00000", 1, 10),
        ("delta_0000002_0000002_0000/bucket_00000", 2, 20),
        ("delta_0000003_0000003_0000/bucket_00000", 3, 30)]
    manifest = CommittedFiles(str(root), {e.path: e for e in entries})
    assert find_damage(LOCAL, manifest, under=str(root)) == {}
    # Write id 1 compacted into base_0000001 and its delta cleaned: not missing.
    write(root / "base_0000001" / "bucket_00000", 1, 10)
    for p in (root / "delta_0000001_0000001_0000").iterdir():
        p.unlink()
    (root / "delta_0000001_0000001_0000").rmdir()
    # Write id 2's file gone from a directory still there; write id 3's emptied.
    (root / "delta_0000002_0000002_0000" / "bucket_00000").unlink()
    (root / "delta_0000003_0000003_0000" / "bucket_00000").write_bytes(b"")
    damage = find_damage(LOCAL, manifest, under=str(root))
    assert {Path(p).parent.name: d.kind for p, d in damage.items()} == {
        "delta_0000002_0000002_0000": "missing-file", "delta_0000003_0000003_0000": "empty-file"}
    # Below another directory nothing is looked at.
    assert find_damage(LOCAL, manifest, under=str(root / "base_0000001")) == {}


def test_recovery_is_held_back_from_cutting_below_a_committed_length() -> None:
    entry = CommittedFile("d/bucket_00000", 5, 800, "0123456789abcdef", 8)
    manifest = CommittedFiles("/t", {entry.path: entry,
                                     "d/bucket_00001": CommittedFile("d/bucket_00001", 5, 400,
                                                                     "0123456789abcdef", 4)})
    planned = RecoveryReport("/t", (
        FileRecovery("/t/d/bucket_00000", 1000, 500, "truncated", "past the last flush"),
        FileRecovery("/t/d/bucket_00001", 1000, 400, "truncated", "past the last flush"),
        FileRecovery("/t/d/bucket_00002", 1000, 0, "removed", "no flush"),
    ), dry_run=True)
    keep = guard_recovery(manifest, {}, planned)
    assert list(keep) == ["/t/d/bucket_00000"]  # cutting to 400 of 400 is allowed
    assert "below the 800 bytes the commit of write id 5 recorded" in keep["/t/d/bucket_00000"]
    live = keeping(lambda p: p.endswith("_00009"), keep)
    assert live("/t/d/bucket_00000") and live("/t/d/bucket_00009")
    assert not live("/t/d/bucket_00001")
    after = mark_unrecoverable(RecoveryReport("/t", (
        FileRecovery("/t/d/bucket_00000", 1000, 1000, "skipped", "held back"),)),
        {**keep, "/t/d/bucket_00005": "it is missing"}, {})
    assert [(f.path, f.action, f.old_length, f.new_length) for f in after.files] == [
        ("/t/d/bucket_00000", "unrecoverable", 1000, 1000),
        ("/t/d/bucket_00005", "unrecoverable", -1, 0)]
    assert not after.clean
