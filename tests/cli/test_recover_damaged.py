"""Issue 11, items 2, 3 and 5, reproduced as written: `recover` never removes or cuts bytes
that hold committed rows, keeps a backup of what it removes by default, and exits 1 naming
what it cannot repair; a side file cut short hides no committed row; verify, cat and recover
give one diagnosis."""

from __future__ import annotations

import json
import os
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest
from support import run_cli as run

from ingest.acid import BucketFileOptions, BucketWriter, format_delta, write_acid_version_file
from ingest.acid.recovery.recover import BACKUP_DIR_NAME
from ingest.txn import Metastore, default_metastore_url

Capsys = pytest.CaptureFixture[str]
LOCAL = fsspec.filesystem("file")


def make_table(tmp_path: Path, capsys: Capsys, loads: int, rows: int = 1000) -> Path:
    """`ingest create` and `loads` times `ingest load` of `rows` rows each."""
    table = tmp_path / "T"
    code, _, err = run(["create", str(table), "--schema", "id BIGINT, value STRING"], capsys)
    assert code == 0, err
    for k in range(loads):
        data = tmp_path / f"in{k}.jsonl"
        data.write_text("".join(json.dumps({"id": k * rows + i, "value": f"value-{i}"}) + "\n"
                                for i in range(rows)))
        code, _, err = run(["load", str(table), "--input", str(data), "-q"], capsys)
        assert code == 0, err
    return table


def bucket(table: Path, write_id: int) -> Path:
    return table / format_delta(write_id, write_id, 0) / "bucket_00000"


def cat_rows(table: Path, capsys: Capsys) -> tuple[int, int, str]:
    code, out, err = run(["cat", str(table)], capsys)
    return code, len(out.splitlines()), err


def backups(table: Path) -> list[Path]:
    return sorted(p for p in (table / BACKUP_DIR_NAME).rglob("*") if p.is_file())


# ---- item 2: recover never deletes or cuts a committed file -------------------------------

def check_untouched_and_named(table: Path, path: Path, before: bytes, capsys: Capsys) -> None:
    code, out, _ = run(["verify", str(table)], capsys)
    assert code == 1 and "unrecoverable-file" in out and str(path) in out
    assert "run `ingest recover" not in out  # recover cannot repair it: not sent there
    for _ in range(2):  # and the same again: nothing changes
        code, out, err = run(["recover", str(table)], capsys)
        assert code == 1, (out, err)
        assert "unrecoverable" in out and str(path) in err and "left untouched" in err
        assert path.read_bytes() == before
    assert not (table / BACKUP_DIR_NAME).exists()  # nothing removed, nothing to keep
    code, rows, err = cat_rows(table, capsys)
    assert code != 0 and str(path) in err


def test_truncated_committed_file_is_kept_and_named(tmp_path: Path, capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 3)
    path = bucket(table, 2)
    os.truncate(path, 2700)  # truncate -s 2700 T/delta_0000002_0000002_0000/bucket_00000
    check_untouched_and_named(table, path, path.read_bytes(), capsys)


def test_committed_file_with_a_damaged_footer_is_kept_and_named(tmp_path: Path,
                                                                capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 3)
    path = bucket(table, 2)
    data = bytearray(path.read_bytes())
    footer_end = len(data) - 1 - data[-1]  # before the postscript
    for offset in (footer_end - 30, footer_end - 31, footer_end - 32):
        data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    check_untouched_and_named(table, path, bytes(data), capsys)


def closed_batch_file(table: Path, flushes: int, rows: int) -> tuple[Path, list[int]]:
    """A committed file written in `flushes` flushes, then closed (no side file left): its
    intermediate footers lie between its stripes. Returns it and the flush lengths."""
    with Metastore.open(default_metastore_url(str(table)), create=False) as store:
        (txn,) = store.allocate_write_ids("default.t", 1)
        path = table / format_delta(txn.write_id, txn.write_id, 0) / "bucket_00000"
        schema = pa.schema([("id", pa.int64()), ("value", pa.string())])
        w = BucketWriter.create(str(path), BucketFileOptions(write_id=txn.write_id,
                                                             row_schema=schema))
        lengths = []
        for k in range(flushes):
            ids = range(k * rows, (k + 1) * rows)
            w.write(pa.table({"id": list(ids), "value": [f"v{i}" for i in ids]}, schema=schema))
            lengths.append(w.flush())
        w.close()
        write_acid_version_file(LOCAL, str(path.parent))
        store.commit(txn)
    return path, lengths


