"""Major and minor compaction: same rows and ROW__IDs before and after, open batches left alone."""

from __future__ import annotations

import hashlib
from pathlib import Path

import fsspec
import fsspec.implementations.local
import pyarrow as pa
import pyarrow.orc as po
import pytest
from support import (
    SIMPLE_SCHEMA,
    all_types_table,
    delete_keys,
    simple_table,
    snap,
    write_deletes,
    write_rows,
)

from ingest.acid import (
    BucketFileOptions,
    BucketWriter,
    ValidWriteIdList,
    WriterOptions,
    acid_state,
)
from ingest.acid.compaction.compact import (
    TEMP_PREFIX,
    compact_partition,
    compactor_snapshot,
    plan_compaction,
)
from ingest.acid.format.committed import committed_file_at
from ingest.acid.format.names import (
    encode_bucket_property,
    format_base,
    format_delta,
    is_compacted_base,
)
from ingest.acid.read.reader import read_table
from ingest.errors import CorruptFileError, NotEnoughHistoryError

FS = fsspec.filesystem("file")
BP0 = encode_bucket_property(0, 0)
BP1 = encode_bucket_property(1, 0)


def open_batch(directory: Path, first: int, rows: dict[int, range]) -> None:
    """A streaming transaction batch delta_first_last: every write id flushed, never closed."""
    path = f"{directory}/bucket_00000"
    for i, (write_id, ids) in enumerate(rows.items()):
        options = BucketFileOptions(write_id=write_id, row_schema=SIMPLE_SCHEMA)
        w = (BucketWriter.create(path, options) if i == 0
             else BucketWriter.open_append(path, options))
        w.write(simple_table(ids))
        w.flush()
        w.abandon()


def fingerprint(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def rows(root: Path, snapshot: ValidWriteIdList) -> list[tuple[object, ...]]:
    t = read_table(str(root), snapshot, with_row_id=True, row_schema=SIMPLE_SCHEMA)
    return sorted((r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"],
                   r["id"], r["value"]) for r in t.to_pylist())


@pytest.fixture
def table(tmp_path: Path) -> tuple[Path, ValidWriteIdList]:
    """base_1 0..99; delta_2 100..149; delta_3 aborted; delete_delta_4 (base rowIds 0..9 and
    delta_2 rowId 5); delta_5 in buckets 0 and 1; delta_6_8 a batch with 6 committed, 7 open;
    delta_9 committed; delete_delta_10 deletes from delta_9 and delta_5 bucket 1."""
    root = tmp_path / "t"
    write_rows(root / format_base(1), 1, range(100))
    write_rows(root / format_delta(2, 2), 2, range(100, 150))
    write_rows(root / format_delta(3, 3), 3, range(150, 200))
    delete_keys(root / format_delta(4, 4, delete=True),
           [(1, BP0, r) for r in range(10)] + [(2, BP0, 5)], write_id=4)
    write_rows(root / format_delta(5, 5), 5, range(200, 220))
    write_rows(root / format_delta(5, 5), 5, range(220, 230), bucket_id=1)
    open_batch(root / format_delta(6, 8, None), 6, {6: range(300, 310), 7: range(310, 320)})
    write_rows(root / format_delta(9, 9), 9, range(400, 410))
    delete_keys(root / format_delta(10, 10, delete=True), [(5, BP1, 3)], write_id=10, bucket_id=1)
    delete_keys(root / format_delta(10, 10, delete=True), [(9, BP0, 0)], write_id=10)
    return root, snap(10, (7,), (3,))


def test_compactor_snapshot_stops_below_the_lowest_open_write_id() -> None:
    c = compactor_snapshot(snap(20, (7, 12), (3, 9, 15)))
    assert (c.high_watermark, c.open_write_ids, c.aborted_write_ids) == (6, (), (3,))
    assert compactor_snapshot(snap(5, (), (2,))).high_watermark == 5


def test_plan_never_splits_an_open_batch(table: tuple[Path, ValidWriteIdList]) -> None:
    root, snapshot = table
    plan = plan_compaction(FS, str(root), snapshot, kind="major")
    assert plan is not None
    # Lowest open is 7, but delta_6_8 holds 7: the high watermark drops below the batch.
    assert plan.snapshot.high_watermark == 5
    assert plan.outputs == (format_base(5),)
    assert plan.inputs == (format_base(1), format_delta(2, 2), format_delta(4, 4, delete=True),
                           format_delta(5, 5))
    minor = plan_compaction(FS, str(root), snapshot, kind="minor")
    assert minor is not None
    assert minor.outputs == (format_delta(2, 5, None), format_delta(2, 5, None, delete=True))


@pytest.mark.parametrize("kinds", [("major",), ("minor",), ("minor", "major"),
                                   ("major", "minor")])
def test_same_rows_and_row_ids_after_compaction(
        table: tuple[Path, ValidWriteIdList], kinds: tuple[str, ...]) -> None:
    root, snapshot = table
    before = rows(root, snapshot)
    batch = fingerprint(root / format_delta(6, 8, None))
    for kind in kinds:
        result = compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA,
                                   kind=kind)  # type: ignore[arg-type]
        if result is None:
            continue
        assert rows(root, snapshot) == before
        state = acid_state(FS, str(root), snapshot)
        chosen = ([state.base.name] if state.base else []) + [d.name for d in state.deltas]
        for out in result.plan.outputs:
            assert out in chosen
    assert fingerprint(root / format_delta(6, 8, None)) == batch
    assert not [p for p in root.iterdir() if p.name.startswith(TEMP_PREFIX)]
    # After the open write id commits, its rows show through the compacted table.
    after_commit = snap(10, (), (3,))
    assert [r[3] for r in rows(root, after_commit) if r[0] == 7] == list(range(310, 320))


