"""Writer benchmark: ACID bucket writer vs plain pyarrow ORC on the same rows and codec,
and the cost of an intermediate footer + side-file entry every 100k rows.

The writer is measured with its default encoder threads and with one. A flush ends a stripe
and makes it durable, so part of its cost is fixed per flush whatever the writer does:
pyarrow's set-up of an ORC writer for each stripe, and two fsyncs (docs/invariants.md, 1). To show
what the fsyncs cost in place, one diagnostic case runs the single-threaded flushing writer
with fsync turned off (`fsync_ms_per_flush`); no other code path ever turns it off.
`checksum_ms` is the CPU time of hashing one flushing writer's stripes (stripe checksums,
docs/format.md §16), which every case above pays; `checksum_share` relates it to that case.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator

import fsspec
import pyarrow as pa
import pyarrow.orc as po

from ingest.acid import BucketFileOptions, BucketWriter, WriterOptions
from ingest.acid.format.checksums import stripe_checksum
from ingest.bench.support import median_seconds_interleaved, report, sample_rows
from ingest.io import files as _files
from ingest.orc import read_tail


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
        with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=table.schema,
                                                         compression=args.compression,
                                                         tuning=options), fs=fs) as w:
            for batch in batches:
                w.write(batch)
                if flush_each_batch:
                    w.flush()

    def acid_without_fsync() -> None:
        with _fsync_off():
            acid(True, 1)

    cases = {
        "plain pyarrow ORC": baseline,
        "ACID, 2 threads, one flush": lambda: acid(False, 2),
        f"ACID, 2 threads, flush/{args.flush_every}": lambda: acid(True, 2),
        "ACID, 1 thread, one flush": lambda: acid(False, 1),
        f"ACID, 1 thread, flush/{args.flush_every}": lambda: acid(True, 1),
        "  same, fsync off (diagnostic)": acid_without_fsync,
    }
    # CPU time too: on a busy machine, waiting for a core (or for others' I/O) swamps the
    # difference of two wall times that the per-flush figures are.
    cpu: dict[str, list[float]] = {name: [] for name in cases}

    def with_cpu(name: str, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            start = time.process_time()
            fn()
            cpu[name].append(time.process_time() - start)
        return run

    try:
        for fn in cases.values():  # warm-up: page cache, allocator, thread pool
            fn()
        timed = median_seconds_interleaved(
            {name: with_cpu(name, fn) for name, fn in cases.items()}, repeats=args.repeats)
        medians = {name: median for name, (median, _) in timed.items()}
        for name, (median, runs) in timed.items():
            print(f"{name:<32}: median {median:.3f} s  runs {[round(t, 3) for t in runs]}")
        setup_s = _encoder_setup_seconds(table, args.compression)
        acid(True, 2)
        checksum_s = _checksum_cpu_seconds(fs, f"{tmp}/delta_{next(counter) - 1}/bucket_00000",
                                           repeats=args.repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base, acid2, acid2f, acid1, acid1f, acid1f_nosync = medians.values()
    *_, cpu1, _, cpu1f_nosync = (statistics.median(t) for t in cpu.values())
    flushes = -(-args.rows // args.flush_every)
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
        single_thread_ms_per_flush=round((acid1f - acid1) / flushes * 1000, 3),
        fsync_ms_per_flush=round((acid1f - acid1f_nosync) / flushes * 1000, 3),
        single_thread_flush_overhead_without_fsync=round(acid1f_nosync / acid1 - 1, 4),
        # What a flush costs beyond its fsyncs, in CPU time (fsync off vs one flush).
        cpu_ms_per_flush_without_fsync=round((cpu1f_nosync - cpu1) / flushes * 1000, 3),
        encoder_setup_ms=round(setup_s * 1000, 3),
        checksum_ms=round(checksum_s * 1000, 3),
        checksum_share=round(checksum_s / acid2f, 4),
    )


def _checksum_cpu_seconds(fs: fsspec.AbstractFileSystem, path: str, *, repeats: int) -> float:
    """Median CPU time of hashing every stripe of a written file, as the writer does."""
    with fs.open(path, "rb") as f:
        data = f.read()
    stripes = read_tail(fs, path, len(data)).stripes
    view = memoryview(data)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        for s in stripes:
            stripe_checksum(view[s.offset:s.end])
        times.append(time.process_time() - start)
    return statistics.median(times)


def _encoder_setup_seconds(table: pa.Table, compression: str) -> float:
    """pyarrow's fixed cost of one stripe: writing a one-row file of the same columns."""
    row = table.slice(0, 1)
    times = []
    for _ in range(50):
        start = time.perf_counter()
        po.write_table(row, pa.BufferOutputStream(), compression=compression,
                       compression_block_size=WriterOptions().compression_block_size)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@contextlib.contextmanager
def _fsync_off() -> Iterator[None]:
    """Diagnostic only: the writer's durable flushes become plain flushes."""
    durable_flush = _files.durable_flush
    _files.durable_flush = lambda f: f.flush()
    try:
        yield
    finally:
        _files.durable_flush = durable_flush
