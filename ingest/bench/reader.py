"""Snapshot reader benchmark: `read_table` over a base, 10 deltas and 2 delete deltas vs plain
pyarrow ORC reading the same bucket files (no merge, no delete filtering). The delete deltas
are written by the product's own writer (`BucketWriter.create` with `kind="delete"`).
`read_table` checks stripe checksums (docs/format.md §16); an interleaved case with the check
off gives `checksum_overhead`, and `checksum_ms` is the CPU time of the hashing alone.
Further cases: the same read on one thread (INGEST_READ_AHEAD=0; by default the next stripe
is decoded on a worker thread meanwhile), through
`ingest.open_table`, and a filtered read that skips stripes by their statistics;
`cpu_ratio` compares CPU seconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as po

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList
from ingest.acid.format import (
    BUCKET,
    KEY_COLUMNS,
    ORIGINAL_TRANSACTION,
    ROW_ID,
    bucket_file_name,
    encode_bucket_property,
    find_mismatches,
    format_base,
    format_delta,
)
from ingest.acid.format.checksums import CHECK_ENV
from ingest.acid.read import read_table
from ingest.acid.read.merge import READ_AHEAD_ENV
from ingest.bench.support import median_seconds_interleaved, report, sample_rows
from ingest.orc import read_tail
from ingest.table import open_table


def build_table(root: str, *, base_rows: int, deltas: int, delta_rows: int,
                delete_fraction: float, fs: fsspec.AbstractFileSystem) -> tuple[list[str], int]:
    """base_0000001 + `deltas` insert deltas + 2 delete deltas; returns (insert files, expected)."""
    files = []
    path = f"{root}/{format_base(1)}/{bucket_file_name(0)}"
    rows = sample_rows(base_rows)
    with BucketWriter.create(path, BucketFileOptions(write_id=1,
                                                     row_schema=rows.schema), fs=fs) as w:
        w.write(rows)
    files.append(path)
    for k in range(deltas):
        wid = k + 2
        path = f"{root}/{format_delta(wid, wid)}/{bucket_file_name(0)}"
        with BucketWriter.create(path, BucketFileOptions(write_id=wid,
                                                         row_schema=rows.schema), fs=fs) as w:
            w.write(sample_rows(delta_rows, seed=wid))
        files.append(path)
    rng = np.random.default_rng(7)
    total = base_rows + deltas * delta_rows
    deleted = 0
    for j, wid in enumerate((deltas + 2, deltas + 3)):
        # Half the deletions hit the base, half the deltas; the two sets are disjoint.
        base_ids = rng.choice(base_rows, int(base_rows * delete_fraction / 2), replace=False)
        base_ids = base_ids[base_ids % 2 == j]
        owids = rng.integers(2, deltas + 2, int(deltas * delta_rows * delete_fraction / 2))
        delta_ids = rng.integers(0, delta_rows // 2, len(owids)) * 2 + j
        keys = pa.table({
            ORIGINAL_TRANSACTION: np.concatenate([np.ones(len(base_ids), np.int64), owids]),
            BUCKET: np.full(len(base_ids) + len(owids), encode_bucket_property(0, 0), np.int32),
            ROW_ID: np.concatenate([base_ids, delta_ids]).astype(np.int64),
        })
        keys = keys.group_by(list(KEY_COLUMNS)).aggregate([])
        path = f"{root}/{format_delta(wid, wid, delete=True)}/{bucket_file_name(0)}"
        with BucketWriter.create(path, BucketFileOptions(write_id=wid, row_schema=rows.schema,
                                                         bucket_id=0, kind="delete"), fs=fs) as w:
            w.write_deletes(keys)
        deleted += w.deletes_written
    return files, total - deleted


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench reader")
    parser.add_argument("--base-rows", type=int, default=1_000_000)
    parser.add_argument("--deltas", type=int, default=10)
    parser.add_argument("--delta-rows", type=int, default=100_000)
    parser.add_argument("--delete-fraction", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="ingest-bench-reader-")
    fs = fsspec.filesystem("file")
    root = f"{tmp}/events"
    try:
        files, expected = build_table(root, base_rows=args.base_rows, deltas=args.deltas,
                                      delta_rows=args.delta_rows,
                                      delete_fraction=args.delete_fraction, fs=fs)
        snapshot = ValidWriteIdList.all_committed("default.events", args.deltas + 3)
        total = args.base_rows + args.deltas * args.delta_rows

        def baseline() -> int:
            return sum(int(po.ORCFile(p).read().num_rows) for p in files)

        def ingest() -> int:
            return int(read_table(root, snapshot, fs=fs).num_rows)

        def ingest_with_row_id() -> int:
            return int(read_table(root, snapshot, with_row_id=True, fs=fs).num_rows)

        def ingest_unchecked() -> int:
            return _with_env(CHECK_ENV, "0", ingest)

        def ingest_one_thread() -> int:
            return _with_env(READ_AHEAD_ENV, "0", ingest)

        table = open_table(root, metastore=False)

        def table_api() -> int:
            return int(table.to_arrow(snapshot=snapshot).num_rows)

        got = ingest()
        assert baseline() == total, "baseline read a different number of events"
        assert got == expected, f"read_table returned {got} rows, expected {expected}"
        assert table_api() == expected
        timed = median_seconds_interleaved(
            {"baseline": baseline, "ingest": ingest, "row_id": ingest_with_row_id,
             "unchecked": ingest_unchecked, "one_thread": ingest_one_thread,
             "api": table_api}, repeats=args.repeats)
        (base_s, base_all), (acid_s, acid_all), (rid_s, rid_all), (off_s, off_all), (
            one_s, one_all), (api_s, api_all) = timed.values()
        cpu = {name: _cpu_seconds(fn, repeats=args.repeats)
               for name, fn in (("baseline", baseline), ("ingest", ingest))}
        # Base ids 0..999,999, delta ids 0..delta_rows-1: every delta stripe is skipped.
        filtered = table.scan(where=f"id >= {args.delta_rows}", snapshot=snapshot)
        filtered_s = median_seconds_interleaved({"f": filtered.to_arrow},
                                                repeats=args.repeats)["f"][0]
        assert filtered.stats is not None and filtered.stats.stripes_skipped == args.deltas
        checksum_s = _checksum_cpu_seconds(fs, sorted(fs.find(root)), repeats=args.repeats)
        sample = read_table(root, snapshot, ["id"], fs=fs, limit=3)
        assert pc.sum(sample["id"]).as_py() is not None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"events={total} visible={expected} files={len(files)} + 2 delete deltas "
          f"repeats={args.repeats}")
    print(f"plain pyarrow ORC    : median {base_s:.3f} s  runs {[round(t, 3) for t in base_all]}")
    print(f"read_table           : median {acid_s:.3f} s  runs {[round(t, 3) for t in acid_all]}")
    print(f"read_table + row__id : median {rid_s:.3f} s  runs {[round(t, 3) for t in rid_all]}")
    print(f"  checksums off      : median {off_s:.3f} s  runs {[round(t, 3) for t in off_all]}")
    print(f"  one thread         : median {one_s:.3f} s  runs {[round(t, 3) for t in one_all]}")
    print(f"open_table.to_arrow  : median {api_s:.3f} s  runs {[round(t, 3) for t in api_all]}")
    print(f"  where id >= {args.delta_rows}: median {filtered_s:.3f} s, "
          f"{filtered.stats.stripes_skipped} of {filtered.stats.stripes} stripes skipped")
    print(f"CPU seconds: baseline {cpu['baseline']:.3f}, read_table {cpu['ingest']:.3f}")
    report(
        "reader",
        events=total,
        rows=expected,
        ingest_rows_per_s=round(total / acid_s),
        baseline_rows_per_s=round(total / base_s),
        ratio=round(base_s / acid_s, 3),
        ratio_one_thread=round(base_s / one_s, 3),
        ratio_api=round(base_s / api_s, 3),
        cpu_ratio=round(cpu["baseline"] / cpu["ingest"], 3),
        filtered_s=round(filtered_s, 4),
        stripes_skipped=filtered.stats.stripes_skipped,
        with_row_id_rows_per_s=round(total / rid_s),
        checksum_overhead=round(acid_s / off_s - 1, 4),
        checksum_ms=round(checksum_s * 1000, 3),
        checksum_share=round(checksum_s / acid_s, 4),
    )


def _with_env(name: str, value: str, fn: Callable[[], int]) -> int:
    os.environ[name] = value
    try:
        return fn()
    finally:
        del os.environ[name]


def _cpu_seconds(fn: Callable[[], int], *, repeats: int) -> float:
    """Median CPU time (every thread of the process) of `repeats` calls."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def _checksum_cpu_seconds(fs: fsspec.AbstractFileSystem, paths: list[str], *,
                          repeats: int) -> float:
    """Median CPU time of checking every stripe checksum of the table's files."""
    tails = [(p, read_tail(fs, p, fs.size(p))) for p in paths if "bucket_" in p]
    times = []
    for _ in range(repeats):
        start = time.process_time()
        for p, tail in tails:
            assert not find_mismatches(fs, p, tail)
        times.append(time.process_time() - start)
    return statistics.median(times)
