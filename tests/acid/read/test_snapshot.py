"""The snapshot reader: bases, deltas, delete deltas, side files, partitions, projections."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.orc as po
import pytest
from support import (
    SIMPLE_SCHEMA,
    all_types_table,
    delete_keys,
    simple_table,
    snap,
    write_rows,
)

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList, acid_event_schema
from ingest.acid.format.names import encode_bucket_property, format_base, format_delta
from ingest.acid.format.side_file import encode_length
from ingest.acid.read.layout import describe_table
from ingest.acid.read.reader import (
    UnverifiedSnapshotWarning,
    list_partitions,
    read_batches,
    read_table,
)
from ingest.errors import ConfigError, CorruptFileError

FS = fsspec.filesystem("file")
BP0 = encode_bucket_property(0, 0)


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """base_1: ids 0..99; delta_2: 100..149; delta_3: 150..199;
    delete_delta_4: base rowIds 0..9 and delta_2 rowId 5 (id 105)."""
    root = tmp_path / "t"
    write_rows(root / format_base(1), 1, range(100))
    write_rows(root / format_delta(2, 2), 2, range(100, 150))
    write_rows(root / format_delta(3, 3), 3, range(150, 200))
    delete_keys(root / format_delta(4, 4, delete=True),
           [(1, BP0, r) for r in range(10)] + [(2, BP0, 5)], write_id=4)
    return root


def test_base_deltas_and_delete_deltas(table_dir: Path) -> None:
    got = read_table(str(table_dir), snap(4))
    assert got.schema == SIMPLE_SCHEMA
    assert ids(got) == [i for i in range(200) if i >= 10 and i != 105]
    # Values come from the row struct, aligned with ids.
    assert all(v == f"v{i}" for i, v in zip(got["id"].to_pylist(), got["value"].to_pylist(),
                                            strict=True))


@pytest.mark.parametrize(
    ("snapshot", "expected"),
    [
        (snap(3), list(range(200))),  # the delete is newer than the snapshot
        (snap(4, aborted=(4,)), list(range(200))),  # the delete aborted
        (snap(4, open_ids=(3,)), [i for i in range(150) if i >= 10 and i != 105]),
        (snap(4, aborted=(2,)), [i for i in range(100, 200) if i < 100 or i >= 150]
         + list(range(10, 100))),
        (snap(1), list(range(100))),
    ],
)
def test_snapshots_of_one_table(table_dir: Path, snapshot: ValidWriteIdList,
                                expected: list[int]) -> None:
    assert ids(read_table(str(table_dir), snapshot)) == sorted(expected)


def test_hive_string_snapshot(table_dir: Path) -> None:
    got = read_table(str(table_dir), "default.t:4:3:3:")
    assert ids(got) == [i for i in range(150) if i >= 10 and i != 105]


def test_bad_snapshot_string_is_a_config_error(table_dir: Path) -> None:
    with pytest.raises(ConfigError, match="Cannot parse write-id list"):
        read_table(str(table_dir), "nonsense")


def test_no_snapshot_warns_and_takes_every_named_write_id(table_dir: Path) -> None:
    with pytest.warns(UnverifiedSnapshotWarning, match=r"without a snapshot.*1\.\.4"):
        got = read_table(str(table_dir))
    assert got.num_rows == 189


@pytest.mark.parametrize("read", [read_table, read_batches, describe_table])
def test_no_snapshot_warning_points_at_the_caller(table_dir: Path, read: object) -> None:
    with pytest.warns(UnverifiedSnapshotWarning) as caught:
        read(str(table_dir))  # type: ignore[operator]
    assert [w.filename for w in caught] == [__file__]


def test_multi_txn_delta_with_side_file(tmp_path: Path) -> None:
    """txn 2 committed, 3 aborted, 4 open and flushed, 5 written but never flushed."""
    root = tmp_path / "t"
    path = str(root / format_delta(2, 5, None) / "bucket_00000")
    w = BucketWriter.create(path, BucketFileOptions(write_id=2, row_schema=SIMPLE_SCHEMA))
    w.write(simple_table(range(0, 3)))
    w.flush()
    w.abandon()
    for wid, rows in ((3, range(3, 5)), (4, range(5, 8))):
        w = BucketWriter.open_append(path, BucketFileOptions(write_id=wid))
        w.write(simple_table(rows))
        w.flush()
        w.abandon()
    w = BucketWriter.open_append(path, BucketFileOptions(write_id=5))
    w.write(simple_table(range(8, 10)))
    w._write_pending()  # stripes on disk, no footer, no side-file entry
    w.abandon()
    assert FS.exists(path + "_flush_length")

    assert ids(read_table(str(root), snap(5, open_ids=(4, 5), aborted=(3,)))) == [0, 1, 2]
    assert ids(read_table(str(root), snap(5, open_ids=(5,), aborted=(3,)))) == [0, 1, 2, 5, 6, 7]
    assert ids(read_table(str(root), snap(3))) == [0, 1, 2, 3, 4]
    # Even "everything committed" stops at the last flush length (docs/invariants.md, 2).
    assert ids(read_table(str(root), snap(5))) == list(range(8))
    got = read_table(str(root), snap(5, aborted=(3,)), with_row_id=True)
    assert [r["rowid"] for r in got["row__id"].to_pylist()] == [0, 1, 2, 0, 1, 2]
    assert [r["writeid"] for r in got["row__id"].to_pylist()] == [2, 2, 2, 4, 4, 4]


def test_side_file_past_the_end_is_corrupt(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_rows(root / format_delta(1, 1), 1, range(3))
    side = root / format_delta(1, 1) / "bucket_00000_flush_length"
    side.write_bytes(encode_length(10**9))
    with pytest.raises(CorruptFileError, match="side file records a flush length"):
        read_table(str(root), snap(1))


def test_statement_ids_and_deletes_of_one_statement(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_rows(root / format_delta(1, 1, 0), 1, range(0, 3), statement_id=0)
    write_rows(root / format_delta(1, 1, 1), 1, range(3, 6), statement_id=1)
    # rowId 1 exists in both statements; only statement 1's is deleted.
    delete_keys(root / format_delta(2, 2, 0, delete=True), [(1, encode_bucket_property(0, 1), 1)],
           write_id=2)
    got = read_table(str(root), snap(2), with_row_id=True)
    assert ids(got) == [0, 1, 2, 3, 5]
    bucket_ids = {r["bucketid"] for r in got["row__id"].to_pylist()}
    assert bucket_ids == {BP0, encode_bucket_property(0, 1)}


def test_deletes_apply_per_bucket(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_rows(root / format_delta(1, 1), 1, range(0, 5), bucket_id=0)
    write_rows(root / format_delta(1, 1), 1, range(5, 10), bucket_id=1)
    d = root / format_delta(2, 2, delete=True)
    delete_keys(d, [(1, encode_bucket_property(1, 0), 0)], write_id=2, bucket_id=1)
    delete_keys(d, [(1, BP0, 4)], write_id=2, bucket_id=0)
    assert ids(read_table(str(root), snap(2))) == [0, 1, 2, 3, 6, 7, 8, 9]


def test_partitioned_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_rows(root / "dt=2026-11-21" / "hr=1" / format_delta(1, 1), 1, range(0, 3))
    write_rows(root / "dt=2026-11-21" / "hr=2" / format_delta(1, 1), 1, range(3, 5))
    write_rows(root / "dt=2026-11-22" / "hr=1" / format_delta(2, 2), 2, range(5, 6))
    write_rows(root / "dt=__HIVE_DEFAULT_PARTITION__" / "hr=a%2Fb" / format_delta(2, 2), 2,
          range(6, 7))
    delete_keys(root / "dt=2026-11-21" / "hr=2" / format_delta(3, 3, delete=True), [(1, BP0, 0)],
           write_id=3)
    parts = list_partitions(str(root))
    assert [p.values for p in parts] == [
        (("dt", "2026-11-21"), ("hr", "1")), (("dt", "2026-11-21"), ("hr", "2")),
        (("dt", "2026-11-22"), ("hr", "1")), (("dt", None), ("hr", "a/b"))]

    got = read_table(str(root), snap(3))
    assert got.schema.names == ["id", "value", "dt", "hr"]
    assert got.schema.field("dt").type == pa.string()
    rows = {r["id"]: (r["dt"], r["hr"]) for r in got.to_pylist()}
    assert rows == {0: ("2026-11-21", "1"), 1: ("2026-11-21", "1"), 2: ("2026-11-21", "1"),
                    4: ("2026-11-21", "2"), 5: ("2026-11-22", "1"), 6: (None, "a/b")}

    one = read_table(str(root / "dt=2026-11-21"), snap(3))
    assert one.schema.names == ["id", "value", "dt", "hr"]
    assert ids(one) == [0, 1, 2, 4]
    leaf = read_table(str(root / "dt=2026-11-21" / "hr=2"), snap(3), ["hr", "id"])
    assert leaf.to_pylist() == [{"hr": "2", "id": 4}]


def test_projections(table_dir: Path) -> None:
    got = read_table(str(table_dir), snap(4), ["value"])
    assert got.schema.names == ["value"]
    assert got.num_rows == 189
    got = read_table(str(table_dir), snap(4), ["value", "id"], with_row_id=True)
    assert got.schema.names == ["row__id", "value", "id"]
    with pytest.raises(ConfigError, match=r"Cannot read columns \['nope'\]"):
        read_table(str(table_dir), snap(4), ["nope"])


def test_projection_of_partition_columns_only(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_rows(root / "p=x" / format_delta(1, 1), 1, range(4))
    got = read_table(str(root), snap(1), ["p"])
    assert got.to_pylist() == [{"p": "x"}] * 4


def test_with_row_id_matches_hive_names(table_dir: Path) -> None:
    got = read_table(str(table_dir), snap(4), with_row_id=True)
    assert got.schema.field("row__id").type == pa.struct(
        [("writeid", pa.int64()), ("bucketid", pa.int32()), ("rowid", pa.int64())])
    by_id = {r["id"]: r["row__id"] for r in got.to_pylist()}
    assert by_id[10] == {"writeid": 1, "bucketid": 536870912, "rowid": 10}
    assert by_id[106] == {"writeid": 2, "bucketid": 536870912, "rowid": 6}


def test_limit_and_batches(table_dir: Path) -> None:
    assert read_table(str(table_dir), snap(4), limit=7).num_rows == 7
    assert read_table(str(table_dir), snap(4), limit=0).num_rows == 0
    batches = list(read_batches(str(table_dir), snap(4)))
    assert len(batches) == 3  # one per stripe: base, delta_2, delta_3
    assert pa.Table.from_batches(batches).equals(read_table(str(table_dir), snap(4)))
    assert sum(b.num_rows for b in read_batches(str(table_dir), snap(4), limit=95)) == 95


def test_empty_and_missing_tables(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    got = read_table(str(tmp_path / "empty"), snap(0))
    assert got.num_rows == 0
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_table(str(tmp_path / "missing"), snap(0))


def test_all_types_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "t"
    data = all_types_table(300, seed=3)
    with BucketWriter.create(str(root / format_delta(1, 1) / "bucket_00000"),
                             BucketFileOptions(write_id=1, row_schema=data.schema)) as w:
        w.write(data)
    got = read_table(str(root), snap(1))
    assert got.to_pylist() == data.to_pylist()


def test_memory_filesystem(table_dir: Path) -> None:
    mem = fsspec.filesystem("memory")
    root = f"/snap-{uuid.uuid4().hex}"
    for local in FS.find(str(table_dir)):
        mem.pipe_file(root + local[len(str(table_dir)):], Path(local).read_bytes())
    try:
        got = read_table(f"memory://{root}", snap(4))
        assert ids(got) == ids(read_table(str(table_dir), snap(4)))
        assert ids(read_table(root, snap(4), fs=mem)) == ids(got)
    finally:
        mem.rm(root, recursive=True)


def test_original_files_get_synthetic_row_ids(tmp_path: Path) -> None:
    """A table converted to ACID: pre-ACID files 000000_0, 000000_0_copy_1, 000001_0 + a delta."""
    root = tmp_path / "t"
    root.mkdir()
    po.write_table(simple_table(range(0, 3)), str(root / "000000_0"))
    po.write_table(simple_table(range(3, 5)), str(root / "000000_0_copy_1"))
    po.write_table(simple_table(range(5, 7)), str(root / "000001_0"))
    write_rows(root / format_delta(1, 1), 1, range(7, 9))
    delete_keys(root / format_delta(2, 2, delete=True), [(0, BP0, 3)], write_id=2)
    got = read_table(str(root), snap(2), with_row_id=True)
    rows = {r["id"]: r["row__id"] for r in got.to_pylist()}
    assert sorted(rows) == [0, 1, 2, 4, 5, 6, 7, 8]  # id 3 = bucket 0's 4th original row
    assert rows[4] == {"writeid": 0, "bucketid": BP0, "rowid": 4}
    assert rows[6] == {"writeid": 0, "bucketid": encode_bucket_property(1, 0), "rowid": 1}


def test_legacy_update_and_delete_events_in_an_insert_delta(tmp_path: Path) -> None:
    """Hive 2 without split-update: op=1/op=2 events in delta_ dirs supersede older rows."""
    root = tmp_path / "t"
    write_rows(root / format_delta(1, 1), 1, range(3))
    events = pa.table([
        pa.array([1, 2], pa.int32()), pa.array([1, 1], pa.int64()),
        pa.array([BP0, BP0], pa.int32()), pa.array([0, 1], pa.int64()),
        pa.array([2, 2], pa.int64()),
        pa.array([{"id": 0, "value": "updated"}, None], acid_event_schema(SIMPLE_SCHEMA)[5].type),
    ], schema=acid_event_schema(SIMPLE_SCHEMA))
    (root / format_delta(2, 2)).mkdir()
    po.write_table(events, str(root / format_delta(2, 2) / "bucket_00000"))
    got = read_table(str(root), snap(2))
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 0, "value": "updated"}, {"id": 2, "value": "v2"}]
    assert ids(read_table(str(root), snap(2, aborted=(2,)))) == [0, 1, 2]


def test_registry_hash_path_for_unsorted_or_mixed_stripes(tmp_path: Path) -> None:
    """A stripe holding several write ids (a streaming file) takes the hashed lookup."""
    root = tmp_path / "t"
    path = str(root / format_delta(1, 2, None) / "bucket_00000")
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA))
    w.write(simple_table(range(0, 4)))
    w.close()
    w = BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    w.write(simple_table(range(4, 8)))
    w.close()
    delete_keys(root / format_delta(3, 3, delete=True), [(1, BP0, 1), (2, BP0, 1), (2, BP0, 3)],
           write_id=3)
    assert ids(read_table(str(root), snap(3))) == [0, 2, 3, 4, 6]
    # and a stripe that mixes write ids is handled by the same registry
    mixed = pa.table([
        pa.array([0] * 4, pa.int32()), pa.array([1, 1, 2, 2], pa.int64()),
        pa.array([BP0] * 4, pa.int32()), pa.array([0, 1, 0, 1], pa.int64()),
        pa.array([1, 1, 2, 2], pa.int64()),
        pa.StructArray.from_arrays([pa.array(np.arange(4)), pa.array(["a", "b", "c", "d"])],
                                   fields=list(SIMPLE_SCHEMA)),
    ], schema=acid_event_schema(SIMPLE_SCHEMA))
    other = tmp_path / "u"
    (other / format_delta(1, 2, None)).mkdir(parents=True)
    po.write_table(mixed, str(other / format_delta(1, 2, None) / "bucket_00000"))
    delete_keys(other / format_delta(3, 3, delete=True), [(2, BP0, 0)], write_id=3)
    assert read_table(str(other), snap(3))["value"].to_pylist() == ["a", "b", "d"]


def test_positional_row_fields_map_to_the_table_schema(tmp_path: Path) -> None:
    """Hive's writers name row fields _col0, _col1, ...; Hive matches them by position."""
    root = tmp_path / "t"
    positional = pa.schema([("_col0", pa.int64()), ("_col1", pa.string())])
    with BucketWriter.create(str(root / format_delta(1, 1) / "bucket_00000"),
                             BucketFileOptions(write_id=1, row_schema=positional)) as w:
        w.write(simple_table(range(3)).rename_columns(["_col0", "_col1"]))
    write_rows(root / format_delta(2, 2), 2, range(3, 5))
    got = read_table(str(root), snap(2), row_schema=SIMPLE_SCHEMA)
    assert got.schema == SIMPLE_SCHEMA
    assert ids(got) == [0, 1, 2, 3, 4]
    assert read_table(str(root), snap(2), ["value"], row_schema=SIMPLE_SCHEMA)[
        "value"].to_pylist() == ["v0", "v1", "v2", "v3", "v4"]


def test_row_schema_gives_empty_tables_their_columns(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    got = read_table(str(tmp_path / "t"), snap(0), row_schema=SIMPLE_SCHEMA, with_row_id=True)
    assert got.schema.names == ["row__id", "id", "value"] and got.num_rows == 0


def test_added_column_reads_as_null_in_older_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_rows(root / format_delta(1, 1), 1, range(2))
    wider = SIMPLE_SCHEMA.append(pa.field("extra", pa.int32()))
    with BucketWriter.create(str(root / format_delta(2, 2) / "bucket_00000"),
                             BucketFileOptions(write_id=2, row_schema=wider)) as w:
        w.write(simple_table(range(2, 3)).append_column("extra", pa.array([7], pa.int32())))
    got = read_table(str(root), snap(2))
    assert got.schema == wider
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 0, "value": "v0", "extra": None}, {"id": 1, "value": "v1", "extra": None},
        {"id": 2, "value": "v2", "extra": 7}]
