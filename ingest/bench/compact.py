"""Compaction benchmark: a major compaction of N deltas (default 100 x 100k rows) and 2 delete
deltas into one base; compaction rows/s, and the snapshot read speed before and after it, in
one run. The table is written by the product's own writer. Compaction runs in this process:
its peak RSS during `compact_partition` is reported (`peak_rss_mb`), with what the process
held when compaction began (`rss_before_mb`: imports, the build's and the reads' leftovers).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time

import fsspec
import numpy as np
import pyarrow as pa

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList
from ingest.acid.compaction import compact_partition
from ingest.acid.format import (
    BUCKET,
    KEY_COLUMNS,
    ORIGINAL_TRANSACTION,
    ROW_ID,
    bucket_file_name,
    encode_bucket_property,
    format_delta,
)
from ingest.acid.read import read_table
from ingest.bench.support import PeakRss, median_seconds, report, sample_rows


def build_table(root: str, *, deltas: int, delta_rows: int, delete_fraction: float,
                fs: fsspec.AbstractFileSystem) -> tuple[int, int]:
    """`deltas` insert deltas (write ids 1..N) and 2 delete deltas; (rows, rows deleted)."""
    schema = sample_rows(1).schema
    for wid in range(1, deltas + 1):
        path = f"{root}/{format_delta(wid, wid)}/{bucket_file_name(0)}"
        with BucketWriter.create(path, BucketFileOptions(write_id=wid, row_schema=schema),
                                 fs=fs) as w:
            w.write(sample_rows(delta_rows, seed=wid))
    rng = np.random.default_rng(7)
    deleted = 0
    for j, wid in enumerate((deltas + 1, deltas + 2)):
        # Each delete delta hits rowIds of one parity, so the two never name the same row.
        count = int(deltas * delta_rows * delete_fraction / 2)
        keys = pa.table({
            ORIGINAL_TRANSACTION: rng.integers(1, deltas + 1, count),
            BUCKET: np.full(count, encode_bucket_property(0, 0), np.int32),
            ROW_ID: rng.integers(0, delta_rows // 2, count) * 2 + j,
        }).group_by(list(KEY_COLUMNS)).aggregate([])
        path = f"{root}/{format_delta(wid, wid, delete=True)}/{bucket_file_name(0)}"
        with BucketWriter.create(path, BucketFileOptions(write_id=wid, row_schema=schema,
                                                         kind="delete"), fs=fs) as w:
            w.write_deletes(keys)
        deleted += w.deletes_written
    return deltas * delta_rows, deleted


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process so far, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench compact")
    parser.add_argument("--deltas", type=int, default=100)
    parser.add_argument("--delta-rows", type=int, default=100_000)
    parser.add_argument("--delete-fraction", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=3, help="reads timed before and after")
    args = parser.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="ingest-bench-compact-")
    fs = fsspec.filesystem("file")
    root = f"{tmp}/events"
    try:
        started = time.perf_counter()
        rows, deleted = build_table(root, deltas=args.deltas, delta_rows=args.delta_rows,
                                    delete_fraction=args.delete_fraction, fs=fs)
        build_s = time.perf_counter() - started
        snapshot = ValidWriteIdList("default.events", args.deltas + 2)
        schema = sample_rows(1).schema
        expected = rows - deleted

        def read() -> None:
            got = read_table(root, snapshot, fs=fs).num_rows
            assert got == expected, f"read {got:,} rows, expected {expected:,}"

        before_s, before_all = median_seconds(read, repeats=args.repeats)
        # The build and the reads leave freed buffers in pyarrow's pool: hand them back, so
        # the peak below is what compaction needs, not what the allocator kept.
        pa.default_memory_pool().release_unused()
        started, cpu_started = time.perf_counter(), _cpu_s()
        with PeakRss() as peak:
            result = compact_partition(root, snapshot, row_schema=schema, fs=fs)
        compact_s = time.perf_counter() - started
        # CPU time too: on a shared machine wall time measures the neighbours as well.
        compact_cpu_s = _cpu_s() - cpu_started
        assert result is not None and result.rows == expected, result
        after_s, after_all = median_seconds(read, repeats=args.repeats)
        print(f"{args.deltas} deltas x {args.delta_rows:,} rows, {deleted:,} deleted "
              f"(built in {build_s:.1f} s)")
        print(f"major compaction: {compact_s:.2f} s, {rows / compact_s:,.0f} input rows/s, "
              f"{result.input_bytes:,} -> {result.output_bytes:,} bytes; {compact_cpu_s:.2f} s "
              f"CPU ({rows / compact_cpu_s:,.0f} input rows per CPU second)")
        print(f"peak RSS while compacting: {peak.python_mb:,.0f} MiB (the process held "
              f"{peak.python_start_mb:,.0f} MiB when it began; scoped: {peak.scoped})")
        print(f"snapshot read: before {before_s:.2f} s ({expected / before_s:,.0f} rows/s), "
              f"after {after_s:.2f} s ({expected / after_s:,.0f} rows/s)")
        # ingest: compaction's input rows/s; baseline: one snapshot read of the uncompacted
        # table (compaction reads it once and writes it once).
        report("compact", ingest_rows_per_s=round(rows / compact_s),
               baseline_rows_per_s=round(expected / before_s),
               ratio=round((rows / compact_s) / (expected / before_s), 3),
               deltas=args.deltas, delta_rows=args.delta_rows, rows=rows,
               deleted=deleted, compact_s=round(compact_s, 3),
               rows_per_s=round(rows / compact_s), compact_cpu_s=round(compact_cpu_s, 3),
               rows_per_cpu_s=round(rows / compact_cpu_s), output_rows=result.rows,
               input_bytes=result.input_bytes, output_bytes=result.output_bytes,
               read_before_s=round(before_s, 3), read_after_s=round(after_s, 3),
               read_before_rows_per_s=round(expected / before_s),
               read_after_rows_per_s=round(expected / after_s),
               read_speedup=round(before_s / after_s, 2),
               peak_rss_mb=round(peak.python_mb), rss_before_mb=round(peak.python_start_mb),
               peak_rss_scoped=peak.scoped,
               read_before_all_s=[round(t, 3) for t in before_all],
               read_after_all_s=[round(t, 3) for t in after_all])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
