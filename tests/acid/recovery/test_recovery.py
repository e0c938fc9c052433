"""`recover_table`: every crash shape of a bucket file, dry runs, backups, live writers,
idempotence and the never-below-a-flush-length rule (docs/invariants.md, 5)."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pyarrow.orc as po
import pytest
from fsspec.implementations.local import LocalFileSystem
from support import SIMPLE_SCHEMA, simple_table

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList, read_events
from ingest.acid.format.side_file import encode_length, read_flush_lengths
from ingest.acid.read import tails as _recovery_tails
from ingest.acid.recovery.recover import recover_table
from ingest.orc import read_tail
from ingest.orc.proto_fields import Footer

DELTA = "delta_0000001_0000003"


def ids_of(path: str, fs: fsspec.AbstractFileSystem | None = None) -> list[int]:
    return [r["id"] for b in read_events(path, fs=fs) for r in b.column("row").to_pylist()]


def flushed_writer(path: str, flushes: int = 2, *,
                   fs: fsspec.AbstractFileSystem | None = None) -> BucketWriter:
    """A writer with `flushes` flushes of 10 rows (ids 0..10*flushes), left open."""
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA,
                                                    compression="zstd"), fs=fs)
    for i in range(flushes):
        w.write(simple_table(range(10 * i, 10 * i + 10)))
        w.flush()
    return w


def torn_stripes(w: BucketWriter, ids: range) -> None:
    """Crash after stripes: stripes on disk, no footer."""
    w.write(simple_table(ids))
    w._write_pending()
    w._file.flush()
    w.abandon()


def torn_footer(w: BucketWriter, ids: range) -> None:
    """Crash after the footer, before the side-file entry."""
    w.write(simple_table(ids))
    w._write_pending()
    w._write_tail()
    w._file.flush()
    w.abandon()


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return tmp_path / "t"


def bucket(table: Path) -> str:
    return str(table / DELTA / "bucket_00000")


def snapshot_bytes(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_healthy_table_unchanged(table: Path) -> None:
    with flushed_writer(bucket(table)):
        pass
    before = snapshot_bytes(table)
    report = recover_table(str(table))
    assert report.nothing_to_do and report.clean
    assert [f.action for f in report.files] == ["ok"]
    assert snapshot_bytes(table) == before


@pytest.mark.parametrize("tear", [torn_stripes, torn_footer])
def test_torn_tail_truncated_to_last_flush(table: Path, tmp_path: Path, tear: object) -> None:
    path = bucket(table)
    w = flushed_writer(path)
    flushed = w.flush()
    tear(w, range(100, 130))  # type: ignore[operator]
    size = Path(path).stat().st_size
    assert size > flushed
    cut = Path(path).read_bytes()[flushed:]
    report = recover_table(str(table), backup_dir=str(tmp_path / "bk"))
    (f,) = report.files
    assert (f.action, f.old_length, f.new_length) == ("truncated", size, flushed)
    assert f.backup_path == str(tmp_path / "bk" / DELTA / f"bucket_00000.{size}-{flushed}.cut")
    assert Path(f.backup_path).read_bytes() == cut
    assert (tmp_path / "bk" / DELTA / "bucket_00000_flush_length").exists()
    assert not Path(path + "_flush_length").exists()
    assert Path(path).stat().st_size == flushed
    assert ids_of(path) == list(range(20))
    assert po.ORCFile(path).nrows == 20
    again = recover_table(str(table))
    assert again.nothing_to_do and [x.action for x in again.files] == ["ok"]


def test_crash_after_side_file_keeps_everything(table: Path) -> None:
    path = bucket(table)
    w = flushed_writer(path, flushes=3)
    w.abandon()
    size = Path(path).stat().st_size
    (f,) = recover_table(str(table)).files
    assert (f.action, f.new_length) == ("side-file-removed", size)
    assert ids_of(path) == list(range(30))


def test_dry_run_changes_nothing(table: Path, tmp_path: Path) -> None:
    w = flushed_writer(bucket(table))
    torn_stripes(w, range(50, 60))
    before = snapshot_bytes(table)
    report = recover_table(str(table), dry_run=True, backup_dir=str(tmp_path / "bk"))
    assert [f.action for f in report.files] == ["truncated"]
    assert not report.clean and not report.nothing_to_do
    assert snapshot_bytes(table) == before
    assert not (tmp_path / "bk").exists()


def test_live_writer_left_alone(table: Path) -> None:
    path = bucket(table)
    w = flushed_writer(path)
    w.write(simple_table(range(100, 110)))
    w._write_pending()
    w._file.flush()
    before = snapshot_bytes(table)
    report = recover_table(str(table), live_files=lambda p: p == path)
    assert [f.action for f in report.files] == ["skipped"] and report.nothing_to_do
    assert snapshot_bytes(table) == before
    w.flush()  # the writer carries on as if nothing happened
    w.close()
    assert ids_of(path) == list(range(20)) + list(range(100, 110))


def test_never_flushed_file_removed(table: Path, tmp_path: Path) -> None:
    path = bucket(table)
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA))
    torn_stripes(w, range(10))
    size = Path(path).stat().st_size
    (f,) = recover_table(str(table), backup_dir=str(tmp_path / "bk")).files
    assert (f.action, f.old_length, f.new_length) == ("removed", size, 0)
    assert not Path(path).exists() and not Path(path + "_flush_length").exists()
    assert Path(f.backup_path or "").stat().st_size == size
    assert recover_table(str(table)).nothing_to_do


def test_crash_after_first_footer_removes_uncommitted_file(table: Path) -> None:
    path = bucket(table)
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA))
    torn_footer(w, range(10))  # side file holds only its initial 0: nothing was committed
    (f,) = recover_table(str(table)).files
    assert f.action == "removed"


def test_last_entry_past_end_goes_back(table: Path) -> None:
    path = bucket(table)
    w = flushed_writer(path, flushes=2)
    good = w.flush()
    w.abandon()
    with open(path + "_flush_length", "ab") as side:
        side.write(encode_length(good + 5000))  # storage lost the data this entry points at
    report = recover_table(str(table))
    (f,) = report.files
    assert f.action == "side-file-removed" and f.new_length == good
    assert f.skipped_lengths == (good + 5000,)
    assert report.warnings and "lost" in report.warnings[0]
    assert ids_of(path) == list(range(20))


def test_last_entry_not_a_footer_goes_back(table: Path) -> None:
    path = bucket(table)
    w = flushed_writer(path, flushes=2)
    good = w.flush()
    torn_stripes(w, range(100, 200))
    with open(path + "_flush_length", "ab") as side:
        side.write(encode_length(good + 10))  # inside the torn stripes
    (f,) = recover_table(str(table)).files
    assert (f.action, f.new_length, f.skipped_lengths) == ("truncated", good, (good + 10,))


def test_torn_side_file_entry_ignored(table: Path) -> None:
    path = bucket(table)
    w = flushed_writer(path, flushes=2)
    good = w.flush()
    torn_footer(w, range(100, 110))
    with open(path + "_flush_length", "ab") as side:
        side.write(b"\x00\x00\x01")
    (f,) = recover_table(str(table)).files
    assert (f.action, f.new_length) == ("truncated", good)


def test_no_usable_entry_but_recorded_is_unrecoverable(table: Path) -> None:
    path = bucket(table)
    w = flushed_writer(path, flushes=1)
    w.abandon()
    Path(path).write_bytes(b"ORC" + b"\x00" * 50)  # the data is gone
    before = snapshot_bytes(table)
    report = recover_table(str(table))
    (f,) = report.files
    assert f.action == "unrecoverable" and not report.clean
    assert snapshot_bytes(table) == before


def test_no_side_file_scans_back_for_footer(table: Path, tmp_path: Path) -> None:
    path = bucket(table)
    with flushed_writer(path, flushes=3):
        pass
    complete = Path(path).stat().st_size
    with open(path, "ab") as f:
        f.write(b"xxORCyy" * 100 + b"ORC\x05")  # false magics in the garbage
    (r,) = recover_table(str(table), backup_dir=str(tmp_path / "bk")).files
    assert (r.action, r.new_length) == ("truncated", complete)
    assert ids_of(path) == list(range(30))


def test_no_side_file_no_footer_removed(table: Path) -> None:
    path = Path(bucket(table))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"ORC" + b"junk" * 10)
    (r,) = recover_table(str(table)).files
    assert r.action == "removed" and not path.exists()


def test_reopened_file_never_cut_below_committed_length(table: Path) -> None:
    path = bucket(table)
    with flushed_writer(path, flushes=2):
        pass  # closed: no side file, 20 committed rows
    committed = Path(path).stat().st_size
    w = BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    torn_stripes(w, range(500, 520))
    (f,) = recover_table(str(table)).files
    assert f.flush_lengths == (committed,)
    assert (f.action, f.new_length) == ("truncated", committed)
    assert ids_of(path) == list(range(20))


def test_orphan_side_file_removed(table: Path) -> None:
    d = table / DELTA
    d.mkdir(parents=True)
    (d / "bucket_00001_flush_length").write_bytes(encode_length(0))
    (f,) = recover_table(str(table)).files
    assert f.action == "side-file-removed"
    assert not (d / "bucket_00001_flush_length").exists()


def test_aborted_directories_listed(table: Path) -> None:
    for name in ("delta_0000001_0000001_0000", "delta_0000002_0000003", "base_0000001",
                 "delta_0000004_0000004_0000"):
        (table / "p=1" / name).mkdir(parents=True)
    snap = ValidWriteIdList("default.t", 4, (), (2, 3, 4))
    report = recover_table(str(table), valid_write_ids=snap)
    assert report.aborted_directories == ("p=1/delta_0000002_0000003",
                                          "p=1/delta_0000004_0000004_0000")


def test_memory_filesystem(tmp_path: Path) -> None:
    fs = fsspec.filesystem("memory")
    root = f"/recovery-{tmp_path.name}"
    path = f"{root}/{DELTA}/bucket_00000"
    w = flushed_writer(path, fs=fs)
    good = w.flush()
    torn_stripes(w, range(100, 120))
    try:
        (f,) = recover_table(root, fs=fs).files
        assert (f.action, f.new_length) == ("truncated", good)
        assert fs.size(path) == good
        assert ids_of(path, fs) == list(range(20))
    finally:
        fs.rm(root, recursive=True)


def test_missing_table_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        recover_table(str(tmp_path / "nope"))


def test_crashed_file_is_recovered_without_the_full_check(
        table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A healthy last flush is checked against the flush before it, never in full: the cost
    stays one flush's worth however many flushes the file holds."""
    path = bucket(table)
    w = flushed_writer(path, flushes=30)
    flushed = w.flush()
    torn_stripes(w, range(1000, 1010))

    def full_check(*_args: object, **_kw: object) -> None:
        raise AssertionError("a healthy file needed the full check")

    monkeypatch.setattr(_recovery_tails, "full_check", full_check)
    (f,) = recover_table(str(table)).files
    assert (f.action, f.new_length) == ("truncated", flushed)
    assert ids_of(path) == list(range(300))


