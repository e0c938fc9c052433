"""ingest.table.maintain.clean: obsolete, aborted and leftover directories go only when no
reader can use them; reads are the same before and after; a registered reader in another
process holds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest
from support import SIMPLE_SCHEMA, visible, write_rows

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.compaction.cleaning import Candidate, plan_cleaning, remove_candidate
from ingest.acid.compaction.compact import TEMP_PREFIX
from ingest.acid.format.names import format_base, format_delta
from ingest.errors import ConfigError
from ingest.table import open_table
from ingest.table.maintain import clean, compact
from ingest.table.maintain.verify import verify_table
from ingest.table.write import alter_table, create_table, delete, load
from ingest.txn import Metastore, default_metastore_url

DDL = "id BIGINT, value STRING, dt STRING"
DT = "dt=2026-01-01"


def rows(ids: range, dt: str = "2026-01-01") -> pa.Table:
    return pa.table({"id": list(ids), "value": [f"v{i}" for i in ids], "dt": [dt] * len(ids)})


def entries(location: str, partition: str = DT) -> list[str]:
    return sorted(os.listdir(f"{location}/{partition}"))


def store_of(location: str) -> Metastore:
    return Metastore.open(default_metastore_url(location), create=False)


def aborted_write(location: str, ids: range) -> str:
    """A write that aborted after writing its delta (a crashed load whose cleanup never ran)."""
    with store_of(location) as store:
        txn = store.open_transaction(location)
        directory = f"{location}/{DT}/{format_delta(txn.write_id, txn.write_id, 0)}"
        write_rows(directory, txn.write_id, ids)
        store.abort(txn)
    return directory.rsplit("/", 1)[-1]


@pytest.fixture
def location(tmp_path: Path) -> str:
    """Write ids 1-3 loads, 4 aborted (its delta left behind), 5 a delete, 6 a load into a
    second partition."""
    loc = str(tmp_path / "wh" / "events")
    create_table(loc, DDL, partitioned_by=["dt"])
    for i in range(3):
        load(open_table(loc), rows(range(i * 10, i * 10 + 10)))
    aborted_write(loc, range(900, 905))
    delete(open_table(loc), "id < 3")
    load(open_table(loc), rows(range(100, 110), "2026-01-02"))
    return loc


def test_minor_then_major_cleaning_keeps_every_visible_row(location: str) -> None:
    before = visible(location)
    aborted = format_delta(4, 4, 0)
    compact(open_table(location), kind="minor")
    report = clean(open_table(location), retention_s=0)
    first = {p.partition: p for p in report.partitions}[DT]
    assert {(r.name, r.kind, r.covered_by) for r in first.removed} == {
        (format_delta(1, 1, 0), "obsolete", format_delta(1, 6, None)),
        (format_delta(2, 2, 0), "obsolete", format_delta(1, 6, None)),
        (format_delta(3, 3, 0), "obsolete", format_delta(1, 6, None)),
        (format_delta(5, 5, 0, delete=True), "obsolete", format_delta(1, 6, None, delete=True)),
        (aborted, "aborted", None),
    }
    assert report.files == first.files == 9 and report.size_bytes > 0
    assert entries(location) == [format_delta(1, 6, None, delete=True), format_delta(1, 6, None)]
    assert visible(location) == before

    compact(open_table(location), kind="major")
    report = clean(open_table(location), retention_s=0)
    assert entries(location) == [format_base(6)]
    assert entries(location, "dt=2026-01-02") == [format_base(6)]
    assert report.directories == 3  # the minor pair, and dt=2026-01-02's delta
    assert visible(location) == before
    assert verify_table(open_table(location)).problems == ()
    # Nothing left to do: a second run removes nothing.
    assert clean(open_table(location), retention_s=0).directories == 0


def test_dry_run_changes_nothing(location: str) -> None:
    compact(open_table(location), kind="major")
    tree = {p: p.stat().st_mtime_ns for p in Path(location).rglob("*")}
    report = clean(open_table(location), retention_s=0, dry_run=True)
    assert report.dry_run and report.directories == 6
    assert {p: p.stat().st_mtime_ns for p in Path(location).rglob("*")} == tree
    assert clean(open_table(location), retention_s=0).directories == 6


def test_retention_from_the_table_property_and_per_run(location: str) -> None:
    before = visible(location)
    compact(open_table(location), kind="major")
    report = clean(open_table(location))  # default 300 s: the base is seconds old
    assert report.retention_s == 300 and report.directories == 0
    kept = {k.name: k.reason for p in report.partitions for k in p.kept}
    assert "within the retention time" in kept[format_delta(1, 1, 0)]
    # The aborted delta was written seconds ago too.
    assert "within the retention time" in kept[format_delta(4, 4, 0)]
    alter_table(open_table(location), properties={"ingest.cleaner.retention.seconds": "3600"})
    assert clean(open_table(location), dry_run=True).retention_s == 3600
    alter_table(open_table(location), properties={"ingest.cleaner.retention.seconds": "0"})
    assert clean(open_table(location)).directories == 6
    assert visible(location) == before
    # A negative run value is refused before anything happens.
    with pytest.raises(ConfigError, match="at least 0"):
        clean(open_table(location), retention_s=-1)


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])
def test_retention_property_is_checked_at_create_and_alter(tmp_path: Path, value: str) -> None:
    loc = str(tmp_path / "wh" / "events")
    with pytest.raises(ConfigError, match="not a number of seconds"):
        create_table(loc, DDL, properties={"ingest.cleaner.retention.seconds": value})
    create_table(loc, DDL, properties={"ingest.cleaner.retention.seconds": "60"})
    with pytest.raises(ConfigError, match="not a number of seconds"):
        alter_table(open_table(loc), properties={"ingest.cleaner.retention.seconds": value})
    with pytest.raises(ConfigError, match="reserved"):
        alter_table(open_table(loc), properties={"ingest.cleaner.other": "1"})


def test_retention_counts_from_when_the_output_was_renamed_into_place(location: str) -> None:
    before = visible(location)
    compact(open_table(location), kind="major", partitions=[DT])
    renamed = time.time()
    report = clean(open_table(location), retention_s=2, partitions=[DT])
    kept = {k.name: k.reason for p in report.partitions for k in p.kept}
    assert "s left of 2 s" in kept[format_delta(1, 1, 0)]
    deadline = time.monotonic() + 30
    while format_delta(1, 1, 0) in entries(location):
        assert time.monotonic() < deadline, "the retention never ran out"
        clean(open_table(location), retention_s=2, partitions=[DT])
        time.sleep(0.2)
    assert time.time() - renamed >= 2
    assert entries(location) == [format_base(6)]
    assert visible(location) == before


def test_an_open_batch_is_never_removed_even_when_every_write_id_aborted(location: str) -> None:
    with store_of(location) as store:
        batch = store.allocate_write_ids(location, 2)
        name = format_delta(batch[0].write_id, batch[1].write_id, None)
        writer = BucketWriter.create(f"{location}/{DT}/{name}/bucket_00000", BucketFileOptions(
            write_id=batch[0].write_id, row_schema=SIMPLE_SCHEMA))
        writer.write(pa.table({"id": [1], "value": ["x"]}))
        writer.flush()
        writer.abandon()  # the writer died: its side file stays
        for txn in batch:
            store.abort(txn)
    report = clean(open_table(location), retention_s=0)
    kept = {k.name: k.reason for p in report.partitions for k in p.kept}
    assert "side file" in kept[name]
    assert name in entries(location)
    assert format_delta(4, 4, 0) not in entries(location)  # the other aborted delta went


def test_leftover_compaction_output_goes_after_the_retention(location: str) -> None:
    stale = Path(location) / DT / f"{TEMP_PREFIX}{format_base(3)}"
    fresh = Path(location) / DT / f"{TEMP_PREFIX}{format_base(5)}"
    for d in (stale, fresh):
        write_rows(d, 3, range(5))
    old = time.time() - 3600
    for p in [*stale.iterdir(), stale]:
        os.utime(p, (old, old))
    aborted = Path(location) / DT / format_delta(4, 4, 0)
    for p in [*aborted.iterdir(), aborted]:
        os.utime(p, (old, old))
    report = clean(open_table(location), retention_s=120)
    removed = {r.name: r.kind for p in report.partitions for r in p.removed}
    assert removed == {stale.name: "temporary"}  # the aborted txn ended seconds ago
    kept = {k.name: k.reason for p in report.partitions for k in p.kept}
    assert "retention" in kept[fresh.name] and "retention" in kept[aborted.name]
    assert not stale.exists() and fresh.exists()


def test_minor_compaction_interrupted_between_renames_keeps_the_delete_deltas(
        location: str) -> None:
    before = visible(location)
    compact(open_table(location), kind="minor")
    # The crash window: the insert delta is in place, the delete delta still hidden, and
    # neither in the manifest (outputs are recorded after the renames).
    part = Path(location) / DT
    hidden = part / f"{TEMP_PREFIX}{format_delta(1, 6, None, delete=True)}"
    (part / format_delta(1, 6, None, delete=True)).rename(hidden)
    with store_of(location) as store:
        store.forget_committed_files(location, [
            f"{DT}/{name}/bucket_00000" for name in (format_delta(1, 6, None),
                                                    format_delta(1, 6, None, delete=True))])
    report = clean(open_table(location), retention_s=0)
    removed = {r.name for p in report.partitions for r in p.removed}
    kept = {k.name: k.reason for p in report.partitions for k in p.kept}
    # Readers skip the half-renamed delta_1_6, so the range's inputs are still chosen.
    assert not removed & {format_delta(5, 5, 0, delete=True), format_delta(1, 1, 0)}
    assert "ingest compact" in kept[hidden.name]
    assert hidden.exists() and (part / format_delta(5, 5, 0, delete=True)).exists()
    compact(open_table(location), kind="minor")  # rolls the rename forward
    assert clean(open_table(location), retention_s=0).directories >= 1
    assert entries(location) == [format_delta(1, 6, None, delete=True), format_delta(1, 6, None)]
    assert visible(location) == before


def test_a_partly_removed_obsolete_directory_is_still_skipped_and_finished(
        location: str) -> None:
    before = visible(location)
    compact(open_table(location), kind="major")
    with store_of(location) as store:
        snapshot = store.snapshot(location)
    plan = plan_cleaning(fsspec.filesystem("file"), f"{location}/{DT}", snapshot)
    victim: Candidate = next(c for c in plan.candidates if c.name == format_delta(1, 1, 0))
    data = [f for f in victim.files if "bucket_" in f[0]]
    # What a crash after the first file leaves: the data file gone, the markers still there.
    os.remove(data[0][0])
    assert sorted(os.listdir(f"{location}/{DT}/{victim.name}")) == ["_orc_acid_version"]
    assert visible(location) == before
    assert verify_table(open_table(location)).problems == ()
    report = clean(open_table(location), retention_s=0)
    assert victim.name in {r.name for p in report.partitions for r in p.removed}
    assert entries(location) == [format_base(6)]
    assert visible(location) == before
    # Removing a candidate whose files are already gone is a no-op, not an error.
    assert remove_candidate(fsspec.filesystem("file"), f"{location}/{DT}", victim) == 0


READER = textwrap.dedent("""
    import json, sys
    from ingest.acid import acid_state, read_bucket_file
    from ingest.txn import Metastore
    location, partition, url = sys.argv[1:4]
    with Metastore.open(url, create=False) as store:
        with store.reading(location, agent="test-reader") as snapshot:
            # A long read: it lists the partition now and opens the files later.
            state = acid_state(__import__("fsspec").filesystem("file"), partition, snapshot)
            chosen = [state.path(d.name) for d in state.deltas]
            print(json.dumps(chosen), flush=True)
            sys.stdin.readline()  # the test compacts and cleans meanwhile
            import os
            events = sum(read_bucket_file(f"{d}/{f}").num_rows for d in chosen
                         for f in sorted(os.listdir(d)) if f.startswith("bucket_"))
            print(json.dumps(events), flush=True)
