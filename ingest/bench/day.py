"""A day of minute commits: N commits (default 1,440 x 2,000 rows) into one partition through
`ingest.table.write.load`, with the initiator run after each commit (`compact(kind="auto")`, as a
stream would between micro-batches) and the cleaner after each compaction (retention 0: no
reader outside the metastore; `--no-clean` keeps obsolete directories). At the end: files
left, and the snapshot read time against the same rows loaded in one delta.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections import Counter

import fsspec
import pyarrow as pa

from ingest.acid.format import is_hidden, is_side_file, parse_bucket_file
from ingest.acid.read import acid_state, read_table
from ingest.bench.support import median_seconds_interleaved, report, sample_rows
from ingest.table import open_table
from ingest.table.maintain import clean, compact
from ingest.table.write import create_table, load
from ingest.txn import Metastore, default_metastore_url

DDL = "id BIGINT, user_id BIGINT, ts TIMESTAMP, event STRING, page STRING, amount DOUBLE, dt STRING"
DT = "2026-11-24"


def commit_rows(i: int, rows: int) -> pa.Table:
    """The rows of commit `i`: ids i*rows .. (i+1)*rows - 1, all in partition DT."""
    t = sample_rows(rows, seed=i)
    t = t.set_column(0, "id", pa.array(range(i * rows, (i + 1) * rows), pa.int64()))
    return t.append_column("dt", pa.array([DT] * rows))


def bucket_files(fs: fsspec.AbstractFileSystem, directory: str) -> int:
    """Bucket files directly in a directory (side files and markers not counted)."""
    return sum(1 for p in fs.ls(directory, detail=False)
               if parse_bucket_file(name := str(p).rstrip("/").rsplit("/", 1)[-1]) is not None
               and not is_side_file(name))


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench day")
    parser.add_argument("--commits", type=int, default=1440)
    parser.add_argument("--rows", type=int, default=2000, help="rows per commit")
    parser.add_argument("--repeats", type=int, default=5, help="reads timed at the end")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="a table property, e.g. a compactor threshold; repeatable")
    parser.add_argument("--no-clean", dest="clean", action="store_false",
                        help="do not run the cleaner after compactions")
    args = parser.parse_args(argv)
    properties = dict(p.split("=", 1) for p in args.property)

    tmp = tempfile.mkdtemp(prefix="ingest-bench-day-")
    fs = fsspec.filesystem("file")
    location, one = f"{tmp}/wh/events", f"{tmp}/wh/one_delta"
    try:
        create_table(location, DDL, partitioned_by=["dt"], properties=properties)
        create_table(one, DDL, partitioned_by=["dt"], properties=properties)
        kinds: Counter[str] = Counter()
        load_s = compact_s = slowest_compact_s = clean_s = 0.0
        with Metastore.open(default_metastore_url(location), create=False) as store:
            table = open_table(location, metastore=store)
            for i in range(args.commits):
                data = commit_rows(i, args.rows)
                started = time.perf_counter()
                load(table, data)
                load_s += time.perf_counter() - started
                started = time.perf_counter()
                done = compact(table, kind="auto")
                took = time.perf_counter() - started
                compact_s, slowest_compact_s = compact_s + took, max(slowest_compact_s, took)
                compacted = [p.kind for p in done.partitions
                             if p.kind is not None and p.result is not None]
                kinds.update(compacted)
                if compacted and args.clean:
                    started = time.perf_counter()
                    clean(table, retention_s=0)
                    clean_s += time.perf_counter() - started
                if (i + 1) % 100 == 0:
                    print(f"{i + 1} commits: load {load_s:.1f} s, auto compaction "
                          f"{compact_s:.1f} s ({dict(kinds)}), cleaning {clean_s:.1f} s",
                          flush=True)
            snapshot = store.snapshot(location)
        rows = args.commits * args.rows
        everything = pa.concat_tables(commit_rows(i, args.rows) for i in range(args.commits))
        load(open_table(one), everything)
        with Metastore.open(default_metastore_url(one), create=False) as store:
            one_snapshot = store.snapshot(one)

        partition = f"{location}/dt={DT}"
        state = acid_state(fs, partition, snapshot)
        chosen = [d.name for d in ([state.base] if state.base else []) + list(state.deltas)]
        files_left = sum(bucket_files(fs, state.path(name)) for name in chosen)
        on_disk = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(partition, detail=False)]
        dirs_on_disk = [n for n in on_disk if not is_hidden(n)]
        files_on_disk = sum(bucket_files(fs, f"{partition}/{n}") for n in dirs_on_disk)

        def read_end() -> None:
            got = read_table(location, snapshot, fs=fs).num_rows
            assert got == rows, f"read {got:,} rows at the end, expected {rows:,}"

        def read_one() -> None:
            got = read_table(one, one_snapshot, fs=fs).num_rows
            assert got == rows, f"read {got:,} rows from one delta, expected {rows:,}"

        times = median_seconds_interleaved({"end": read_end, "one": read_one},
                                           repeats=args.repeats)
        end_s, one_s = times["end"][0], times["one"][0]
        print(f"{args.commits} commits x {args.rows:,} rows: load {load_s:.1f} s, automatic "
              f"compaction {compact_s:.1f} s (slowest {slowest_compact_s:.2f} s; "
              f"{dict(kinds)}), cleaning {clean_s:.1f} s")
        print(f"left: {files_left} files in {len(chosen)} directories a snapshot reads "
              f"({', '.join(chosen)}); on disk{'' if args.clean else ' without a cleaner'}: "
              f"{files_on_disk} files in {len(dirs_on_disk)} directories")
        print(f"read at the end {end_s:.3f} s ({rows / end_s:,.0f} rows/s); the same rows in "
              f"one delta {one_s:.3f} s ({rows / one_s:,.0f} rows/s)")
        # ingest: reading the table the day left; baseline: the same rows in one delta.
        report("day", ingest_rows_per_s=round(rows / end_s),
               baseline_rows_per_s=round(rows / one_s), ratio=round(one_s / end_s, 3),
               files_left=files_left, dirs_left=len(chosen), directories_left=chosen,
               files_on_disk=files_on_disk, dirs_on_disk=len(dirs_on_disk),
               commits=args.commits, rows_per_commit=args.rows, rows=rows,
               major_compactions=kinds["major"], minor_compactions=kinds["minor"],
               load_s=round(load_s, 2), compact_s=round(compact_s, 2),
               clean_s=round(clean_s, 2), cleaned=args.clean,
               slowest_compact_s=round(slowest_compact_s, 3), read_end_s=round(end_s, 3),
               read_one_delta_s=round(one_s, 3),
               # Fastest against fastest: on a shared machine the medians carry the neighbours.
               ratio_best=round(min(times["one"][1]) / min(times["end"][1]), 3),
               read_end_all_s=[round(t, 3) for t in times["end"][1]],
               read_one_delta_all_s=[round(t, 3) for t in times["one"][1]])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
