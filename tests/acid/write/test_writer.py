"""The ACID bucket writer: events, footers at every flush, side file, append after a tear."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.orc as po
import pyorc
import pytest
from support import ALL_TYPES_SCHEMA, SIMPLE_SCHEMA, all_types_table, simple_table

from ingest.acid import (
    BucketFileOptions,
    BucketWriter,
    WriterOptions,
    read_bucket_file,
    read_flush_lengths,
)
from ingest.acid.format.events import acid_event_schema
from ingest.errors import ConfigError, CorruptFileError, SchemaMismatchError
from ingest.orc import open_orc, parse_tail, read_tail
from ingest.orc.compression import CODECS
from ingest.orc.proto_fields import ColumnStatistics, Footer

FS = fsspec.filesystem("file")


def bucket_path(tmp_path: Path, name: str = "delta_0000001_0000003") -> str:
    return str(tmp_path / name / "bucket_00000")


def flushed_then_died(path: str, ids: range, *, write_id: int) -> int:
    """A writer that flushed `ids` and died: no close, so the side file stays."""
    w = BucketWriter.create(path, BucketFileOptions(write_id=write_id, row_schema=SIMPLE_SCHEMA))
    w.write(simple_table(ids))
    length = w.flush()
    w.abandon()
    return length


def rows_at(path: str, length: int) -> list[dict]:
    with open_orc(FS, path, length) as orc:
        return orc.read().to_pylist()


def pyorc_rows(path: str, length: int) -> list[tuple]:
    with open(path, "rb") as f:
        return list(pyorc.Reader(io.BytesIO(f.read(length))))


def test_events_carry_hive_acid_fields(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=7, row_schema=SIMPLE_SCHEMA,
                                                     bucket_id=1, statement_id=2)) as w:
        w.write(simple_table(range(3)))
    rows = read_bucket_file(path).to_pylist()
    assert rows[0] == {"operation": 0, "originalTransaction": 7, "bucket": 536936450,
                       "rowId": 0, "currentTransaction": 7, "row": {"id": 0, "value": "v0"}}
    assert [r["rowId"] for r in rows] == [0, 1, 2]
    assert not Path(path + "_flush_length").exists(), "close() removes the side file"


def test_bucket_zero_statement_zero_is_536870912(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA)) as w:
        w.write(simple_table(range(1)))
    assert read_bucket_file(path).column("bucket").to_pylist() == [536870912]


@pytest.mark.parametrize("codec", CODECS)
def test_every_flush_length_opens_in_pyarrow_and_pyorc_with_exactly_its_rows(
        tmp_path: Path, codec: str) -> None:
    path = bucket_path(tmp_path)
    w = BucketWriter.create(path, BucketFileOptions(write_id=3, row_schema=ALL_TYPES_SCHEMA,
                                                    compression=codec))
    written = []
    for i in range(4):
        chunk = all_types_table(50 + i, seed=i, start=i * 100)
        w.write(chunk)
        written += chunk.to_pylist()
        length = w.flush()
        assert read_flush_lengths(FS, path)[-1] == length
        got = rows_at(path, length)
        assert [r["row"] for r in got] == written
        assert [r["rowId"] for r in got] == list(range(len(written)))
        assert len(pyorc_rows(path, length)) == len(written)
    lengths = read_flush_lengths(FS, path)
    assert lengths[0] == 0 and lengths == sorted(lengths)
    for length in lengths[1:]:  # earlier footers stay valid after later stripes
        tail = read_tail(FS, path, length)
        assert tail.compression == codec
        metadata = tail.user_metadata
        assert metadata["hive.acid.version"] == b"2"
        assert metadata["hive.acid.stats"] == f"{tail.number_of_rows},0,0".encode()
        keys = metadata["hive.acid.key.index"].decode().rstrip(";").split(";")
        assert len(keys) == len(tail.stripes)
        last = rows_at(path, length)[-1]
        assert keys[-1] == f"3,{last['bucket']},{last['rowId']}"
    w.close()
    assert [r["row"] for r in read_bucket_file(path).to_pylist()] == written


@pytest.mark.parametrize("codec", CODECS)
def test_file_statistics_equal_those_of_one_pyarrow_write_of_the_same_events(
        tmp_path: Path, codec: str) -> None:
    path = bucket_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=4, row_schema=ALL_TYPES_SCHEMA,
                                                     compression=codec)) as w:
        for i in range(5):
            w.write(all_types_table(300, seed=11, start=i * 300))
            w.flush()
    ours = read_bucket_file(path)
    assert po.ORCFile(path).nstripes == 5
    sink = io.BytesIO()
    po.write_table(ours, sink, compression={"none": "uncompressed"}.get(codec, codec))
    whole = sink.getvalue()
    reference = parse_tail(whole, len(whole)).statistics
    data = Path(path).read_bytes()
    merged = parse_tail(data, len(data)).statistics
    assert len(merged) == len(reference)
    for column, (a, b) in enumerate(zip(merged, reference, strict=True)):
        a, b = _comparable(a), _comparable(b)
        assert a.keys() == b.keys(), column
        for key in a:
            if key == ColumnStatistics.DOUBLE_STATISTICS:
                assert a[key][:2] == b[key][:2], column
                assert a[key][2] == pytest.approx(b[key][2], rel=1e-9), column
            else:
                assert a[key] == b[key], (column, key)


def _comparable(stats) -> dict:
    out = {}
    for number, _, value in stats.fields:
        if number == ColumnStatistics.BYTES_ON_DISK:
            continue
        if number == ColumnStatistics.DOUBLE_STATISTICS:
            from ingest.orc import Message

            m = Message.decode(value)
            out[number] = (m.double(1), m.double(2), m.double(3) or 0.0)
        else:
            out[number] = value
    return out


def test_torn_stripe_is_discarded_on_reopen_and_every_reader_sees_the_right_rows(
        tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA))
    for i in range(3):
        w.write(simple_table(range(i * 10, i * 10 + 10)))
        w.flush()
    w.abandon()  # the writer dies: no close, side file stays
    committed = Path(path).stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x17torn stripe bytes that never got a footer" * 50)
    assert read_bucket_file(path).num_rows == 30, "readers stop at the flush length"

    w = BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    assert Path(path).stat().st_size == committed, "bytes past the flush length are cut first"
    w.write(simple_table(range(100, 105)))
    w.close()
    rows = read_bucket_file(path).to_pylist()
    assert [r["row"]["id"] for r in rows] == list(range(30)) + list(range(100, 105))
    assert [(r["originalTransaction"], r["rowId"]) for r in rows[28:32]] == [
        (1, 28), (1, 29), (2, 0), (2, 1)]
    assert len(pyorc_rows(path, Path(path).stat().st_size)) == 35
    metadata = po.ORCFile(path).metadata
    assert metadata[b"hive.acid.key.index"].endswith(b"2,536870912,4;")
    assert metadata[b"hive.acid.stats"] == b"35,0,0"


def test_same_write_id_continues_row_ids(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    flushed_then_died(path, range(3), write_id=5)
    w = BucketWriter.open_append(path, BucketFileOptions(write_id=5))
    w.write(simple_table(range(3, 5)))
    w.close()
    assert read_bucket_file(path).column("rowId").to_pylist() == [0, 1, 2, 3, 4]


def test_appending_an_older_write_id_is_refused(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=5, row_schema=SIMPLE_SCHEMA)) as w:
        w.write(simple_table(range(3)))
    with pytest.raises(SchemaMismatchError, match="sorted by write id"):
        BucketWriter.open_append(path, BucketFileOptions(write_id=4))


def test_batch_with_wrong_schema_is_refused_and_flushed_rows_survive(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA))
    w.write(simple_table(range(5)))
    length = w.flush()
    bad = pa.table({"id": pa.array(["x"]), "value": pa.array(["y"])})
    with pytest.raises(SchemaMismatchError, match="column 'id' is string, expected int64"):
        w.write(bad)
    with pytest.raises(SchemaMismatchError, match="column 'extra' is not in the table"):
        w.write(simple_table(range(1)).append_column("extra", pa.array([1])))
    assert rows_at(path, length)[-1]["row"] == {"id": 4, "value": "v4"}
    w.write(simple_table(range(5, 6)))
    w.close()
    assert read_bucket_file(path).num_rows == 6


def test_side_file_pointing_past_the_end_is_a_clear_error(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    flushed_then_died(path, range(5), write_id=1)
    size = Path(path).stat().st_size
    with open(path + "_flush_length", "ab") as f:
        f.write(struct.pack(">q", size + 1000))
    with pytest.raises(CorruptFileError, match=f"flush length of {size + 1000:,} bytes but the "
                                                f"file has only {size:,}") as info:
        read_bucket_file(path)
    assert "ingest recover" in str(info.value)
    with pytest.raises(CorruptFileError):
        BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    assert Path(path).stat().st_size == size, "a refused append changes nothing"


def test_torn_side_file_entry_is_ignored(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    flushed_then_died(path, range(5), write_id=1)
    with open(path + "_flush_length", "ab") as f:
        f.write(b"\x00\x00\x01")  # a crash mid-way through writing the next entry
    assert read_bucket_file(path).num_rows == 5


def test_not_an_orc_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bucket_00000"
    path.write_bytes(b"id,value\n1,a\n")
    with pytest.raises(CorruptFileError, match="no ORC postscript"):
        read_bucket_file(str(path))
    with pytest.raises(CorruptFileError):
        BucketWriter.open_append(str(path), BucketFileOptions(write_id=1))


def test_existing_file_is_not_overwritten(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA)) as w:
        w.write(simple_table(range(2)))
    with pytest.raises(FileExistsError, match="open_append"):
        BucketWriter.create(path, BucketFileOptions(write_id=2, row_schema=SIMPLE_SCHEMA))
    assert read_bucket_file(path).num_rows == 2


def test_memory_filesystem_round_trip() -> None:
    fs = fsspec.filesystem("memory")
    path = "memory://ingest-test-writer/delta_0000001_0000002/bucket_00000"
    try:
        w = BucketWriter.create(path, BucketFileOptions(write_id=1,
                                                        row_schema=SIMPLE_SCHEMA), fs=fs)
        w.write(simple_table(range(4)))
        w.flush()
        w.abandon()
        w = BucketWriter.open_append(path, BucketFileOptions(write_id=2), fs=fs)
        w.write(simple_table(range(4, 6)))
        w.close()
        assert read_bucket_file(path, fs=fs).column("currentTransaction").to_pylist() == [
            1, 1, 1, 1, 2, 2]
    finally:
        fs.rm("/ingest-test-writer", recursive=True)


def test_small_stripes_make_several_stripes_per_flush(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    options = WriterOptions(stripe_size_bytes=64 * 1024, compression_block_size=64 * 1024,
                            row_index_stride=1000)
    with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA,
                                                     tuning=options)) as w:
        w.write(simple_table(range(200_000)))
    f = po.ORCFile(path)
    assert f.nstripes > 1
    keys = f.metadata[b"hive.acid.key.index"].decode().rstrip(";").split(";")
    assert len(keys) == f.nstripes and keys[-1] == "1,536870912,199999"
    assert read_bucket_file(path).schema == acid_event_schema(SIMPLE_SCHEMA)


def test_reopened_file_accepts_the_arrow_types_it_was_created_with(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    schema = pa.schema([("ts", pa.timestamp("us")), ("s", pa.string())])
    batch = pa.table({"ts": pa.array([1_700_000_000_000_000], pa.timestamp("us")),
                      "s": ["a"]}, schema=schema)
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=schema))
    w.write(batch)
    w.flush()
    w.abandon()
    w = BucketWriter.open_append(path,
                                 BucketFileOptions(write_id=2))  # reads back timestamp[ns] from ORC
    w.write(batch)
    w.close()
    assert read_bucket_file(path).num_rows == 2


@pytest.mark.parametrize(("options", "message"), [
    (WriterOptions(compression_block_size=4096), "compression_block_size"),
    (WriterOptions(row_index_stride=0), "row_index_stride=0"),
    (WriterOptions(encoder_threads=0), "encoder_threads=0"),
    (WriterOptions(stripe_size_bytes=0), "stripe_size_bytes=0"),
])
def test_bad_writer_options_are_a_config_error(tmp_path: Path, options: WriterOptions,
                                               message: str) -> None:
    from ingest.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        BucketWriter.create(bucket_path(tmp_path), BucketFileOptions(write_id=1,
                                                                     row_schema=SIMPLE_SCHEMA,
                                                                     tuning=options))
    assert not (tmp_path / "delta_0000001_0000003").exists(), "nothing is created"


def test_torn_side_file_entry_is_cut_before_appending(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    flushed_then_died(path, range(5), write_id=1)
    with open(path + "_flush_length", "ab") as f:
        f.write(b"\x00\x00\x01")
    w = BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    w.write(simple_table(range(5, 8)))
    length = w.flush()
    w.abandon()
    assert read_flush_lengths(FS, path)[-1] == length
    assert Path(path + "_flush_length").stat().st_size % 8 == 0
    assert read_bucket_file(path).column("currentTransaction").to_pylist() == [1] * 5 + [2] * 3


def test_a_second_writer_appending_to_the_same_file_is_fenced_off(tmp_path: Path) -> None:
    from ingest.errors import CommitConflictError

    path = bucket_path(tmp_path)
    flushed_then_died(path, range(5), write_id=1)
    first = BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    zombie = BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    first.write(simple_table(range(5, 7)))
    first.flush()
    zombie.write(simple_table(range(100, 102)))
    with pytest.raises(CommitConflictError, match="another writer changed it"):
        zombie.flush()
    zombie.abandon()
    first.close()
    assert read_bucket_file(path).column("rowId").to_pylist() == [0, 1, 2, 3, 4, 0, 1]


def test_sliced_batches_with_null_lists_and_a_struct_column(tmp_path: Path) -> None:
    schema = pa.schema([("st", pa.struct([("x", pa.int32())])), ("l", pa.list_(pa.int32()))])
    table = pa.table({"st": [{"x": 1}, None, {"x": 3}, {"x": 4}],
                      "l": [[1], None, [], None]}, schema=schema)
    path = bucket_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=schema)) as w:
        w.write(table.slice(0, 1))
        w.write(table.slice(1))
    assert [r["row"] for r in read_bucket_file(path).to_pylist()] == table.to_pylist()


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_stripes_cut_from_one_write_and_encoded_in_column_groups_keep_every_value(
        tmp_path: Path, split_stripes_into_column_groups: None, threads: int) -> None:
    # Stripe cuts slice the buffered rows (pyarrow misplaces values of sliced struct columns
    # with nulls unless the writer copies them), and every stripe is split into column groups.
    table = all_types_table(3000)
    path = bucket_path(tmp_path)
    options = WriterOptions(stripe_size_bytes=48 * 1024, row_index_stride=100,
                            encoder_threads=threads)
    with BucketWriter.create(path, BucketFileOptions(write_id=4, row_schema=ALL_TYPES_SCHEMA,
                                                     tuning=options)) as w:
        w.write(table)
        length = w.flush()
        w.write(table.slice(5, 700))
    assert po.ORCFile(path).nstripes > 3
    events = read_bucket_file(path).to_pylist()
    assert [e["row"] for e in events] == table.to_pylist() + table.slice(5, 700).to_pylist()
    assert [e["rowId"] for e in events] == list(range(3700))
    at_flush = pyorc_rows(path, length)
    assert [r[3] for r in at_flush] == list(range(3000))
    assert [r[5][0] for r in at_flush] == table.column(0).to_pylist()


@pytest.mark.parametrize("codec", CODECS)
def test_event_columns_hold_multi_byte_values_in_every_row_group(tmp_path: Path,
                                                                 codec: str) -> None:
    # The writer encodes the event columns itself: varints of 1..6 bytes, runs cut at row
    # groups of an odd stride, a row id sequence that continues across a reopen.
    write_id = (1 << 40) + 3
    path = bucket_path(tmp_path)
    options = WriterOptions(row_index_stride=777)
    with BucketWriter.create(path, BucketFileOptions(write_id=write_id, row_schema=SIMPLE_SCHEMA,
                                                     bucket_id=4095, statement_id=9,
                                                     compression=codec, tuning=options)) as w:
        w.write(simple_table(range(20_000)))
        w.flush()
        w.write(simple_table(range(20_000, 20_003)))
    expected = [(0, write_id, (1 << 29) | (4095 << 16) | 9, i, write_id) for i in range(20_003)]
    events = read_bucket_file(path).to_pylist()
    keys = ["operation", "originalTransaction", "bucket", "rowId", "currentTransaction"]
    assert [tuple(e[k] for k in keys) for e in events] == expected
    assert [r[:5] for r in pyorc_rows(path, Path(path).stat().st_size)] == expected


def test_appending_keeps_the_files_row_index_stride_so_seeks_land_right(tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    with BucketWriter.create(path,
                             BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA,
                                               tuning=WriterOptions(row_index_stride=100))) as w:
        w.write(simple_table(range(1000)))
    w = BucketWriter.open_append(path,
                                 BucketFileOptions(write_id=2))  # default options: stride 10,000
    w.write(simple_table(range(1000, 2000)))
    w.close()
    tail = parse_tail(Path(path).read_bytes(), Path(path).stat().st_size)
    assert tail.footer.uint(Footer.ROW_INDEX_STRIDE) == 100
    with open(path, "rb") as f:
        reader = pyorc.Reader(f)
        for row in (150, 1150, 1999):
            reader.seek(row)
            event = next(reader)
            assert (event[1], event[3]) == (row // 1000 + 1, row % 1000), row


@pytest.mark.parametrize(("schema", "write_id", "error"), [
    (SIMPLE_SCHEMA, 1 << 63, ValueError),
    (SIMPLE_SCHEMA, -1, ValueError),
    (pa.schema([]), 1, SchemaMismatchError),
])
def test_impossible_write_ids_and_empty_schemas_are_refused_before_any_file(
        tmp_path: Path, schema: pa.Schema, write_id: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        BucketWriter.create(bucket_path(tmp_path), BucketFileOptions(write_id=write_id,
                                                                     row_schema=schema))
    assert not (tmp_path / "delta_0000001_0000003").exists()


def test_appending_to_a_file_with_a_block_size_pyarrow_cannot_write_is_refused(
        tmp_path: Path) -> None:
    # ORC Java picks smaller compression blocks for wide schemas (e.g. 32 KiB); pyarrow
    # writes only multiples of 64 KiB, so such a file cannot be continued.
    from ingest.errors import UnsupportedFormatError
    from ingest.orc import serialize_tail

    path = bucket_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA,
                                                     compression="zlib")) as w:
        w.write(simple_table(range(10)))
    data = Path(path).read_bytes()
    tail = parse_tail(data, len(data))
    rewritten = data[:tail.start] + serialize_tail(
        postscript=tail.postscript, footer=tail.footer, metadata=tail.metadata,
        compression="zlib", block_size=32 * 1024)
    Path(path).write_bytes(rewritten)
    with pytest.raises(UnsupportedFormatError, match="block size of 32,768 bytes"):
        BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    assert Path(path).read_bytes() == rewritten
    assert read_bucket_file(path).num_rows == 10


def test_open_append_takes_unset_options_from_the_file_and_refuses_disagreeing_ones(
        tmp_path: Path) -> None:
    path = bucket_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA,
                                                     bucket_id=2, compression="zlib")) as w:
        w.write(simple_table(range(3)))
    for wrong, error in [({"kind": "delete"}, ValueError), ({"bucket_id": 1}, ValueError),
                         ({"compression": "zstd"}, ValueError),
                         ({"row_schema": pa.schema([("id", pa.int64())])}, SchemaMismatchError)]:
        with pytest.raises(error, match="Cannot append to"):
            BucketWriter.open_append(path, BucketFileOptions(write_id=2, **wrong))
    w = BucketWriter.open_append(path, BucketFileOptions(write_id=2, row_schema=SIMPLE_SCHEMA))
    assert (w.options.bucket_id, w.options.statement_id, w.options.kind,
            w.options.compression) == (2, 0, "insert", "zlib")
    w.write(simple_table(range(3, 5)))
    w.close()
    assert read_bucket_file(path).column("bucket").to_pylist() == [537001984] * 5


def test_create_needs_a_row_schema(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="row_schema"):
        BucketWriter.create(bucket_path(tmp_path), BucketFileOptions(write_id=1))


def test_options_take_a_codec_in_any_case_and_refuse_an_unknown_one() -> None:
    assert BucketFileOptions(write_id=1, compression="ZSTD").compression == "zstd"  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'gzip' is not one of NONE, ZLIB, SNAPPY, LZ4, ZSTD"):
        BucketFileOptions(write_id=1, compression="gzip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Bucket id 4096 is out of range"):
        BucketFileOptions(write_id=1, bucket_id=4096)



def test_files_of_one_schema_share_an_empty_tail_and_each_schema_has_its_own(
        tmp_path: Path) -> None:
    def written_types(name: str, schema: pa.Schema, value: object) -> str:
        path = bucket_path(tmp_path, name)
        w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=schema))
        w.write(pa.table({"c": [value]}, schema=schema))
        w.close()
        with open(path, "rb") as f:
            return str(pyorc.Reader(f).schema)

    text, number = pa.schema([("c", pa.string())]), pa.schema([("c", pa.int32())])
    assert written_types("delta_0000001_0000001", text, "a").endswith("row:struct<c:string>>")
    assert written_types("delta_0000002_0000002", number, 1).endswith("row:struct<c:int>>")
    assert written_types("delta_0000003_0000003", text, "b").endswith("row:struct<c:string>>")
    w = BucketWriter.create(bucket_path(tmp_path, "delta_0000004_0000004"),
                            BucketFileOptions(write_id=4, row_schema=SIMPLE_SCHEMA))
    events = acid_event_schema(SIMPLE_SCHEMA)
    assert w._encoder.empty_tail(events) is w._encoder.empty_tail(events)
    w.close()
