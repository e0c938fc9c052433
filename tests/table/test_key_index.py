"""The key index of keyed writes (docs/format.md §24): lookups through it equal lookups by
scanning, at every step of random upserts, deletes, plain loads and compactions; an index
file not bound to the committed file it names is never trusted (a crashed write's, one cut
short, one of another key); a bucket with an unindexed file (a `load`) is scanned; readers
and `verify` do not see the index directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import ingest
from ingest.acid.format import bucket_ids
from ingest.acid.keys._file_cache import FILES
from ingest.acid.keys.current import BUCKET_PROPERTY, ROW_ID, WRITE_ID, find_current_rows
from ingest.acid.keys.key_index import INDEX_DIRECTORY, row_hashes
from ingest.acid.read import ReadView
from ingest.table import Table
from ingest.table.core._committed import table_manifest
from ingest.table.write import create_table

DDL = "id BIGINT, value STRING, v BIGINT"


def _table(tmp_path: Path, *, partitioned: bool = False) -> Table:
    location = str(tmp_path / "wh" / "t")
    create_table(location, DDL, buckets=4, bucketed_by=["id"],
                 partitioned_by=["dt"] if partitioned else [])
    return ingest.open_table(location)


def _rows(ids: list[int], version: int, dt: str | None = None) -> pa.Table:
    data = {"id": pa.array(ids, pa.int64()), "value": [f"v{i}-{version}" for i in ids],
            "v": pa.array([version] * len(ids), pa.int64())}
    if dt is not None:
        data["dt"] = [dt] * len(ids)
    return pa.table(data)


def _lookups(t: Table, ids: list[int], dt: str | None = None, *,
             columns: tuple[str, ...] = ()) -> tuple[set, set, int]:
    """The live (key, ROW__ID, values of `columns`) of `ids` found through the key index and
    by scanning, and the buckets the index answered (-1 when it answered every bucket
    read)."""
    with t.to_write("look up keys") as (store, defn):
        fs = t.fs
        manifest = table_manifest(store, defn)
        view = ReadView(defn.name, store.snapshot(defn), manifest.entries)
        keys = pa.table({"id": pa.array(ids, pa.int64())})
        if dt is not None:
            keys = keys.append_column("dt", pa.array([dt] * len(ids)))
        buckets = np.asarray(bucket_ids(keys, ["id"], defn.bucket_count))
        found = []
        for key_index in (["id"], None):
            current = find_current_rows(fs, manifest.root, view, keys, bucket_ids=buckets,
                                        row_schema=defn.row_schema,
                                        partition_columns=defn.partition_columns,
                                        key_index=key_index, columns=columns)
            found.append(current)
    as_set = [{(r["id"], r[WRITE_ID], r[BUCKET_PROPERTY], r[ROW_ID], *(r[c] for c in columns))
               for r in c.rows.to_pylist()} for c in found]
    assert found[1].buckets_indexed == 0
    every = found[0].buckets_indexed == found[0].buckets_read
    return as_set[0], as_set[1], -1 if every else found[0].buckets_indexed


@pytest.mark.parametrize("sealed", [None, 8])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lookups_through_the_index_equal_lookups_by_scanning_at_every_step(
        tmp_path: Path, seed: int, sealed: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `sealed`, the merged runs of a bucket's small files (`_runs.py`) seal at 8
    entries: files probed alone, runs sealed, new runs started, runs dropped by compaction."""
    if sealed is not None:
        monkeypatch.setattr("ingest.acid.keys._runs.SEALED_ENTRIES", sealed)
        monkeypatch.setattr("ingest.acid.keys._delete_events.SEALED_ENTRIES", sealed)
    rng = np.random.default_rng(seed)
    t = _table(tmp_path / str(seed))
    live: set[int] = set()
    indexed_seen = 0
    for step in range(14):
        op = rng.choice(["upsert", "upsert", "upsert", "delete", "load", "minor", "major"])
        if op == "upsert":
            ids = sorted({int(i) for i in rng.integers(0, 300, 60)})
            t.upsert(_rows(ids, step), key=["id"])
            live |= set(ids)
        elif op == "delete" and live:
            gone = sorted(rng.choice(sorted(live), min(20, len(live)), replace=False).tolist())
            t.apply_changes([{"op": "d", "before": {"id": i}} for i in gone], key=["id"])
            live -= set(gone)
        elif op == "load":  # new keys only: a key held twice is another test's case
            ids = sorted({int(i) for i in rng.integers(1000, 5000, 30)} - live)
            t.load(_rows(ids, step))
            live |= set(ids)
        elif op in ("minor", "major"):
            t.compact(op)
        probe = sorted({int(i) for i in rng.integers(0, 5000, 80)} | set(list(live)[:40]))
        # Every other step also asks for a column the index does not hold (an order-by's).
        via_index, via_scan, indexed = _lookups(t, probe, columns=("v",) if step % 2 else ())
        assert via_index == via_scan, (step, op)
        assert {k for k, *_ in via_scan} == live & set(probe)
        indexed_seen += indexed != 0
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == sorted(live)
    assert indexed_seen > 0  # the index answered somewhere, or the test shows nothing