def test_major_output_is_a_compacted_base_of_insert_events(
        table: tuple[Path, ValidWriteIdList]) -> None:
    root, snapshot = table
    result = compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA, kind="major")
    assert result is not None and result.rows == 90 + 49 + 30
    base = root / format_base(5)
    assert is_compacted_base(FS, str(base))
    assert (base / "_orc_acid_version").read_bytes() == b"2"
    assert sorted(p.name for p in base.iterdir()) == [
        "_metadata_acid", "_orc_acid_version", "bucket_00000", "bucket_00001"]
    events = po.ORCFile(str(base / "bucket_00000")).read()
    assert set(events["operation"].to_pylist()) == {0}
    assert events["originalTransaction"].to_pylist() == events["currentTransaction"].to_pylist()
    keys = list(zip(*(events[c].to_pylist() for c in ("originalTransaction", "bucket", "rowId")),
                    strict=True))
    assert keys == sorted(keys)
    meta = po.ORCFile(str(base / "bucket_00000")).metadata
    assert meta[b"hive.acid.stats"] == f"{events.num_rows},0,0".encode()


def test_minor_copies_events_and_drops_aborted_ones(
        table: tuple[Path, ValidWriteIdList]) -> None:
    root, snapshot = table
    result = compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA, kind="minor")
    assert result is not None
    delta = po.ORCFile(str(root / format_delta(2, 5, None) / "bucket_00000")).read()
    assert sorted(set(delta["currentTransaction"].to_pylist())) == [2, 5]  # 3 aborted
    deletes = po.ORCFile(str(root / format_delta(2, 5, None, delete=True) / "bucket_00000")
                         ).read()
    assert set(deletes["operation"].to_pylist()) == {2}
    assert deletes.num_rows == 11
    assert not (root / format_delta(2, 5, None, delete=True) / "bucket_00001").exists()