@pytest.mark.parametrize("torn", [False, True])
def test_last_footer_with_a_moved_earlier_stripe_goes_back(table: Path, torn: bool) -> None:
    """The last footer points an earlier stripe one byte off: it still parses, its stripes
    are in bounds and its own flush's stripes decode, but it disagrees with the footer before
    it, so recovery goes back to that one."""
    path = bucket(table)
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA,
                                                    compression="none"))
    for i in range(3):
        w.write(simple_table(range(10 * i, 10 * i + 10)))
        w.flush()
    lengths = [x for x in (read_flush_lengths(fsspec.filesystem("file"), path) or []) if x]
    if torn:
        torn_stripes(w, range(1000, 1010))
    else:
        w.abandon()
    last = read_tail(fsspec.filesystem("file"), path, lengths[-1], check=False)
    entry = last.footer.encoded_messages(Footer.STRIPES)[0]
    assert entry[:2] == b"\x08\x03"  # offset 3: right after the "ORC" header
    data = bytearray(Path(path).read_bytes())
    at = data.index(entry, last.start, lengths[-1])
    data[at + 1] = 4
    Path(path).write_bytes(bytes(data))
    (f,) = recover_table(str(table)).files
    assert (f.new_length, f.skipped_lengths) == (lengths[-2], (lengths[-1],))
    assert ids_of(path) == list(range(20))