def test_cut_committed_file_with_earlier_footers_is_kept_and_named(
        tmp_path: Path, capsys: Capsys) -> None:
    """Cutting back to the last intermediate footer (as `orcfiledump --recover` does) would
    make the file read without the rows past it, exit 0, for ever: it is left and named."""
    table = make_table(tmp_path, capsys, 1)
    path, lengths = closed_batch_file(table, 3, 300)
    os.truncate(path, path.stat().st_size - 10)  # the final tail is gone, stripes intact
    code, out, err = run(["recover", str(table)], capsys)
    assert code == 1, (out, err)
    assert f"{path}: left untouched" in err
    assert f"{600:,} rows readable at its last complete footer" in err
    check_untouched_and_named(table, path, path.read_bytes(), capsys)


def test_junk_after_a_committed_file_is_not_cut(tmp_path: Path, capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 1)
    path = bucket(table, 1)
    with open(path, "ab") as f:
        f.write(b"torn stripe bytes")
    check_untouched_and_named(table, path, path.read_bytes(), capsys)


def test_no_backup_keeps_nothing(tmp_path: Path, capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 0)
    open_batch(table, 2, 100)
    code, _, err = run(["recover", str(table), "--no-backup", "--txn-timeout-s", "0"], capsys)
    assert code == 0, err
    assert not (table / BACKUP_DIR_NAME).exists()
    code, _, err = run(["recover", str(table), "--no-backup", "--backup-dir", "x"], capsys)
    assert code == 2 and "exclude each other" in err


def test_backup_by_default(tmp_path: Path, capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 0)
    path = open_batch(table, 2, 100)
    with open(path, "ab") as f:
        f.write(b"torn stripe of the open write id")
    before = path.read_bytes()
    side = Path(f"{path}_flush_length").read_bytes()
    code, _, err = run(["recover", str(table), "--txn-timeout-s", "0"], capsys)
    assert code == 0, err
    kept = {p.name: p.read_bytes() for p in backups(table)}
    (cut,) = [name for name in kept if name.endswith(".cut")]
    length = path.stat().st_size
    assert cut == f"bucket_00000.{len(before)}-{length}.cut"
    assert before[:length] + kept[cut] == before
    assert kept["bucket_00000_flush_length"] == side


# ---- item 3: a short side file hides no committed row, and recover cuts none ---------------

def open_batch(table: Path, committed: int, rows: int) -> Path:
    """A transaction batch of committed + 1 write ids, each flushing `rows` rows into one
    bucket file; all but the last committed, the last left open with its side file."""
    with Metastore.open(default_metastore_url(str(table)), create=False) as store:
        txns = store.allocate_write_ids("default.t", committed + 1, agent="test")
        directory = table / format_delta(txns[0].write_id, txns[-1].write_id, None)
        path = directory / "bucket_00000"
        schema = pa.schema([("id", pa.int64()), ("value", pa.string())])
        for k, txn in enumerate(txns):
            ids = range(k * rows, (k + 1) * rows)
            data = pa.table({"id": list(ids), "value": [f"v{i}" for i in ids]}, schema=schema)
            w = (BucketWriter.open_append(str(path), BucketFileOptions(write_id=txn.write_id))
                 if path.exists() else
                 BucketWriter.create(str(path), BucketFileOptions(write_id=txn.write_id,
                                                                  row_schema=schema)))
            w.write(data)
            w.flush()
            w.abandon()
            if k < committed:
                store.commit(txn)
        write_acid_version_file(LOCAL, str(directory))
    return path


