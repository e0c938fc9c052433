"""Compaction output against Hive 2.3 and ORC Java (pyspark's jars) and pyarrow.

After minor and after major compaction of a partition with deletes, an aborted write id and an
open transaction batch, Hive's `AcidUtils.getAcidState` chooses the new base or delta (and the
same directories as our `acid_state`), Hive's `OrcRawRecordMerger` and its query path
(`OrcInputFormat` splits) return exactly the rows and ROW__IDs `ingest cat --row-id` prints, ORC
Java and pyarrow read every new file, and tables written by Hive's own `OrcRecordUpdater`
compact (library and `ingest compact`) to the same rows.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.orc as po
import pytest
from compat import javatools
from conftest import require
from support import SIMPLE_SCHEMA, run_cli, simple_table, write_deletes

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList
from ingest.acid.compaction.compact import compact_partition
from ingest.acid.format.names import encode_bucket_property, format_base, format_delta
from ingest.acid.read.directories import acid_state
from ingest.acid.read.reader import read_table

pytestmark = pytest.mark.java

FS = fsspec.filesystem("file")
BP0 = encode_bucket_property(0, 0)
# 7 open inside the batch delta_6_8, 3 aborted; nothing open after 10.
SNAPSHOTS = ["default.t:10:7:7:3", "default.t:10:::3", "default.t:5:::3", "default.t:9:7:7:3"]
# SIMPLE_SCHEMA in Hive's terms, for the merger's object inspector.
HIVE_COLUMNS = {"columns": "id,value", "columns_types": "bigint:string"}
Row = tuple[int, int, int, int, str]  # writeid, bucket property, rowid, id, value


@pytest.fixture(autouse=True)
def _java() -> None:
    ok, why = javatools.available()
    require(ok, f"Java and pyspark's jars for the Hive tools ({why})")


def _write(directory: Path, write_id: int, ids: range, bucket_id: int = 0) -> None:
    with BucketWriter.create(f"{directory}/bucket_{bucket_id:05d}", BucketFileOptions(
            write_id=write_id, row_schema=SIMPLE_SCHEMA, bucket_id=bucket_id)) as w:
        w.write(simple_table(ids))


def _delete(directory: Path, keys: list[tuple[int, int]], write_id: int) -> None:
    write_deletes(str(directory / "bucket_00000"), pa.table({
        "originalTransaction": [k[0] for k in keys], "bucket": [BP0] * len(keys),
        "rowId": [k[1] for k in keys]}), write_id=write_id)


def _partition(root: Path, *, open_batch: bool = True) -> Path:
    """Two buckets, deletes, aborted write id 3, open write id 7: inside the transaction batch
    delta_6_8 (side file left) or, without `open_batch`, between delta_6_6 and delta_8_8."""
    _write(root / format_delta(1, 1), 1, range(0, 50))
    _write(root / format_delta(2, 2), 2, range(50, 100))
    _write(root / format_delta(2, 2), 2, range(100, 120), bucket_id=1)
    _write(root / format_delta(3, 3), 3, range(150, 200))  # aborted
    _delete(root / format_delta(4, 4, delete=True), [(1, r) for r in range(0, 50, 2)], 4)
    _write(root / format_delta(5, 5), 5, range(200, 230))
    path = f"{root / format_delta(6, 8, None)}/bucket_00000"
    if not open_batch:
        _write(root / format_delta(6, 6), 6, range(300, 310))
        _write(root / format_delta(8, 8), 8, range(320, 330))
    for write_id, ids in ((6, range(300, 310)), (7, range(310, 320))) if open_batch else ():
        options = BucketFileOptions(write_id=write_id, row_schema=SIMPLE_SCHEMA)
        w = (BucketWriter.create(path, options) if write_id == 6
             else BucketWriter.open_append(path, options))
        w.write(simple_table(ids))
        w.flush()
        w.abandon()  # the batch stays open: its side file remains
    _write(root / format_delta(9, 9), 9, range(400, 410))
    _delete(root / format_delta(10, 10, delete=True), [(9, 0), (2, 3)], 10)
    return root


def _keyed(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted((r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"],
                   r["id"], r["value"]) for r in table.to_pylist())


def _check_hive_agrees(part: Path) -> None:
    queries = [(str(part), s) for s in SNAPSHOTS]
    for (_, snapshot), hive in zip(queries, javatools.hive_acid_state_many(queries),
                                   strict=True):
        ours = acid_state(FS, str(part), ValidWriteIdList.from_hive_string(snapshot))
        rel = javatools.relative_state(hive, part)
        assert (ours.base.name if ours.base else None) == rel["base"], snapshot
        assert [d.name for d in ours.deltas] == rel["deltas"], snapshot


def _check_files_read(directory: Path) -> None:
    files = sorted(p for p in directory.iterdir() if p.name.startswith("bucket_"))
    assert files and not any(p.name.endswith("_flush_length") for p in files)
    for java, path in zip(javatools.orc_read_many(files), files, strict=True):
        ours = po.ORCFile(str(path)).read()
        assert java["num_rows"] == ours.num_rows
        assert [_key(r) for r in ours.to_pylist()] == [_key(r) for r in java["rows"]]
        assert [r["row"] for r in ours.to_pylist()] == [r["row"] for r in java["rows"]]


@pytest.mark.parametrize("kinds", [("minor",), ("major",), ("minor", "major")])
def test_hive_picks_the_compacted_directories(tmp_path: Path, kinds: tuple[str, ...]) -> None:
    part = _partition(tmp_path / "t")
    batch = (part / format_delta(6, 8, None) / "bucket_00000").read_bytes()
    snapshots = [ValidWriteIdList.from_hive_string(s) for s in SNAPSHOTS]
    before = [_keyed(read_table(str(part), s, with_row_id=True)) for s in snapshots]
    for kind in kinds:
        result = compact_partition(str(part), snapshots[0], row_schema=SIMPLE_SCHEMA,
                                   kind=kind)  # type: ignore[arg-type]
        assert result is not None
        # Hive's own selection takes the new directories for the current snapshot.
        rel = javatools.relative_state(javatools.hive_acid_state(part, SNAPSHOTS[0]), part)
        chosen = [rel["base"], *rel["deltas"]]
        assert all(out in chosen for out in result.plan.outputs), (result.plan.outputs, rel)
        _check_hive_agrees(part)
        for out in result.plan.outputs:
            _check_files_read(part / out)
        # Snapshots at or after the compactor's see the same rows with the same ROW__IDs.
        for s, rows in zip(snapshots, before, strict=True):
            if s.high_watermark >= result.plan.snapshot.high_watermark:
                assert _keyed(read_table(str(part), s, with_row_id=True)) == rows, s
    assert (part / format_delta(6, 8, None) / "bucket_00000").read_bytes() == batch
    assert (part / format_delta(6, 8, None) / "bucket_00000_flush_length").exists()


def test_orc_java_reads_the_base_rows(tmp_path: Path) -> None:
    part = _partition(tmp_path / "t")
    snap = ValidWriteIdList.from_hive_string(SNAPSHOTS[0])
    # The base holds what the compactor's snapshot (high watermark 5) sees.
    at_5 = ValidWriteIdList.from_hive_string("default.t:5:::3")
    expected = _keyed(read_table(str(part), at_5, with_row_id=True))
    result = compact_partition(str(part), snap, row_schema=SIMPLE_SCHEMA, kind="major")
    assert result is not None and result.plan.outputs == (format_base(5),)
    java_rows = []
    for r in javatools.orc_read_many(sorted((part / format_base(5)).glob("bucket_*"))):
        java_rows += r["rows"]
    assert {r["operation"] for r in java_rows} == {0}
    base_keys = sorted(_key(r)[1:4] for r in java_rows)
    assert base_keys == [k[:3] for k in expected]
    shutil.rmtree(part / format_base(5))


def _key(row: dict) -> tuple[int, int, int, int, int]:
    return (row["operation"], row["originalTransaction"], row["bucket"], row["rowId"],
            row["currentTransaction"])


def test_orc_java_reads_stripes_encoded_in_parallel(tmp_path: Path) -> None:
    """Stripes of more than 8k rows: event columns and row columns encoded as separate groups
    and stitched; ORC Java reads the same events as pyarrow."""
    part = tmp_path / "t"
    _write(part / format_delta(1, 1), 1, range(0, 15_000))
    _write(part / format_delta(2, 2), 2, range(15_000, 30_000))
    _delete(part / format_delta(3, 3, delete=True), [(1, 7), (2, 9)], 3)
    snap = ValidWriteIdList.from_hive_string("default.t:3::")
    result = compact_partition(str(part), snap, row_schema=SIMPLE_SCHEMA, kind="major")
    assert result is not None and result.rows == 29_998
    _check_files_read(part / format_base(3))


def _to_write_id_list(valid_txns: str) -> str:
    """Hive 2.x `hwm:minOpen[:exceptions]` (exceptions aborted here) -> our string form."""
    hwm, _min_open, *exceptions = valid_txns.split(":")
    return f"default.ref:{hwm}:9223372036854775807::{','.join(exceptions)}"


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["basic", "streaming_open"])
@pytest.mark.parametrize("transactional_properties", ["default", "legacy"])
@pytest.mark.parametrize("kinds", [("minor",), ("major",), ("minor", "major")])
def test_a_table_written_by_hive_compacts_to_the_same_rows(
        tmp_path: Path, scenario: str, transactional_properties: str,
        kinds: tuple[str, ...]) -> None:
    """Hive's own OrcRecordUpdater wrote inserts, updates and deletes (split-update, or Hive 2's
    update events inside insert deltas); every snapshot reads the same rows afterwards."""
    table = tmp_path / "ref"
    manifest = javatools.hive_write_reference_table(
        table, scenario, transactional_properties=transactional_properties)
    snapshots = {name: ValidWriteIdList.from_hive_string(_to_write_id_list(v))
                 for name, v in manifest["valid_txns"].items()}
    # Each named snapshot is another outcome of the same transactions: compact a copy per
    # outcome, as of that outcome.
    reads: list[tuple[Path, str, list[tuple[object, ...]]]] = []
    for name, snap in snapshots.items():
        copy = tmp_path / name
        shutil.copytree(table, copy)
        before = _keyed(read_table(str(copy), snap, with_row_id=True, row_schema=SIMPLE_SCHEMA))
        reads.append((copy, manifest["valid_txns"][name], before))
        for kind in kinds:
            result = compact_partition(str(copy), snap, row_schema=SIMPLE_SCHEMA,
                                       kind=kind)  # type: ignore[arg-type]
            if result is None:
                continue
            for out in result.plan.outputs:
                _check_files_read(copy / out)
            got = _keyed(read_table(str(copy), snap, with_row_id=True, row_schema=SIMPLE_SCHEMA))
            assert got == before, (kind, name)
            rows = sorted(({"id": r[3], "value": r[4]} for r in got), key=lambda r: r["id"])
            assert rows == manifest["expected_rows"][name], (kind, name)
    # Hive's merged read of each compacted copy returns the same rows and ROW__IDs (the
    # aborted outcome included, which `ingest compact` cannot reach: adopting commits it all).
    hive = _hive_read([(copy, valid) for copy, valid, _ in reads])
    for (copy, _, before), (_, rows) in zip(reads, hive, strict=True):
        assert rows == before, copy.name


def _hive_read(queries: list[tuple[Path, str]]) -> list[tuple[list[str], list[Row]]]:
    """Hive 2.3's merged read (getAcidState + OrcRawRecordMerger) of each (dir, snapshot):
    the directories it chose (base first) and the rows, sorted."""
    results = []
    for result in javatools.hive_merged_read_many(queries, **HIVE_COLUMNS):
        chosen = [Path(p).name for p in [result["base"], *result["deltas"]] if p]
        rows = sorted((r["originalTransaction"], r["bucket"], r["rowId"], r["row"]["id"],
                       r["row"]["value"]) for r in result["rows"])
        results.append((chosen, rows))
    return results


def _hive_query_read(queries: list[tuple[Path, str]], transactional_properties: str = "default"
                     ) -> list[list[Row]]:
    """The rows Hive 2.3's queries read (OrcInputFormat.getSplits, then getReader per split)."""
    results = []
    for result in javatools.hive_merged_read_many(
            queries, **HIVE_COLUMNS, reader="input_format",
            transactional_properties=transactional_properties):
        rows = sorted((r["originalTransaction"], r["bucket"], r["rowId"], r["row"]["id"],
                       r["row"]["value"]) for r in result["rows"])
        results.append(rows)
    return results