def test_closed_file_is_checked_against_its_last_flush(
        table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a side file the footer before the last flush is found in the gap before the
    stripes written after it, so a healthy closed file is not checked in full either."""
    path = bucket(table)
    with flushed_writer(path, flushes=30):
        pass
    before = snapshot_bytes(table)

    def full_check(*_args: object, **_kw: object) -> None:
        raise AssertionError("a healthy file needed the full check")

    monkeypatch.setattr(_recovery_tails, "full_check", full_check)
    report = recover_table(str(table))
    assert [f.action for f in report.files] == ["ok"] and report.nothing_to_do
    assert snapshot_bytes(table) == before


class _ReadLog(LocalFileSystem):
    """A local filesystem that records where every read of a file starts."""

    reads: list[tuple[str, int, int | None]] = []

    def cat_file(self, path: str, start: int | None = None, end: int | None = None,
                 **kwargs: object) -> bytes:
        type(self).reads.append((self._strip_protocol(path), start or 0, end))
        return super().cat_file(path, start=start, end=end, **kwargs)


def test_looking_past_the_side_file_reads_only_past_it(
        table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding footers a side file does not record scans back from the end only as far as
    the side file's last length: a crashed file costs the same however large it is."""
    monkeypatch.setattr(_recovery_tails, "_SCAN_CHUNK", 4096)  # a small file, many chunks
    path = bucket(table)
    w = flushed_writer(path, flushes=40)
    flushed = (read_flush_lengths(fsspec.filesystem("file"), path) or [0])[-1]
    torn_stripes(w, range(1000, 1010))
    fs = _ReadLog(skip_instance_cache=True)
    _ReadLog.reads = []
    (f,) = recover_table(str(table), fs=fs, committed=lambda _w: True).files
    assert (f.action, f.new_length) == ("truncated", flushed)
    # Tails are read near their ends, and the header's magic at 0; nothing from the first
    # flushes' stripes.
    reads = [(start, end) for p, start, end in _ReadLog.reads if p == path]
    assert reads and all(start > flushed // 2 or (end is not None and end <= 16)
                         for start, end in reads), sorted(reads)