def test_nothing_to_do_and_conflicts(table: tuple[Path, ValidWriteIdList]) -> None:
    root, snapshot = table
    assert compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA, dry_run=True
                             ).dry_run
    assert not (root / format_base(5)).exists()
    # A leftover of a crashed run is hidden and replaced.
    (root / f"{TEMP_PREFIX}{format_base(5)}").mkdir()
    (root / f"{TEMP_PREFIX}{format_base(5)}" / "bucket_00000").write_bytes(b"torn")
    compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA)
    assert compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA) is None
    assert not [p for p in root.iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_interleaved_keys_are_sorted(tmp_path: Path) -> None:
    """Delete events of later write ids naming older rows come out in key order."""
    root = tmp_path / "t"
    write_rows(root / format_delta(1, 1), 1, range(10))
    write_rows(root / format_delta(2, 2), 2, range(10, 20))
    delete_keys(root / format_delta(3, 3, delete=True), [(2, BP0, 1)], write_id=3)
    delete_keys(root / format_delta(4, 4, delete=True), [(1, BP0, 1)], write_id=4)
    snapshot = snap(4)
    before = rows(root, snapshot)
    compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA, kind="minor")
    assert rows(root, snapshot) == before
    deletes = po.ORCFile(str(root / format_delta(1, 4, None, delete=True) / "bucket_00000")
                         ).read()
    assert deletes["originalTransaction"].to_pylist() == [1, 2]


@pytest.mark.parametrize("kind", ["major", "minor"])
def test_all_types_in_stripes_encoded_in_parallel(tmp_path: Path, kind: str) -> None:
    """Every type, nulls in every column (nested structs too), stripes of > 8k rows whose
    row columns are encoded in parallel groups; small stripes cut by a small stripe size."""
    root = tmp_path / "t"
    data = [all_types_table(12_000, seed=k) for k in range(3)]
    schema = data[0].schema
    for k, table in enumerate(data):
        with BucketWriter.create(f"{root / format_delta(k + 1, k + 1)}/bucket_00000",
                                 BucketFileOptions(write_id=k + 1, row_schema=schema)) as w:
            w.write(table)
    write_deletes(f"{root / format_delta(4, 4, delete=True)}/bucket_00000", pa.table({
        "originalTransaction": [1, 2, 3], "bucket": [BP0] * 3, "rowId": [5, 6, 7]}),
        write_id=4, row_schema=schema)
    snapshot = snap(4)
    before = read_table(str(root), snapshot, with_row_id=True)
    for tuning in (WriterOptions(), WriterOptions(stripe_size_bytes=256 * 1024)):
        result = compact_partition(str(root), snapshot, row_schema=schema, kind=kind,
                                   tuning=tuning)  # type: ignore[arg-type]
        assert result is not None
        after = read_table(str(root), snapshot, with_row_id=True)
        assert after.sort_by("row__id").equals(before.sort_by("row__id"))
        for out in result.plan.outputs:
            for f in list((root / out).glob("bucket_*")):
                assert po.ORCFile(str(f)).read().num_rows > 0
            FS.rm(str(root / out), recursive=True)


def test_a_minor_compaction_cut_between_its_renames_is_rolled_forward(
        table: tuple[Path, ValidWriteIdList], monkeypatch: pytest.MonkeyPatch) -> None:
    root, snapshot = table
    before = rows(root, snapshot)
    real = FS.mv
    calls: list[str] = []

    def crash_after_first(src: str, dst: str, **kw: object) -> None:
        if calls:
            raise OSError("killed")
        calls.append(dst)
        real(src, dst, **kw)

    monkeypatch.setattr(FS, "mv", crash_after_first)
    with pytest.raises(OSError, match="killed"):
        compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA, kind="minor", fs=FS)
    monkeypatch.setattr(FS, "mv", real)
    assert (root / format_delta(2, 5, None)).exists()
    assert (root / f"{TEMP_PREFIX}{format_delta(2, 5, None, delete=True)}").exists()
    # The next compaction (of either kind) first finishes the pair.
    result = compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA, kind="major",
                               fs=FS)
    assert result is not None
    assert (root / format_delta(2, 5, None, delete=True)).exists()
    assert result.plan.inputs == (format_base(1), format_delta(2, 5, None, delete=True),
                                  format_delta(2, 5, None))
    assert rows(root, snapshot) == before


