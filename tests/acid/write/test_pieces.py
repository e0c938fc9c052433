"""Stripe pieces: rows encoded away from the writer (`encode_piece`), appended by
`BucketWriter.write_piece` as insert stripes that readers cannot tell from the writer's own."""

from __future__ import annotations

import io
from pathlib import Path

import fsspec
import pyarrow as pa
import pyorc
import pytest
from support import ALL_TYPES_SCHEMA, SIMPLE_SCHEMA, all_types_table, simple_table

from ingest.acid import (
    BucketFileOptions,
    BucketWriter,
    encode_piece,
    read_bucket_file,
    read_flush_lengths,
)
from ingest.acid.format.checksums import find_mismatches
from ingest.errors import SchemaMismatchError
from ingest.orc import read_tail
from ingest.orc.compression import CODECS
from ingest.orc.proto_fields import ColumnStatistics

FS = fsspec.filesystem("file")


def _stats(path: str) -> list[dict]:
    return [{n: v for n, _, v in s.fields if n != ColumnStatistics.BYTES_ON_DISK}
            for s in read_tail(FS, path, Path(path).stat().st_size).statistics]


@pytest.mark.parametrize("codec", CODECS)
def test_pieces_between_rows_read_back_as_one_file_of_rows(tmp_path: Path, codec: str) -> None:
    options = BucketFileOptions(write_id=5, row_schema=ALL_TYPES_SCHEMA, bucket_id=3,
                                compression=codec)
    chunks = [all_types_table(700 + i, seed=i, start=i * 1000) for i in range(4)]
    by_pieces = str(tmp_path / "pieces" / "bucket_00003")
    w = BucketWriter.create(by_pieces, options)
    assert w.write_piece(encode_piece(chunks[0], options)) == 700
    w.write(chunks[1])  # buffered rows, then a piece: the rows keep the lower row ids
    assert w.write_piece(encode_piece(chunks[2], options)) == 702
    first = w.flush()
    assert w.write_piece(encode_piece(chunks[3], options).to_pybytes()) == 703
    w.close()
    by_rows = str(tmp_path / "rows" / "bucket_00003")
    with BucketWriter.create(by_rows, options) as w:
        for chunk in chunks:
            w.write(chunk)
            w.flush()

    ours, theirs = read_bucket_file(by_pieces), read_bucket_file(by_rows)
    assert ours.to_pylist() == theirs.to_pylist()
    assert ours.column("rowId").to_pylist() == list(range(sum(c.num_rows for c in chunks)))
    assert _stats(by_pieces) == _stats(by_rows)
    tail = read_tail(FS, by_pieces, Path(by_pieces).stat().st_size)
    keys = tail.user_metadata["hive.acid.key.index"].decode().rstrip(";").split(";")
    bucket = ours.column("bucket")[0].as_py()
    ends = [700, 1401, 2103, 2806]
    assert keys == [f"5,{bucket},{end - 1}" for end in ends]
    assert [s.number_of_rows for s in tail.stripes] == [700, 701, 702, 703]
    assert len(list(pyorc.Reader(io.BytesIO(Path(by_pieces).read_bytes())))) == 2806
    assert read_bucket_file(by_pieces, length=first).num_rows == 2103
    assert find_mismatches(FS, by_pieces, tail) == []


def test_an_appended_file_takes_pieces_after_its_committed_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "delta" / "bucket_00000")
    options = BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA)
    w = BucketWriter.create(path, options)
    w.write(simple_table(range(5)))
    w.flush()
    w.abandon()
    w = BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    w.write_piece(encode_piece(simple_table(range(5, 9)), options))
    length = w.flush()
    w.abandon()
    assert read_flush_lengths(FS, path)[-1] == length
    got = read_bucket_file(path).to_pylist()
    assert [(r["currentTransaction"], r["rowId"], r["row"]["id"]) for r in got] == [
        *((1, i, i) for i in range(5)), *((2, i, 5 + i) for i in range(4))]


def test_a_piece_of_another_codec_is_written_as_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "bucket_00000")
    with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA,
                                                     compression="zlib")) as w:
        piece = encode_piece(simple_table(range(10)),
                             BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA,
                                               compression="snappy"))
        assert w.write_piece(piece) == 10
    tail = read_tail(FS, path, Path(path).stat().st_size)
    assert tail.compression == "zlib"
    assert [r["row"]["id"] for r in read_bucket_file(path).to_pylist()] == list(range(10))


def test_a_piece_of_other_columns_is_refused_and_the_file_keeps_its_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "bucket_00000")
    options = BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA)
    w = BucketWriter.create(path, options)
    w.write(simple_table(range(3)))
    w.flush()
    other = pa.schema([("id", pa.int64()), ("name", pa.string())])
    piece = encode_piece(pa.table({"id": [1], "name": ["x"]}, schema=other),
                         BucketFileOptions(write_id=1, row_schema=other))
    with pytest.raises(SchemaMismatchError, match="not the file's row schema"):
        w.write_piece(piece)
    w.close()
    assert read_bucket_file(path).num_rows == 3


def test_encode_piece_refuses_rows_of_other_columns() -> None:
    with pytest.raises(SchemaMismatchError,
                       match=r"stripe piece.*column 'value' \(string\) is missing"):
        encode_piece(pa.table({"id": pa.array([1], pa.int64())}),
                     BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA))
