"""The sink and the committed-file manifest: each micro-batch's commit records the files its
tasks wrote (both tables; a transaction batch's file at its flush length), and an aborted
micro-batch removes only what its tasks reported writing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import fsspec
import pytest
from spark.test_sink import PANDAS_WARNING, event, ids, kafka_batch, make_sink

from ingest.acid.format.committed import committed_file_at
from ingest.acid.read.reader import read_table
from ingest.errors import CorruptFileError
from ingest.spark.sink._batch import remove_staging_leftovers
from ingest.spark.sink._results import FileWritten
from ingest.spark.sink._undo import remove_written
from ingest.table import open_table
from ingest.table.core._committed import table_manifest
from ingest.table.maintain import verify_table
from ingest.txn import Metastore

pytestmark = pytest.mark.filterwarnings(PANDAS_WARNING)
LOCAL = fsspec.filesystem("file")


def test_abort_removes_only_the_files_its_tasks_reported(tmp_path: Path) -> None:
    root = tmp_path / "t"
    ours = root / "dt=1" / "delta_0000004_0000004_0000"
    shared = root / "dt=2" / "delta_0000004_0000004_0000"
    for d in (ours, shared):
        d.mkdir(parents=True)
        (d / "_orc_acid_version").write_text("2")
    (ours / "bucket_00000").write_bytes(b"published")
    (ours / "_tmp.bucket_00001.9").write_bytes(b"a dead attempt's staging file")
    (shared / "bucket_00000").write_bytes(b"ours too")
    (shared / "bucket_00007").write_bytes(b"not written by this micro-batch")
    reported = [FileWritten("table", str(d / "bucket_00000"), str(d / "_tmp.bucket_00000.3"),
                            1, 9, 9) for d in (ours, shared)]
    remove_written(LOCAL, str(root), 1, "delta_0000004_0000004_0000", reported)
    assert not ours.exists()  # only the marker and a hidden staging file were left
    assert sorted(p.name for p in shared.iterdir()) == ["_orc_acid_version", "bucket_00007"]


def test_staging_leftovers_of_every_reported_directory_go_and_nothing_else(
        tmp_path: Path) -> None:
    """After the commit, each directory a reported file is in loses its hidden staging
    files (a speculative attempt's, with their side files), and only those; a directory
    already gone is no error."""
    table, dead = tmp_path / "t" / "delta_0000004_0000004_0000", tmp_path / "d" / "delta_1_1_0"
    other = tmp_path / "t" / "delta_0000003_0000003_0000"
    for d in (table, dead, other):
        d.mkdir(parents=True)
        for name in ("bucket_00000", "_tmp.bucket_00001.9", "_tmp.bucket_00001.9_flush_length",
                     "_orc_acid_version", "_tmp.other"):
            (d / name).write_bytes(b"x")
    results = [FileWritten("table", str(table / "bucket_00000"), None, 1, 1, 1),
               FileWritten("dead_letter", str(dead / "bucket_00000"), None, 1, 1, 1),
               FileWritten("table", str(tmp_path / "gone" / "bucket_00000"), None, 1, 1, 1)]
    remove_staging_leftovers(results, fs=LOCAL, dl_fs=LOCAL)  # none staged: nothing to do
    assert len(list(table.iterdir())) == 5
    remove_staging_leftovers(results, fs=LOCAL, dl_fs=LOCAL, speculation=True)
    for d in (table, dead):
        assert sorted(p.name for p in d.iterdir()) == [
            "_orc_acid_version", "_tmp.other", "bucket_00000"], d
    assert len(list(other.iterdir())) == 5  # not a directory of the micro-batch


def _check_entries(location: str, url: str) -> dict[str, int]:
    """Every manifest entry matches its file at the committed length; verify passes.
    Returns {relative path: committed length}."""
    with Metastore.open(url, read_only=True) as store:
        table = store.get_table(location)
        manifest = table_manifest(store, table)
    assert len(manifest)
    for rel, entry in manifest.entries.items():
        found = committed_file_at(LOCAL, manifest.absolute(rel), rel, write_id=entry.write_id,
                                  length=entry.length)
        assert found == entry, rel
    assert verify_table(open_table(location)).ok
    return {rel: e.length for rel, e in manifest.entries.items()}


@pytest.mark.spark
@pytest.mark.slow
def test_every_commit_records_its_files(spark: Any, warehouse: Path) -> None:
    sink = make_sink(warehouse, flush_rows=7)
    with sink:
        sink(kafka_batch(spark, [event(i) for i in range(30)] + [b"not json"]), 0)
    _check_entries(sink.table_location, sink.metastore_url)
    _check_entries(sink.dead_letter_location, sink.metastore_url)

    batch = make_sink(warehouse / "k3", partition_by=None, txns_per_delta=3, flush_rows=8,
                      on_new_field="ignore")  # the events' dt is dropped
    root = Path(batch.table_location[len("file://"):])
    with batch:
        batch(kafka_batch(spark, [event(i) for i in range(20)]), 0)
        first = _check_entries(batch.table_location, batch.metastore_url)
        batch(kafka_batch(spark, [event(i) for i in range(20, 40)], start=10), 1)
        second = _check_entries(batch.table_location, batch.metastore_url)
        # The shared files grew, and their entries with them.
        assert first.keys() == second.keys() and all(second[k] > first[k] for k in first)
    with Metastore.open(batch.metastore_url, read_only=True) as store:
        snapshot = store.snapshot(batch.table_location)
        manifest = table_manifest(store, store.get_table(batch.table_location))
    assert ids(read_table(str(root), snapshot, committed=manifest)) == list(range(40))
    damaged = manifest.absolute(sorted(manifest.entries)[0])
    os.truncate(damaged, 0)
    with pytest.raises(CorruptFileError, match="empty") as info:
        read_table(str(root), snapshot, committed=manifest)
    assert info.value.path == damaged
