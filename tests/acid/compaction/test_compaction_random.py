"""Random histories of inserts, deletes, aborts and an open transaction batch, compacted minor
and major at random points: the reader returns the same rows with the same ROW__IDs before and
after every compaction, and the model's rows at the end (hypothesis)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import SIMPLE_SCHEMA, write_deletes

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList
from ingest.acid.compaction.compact import compact_partition
from ingest.acid.format.names import encode_bucket_property, format_delta
from ingest.acid.read.reader import read_table

Key = tuple[int, int, int]

step = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 2), st.integers(1, 30)),
    st.tuples(st.just("abort"), st.integers(0, 2), st.integers(1, 10)),
    st.tuples(st.just("delete"), st.integers(0, 2**32), st.integers(1, 8)),
    st.tuples(st.just("compact"), st.sampled_from(["minor", "major"]), st.just(0)),
    st.tuples(st.just("batch"), st.integers(1, 10), st.integers(1, 10)),
)


class History:
    """The partition on disk and what it should hold."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.next_write_id = 1
        self.next_id = 0
        self.aborted: set[int] = set()
        self.open: set[int] = set()
        self.rows: dict[Key, int] = {}  # visible keys -> id
        self.pending: dict[Key, int] = {}  # rows of the open write id

    def snapshot(self) -> ValidWriteIdList:
        return ValidWriteIdList("default.t", self.next_write_id - 1, tuple(self.open),
                                tuple(self.aborted))

    def _ids(self, n: int) -> range:
        self.next_id += n
        return range(self.next_id - n, self.next_id)

    def _table(self, ids: range) -> pa.Table:
        return pa.table({"id": pa.array(list(ids), pa.int64()),
                         "value": [f"v{i}" for i in ids]}, schema=SIMPLE_SCHEMA)

    def insert(self, bucket: int, n: int, *, abort: bool = False) -> None:
        w = self.next_write_id
        self.next_write_id += 1
        ids = self._ids(n)
        with BucketWriter.create(f"{self.root / format_delta(w, w)}/bucket_{bucket:05d}",
                                 BucketFileOptions(write_id=w, row_schema=SIMPLE_SCHEMA,
                                                   bucket_id=bucket)) as writer:
            writer.write(self._table(ids))
        if abort:
            self.aborted.add(w)
            return
        bp = encode_bucket_property(bucket, 0)
        self.rows.update({(w, bp, r): i for r, i in enumerate(ids)})

    def delete(self, seed: int, n: int) -> None:
        if not self.rows:
            return
        keys = sorted(self.rows)
        chosen = sorted({keys[(seed + k * 7919) % len(keys)] for k in range(n)})
        w = self.next_write_id
        self.next_write_id += 1
        by_bucket: dict[int, list[Key]] = {}
        for key in chosen:
            by_bucket.setdefault((key[1] >> 16) & 0xFFF, []).append(key)
            del self.rows[key]
        for bucket, ks in by_bucket.items():
            write_deletes(f"{self.root / format_delta(w, w, delete=True)}/bucket_{bucket:05d}",
                          pa.table({"originalTransaction": [k[0] for k in ks],
                                    "bucket": [k[1] for k in ks], "rowId": [k[2] for k in ks]}),
                          write_id=w, bucket_id=bucket)

    def batch(self, first_rows: int, second_rows: int) -> None:
        """A two-transaction batch: the first commits, the second stays open."""
        if self.open:
            return
        w = self.next_write_id
        self.next_write_id += 2
        path = f"{self.root / format_delta(w, w + 1, None)}/bucket_00000"
        bp = encode_bucket_property(0, 0)
        for write_id, n in ((w, first_rows), (w + 1, second_rows)):
            options = BucketFileOptions(write_id=write_id, row_schema=SIMPLE_SCHEMA)
            writer = (BucketWriter.create(path, options) if write_id == w
                      else BucketWriter.open_append(path, options))
            ids = self._ids(n)
            writer.write(self._table(ids))
            writer.flush()
            writer.abandon()
            target = self.rows if write_id == w else self.pending
            target.update({(write_id, bp, r): i for r, i in enumerate(ids)})
        self.open.add(w + 1)

    def commit_open(self) -> None:
        self.open.clear()
        self.rows.update(self.pending)
        self.pending.clear()

    def read(self) -> dict[Key, int]:
        t = read_table(str(self.root), self.snapshot(), with_row_id=True,
                       row_schema=SIMPLE_SCHEMA)
        got: dict[Key, int] = {}
        for r in t.to_pylist():
            key = (r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"])
            assert key not in got, f"row {key} returned twice"
            got[key] = r["id"]
        return got


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(step, min_size=1, max_size=14))
def test_random_histories_read_the_same_after_compaction(steps: list[tuple]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="compaction-random-"))
    try:
        h = History(tmp / "t")
        h.root.mkdir()
        for kind, a, b in steps:
            if kind == "insert":
                h.insert(a, b)
            elif kind == "abort":
                h.insert(a, b, abort=True)
            elif kind == "delete":
                h.delete(a, b)
            elif kind == "batch":
                h.batch(a, b)
            else:
                before = h.read()
                compact_partition(str(h.root), h.snapshot(), row_schema=SIMPLE_SCHEMA,
                                  kind=kind)
                assert h.read() == before == h.rows
        assert h.read() == h.rows
        h.commit_open()
        assert h.read() == h.rows
        for kind in ("minor", "major"):
            compact_partition(str(h.root), h.snapshot(), row_schema=SIMPLE_SCHEMA, kind=kind)
            assert h.read() == h.rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