def _cat(path: Path, capsys: pytest.CaptureFixture[str], snapshot: str | None = None
         ) -> list[Row]:
    """`ingest cat PATH --row-id [--snapshot S]`, sorted."""
    code, out, err = run_cli(["cat", str(path), "--row-id",
                              *(["--snapshot", snapshot] if snapshot else [])], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    return sorted((r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"],
                   r["id"], r["value"]) for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize("kinds", [("minor", "major"), ("major",)])
def test_hives_merger_returns_our_rows_after_compaction(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kinds: tuple[str, ...]) -> None:
    """Before and after each compaction, for every snapshot, Hive's merged read and
    `ingest cat --row-id` return the same rows with the same ROW__IDs, and nothing changes."""
    part = _partition(tmp_path / "t")
    stages = [tmp_path / "before"]
    shutil.copytree(part, stages[0])
    outputs: dict[Path, tuple[str, ...]] = {stages[0]: ()}
    snapshot = ValidWriteIdList.from_hive_string(SNAPSHOTS[0])
    for kind in kinds:
        result = compact_partition(str(part), snapshot, row_schema=SIMPLE_SCHEMA,
                                   kind=kind)  # type: ignore[arg-type]
        assert result is not None
        stages.append(tmp_path / f"after-{len(stages)}-{kind}")
        shutil.copytree(part, stages[-1])
        outputs[stages[-1]] = result.plan.outputs
    queries = [(stage, s) for stage in stages for s in SNAPSHOTS]
    hive = _hive_read(queries)
    before = {s: rows for (stage, s), (_, rows) in zip(queries, hive, strict=True)
              if stage == stages[0]}
    assert all(before.values())
    for (stage, s), (chosen, rows) in zip(queries, hive, strict=True):
        assert rows == _cat(stage, capsys, s), (stage.name, s)
        assert rows == before[s], (stage.name, s)
        if s == SNAPSHOTS[0]:  # the snapshot compacted as of reads the new directories
            assert set(outputs[stage]) <= set(chosen), (stage.name, chosen)


@pytest.mark.slow
def test_hives_query_path_reads_our_rows_after_compaction(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reader Hive 2.3's queries use (OrcInputFormat splits: split-update insert deltas
    and bases as split files, delete deltas merged in) returns `ingest cat`'s rows and ROW__IDs
    before, after minor and after major compaction. No open transaction batch here: Hive 2.3's
    split generation fails on any `_flush_length` side file in an insert delta, its own too
    (docs/format.md §9)."""
    part = _partition(tmp_path / "t", open_batch=False)
    snapshots = [s for s in SNAPSHOTS if ValidWriteIdList.from_hive_string(s).high_watermark >= 6]
    stages = [tmp_path / "before"]
    shutil.copytree(part, stages[0])
    for kind in ("minor", "major"):
        result = compact_partition(str(part), ValidWriteIdList.from_hive_string(SNAPSHOTS[0]),
                                   row_schema=SIMPLE_SCHEMA, kind=kind)  # type: ignore[arg-type]
        assert result is not None and result.plan.snapshot.high_watermark == 6
        stages.append(tmp_path / kind)
        shutil.copytree(part, stages[-1])
    queries = [(stage, s) for stage in stages for s in snapshots]
    for (stage, s), rows in zip(queries, _hive_query_read(queries), strict=True):
        assert rows and rows == _cat(stage, capsys, s), (stage.name, s)
        assert rows == _cat(stages[0], capsys, s), (stage.name, s)


@pytest.mark.slow
def test_statements_of_one_transaction_compact_for_hive(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two statements of write id 2 (delta_2_2_0000, delta_2_2_0001: row ids restart, the
    bucket property tells them apart) with a delete in each: both Hive readers agree with
    `ingest cat` before and after minor and major compaction."""
    part = tmp_path / "t"
    for write_id, statement_id, ids in ((1, 0, range(0, 5)), (2, 0, range(10, 15)),
                                        (2, 1, range(20, 25)), (4, 0, range(40, 45))):
        with BucketWriter.create(
                str(part / format_delta(write_id, write_id, statement_id) / "bucket_00000"),
                BucketFileOptions(write_id=write_id, row_schema=SIMPLE_SCHEMA,
                                  statement_id=statement_id)) as w:
            w.write(simple_table(ids))
    write_deletes(str(part / format_delta(3, 3, 0, delete=True) / "bucket_00000"), pa.table({
        "originalTransaction": [2, 2],
        "bucket": [encode_bucket_property(0, 1), encode_bucket_property(0, 0)],
        "rowId": [1, 2]}), write_id=3)
    snapshot = "default.t:4::"
    stages = [tmp_path / "before"]
    shutil.copytree(part, stages[0])
    for kind in ("minor", "major"):
        assert compact_partition(str(part), ValidWriteIdList.from_hive_string(snapshot),
                                 row_schema=SIMPLE_SCHEMA, kind=kind) is not None  # type: ignore[arg-type]
        stages.append(tmp_path / kind)
        shutil.copytree(part, stages[-1])
    queries = [(stage, snapshot) for stage in stages]
    expected = _cat(stages[0], capsys, snapshot)
    assert len(expected) == 18 and (2, encode_bucket_property(0, 1), 0, 20, "v20") in expected
    merged = [rows for _, rows in _hive_read(queries)]
    assert merged == _hive_query_read(queries) == [expected] * len(stages)
    assert all(_cat(stage, capsys, snapshot) == expected for stage in stages)


def _cli_ok(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    code, out, err = run_cli([*args, "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["basic", "streaming_open"])
@pytest.mark.parametrize("transactional_properties", ["default", "legacy"])
def test_a_table_written_by_hive_compacts_with_the_cli(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: str,
        transactional_properties: str) -> None:
    """A table Hive's OrcRecordUpdater wrote (an update, a delete, a streaming batch maybe
    still open), adopted by `ingest create --adopt`, then `ingest compact --minor` and
    `--major`: `ingest cat` and Hive's merged read see the rows Hive wrote at every step, and
    ORC Java reads every new file."""
    table = tmp_path / "ref"
    manifest = javatools.hive_write_reference_table(
        table, scenario, transactional_properties=transactional_properties)
    _cli_ok(["create", str(table), "--schema", "id BIGINT, value STRING", "--adopt"], capsys)
    expected = manifest["expected_rows"]["all_committed"]
    before = _cat(table, capsys)
    assert sorted(({"id": r[3], "value": r[4]} for r in before),
                  key=lambda r: r["id"]) == expected
    stages, outputs = [tmp_path / "before"], []
    shutil.copytree(table, stages[0])
    for kind in ("minor", "major"):
        report = _cli_ok(["compact", str(table), f"--{kind}"], capsys)
        (done,) = report["partitions"]
        assert done["compacted"], report
        outputs += [table / out for out in done["outputs"]]
        assert _cat(table, capsys) == before, kind
        stages.append(tmp_path / kind)
        shutil.copytree(table, stages[-1])
    # Hive 2 ("legacy") tables hold updates and deletes in insert deltas: no delete delta.
    minor = ["delta_0000001_0000006"] + (
        ["delete_delta_0000001_0000006"] if transactional_properties == "default" else [])
    assert [p.name for p in outputs] == [*minor, "base_0000006"]
    valid = manifest["valid_txns"]["all_committed"]
    hive = _hive_read([(stage, valid) for stage in stages])
    assert [chosen for chosen, _ in hive[1:]] == [sorted(minor), ["base_0000006"]]
    for stage, (_, rows) in zip(stages, hive, strict=True):
        assert rows == before, stage.name
    # Hive's query path too; before compaction only without the open batch's side file, which
    # Hive 2.3's split generation cannot list (compaction makes that delta obsolete).
    readable = stages if scenario == "basic" else stages[1:]
    queried = _hive_query_read([(stage, valid) for stage in readable], transactional_properties)
    for stage, rows in zip(readable, queried, strict=True):
        assert rows == before, stage.name
    for out in outputs:
        _check_files_read(out)
