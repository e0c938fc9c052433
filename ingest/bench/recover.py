"""Recovery benchmark: a bucket file of ~1 GB with 1,000 flushes, crashed (garbage appended),
recovered as `ingest recover` does (`recover_table_with_metastore`, backup on, data checked),
then recovered again (the file now has no side file, as a closed one: its stripes are decoded
once, so that figure grows with the file's size); the baseline is reading the whole file once.
Recovering the crashed file should not grow with `--flushes` (each flush also leaves its footer
in the file, so the file grows with them)."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import fsspec
import numpy as np
import pyarrow as pa

from ingest.acid import BucketFileOptions, BucketWriter, side_file_path
from ingest.bench.support import median_seconds, report
from ingest.table import open_table_or_files
from ingest.table.maintain import TableRecovery, recover_table_with_metastore

_CHUNK = 64 * 1024 * 1024


def ingest_recover(table: str) -> TableRecovery:
    """What `ingest recover TABLE` runs (no metastore here: every write id is committed)."""
    return recover_table_with_metastore(open_table_or_files(table), check_data=True)


def _flush_batch(rows: int, seed: int) -> pa.Table:
    """Incompressible rows (random int64 + 24 random bytes): ~39 bytes each on disk."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=rows * 24, dtype=np.uint8).tobytes()
    offsets = pa.array(np.arange(0, rows * 24 + 1, 24, dtype=np.int32))
    payload = pa.BinaryArray.from_buffers(pa.binary(), rows, [None, offsets.buffers()[1],
                                                               pa.py_buffer(raw)])
    return pa.table({"id": rng.integers(0, 2**62, rows, dtype=np.int64), "payload": payload})


def build(path: str, *, size_mb: int, flushes: int) -> int:
    """Write a bucket file of about size_mb MiB in `flushes` flushes; returns its length."""
    rows = max(1, size_mb * 1024 * 1024 // flushes // 39)
    batch = _flush_batch(rows, 0)
    fs = fsspec.filesystem("file")
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=batch.schema,
                                                    compression="none"), fs=fs)
    for _ in range(flushes):
        w.write(batch)
        w.flush()
    w.abandon()  # the side file stays: the writer "died"
    return int(fs.size(path))


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench recover")
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--flushes", type=int, default=1000)
    parser.add_argument("--garbage-kb", type=int, default=512,
                        help="torn bytes appended after the last flush")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to build the file (default: tmp)")
    args = parser.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="ingest-bench-recover-", dir=args.dir)
    table = f"{tmp}/t"
    path = f"{table}/delta_0000001_0000001/bucket_00000"
    try:
        started = time.perf_counter()
        length = build(path, size_mb=args.size_mb, flushes=args.flushes)
        build_s = time.perf_counter() - started
        side = open(side_file_path(path), "rb").read()  # noqa: SIM115
        garbage = os.urandom(args.garbage_kb * 1024)

        def crash() -> None:
            with open(side_file_path(path), "wb") as f:
                f.write(side)
            with open(path, "ab") as f:
                f.write(garbage)

        times = []
        for _ in range(args.repeats):
            crash()
            started = time.perf_counter()
            result = ingest_recover(table).report
            times.append(time.perf_counter() - started)
            (f,) = result.files
            assert f.action == "truncated" and f.new_length == length, f
        recover_s = sorted(times)[len(times) // 2]

        def recover_closed() -> None:
            (f,) = ingest_recover(table).report.files
            assert f.action == "ok", f

        closed_s, closed_all = median_seconds(recover_closed, repeats=args.repeats)

        def read_all() -> None:
            with open(path, "rb") as f:
                while f.read(_CHUNK):
                    pass

        read_all()  # warm the page cache so the baseline is not a cold-disk figure
        base_s, base_all = median_seconds(read_all, repeats=args.repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"file={length:,} bytes flushes={args.flushes} built in {build_s:.1f} s")
    print(f"ingest recover (crashed file): median {recover_s * 1000:.1f} ms runs "
          f"{[round(t * 1000, 1) for t in times]} ms")
    print(f"ingest recover again (closed file, stripes decoded): median "
          f"{closed_s * 1000:.1f} ms runs "
          f"{[round(t * 1000, 1) for t in closed_all]} ms")
    print(f"read whole file: median {base_s * 1000:.1f} ms runs "
          f"{[round(t * 1000, 1) for t in base_all]} ms")
    report(
        "recover",
        file_bytes=length,
        flushes=args.flushes,
        garbage_bytes=len(garbage),
        recover_seconds=round(recover_s, 5),
        recover_closed_seconds=round(closed_s, 5),
        baseline_seconds=round(base_s, 5),
        ratio=round(base_s / recover_s, 2),
        build_seconds=round(build_s, 1),
    )
