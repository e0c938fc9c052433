"""The committed-file manifest seen from the command line (the two gaps the fault
suite found): a committed bucket file emptied (`truncate -s 0`), cut, or whose footer changed
in a way ORC still parses is named by `cat`, `verify`, `recover` and `delete`, with a non-zero
exit; a file the manifest does not list reads as before; a transaction batch's later, never
committed footer cannot change the committed rows read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest
from cli.test_recover_damaged import bucket, make_table
from support import run_cli as run

from ingest.acid import BucketFileOptions, BucketWriter, format_delta, write_acid_version_file
from ingest.acid.read.reader import read_table
from ingest.orc import read_tail
from ingest.orc.proto_fields import PostScript
from ingest.txn import Metastore, default_metastore_url

Capsys = pytest.CaptureFixture[str]
LOCAL = fsspec.filesystem("file")


def named_everywhere(table: Path, path: Path, kind: str, capsys: Capsys) -> None:
    """cat fails naming the file and pointing to verify; verify exits 1 with `kind`;
    recover exits 1 naming it and leaves its bytes as they are."""
    before = path.read_bytes() if path.exists() else None
    code, out, err = run(["cat", str(table)], capsys)
    assert code == 3 and out == "", err
    assert f"Cannot read bucket file {path}" in err and f"ingest verify {table}" in err
    code, out, _ = run(["verify", str(table)], capsys)
    assert code == 1 and f"{kind}: Bucket file {path} differs from its commit" in out
    assert "run `ingest recover" not in out
    code, out, err = run(["recover", str(table)], capsys)
    assert code == 1 and f"{path}: left untouched" in err, (out, err)
    assert (path.read_bytes() if path.exists() else None) == before


@pytest.mark.parametrize("cut", ["0", "half", "1 byte"])
def test_cut_committed_file_fails_every_command_naming_it(tmp_path: Path, capsys: Capsys,
                                                          cut: str) -> None:
    table = make_table(tmp_path, capsys, 3)
    path = bucket(table, 2)
    size = path.stat().st_size
    os.truncate(path, {"0": 0, "half": size // 2, "1 byte": size - 1}[cut])  # truncate -s ...
    named_everywhere(table, path, "empty-file" if cut == "0" else "short-file", capsys)
    code, out, err = run(["delete", str(table), "--where", "id < 10"], capsys)
    assert code == 3 and str(path) in err, (out, err)


def test_missing_committed_file_is_named(tmp_path: Path, capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 2)
    path = bucket(table, 1)
    path.unlink()
    named_everywhere(table, path, "missing-file", capsys)


def silent_footer_flip(table: Path, path: Path) -> tuple[int, int]:
    """An (offset, mask) in the file's ORC tail whose flip still decodes and changes the
    rows read, as ORC alone sees them (the reader without the manifest, exit 0)."""
    with Metastore.open(default_metastore_url(str(table)), read_only=True) as store:
        snapshot = store.snapshot(str(table))
    good = read_table(str(table), snapshot).to_pylist()
    data = path.read_bytes()
    tail = read_tail(LOCAL, str(path), len(data))
    postscript = len(data) - 1 - data[-1]
    footer = postscript - (tail.postscript.uint(PostScript.FOOTER_LENGTH) or 0)
    for offset in range(footer, postscript):
        for mask in (0x10, 0x01):
            damaged = bytearray(data)
            damaged[offset] ^= mask
            path.write_bytes(bytes(damaged))
            try:
                if read_table(str(table), snapshot).to_pylist() != good:
                    path.write_bytes(data)
                    return offset, mask
            except Exception:  # noqa: BLE001 - a flip that breaks decoding is not silent
                pass
    path.write_bytes(data)
    raise AssertionError(f"no flip in the tail of {path} changes rows silently")


def test_footer_flip_that_still_parses_is_detected(tmp_path: Path, capsys: Capsys) -> None:
    table = make_table(tmp_path, capsys, 3)
    path = bucket(table, 2)
    offset, mask = silent_footer_flip(table, path)
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))
    named_everywhere(table, path, "damaged-footer", capsys)
    _, _, err = run(["cat", str(table)], capsys)
    assert "hashes to" in err and "its footer changed after the commit" in err


def test_a_file_without_entry_reads_as_before(tmp_path: Path, capsys: Capsys) -> None:
    """Files no commit recorded (Hive's, adopted, an older metastore's) are not checked."""
    table = make_table(tmp_path, capsys, 2)
    with Metastore.open(default_metastore_url(str(table)), create=False) as store:
        assert store.forget_committed_files(
            "default.t", [f"{format_delta(2, 2, 0)}/bucket_00000"]) == 1
    os.truncate(bucket(table, 2), 0)
    code, out, err = run(["cat", str(table)], capsys)
    assert code == 0 and len(out.splitlines()) == 1000, err


def test_a_batch_files_uncommitted_footer_cannot_change_committed_rows(
        tmp_path: Path, capsys: Capsys) -> None:
    """Write ids 1-2 of a transaction batch commit (each recording the file at its flush
    length), write id 3 flushes and stays open. Every byte of write id 3's footer, flipped,
    leaves the committed rows exactly as they were: readers stop at the committed length."""
    table = make_table(tmp_path, capsys, 0)
    schema = pa.schema([("id", pa.int64()), ("value", pa.string())])
    with Metastore.open(default_metastore_url(str(table)), create=False) as store:
        txns = store.allocate_write_ids("default.t", 3, agent="test")
        directory = table / format_delta(1, 3, None)
        path = directory / "bucket_00000"
        for k, txn in enumerate(txns):
            ids = range(k * 100, (k + 1) * 100)
            w = (BucketWriter.open_append(str(path), BucketFileOptions(write_id=txn.write_id))
                 if path.exists() else BucketWriter.create(
                     str(path), BucketFileOptions(write_id=txn.write_id, row_schema=schema)))
            w.write(pa.table({"id": list(ids), "value": [f"v{i}" for i in ids]}, schema=schema))
            w.flush()
            w.abandon()
            if k < 2:
                store.commit(txn, files={"default.t": [
                    w.committed_file(f"{directory.name}/bucket_00000")]})
        write_acid_version_file(LOCAL, str(directory))
    data = path.read_bytes()
    start = read_tail(LOCAL, str(path), len(data)).start
    assert run(["verify", str(table)], capsys)[0] == 0
    for offset in range(start, len(data), 7):
        damaged = bytearray(data)
        damaged[offset] ^= 0x10
        path.write_bytes(bytes(damaged))
        code, out, err = run(["cat", str(table)], capsys)
        assert code == 0, err
        assert sorted(json.loads(line)["id"] for line in out.splitlines()) == list(range(200))