def test_a_hash_collision_is_resolved_by_the_key_values(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Entries are probed by a 64-bit hash; two keys of one hash must still be told apart.
    Forced by giving every row the same hash (and digest)."""
    import ingest.acid.keys.current as current_module
    import ingest.acid.keys.key_index as key_index_module

    def same_hash(table: pa.Table, types: pa.Schema) -> np.ndarray:
        return np.zeros(table.num_rows, np.uint64)

    monkeypatch.setattr(key_index_module, "row_hashes", same_hash)
    monkeypatch.setattr(current_module, "row_hashes", same_hash)
    # The delete events' ROW__ID hashes collide too: their ROW__IDs are compared.
    monkeypatch.setattr("ingest.acid.keys._delete_events.row_hashes", same_hash)
    t = _table(tmp_path)
    t.upsert(_rows(list(range(40)), 1), key=["id"])
    t.upsert(_rows(list(range(20, 60)), 2), key=["id"])
    via_index, via_scan, indexed = _lookups(t, [0, 5, 25, 45, 99])
    assert indexed == -1 and via_index == via_scan
    assert {k for k, *_ in via_index} == {0, 5, 25, 45}
    assert {r["id"]: r["v"] for r in t.to_arrow().to_pylist()} == {
        **{i: 1 for i in range(20)}, **{i: 2 for i in range(20, 60)}}


def test_files_loaded_without_the_index_are_scanned_or_indexed_by_the_next_upsert(
        tmp_path: Path) -> None:
    """A `load` writes no index: a lookup without catch-up scans its buckets; an upsert
    indexes the loaded files of the buckets it touches (reading each once), so the next one
    finds every key through the index."""
    t = _table(tmp_path, partitioned=True)
    t.load(_rows(list(range(100)), 0, "a"))
    via_index, via_scan, indexed = _lookups(t, list(range(0, 100, 7)), "a")
    assert indexed == 0 and via_index == via_scan and len(via_scan) == 15
    r = t.upsert(_rows(list(range(50, 150)), 1, "a"), key=["id", "dt"])
    assert (r.counts.inserted, r.counts.updated) == (50, 50)
    # The loaded files were read once, to index them.
    assert (r.counts.buckets_indexed, r.counts.rows_scanned) == (r.counts.buckets_read, 100)
    assert len(_index_files(t)) == 8  # the loaded files' and the upsert's
    via_index, via_scan, indexed = _lookups(t, list(range(0, 160, 3)), "a")
    assert indexed == -1 and via_index == via_scan
    t.load(_rows([500], 0, "a"))
    via_index, via_scan, indexed = _lookups(t, [500, 3, 60, 120], "a")
    assert 0 < indexed < 4 and via_index == via_scan  # only the new file's bucket scans
    r = t.upsert(_rows([500, 3, 200], 2, "a"), key=["id", "dt"])
    assert (r.counts.updated, r.counts.inserted, r.counts.rows_scanned) == (2, 1, 1)
    r = t.upsert(_rows([500, 3, 200], 3, "a"), key=["id", "dt"])
    assert (r.counts.updated, r.counts.rows_scanned) == (3, 0)
    t.compact("major")
    r = t.upsert(_rows([2, 61, 121, 201], 3, "a"), key=["id", "dt"])
    assert (r.counts.buckets_indexed, r.counts.rows_scanned) == (r.counts.buckets_read, 0)
    assert (r.counts.inserted, r.counts.updated) == (1, 3)
    rows = {x["id"]: x["v"] for x in t.to_arrow().to_pylist()}
    assert len(rows) == 153
    assert (rows[500], rows[3], rows[200], rows[2], rows[1], rows[60]) == (3, 3, 3, 3, 0, 1)


def _index_files(t: Table) -> list[Path]:
    root = Path(t.location.removeprefix("file://")) / INDEX_DIRECTORY
    return sorted(root.rglob("*.arrow"))


def test_an_index_file_cut_short_or_rebound_is_not_trusted(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows(list(range(40)), 1), key=["id"])
    t.upsert(_rows(list(range(40)), 2), key=["id"])
    files = _index_files(t)
    assert len(files) == 8  # 4 buckets, 2 writes
    _, _, indexed = _lookups(t, list(range(40)))
    assert indexed == -1
    first, second = [f for f in files if "bucket_00000" in str(f)]
    first.write_bytes(first.read_bytes()[:-10])  # cut short
    # The other write's index under this file's name: the manifest entry it repeats differs.
    other = [f for f in files if "bucket_00001" in str(f)][0]
    second.write_bytes(other.read_bytes())
    # This process decoded both files while they were sound, bound to the committed data
    # files (which cannot change): it answers from that copy, rightly.
    via_index, via_scan, indexed = _lookups(t, list(range(40)))
    assert indexed == -1 and via_index == via_scan
    FILES.clear()  # as a new process: it reads the damaged files and trusts neither
    via_index, via_scan, indexed = _lookups(t, list(range(40)))
    assert indexed == 3 and via_index == via_scan
    # The next upsert indexes that bucket's files again from the data.
    r = t.upsert(_rows(list(range(40)), 3), key=["id"])
    assert (r.counts.updated, r.counts.buckets_indexed) == (40, 4)
    assert 0 < r.counts.rows_scanned < 80  # only that bucket's two files were read
    assert {x["v"] for x in t.to_arrow().to_pylist()} == {3}
    via_index, via_scan, indexed = _lookups(t, list(range(40)))
    assert indexed == -1 and via_index == via_scan


def test_a_write_that_dies_before_its_commit_leaves_no_trusted_index(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows(list(range(40)), 1), key=["id"])
    before = set(_index_files(t))
    script = textwrap.dedent(f"""
        import os, pyarrow as pa
        import sys
        import ingest
        def die(*args, **kwargs):
            os._exit(9)  # the process dies: no cleanup, no abort
        import importlib
        importlib.import_module("ingest.table.write.upsert").commit = die
        t = ingest.open_table({t.location!r})
        t.upsert(pa.table({{"id": pa.array(range(40), pa.int64()),
                           "value": ["dead"] * 40, "v": pa.array([7] * 40, pa.int64())}}),
                 key=["id"])
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 9, done.stderr
    left = set(_index_files(t)) - before
    assert len(left) == 4  # the dead write's index files are on disk ...
    via_index, via_scan, indexed = _lookups(t, list(range(40)))
    assert indexed == -1 and via_index == via_scan  # ... and never used
    assert {w for _, w, *_ in via_index} == {1}
    r = t.upsert(_rows(list(range(40)), 2), key=["id"])
    assert r.counts.updated == 40
    assert {x["v"] for x in t.to_arrow().to_pylist()} == {2}


def test_a_failed_write_removes_its_index_files(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows(list(range(10)), 1), key=["id"])
    before = _index_files(t)
    with pytest.raises(Exception, match="null"):
        t.upsert(pa.table({"id": pa.array([1, None], pa.int64()), "value": ["a", "b"],
                           "v": pa.array([1, 2], pa.int64())}), key=["id"])
    assert _index_files(t) == before


def test_the_index_is_invisible_to_readers_and_verify(tmp_path: Path) -> None:
    t = _table(tmp_path, partitioned=True)
    t.upsert(_rows(list(range(30)), 1, "a"), key=["id", "dt"])
    t.upsert(_rows(list(range(10, 40)), 2, "b"), key=["id", "dt"])
    t.apply_changes([{"op": "d", "before": {"id": 3, "dt": "a"}}], key=["id", "dt"])
    assert _index_files(t)
    assert t.to_arrow().num_rows == 59
    report = t.verify()
    assert report.ok, report.problems
    t.compact("major")
    assert t.verify().ok and t.to_arrow().num_rows == 59


def test_row_hashes_agree_across_types_and_slices() -> None:
    a = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["x", "", None],
                  "f": [0.0, -0.0, None]})
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("f", pa.float64())])
    whole = row_hashes(a, schema)
    assert list(row_hashes(a.slice(1), schema)) == list(whole[1:])
    large = a.cast(pa.schema([("id", pa.int64()), ("s", pa.large_string()),
                              ("f", pa.float64())]))
    assert list(row_hashes(large, schema)) == list(whole)
    assert len(set(whole.tolist())) == 3


