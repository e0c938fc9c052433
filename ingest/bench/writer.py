"""Writer benchmark: ACID bucket writer vs plain pyarrow ORC on the same rows and codec,
and the cost of an intermediate footer + side-file entry every 100k rows.

The writer is measured with its default parallel stripe encoding and with one encoder
thread, since the flush cost differs: a flush is a barrier for the encoder threads."""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile

import fsspec
import pyarrow.orc as po

from ingest.acid import BucketWriter, WriterOptions
from ingest.bench._common import median_seconds, report, sample_rows


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench writer")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--flush-every", type=int, default=100_000)
    parser.add_argument("--compression", default="zstd")
    args = parser.parse_args(argv)

    table = sample_rows(args.rows)
    batches = table.to_batches(max_chunksize=args.flush_every)
    tmp = tempfile.mkdtemp(prefix="ingest-bench-")
    fs = fsspec.filesystem("file")
    counter = itertools.count()

    def baseline() -> None:
        po.write_table(table, f"{tmp}/plain-{next(counter)}.orc", compression=args.compression)

    def acid(flush_each_batch: bool, threads: int) -> None:
        path = f"{tmp}/delta_{next(counter)}/bucket_00000"
        options = WriterOptions(encoder_threads=threads)
        with BucketWriter(path, table.schema, write_id=1, compression=args.compression, fs=fs,
                          options=options) as w:
            for batch in batches:
                w.write(batch)
                if flush_each_batch:
                    w.flush()

    cases = {
        "plain pyarrow ORC": baseline,
        "ACID, 2 threads, one flush": lambda: acid(False, 2),
        f"ACID, 2 threads, flush/{args.flush_every}": lambda: acid(True, 2),
        "ACID, 1 thread, one flush": lambda: acid(False, 1),
        f"ACID, 1 thread, flush/{args.flush_every}": lambda: acid(True, 1),
    }
    try:
        for fn in cases.values():  # warm-up: page cache, allocator, thread pool
            fn()
        medians = {}
        for name, fn in cases.items():
            medians[name], runs = median_seconds(fn, repeats=args.repeats)
            print(f"{name:<32}: median {medians[name]:.3f} s  runs {[round(t, 3) for t in runs]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base, acid2, acid2f, acid1, acid1f = medians.values()
    print(f"rows={args.rows} columns={table.num_columns} codec={args.compression} "
          f"repeats={args.repeats}")
    report(
        "writer",
        rows=args.rows,
        compression=args.compression,
        ingest_rows_per_s=round(args.rows / acid2),
        baseline_rows_per_s=round(args.rows / base),
        ratio=round(base / acid2, 3),
        flush_overhead=round(acid2f / acid2 - 1, 4),
        single_thread_rows_per_s=round(args.rows / acid1),
        single_thread_ratio=round(base / acid1, 3),
        single_thread_flush_overhead=round(acid1f / acid1 - 1, 4),
    )
