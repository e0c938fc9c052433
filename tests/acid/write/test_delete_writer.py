"""Delete events: a BucketWriter for kind="delete" writes Hive's delete_delta bucket files."""

from __future__ import annotations

import io
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.orc as po
import pyorc
import pytest
from support import ALL_TYPES_SCHEMA, SIMPLE_SCHEMA, simple_table

from ingest.acid import (
    BucketFileOptions,
    BucketWriter,
    WriterOptions,
    read_bucket_file,
    read_flush_lengths,
)
from ingest.acid.format.names import encode_bucket_property, format_delta
from ingest.errors import SchemaMismatchError
from ingest.orc import read_tail

FS = fsspec.filesystem("file")
B0 = encode_bucket_property(0, 0)
B0_S1 = encode_bucket_property(0, 1)
B3 = encode_bucket_property(3, 0)


def delete_path(tmp_path: Path, write_id: int = 9, bucket: int = 0) -> str:
    name = format_delta(write_id, write_id, 0, delete=True)
    return str(tmp_path / name / f"bucket_{bucket:05d}")


def keys(rows: list[tuple[int, int, int]]) -> pa.Table:
    w, b, r = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table({"originalTransaction": pa.array(w, pa.int64()),
                     "bucket": pa.array(b, pa.int32()), "rowId": pa.array(r, pa.int64())})


def key_index(path: str, length: int | None = None) -> list[str]:
    tail = read_tail(FS, path, length if length is not None else Path(path).stat().st_size)
    return tail.user_metadata["hive.acid.key.index"].decode().rstrip(";").split(";")


def test_delete_events_are_sorted_with_null_rows_and_the_deleting_write_id(tmp_path: Path) -> None:
    path = delete_path(tmp_path)
    unsorted = [(5, B0, 7), (2, B0_S1, 0), (2, B0, 3), (5, B0, 1), (2, B0, 0)]
    with BucketWriter.create(path, BucketFileOptions(write_id=9, row_schema=SIMPLE_SCHEMA,
                                                     bucket_id=0, kind="delete")) as w:
        w.write_deletes(keys(unsorted))
        assert w.is_delete_writer
    expected = sorted(unsorted)
    events = read_bucket_file(path).to_pylist()
    assert events == [{"operation": 2, "originalTransaction": o, "bucket": b, "rowId": r,
                       "currentTransaction": 9, "row": None} for o, b, r in expected]
    # pyarrow's and ORC C++'s (pyorc) own readers agree, and see the full row type.
    orc = po.ORCFile(path)
    assert orc.schema.field("row").type == pa.struct(list(SIMPLE_SCHEMA))
    assert orc.read().column("rowId").to_pylist() == [r for _, _, r in expected]
    with open(path, "rb") as f:
        reader = pyorc.Reader(f)
        assert str(reader.schema) == (
            "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
            "currentTransaction:bigint,row:struct<id:bigint,value:string>>")
        assert [tuple(r) for r in reader] == [(2, o, b, r, 9, None) for o, b, r in expected]
    metadata = read_tail(FS, path, Path(path).stat().st_size).user_metadata
    assert metadata["hive.acid.stats"] == b"0,0,5"
    assert metadata["hive.acid.version"] == b"2"
    assert key_index(path) == [f"5,{B0},7"]
    assert not Path(path + "_flush_length").exists()


def test_key_index_holds_the_last_key_of_every_stripe(tmp_path: Path) -> None:
    path = delete_path(tmp_path)
    w = BucketWriter.create(path, BucketFileOptions(write_id=12, row_schema=ALL_TYPES_SCHEMA,
                                                    bucket_id=0, compression="zlib", kind="delete"))
    w.write_deletes(keys([(3, B0, r) for r in range(100)]))
    first = w.flush()
    w.write_deletes(keys([(4, B0, r) for r in range(0, 50, 2)]))
    w.write_deletes(keys([(4, B0, 60), (7, B0_S1, 1)]))
    second = w.flush()
    w.close()
    assert read_flush_lengths(FS, path) is None  # closed: side file removed
    assert key_index(path, first) == [f"3,{B0},99"]
    assert read_tail(FS, path, first).user_metadata["hive.acid.stats"] == b"0,0,100"
    assert key_index(path) == [f"3,{B0},99", f"7,{B0_S1},1"]
    assert read_tail(FS, path, second).user_metadata["hive.acid.stats"] == b"0,0,127"
    table = read_bucket_file(path)
    assert table.num_rows == 127
    assert table.column("row").null_count == 127
    with open(path, "rb") as f:
        assert len(list(pyorc.Reader(io.BytesIO(f.read(first))))) == 100


def test_small_stripes_give_one_key_per_stripe(tmp_path: Path) -> None:
    path = delete_path(tmp_path)
    options = WriterOptions(stripe_size_bytes=64 * 1024, compression_block_size=64 * 1024,
                            row_index_stride=1000)
    with BucketWriter.create(path, BucketFileOptions(write_id=2, row_schema=SIMPLE_SCHEMA,
                                                     bucket_id=0, kind="delete",
                                                     tuning=options)) as w:
        w.write_deletes(keys([(1, B0, r) for r in range(200_000)]))
    orc = po.ORCFile(path)
    assert orc.nstripes > 1
    entries = key_index(path)
    assert len(entries) == orc.nstripes
    last_of_each = [orc.read_stripe(i).column("rowId")[-1].as_py() for i in range(orc.nstripes)]
    assert entries == [f"1,{B0},{r}" for r in last_of_each]
    assert entries[-1] == f"1,{B0},199999"