def test_an_unchanged_row_found_through_the_index_writes_nothing(tmp_path: Path) -> None:
    """The digest says which new images differ; equal ones are read and compared, so a
    repeated upsert is a no-op as without the index."""
    t = _table(tmp_path)
    t.upsert(_rows(list(range(30)), 1), key=["id"])
    r = t.upsert(_rows(list(range(30)), 1), key=["id"])
    assert r.write_id is None and r.counts.unchanged == 30
    assert r.counts.buckets_indexed == r.counts.buckets_read > 0
    changed = _rows(list(range(30)), 1).set_column(1, "value", pa.array(
        ["x" if i == 7 else f"v{i}-1" for i in range(30)]))
    r = t.upsert(changed, key=["id"])
    assert (r.counts.unchanged, r.counts.updated) == (29, 1)


def test_an_index_is_bound_to_its_key_types_and_its_digest_to_the_row_types(
        tmp_path: Path) -> None:
    from ingest.acid.keys.key_index import load_index
    t = _table(tmp_path)
    t.upsert(_rows(list(range(10)), 1), key=["id"])
    with t.to_write("look up keys") as (store, defn):
        fs = t.fs
        manifest = table_manifest(store, defn)
        entry = next(iter(manifest.entries.values()))
        key = pa.schema([defn.row_schema.field("id")])
        same = load_index(fs, manifest.root, entry, key_types=key, row_types=defn.row_schema)
        assert same is not None and same.digests_valid
        added = defn.row_schema.append(pa.field("extra", pa.string()))
        later = load_index(fs, manifest.root, entry, key_types=key, row_types=added)
        assert later is not None and not later.digests_valid  # an ALTER TABLE ADD COLUMNS
        narrower = pa.schema([pa.field("id", pa.int32())])
        assert load_index(fs, manifest.root, entry, key_types=narrower,
                          row_types=defn.row_schema) is None


