"""Random inserts, deletes, aborted and open transactions vs a dict model of visible rows.

Each insert is a new delta directory (one or two statements, bucket 0 or 1); streaming batches
put several transactions into one bucket file with a side file; each delete is a delete_delta
naming existing ROW__IDs. Every snapshot (each high watermark, with some committed write ids
shown as still open) must read exactly the model's rows, keyed by ROW__ID.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import fsspec
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import SIMPLE_SCHEMA, simple_table, write_deletes

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList
from ingest.acid.format.names import encode_bucket_property, format_delta
from ingest.acid.read.reader import read_table

# The memory filesystem: no fsync, so an example costs milliseconds; the fsspec (non-local)
# read path is the one exercised here, test_snapshot.py covers the local one.
FS = fsspec.filesystem("memory")
STATES = st.sampled_from(["committed", "committed", "committed", "aborted", "open"])
Key = tuple[int, int, int]  # (writeid, bucket property, rowid)

INSERT = st.tuples(st.just("insert"), STATES, st.integers(1, 5), st.sampled_from([0, 1]),
                   st.booleans())
DELETE = st.tuples(st.just("delete"), STATES, st.lists(st.integers(0, 10_000), min_size=1,
                                                       max_size=4), st.none(), st.none())
STREAM = st.tuples(st.just("stream"), st.lists(STATES, min_size=1, max_size=4),
                   st.integers(1, 3), st.sampled_from([0, 1]), st.booleans())
OPS = st.lists(st.one_of(INSERT, DELETE, STREAM), min_size=1, max_size=12)


@dataclass
class Model:
    root: str
    next_write_id: int = 1
    next_value: int = 0
    states: dict[int, str] = field(default_factory=dict)
    inserted: dict[Key, tuple[int, int]] = field(default_factory=dict)  # key -> (write id, value)
    deletes: list[tuple[int, Key]] = field(default_factory=list)  # (delete write id, key)

    def take_write_id(self, state: str) -> int:
        wid = self.next_write_id
        self.next_write_id += 1
        self.states[wid] = state
        return wid

    def rows(self, n: int) -> pa.Table:
        table = simple_table(range(self.next_value, self.next_value + n))
        self.next_value += n
        return table

    def record(self, wid: int, bucket_property: int, table: pa.Table, first_row_id: int = 0
               ) -> None:
        for k, value in enumerate(table["id"].to_pylist()):
            self.inserted[(wid, bucket_property, first_row_id + k)] = (wid, value)

    # -- operations -------------------------------------------------------------------------

    def insert(self, state: str, n: int, bucket: int, two_statements: bool) -> None:
        wid = self.take_write_id(state)
        for stmt in (0, 1) if two_statements else (0,):
            table = self.rows(n)
            path = f"{self.root}/{format_delta(wid, wid, stmt)}/bucket_{bucket:05d}"
            with BucketWriter.create(path, BucketFileOptions(write_id=wid, row_schema=SIMPLE_SCHEMA,
                                                             bucket_id=bucket,
                                                             statement_id=stmt), fs=FS) as w:
                w.write(table)
            self.record(wid, encode_bucket_property(bucket, stmt), table)

    def stream(self, states: list[str], n: int, bucket: int, last_unflushed: bool) -> None:
        """One streaming batch: several txns in one bucket file, the side file kept."""
        wids = [self.take_write_id(s) for s in states]
        path = (f"{self.root}/{format_delta(wids[0], wids[-1], None)}/"
                f"bucket_{bucket:05d}")
        for i, wid in enumerate(wids):
            table = self.rows(n)
            if i == 0:
                w = BucketWriter.create(path, BucketFileOptions(write_id=wid,
                                                                row_schema=SIMPLE_SCHEMA,
                                                                bucket_id=bucket), fs=FS)
            else:
                w = BucketWriter.open_append(path, BucketFileOptions(write_id=wid), fs=FS)
            w.write(table)
            if last_unflushed and i == len(wids) - 1 and i > 0:
                # Written past the last flush length: a reader must never see these rows.
                w._write_pending()
                self.states[wid] = "aborted"
            else:
                w.flush()
                self.record(wid, encode_bucket_property(bucket, 0), table)
            w.abandon()

    def delete(self, state: str, picks: list[int]) -> None:
        if not self.inserted:
            return
        keys = sorted(self.inserted)
        chosen = sorted({keys[p % len(keys)] for p in picks})
        wid = self.take_write_id(state)
        by_bucket: dict[int, list[Key]] = {}
        for key in chosen:
            by_bucket.setdefault((key[1] >> 16) & 0xFFF, []).append(key)
        for bucket, bucket_keys in by_bucket.items():
            table = pa.table({
                "originalTransaction": pa.array([k[0] for k in bucket_keys], pa.int64()),
                "bucket": pa.array([k[1] for k in bucket_keys], pa.int32()),
                "rowId": pa.array([k[2] for k in bucket_keys], pa.int64()),
            })
            path = f"{self.root}/{format_delta(wid, wid, 0, delete=True)}/bucket_{bucket:05d}"
            write_deletes(path, table, write_id=wid, bucket_id=bucket, fs=FS)
        self.deletes.extend((wid, k) for k in chosen)

    # -- expectations -----------------------------------------------------------------------

    def visible(self, snapshot: ValidWriteIdList) -> dict[Key, int]:
        gone = {k for wid, k in self.deletes if snapshot.is_valid(wid)}
        return {k: value for k, (wid, value) in self.inserted.items()
                if snapshot.is_valid(wid) and k not in gone}

    def snapshots(self, hide: int) -> list[ValidWriteIdList]:
        """Snapshots at several high watermarks; `hide` picks a committed id shown as open."""
        out = []
        top = self.next_write_id - 1
        # Up to 8 high watermarks, always the newest: reads dominate the example's cost.
        hwms = sorted({top, *range(0, top + 1, max(1, (top + 7) // 8))})
        for hwm in hwms:
            upto = [w for w in self.states if w <= hwm]
            open_ids = [w for w in upto if self.states[w] == "open"]
            aborted = [w for w in upto if self.states[w] == "aborted"]
            committed = [w for w in upto if self.states[w] == "committed"]
            if committed and hide:
                open_ids.append(committed[hide % len(committed)])
            out.append(ValidWriteIdList("default.t", hwm, tuple(open_ids), tuple(aborted)))
        return out


def _check(ops: list[tuple], hide: int) -> None:
    root = f"/snapshot-model-{uuid.uuid4().hex}"
    try:
        model = Model(f"{root}/t")
        for op, a, b, c, d in ops:
            if op == "insert":
                model.insert(a, b, c, d)
            elif op == "stream":
                model.stream(a, b, c, d)
            else:
                model.delete(a, b)
        for snapshot in model.snapshots(hide):
            if snapshot.high_watermark == 0 and not model.states:
                continue
            got = (read_table(model.root, snapshot, with_row_id=True, fs=FS)
                   if model.states else None)
            expected = model.visible(snapshot)
            actual = {} if got is None else {
                (r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"]):
                    r["id"] for r in got.to_pylist()}
            assert actual == expected, f"snapshot {snapshot}"
    finally:
        if FS.exists(root):
            FS.rm(root, recursive=True)


@settings(max_examples=25, deadline=None)
@given(OPS, st.integers(0, 5))
def test_every_snapshot_matches_the_model(ops: list[tuple], hide: int) -> None:
    _check(ops, hide)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(OPS, st.integers(0, 5))
def test_every_snapshot_matches_the_model_many(ops: list[tuple], hide: int) -> None:
    _check(ops, hide)