""")


def test_a_reader_in_another_process_keeps_the_directories_it_listed(location: str) -> None:
    before = visible(location)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, location, f"{location}/{DT}",
         default_metastore_url(location)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdin is not None
        chosen = json.loads(reader.stdout.readline())  # registered, partition listed
        assert [d.rsplit("/", 1)[-1] for d in chosen] == [
            format_delta(1, 1, 0), format_delta(2, 2, 0), format_delta(3, 3, 0),
            format_delta(5, 5, 0, delete=True)]
        compact(open_table(location), kind="major")
        report = clean(open_table(location), retention_s=0)
        assert report.live_readers == 1
        kept = {k.name: k.reason for p in report.partitions for k in p.kept}
        assert all("test-reader" in kept[d.rsplit("/", 1)[-1]] for d in chosen)
        # Aborted directories are no snapshot's: they go even while the reader holds on.
        assert {r.name for p in report.partitions for r in p.removed} == {format_delta(4, 4, 0)}
        reader.stdin.write("go\n")
        reader.stdin.flush()
        assert json.loads(reader.stdout.readline()) == 30 + 3  # 30 inserts, 3 delete events
        assert reader.wait(timeout=60) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    report = clean(open_table(location), retention_s=0)
    assert report.live_readers == 0 and report.directories == 5
    assert entries(location) == [format_base(6)]
    assert visible(location) == before


def test_with_a_history_record_only_readers_older_than_the_compactor_block(
        location: str) -> None:
    before = visible(location)
    with store_of(location) as store:
        old_reader = store.reading(location, agent="old-reader")
        old_reader.__enter__()
        # compact() records its run with a transaction of its own, committed after the rename.
        report = compact(open_table(location, metastore=store), kind="major", partitions=[DT])
        (done,) = report.partitions
        assert done.result is not None
        (history,) = store.compactions(location)
        record = history.compaction_id
        with store.reading(location, agent="new-reader"):
            report = clean(open_table(location, metastore=store), retention_s=0, partitions=[DT])
            kept = {k.name: k.reason for p in report.partitions for k in p.kept}
            assert "old-reader" in kept[format_delta(1, 1, 0)]
            assert "new-reader" not in kept[format_delta(1, 1, 0)]
            assert report.compactions_cleaned == ()
        old_reader.__exit__(None, None, None)
        with store.reading(location, agent="new-reader"):
            report = clean(open_table(location, metastore=store), retention_s=0, partitions=[DT])
        assert report.compactions_cleaned == (record,)
        assert entries(location) == [format_base(6)]
        assert store.compactions_to_clean(location) == []
    assert visible(location) == before


def test_bad_input(tmp_path: Path, location: str) -> None:
    from ingest.errors import TableNotFoundError
    from ingest.txn import MetastoreError

    with pytest.raises(TableNotFoundError):
        clean(open_table(str(tmp_path / "nothing")))
    with pytest.raises(ConfigError, match="no partition 'dt=2030-01-01'"):
        clean(open_table(location), partitions=["dt=2030-01-01"])
    with pytest.raises(ConfigError, match="not of the form"):
        clean(open_table(location), partitions=["2030"])
    with pytest.raises(MetastoreError, match="does not exist"):
        clean(open_table(location, metastore=f"sqlite://{tmp_path}/elsewhere.sqlite"))
    assert not (tmp_path / "elsewhere.sqlite").exists()


def test_cleaning_a_memory_table_goes_through_fsspec() -> None:
    import uuid

    loc = f"memory://wh-clean-{uuid.uuid4().hex[:8]}/events"
    create_table(loc, "id BIGINT, value STRING")
    for i in range(3):
        load(open_table(loc), pa.table({"id": [i], "value": [f"v{i}"]}))
    delete(open_table(loc), "id = 1")
    compact(open_table(loc), kind="major")
    fs = fsspec.filesystem("memory")
    root = loc[len("memory://"):]
    try:
        # memory:// keeps creation times only: those count, so the default retention holds.
        assert clean(open_table(loc)).directories == 0
        report = clean(open_table(loc), retention_s=0)
        assert (report.directories, report.files) == (4, 8)
        assert [name for p in fs.ls(root, detail=False)
                if not (name := p.rsplit("/", 1)[-1]).startswith("_")] == [format_base(4)]
        with Metastore.open(default_metastore_url(loc), create=False) as store:
            from ingest.acid.read.reader import read_table

            got = read_table(loc, store.snapshot(loc)).to_pylist()
        assert sorted(r["id"] for r in got) == [0, 2]
    finally:
        fs.rm(root, recursive=True)
