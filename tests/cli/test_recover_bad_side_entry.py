"""Issue 19 §6 item 9: a bad last side-file entry (past the end of the file, or at no
footer) beside a committed file: `ingest recover` goes back to the last complete footer when
the committed-file manifest shows every committed byte lies below it, and only then."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import pytest
from support import SIMPLE_SCHEMA, cat_ids, simple_table
from support import run_cli as run

from ingest.acid import BucketFileOptions, BucketWriter, format_delta, write_acid_version_file
from ingest.acid.format.committed import committed_file_at
from ingest.acid.format.side_file import encode_length
from ingest.txn import Metastore, default_metastore_url

Capsys = pytest.CaptureFixture[str]
LOCAL = fsspec.filesystem("file")


def flushed_and_committed(tmp_path: Path, capsys: Capsys, *, manifest: bool = True
                          ) -> tuple[Path, Path, int, BucketWriter]:
    """A table whose write id 1 wrote 20 rows in two flushes of a file kept open (its side
    file stays), committed with the file's manifest entry at the second flush unless
    `manifest` is False. Returns (table, file, committed length, the open writer)."""
    table = tmp_path / "T"
    code, _, err = run(["create", str(table), "--schema", "id BIGINT, value STRING"], capsys)
    assert code == 0, err
    with Metastore.open(default_metastore_url(str(table))) as store:
        txn = store.open_transaction("default.T", agent="test")
        directory = table / format_delta(txn.write_id, txn.write_id, 0)
        directory.mkdir()
        write_acid_version_file(LOCAL, str(directory))
        path = directory / "bucket_00000"
        w = BucketWriter.create(str(path), BucketFileOptions(write_id=txn.write_id,
                                                             row_schema=SIMPLE_SCHEMA))
        for i in range(2):
            w.write(simple_table(range(10 * i, 10 * i + 10)))
            length = w.flush()
        entry = committed_file_at(LOCAL, str(path), f"{directory.name}/bucket_00000",
                                  write_id=txn.write_id, length=length)
        store.commit(txn, files={"default.T": [entry]} if manifest else None)
    return table, path, length, w


def append_entry(path: Path, length: int) -> None:
    with open(f"{path}_flush_length", "ab") as side:
        side.write(encode_length(length))


def test_an_entry_past_the_file_goes_back_to_the_last_complete_footer(
        tmp_path: Path, capsys: Capsys) -> None:
    table, path, committed, w = flushed_and_committed(tmp_path, capsys)
    w.abandon()
    append_entry(path, committed + 5000)  # a length the file never reached
    code, out, err = run(["recover", str(table), "--json"], capsys)
    assert code == 0, (out, err)
    (f,) = json.loads(out)["files"]
    assert (f["action"], f["new_length"]) == ("side-file-removed", committed), f
    assert f["skipped_lengths"] == [committed + 5000]
    assert "the committed length" in f["reason"], f
    assert not Path(f"{path}_flush_length").exists()
    assert cat_ids(table, capsys) == list(range(20))
    code, out, err = run(["verify", str(table)], capsys)
    assert code == 0, (out, err)
    code, out, err = run(["recover", str(table), "--json"], capsys)
    assert code == 0 and all(f["action"] == "ok" for f in json.loads(out)["files"])


def test_an_entry_at_no_footer_goes_back_and_cuts_only_uncommitted_bytes(
        tmp_path: Path, capsys: Capsys) -> None:
    table, path, committed, w = flushed_and_committed(tmp_path, capsys)
    # A third flush of the same writer died after its stripes: bytes past the committed
    # length, and an entry inside them that ends in no footer.
    w.write(simple_table(range(100, 200)))
    w._write_pending()
    w._file.flush()
    w.abandon()
    size = path.stat().st_size
    append_entry(path, committed + 10)
    code, out, err = run(["recover", str(table), "--json"], capsys)
    assert code == 0, (out, err)
    (f,) = json.loads(out)["files"]
    assert (f["action"], f["old_length"], f["new_length"]) == ("truncated", size, committed), f
    assert path.stat().st_size == committed
    assert cat_ids(table, capsys) == list(range(20))
    code, out, err = run(["verify", str(table)], capsys)
    assert code == 0, (out, err)


def test_without_a_manifest_entry_the_file_stays_unrecoverable(
        tmp_path: Path, capsys: Capsys) -> None:
    # Nothing says which flush lengths committed: the lost one might have (invariant 7).
    table, path, committed, w = flushed_and_committed(tmp_path, capsys, manifest=False)
    w.abandon()
    append_entry(path, committed + 5000)
    before = path.read_bytes()
    code, out, err = run(["recover", str(table), "--json"], capsys)
    assert code == 1, (out, err)
    (f,) = json.loads(out)["files"]
    assert f["action"] == "unrecoverable" and "left untouched" in f["reason"]
    assert path.read_bytes() == before and Path(f"{path}_flush_length").exists()
