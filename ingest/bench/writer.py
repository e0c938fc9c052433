"""Writer benchmark: ACID bucket writer vs plain pyarrow ORC on the same rows and codec,
and the cost of an intermediate footer + side-file entry every 100k rows."""

from __future__ import annotations

import argparse
import shutil
import tempfile

import fsspec
import pyarrow.orc as po

from ingest.acid import BucketWriter
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
    counter = iter(range(1_000_000))

    def baseline() -> None:
        po.write_table(table, f"{tmp}/plain-{next(counter)}.orc", compression=args.compression)

    def acid(flush_each_batch: bool) -> None:
        path = f"{tmp}/delta_{next(counter)}/bucket_00000"
        with BucketWriter(path, table.schema, write_id=1, compression=args.compression,
                          fs=fs) as w:
            for batch in batches:
                w.write(batch)
                if flush_each_batch:
                    w.flush()

    try:
        baseline()  # warm-up: page cache, allocator
        acid(False)
        base_s, base_all = median_seconds(baseline, repeats=args.repeats)
        acid_s, acid_all = median_seconds(lambda: acid(False), repeats=args.repeats)
        flush_s, flush_all = median_seconds(lambda: acid(True), repeats=args.repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"rows={args.rows} columns={table.num_columns} codec={args.compression} "
          f"repeats={args.repeats}")
    print(f"plain pyarrow ORC : median {base_s:.3f} s  runs {[round(t, 3) for t in base_all]}")
    print(f"ACID, one flush   : median {acid_s:.3f} s  runs {[round(t, 3) for t in acid_all]}")
    print(f"ACID, flush/{args.flush_every:<7}: median {flush_s:.3f} s  "
          f"runs {[round(t, 3) for t in flush_all]}")
    report(
        "writer",
        rows=args.rows,
        compression=args.compression,
        ingest_rows_per_s=round(args.rows / acid_s),
        baseline_rows_per_s=round(args.rows / base_s),
        ratio=round(base_s / acid_s, 3),
        flushing_rows_per_s=round(args.rows / flush_s),
        flush_overhead=round(flush_s / acid_s - 1, 4),
    )

