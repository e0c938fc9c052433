"""Key columns made from stripe statistics: a stripe whose statistics prove its ROW__IDs run
without gaps is read without decoding them, and reads exactly as when they are decoded."""

from __future__ import annotations

from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.orc as po
from support import SIMPLE_SCHEMA, delete_keys, simple_table, snap

from ingest.acid import BucketFileOptions, BucketWriter, WriterOptions, acid_event_schema
from ingest.acid.format.names import encode_bucket_property, format_delta
from ingest.acid.read.reader import read_table
from ingest.acid.read.stripe_stats import sequential_keys
from ingest.acid.write.event_writer import EventWriter
from ingest.orc import read_tail

FS = fsspec.filesystem("file")
BP0 = encode_bucket_property(0, 0)
SMALL_STRIPES = WriterOptions(stripe_size_bytes=64 * 1024, compression_block_size=64 * 1024,
                              row_index_stride=1000)


def _written(directory: Path, write_id: int, ids: range) -> str:
    """An insert delta of `ids` in several stripes, as our writer numbers its rows."""
    path = f"{directory}/bucket_00000"
    with BucketWriter.create(path, BucketFileOptions(write_id=write_id, row_schema=SIMPLE_SCHEMA,
                                                     tuning=SMALL_STRIPES)) as w:
        w.write(simple_table(ids))
    return path


def _compacted(directory: Path, ids: range, write_ids: list[int], row_ids: list[int]) -> str:
    """Events written unchanged with the ROW__IDs given (sorted and unique, as compaction
    leaves them, but not always without gaps), in several stripes."""
    path = f"{directory}/bucket_00000"
    n = len(ids)
    rows = simple_table(ids).combine_chunks()
    events = pa.table([pa.array(np.zeros(n, np.int32)), pa.array(write_ids, pa.int64()),
                       pa.array(np.full(n, BP0, np.int32)), pa.array(row_ids, pa.int64()),
                       pa.array(write_ids, pa.int64()),
                       pa.StructArray.from_arrays([c.chunk(0) for c in rows.columns],
                                                  fields=list(SIMPLE_SCHEMA))],
                      schema=acid_event_schema(SIMPLE_SCHEMA))
    with EventWriter.create(path, BucketFileOptions(write_id=max(write_ids),
                                                    row_schema=SIMPLE_SCHEMA,
                                                    tuning=SMALL_STRIPES)) as w:
        w.write_events(events)
    return path


def _keys_of(path: str, stripe: int) -> list[tuple[int, int, int]]:
    decoded = po.ORCFile(path).read_stripe(stripe, columns=["originalTransaction", "bucket",
                                                            "rowId"])
    return list(zip(*(decoded.column(i).to_pylist() for i in range(3)), strict=True))


def test_statistics_prove_every_stripe_our_writer_numbers(tmp_path: Path) -> None:
    path = _written(tmp_path / format_delta(3, 3), 3, range(200_000))
    tail = read_tail(FS, path, FS.size(path))
    assert len(tail.stripes) > 1
    for i in range(len(tail.stripes)):
        keys = _keys_of(path, i)
        assert sequential_keys(tail, i) == keys[0]
        w, b, first = keys[0]
        assert keys == [(w, b, first + j) for j in range(len(keys))]


def test_gaps_and_mixed_write_ids_prove_nothing(tmp_path: Path) -> None:
    n = 30_000
    gaps = _compacted(tmp_path / "gaps", range(n), [1] * n, list(range(0, 2 * n, 2)))
    mixed = _compacted(tmp_path / "mixed", range(n), [1] * (n // 2) + [2] * (n // 2),
                       list(range(n // 2)) * 2)
    proven = {}
    for path in (gaps, mixed):
        tail = read_tail(FS, path, FS.size(path))
        assert len(tail.stripes) > 2
        proven[path] = [sequential_keys(tail, i) for i in range(len(tail.stripes))]
        for i, got in enumerate(proven[path]):
            keys = _keys_of(path, i)
            w, b, first = keys[0]
            runs = keys == [(w, b, first + j) for j in range(len(keys))]
            assert got == (keys[0] if runs else None)
    assert set(proven[gaps]) == {None}
    # The stripe across the change of write id is not proven; those either side are.
    assert proven[mixed].count(None) == 1


def test_made_keys_read_as_decoded_ones(tmp_path: Path) -> None:
    """Deletes hit stripes whose keys are made (our writer's) and stripes whose keys must be
    decoded (compacted events, with gaps); the read, with ROW__IDs and without, equals the
    events minus the deleted keys, taken from the files by pyarrow alone."""
    root = tmp_path / "t"
    ours = _written(root / format_delta(1, 1), 1, range(200_000))
    theirs = _compacted(root / format_delta(2, 2), range(200_000, 230_000), [2] * 30_000,
                      list(range(0, 90_000, 3)))
    rng = np.random.default_rng(7)
    deleted = sorted({(1, BP0, int(r)) for r in rng.choice(200_000, 5_000, replace=False)}
                     | {(2, BP0, int(r) * 3) for r in rng.choice(30_000, 500, replace=False)})
    delete_keys(root / format_delta(3, 3, delete=True), deleted, write_id=3)
    expected = []
    for path in (ours, theirs):
        events = po.ORCFile(path).read()
        keys = zip(*(events.column(c).to_pylist()
                     for c in ("originalTransaction", "bucket", "rowId")), strict=True)
        ids = events.column("row").combine_chunks().field("id").to_pylist()
        expected += [(k, i) for k, i in zip(keys, ids, strict=True)]
    gone = set(deleted)
    expected = sorted((k, i) for k, i in expected if k not in gone)

    got = read_table(str(root), snap(3), with_row_id=True)
    row_ids = [(r["writeid"], r["bucketid"], r["rowid"]) for r in got.column("row__id").to_pylist()]
    assert sorted(zip(row_ids, got.column("id").to_pylist(), strict=True)) == expected
    assert sorted(read_table(str(root), snap(3)).column("id").to_pylist()) == sorted(
        i for _, i in expected)