def test_appending_to_a_delete_file_continues_sorted_deletes(tmp_path: Path) -> None:
    path = delete_path(tmp_path)
    w = BucketWriter.create(path, BucketFileOptions(write_id=4, row_schema=SIMPLE_SCHEMA,
                                                    bucket_id=0, kind="delete"))
    w.write_deletes(keys([(1, B0, 0), (1, B0, 5)]))
    w.flush()
    w.abandon()
    again = BucketWriter.open_append(path, BucketFileOptions(write_id=4))
    assert again.is_delete_writer and again.deletes_written == 2
    with pytest.raises(ValueError, match=r"sorts before the last key written, \(1, 536870912, 5\)"):
        again.write_deletes(keys([(1, B0, 3)]))
    again.write_deletes(keys([(2, B0, 0)]))
    again.close()
    assert read_bucket_file(path).column("rowId").to_pylist() == [0, 5, 0]
    assert read_tail(FS, path, Path(path).stat().st_size).user_metadata[
        "hive.acid.stats"] == b"0,0,3"


def test_nested_struct_rows_stay_null(tmp_path: Path) -> None:
    path = delete_path(tmp_path, bucket=3)
    with BucketWriter.create(path, BucketFileOptions(write_id=3, row_schema=ALL_TYPES_SCHEMA,
                                                     bucket_id=3, kind="delete")) as w:
        w.write_deletes(keys([(1, B3, 2), (1, B3, 1)]))
    rows = read_bucket_file(path).to_pylist()
    assert [(r["bucket"], r["rowId"], r["row"]) for r in rows] == [(B3, 1, None), (B3, 2, None)]


def test_key_columns_may_be_other_integer_types_and_extra_columns_are_ignored(
        tmp_path: Path) -> None:
    path = delete_path(tmp_path)
    data = pa.table({"rowId": pa.array([2, 1], pa.int32()),
                     "bucket": pa.array([B0, B0], pa.int64()),
                     "originalTransaction": pa.array([1, 1], pa.int32()),
                     "note": ["x", "y"]})
    with BucketWriter.create(path, BucketFileOptions(write_id=3, row_schema=SIMPLE_SCHEMA,
                                                     bucket_id=0, kind="delete")) as w:
        w.write_deletes(data)
        w.write_deletes(keys([]))
    assert read_bucket_file(path).column("rowId").to_pylist() == [1, 2]


def test_a_key_of_another_bucket_is_refused(tmp_path: Path) -> None:
    path = delete_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=3, row_schema=SIMPLE_SCHEMA,
                                                     bucket_id=0, kind="delete")) as w:
        with pytest.raises(ValueError, match=f"bucket property {B3} decodes to bucket 3, but "
                                             "this file is bucket 0"):
            w.write_deletes(keys([(1, B0, 0), (1, B3, 0)]))
    assert read_bucket_file(path).num_rows == 0


def test_missing_key_column_and_nulls_are_schema_errors(tmp_path: Path) -> None:
    path = delete_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=3, row_schema=SIMPLE_SCHEMA,
                                                     bucket_id=0, kind="delete")) as w:
        with pytest.raises(SchemaMismatchError, match="key column 'rowId' is missing"):
            w.write_deletes(pa.table({"originalTransaction": [1], "bucket": [B0]}))
        with pytest.raises(SchemaMismatchError, match="'bucket' must be an integer without "
                                                      "nulls, found int64 with 1 nulls"):
            w.write_deletes(pa.table({"originalTransaction": [1], "bucket": [None],
                                      "rowId": [0]}, schema=pa.schema(
                [("originalTransaction", pa.int64()), ("bucket", pa.int64()),
                 ("rowId", pa.int64())])))


def test_insert_and_delete_writers_do_not_mix(tmp_path: Path) -> None:
    with BucketWriter.create(delete_path(tmp_path), BucketFileOptions(write_id=3,
                                                                      row_schema=SIMPLE_SCHEMA,
                                                                      bucket_id=0,
                                                                      kind="delete")) as w:
        with pytest.raises(ValueError, match="writes delete events: use write_deletes"):
            w.write(simple_table(range(2)))
    insert = str(tmp_path / "delta_0000003_0000003_0000" / "bucket_00000")
    with BucketWriter.create(insert, BucketFileOptions(write_id=3, row_schema=SIMPLE_SCHEMA)) as w:
        with pytest.raises(ValueError, match="writes insert events: open a delete_delta file"):
            w.write_deletes(keys([(1, B0, 0)]))
        w.write(simple_table(range(2)))
        w.flush()
        assert w.rows_written == 2 and w.deletes_written == 0
    assert read_tail(FS, insert, Path(insert).stat().st_size).user_metadata[
        "hive.acid.stats"] == b"2,0,0"