def test_major_keeps_the_synthetic_row_ids_of_original_files(tmp_path: Path) -> None:
    """A table converted from plain ORC: original files get Hive's synthetic ROW__IDs
    (write id 0, position in path order), which the base keeps; deletes of them apply."""
    root = tmp_path / "t"
    root.mkdir()
    po.write_table(simple_table(range(0, 10)), str(root / "000000_0"))
    po.write_table(simple_table(range(10, 15)), str(root / "000000_0_copy_1"))
    po.write_table(simple_table(range(15, 20)), str(root / "000001_0"))
    write_rows(root / format_delta(1, 1), 1, range(100, 105))
    delete_keys(root / format_delta(2, 2, delete=True), [(0, BP0, 3), (0, BP0, 12)], write_id=2)
    snapshot = snap(2)
    before = rows(root, snapshot)
    # Bucket 0's original files number their rows on: 000000_0_copy_1 starts at rowId 10.
    assert sorted(r[3] for r in before if r[0] == 0 and r[1] == BP0) == [
        i for i in range(15) if i not in (3, 12)]
    result = compact_partition(str(root), snapshot, row_schema=SIMPLE_SCHEMA, kind="major")
    assert result is not None and result.plan.outputs == (format_base(2),)
    assert result.plan.inputs[:3] == ("000000_0", "000000_0_copy_1", "000001_0")
    assert rows(root, snapshot) == before
    assert {r[0] for r in before} == {0, 1}
    assert len(before) == 25 - 2
    # Hive's rule: a snapshot older than a compacted base has not enough history.
    with pytest.raises(NotEnoughHistoryError):
        rows(root, snap(0))


class RottingDisk(fsspec.implementations.local.LocalFileSystem):
    """A local disk that hands back the first stripe of a hidden compaction output with one
    byte changed, as storage that corrupted it after the write would."""

    def cat_file(self, path: str, start: int | None = None, end: int | None = None,
                 **kwargs: object) -> bytes:
        data = super().cat_file(path, start=start, end=end, **kwargs)
        if f"/{TEMP_PREFIX}" in str(path) and start == 3 and data:
            return bytes([data[0] ^ 0xFF]) + data[1:]
        return data


@pytest.mark.parametrize("kind", ["major", "minor"])
def test_an_output_that_fails_its_check_is_never_renamed(tmp_path: Path, kind: str) -> None:
    """Outputs are checked before the renames: a stripe that no longer hashes to its
    checksum fails the compaction, its hidden output is removed and the inputs stay."""
    root = tmp_path / "t"
    for w in (1, 2, 3):
        write_rows(root / format_delta(w, w), w, range(w * 10, w * 10 + 10))
    delete_keys(root / format_delta(4, 4, delete=True), [(1, BP0, 0)], write_id=4)
    was = fingerprint(root)
    with pytest.raises(CorruptFileError, match="failed its check after writing: Checksum "
                       "mismatch") as info:
        compact_partition(str(root), snap(4), row_schema=SIMPLE_SCHEMA, kind=kind,
                          fs=RottingDisk())
    assert "nothing was renamed into place" in str(info.value)
    assert fingerprint(root) == was


def test_output_entries_are_made_when_the_output_is_checked(tmp_path: Path) -> None:
    """The result carries the outputs' manifest entries, under their final names relative
    to the table root, as the files are on disk after the renames."""
    root = tmp_path / "t"
    partition = root / "dt=1"
    for w in (1, 2):
        write_rows(partition / format_delta(w, w), w, range(w * 10, w * 10 + 10))
    result = compact_partition(str(partition), snap(2), row_schema=SIMPLE_SCHEMA,
                               root=str(root))
    assert result is not None
    (entry,) = result.output_files
    assert entry.path == f"dt=1/{format_base(2)}/bucket_00000"
    assert (entry.write_id, entry.rows) == (2, 20)
    assert committed_file_at(FS, str(root / entry.path), entry.path, write_id=2) == entry