def test_short_side_file_hides_no_committed_row(tmp_path: Path, capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 0)
    path = open_batch(table, 5, 200)
    side = Path(f"{path}_flush_length")
    before = path.read_bytes()
    os.truncate(side, 24)  # truncate -s 24 bucket_00000_flush_length
    code, rows, err = cat_rows(table, capsys)
    assert code == 0 and rows == 1000, err
    assert "Warning:" in err and str(path) in err and "side file" in err
    code, out, err = run(["recover", str(table), "--txn-timeout-s", "0"], capsys)
    assert code == 0, (out, err)
    assert "side file rebuilt" in out
    code, rows, err = cat_rows(table, capsys)
    assert code == 0 and rows == 1000 and "Warning" not in err, err
    code, out, err = run(["verify", str(table)], capsys)
    assert code == 0, out
    # Nothing was cut (the aborted write id's complete flush stays; readers drop its rows);
    # the side file went to the backup.
    assert path.read_bytes() == before
    assert [p.name for p in backups(table)] == ["bucket_00000_flush_length"]


def test_side_file_holding_only_zero_keeps_committed_footers(tmp_path: Path,
                                                            capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 0)
    path = open_batch(table, 3, 100)
    os.truncate(f"{path}_flush_length", 8)
    code, out, err = run(["recover", str(table), "--txn-timeout-s", "0"], capsys)
    assert code == 0, (out, err)
    assert path.exists()
    code, rows, err = cat_rows(table, capsys)
    assert code == 0 and rows == 300, err


# ---- item 5: one diagnosis ----------------------------------------------------------------

def test_damaged_stripe_is_named_the_same_way_everywhere(tmp_path: Path,
                                                         capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 1, rows=2100)
    path = bucket(table, 1)
    data = bytearray(path.read_bytes())
    data[4500] ^= 0xFF  # inside a stripe: its footer is sound
    path.write_bytes(bytes(data))
    code, rows, err = cat_rows(table, capsys)
    assert code != 0 and str(path) in err
    assert "run `ingest recover" not in err and "damaged inside its stripes" in err
    code, out, _ = run(["verify", str(table)], capsys)
    assert code == 1 and str(path) in out and "run `ingest recover" not in out
    code, out, err = run(["recover", str(table)], capsys)
    assert code == 1 and str(path) in err and "unrecoverable" in out
    assert path.read_bytes() == bytes(data)


def test_garbage_side_file_beside_a_committed_file(tmp_path: Path, capsys: Capsys) -> None:
    """A side file whose lengths end in no footer, beside a complete committed file: readers
    name the file and send the user to recover, which removes the side file only."""
    table = make_table(tmp_path, capsys, 2)
    path = bucket(table, 2)
    before = path.read_bytes()
    Path(f"{path}_flush_length").write_bytes((0).to_bytes(8, "big") + (100).to_bytes(8, "big"))
    code, rows, err = cat_rows(table, capsys)
    assert code != 0 and str(path) in err
    code, out, _ = run(["verify", str(table)], capsys)
    assert code == 1 and "needs-recovery" in out and str(path) in out
    code, out, err = run(["recover", str(table)], capsys)
    assert code == 0 and "side-file-removed" in out, (out, err)
    assert path.read_bytes() == before and not Path(f"{path}_flush_length").exists()
    code, rows, err = cat_rows(table, capsys)
    assert code == 0 and rows == 2000 and "Warning" not in err


def test_stray_directory_recover_names_it(tmp_path: Path, capsys: Capsys) -> None:
    """`mkdir T/delta_abc_def` breaks cat; recover cannot repair it, so it says so, exit 1."""
    table = make_table(tmp_path, capsys, 1)
    (table / "delta_abc_def").mkdir()
    code, _, err = cat_rows(table, capsys)
    assert code != 0 and "delta_abc_def" in err and "run `ingest recover" not in err
    code, out, err = run(["recover", str(table)], capsys)
    assert code == 1 and f"{table}/delta_abc_def" in err, (out, err)
    assert (table / "delta_abc_def").is_dir()


def test_verify_names_a_short_side_file_of_an_open_batch(tmp_path: Path,
                                                         capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 0)
    path = open_batch(table, 5, 200)
    os.truncate(f"{path}_flush_length", 24)
    code, out, _ = run(["verify", str(table)], capsys)
    assert code == 1 and "short-side-file" in out and str(path) in out