def test_the_cleaner_removes_the_index_files_of_what_it_removes(tmp_path: Path) -> None:
    t = _table(tmp_path, partitioned=True)
    for version in range(3):
        t.upsert(_rows(list(range(version * 5, 40)), version, "a"), key=["id", "dt"])
    before = set(_index_files(t))
    t.compact("major")
    t.clean(retention_s=0)
    after = set(_index_files(t))
    # Only the base's index files are left: every delta's went with its directory.
    assert after and not after & before
    assert all(Path(p).name.startswith("base_") for p in after), sorted(after)
    table_dir = Path(t.location.removeprefix("file://"))
    assert len(after) == len(list(table_dir.glob("dt=a/base_*/bucket_*")))
    via_index, via_scan, indexed = _lookups(t, list(range(50)), "a")
    assert via_index == via_scan and indexed == -1  # the base's index answers every bucket


def test_an_order_by_upsert_looks_up_through_the_index_and_skips_stale_events(
        tmp_path: Path) -> None:
    """The index finds the ROW__IDs; the order-by values are read for those rows only."""
    t = _table(tmp_path)
    t.upsert(_rows(list(range(40)), 5), key=["id"], order_by="v")
    t.upsert(_rows(list(range(0, 40, 2)), 7), key=["id"], order_by="v")
    t.apply_changes([{"op": "d", "before": {"id": 39}}], key=["id"])
    via_index, via_scan, indexed = _lookups(t, list(range(50)), columns=("v",))
    assert indexed == -1 and via_index == via_scan
    assert {(k, v) for k, *_, v in via_index} == {
        (i, 7 if i % 2 == 0 else 5) for i in range(39)}
    older = _rows(list(range(10)), 6)  # newer than the odd keys' 5, older than the even 7
    r = t.upsert(older, key=["id"], order_by="v")
    assert (r.counts.buckets_indexed, r.counts.rows_scanned) == (r.counts.buckets_read, 0)
    assert (r.counts.stale, r.counts.updated) == (5, 5)
    assert {x["id"]: x["v"] for x in t.to_arrow().to_pylist() if x["id"] < 10} == {
        i: 7 if i % 2 == 0 else 6 for i in range(10)}
