"""Upsert benchmark: the time of a batch of N keyed changes into tables of growing size.

For each table size M (default 100k and 1M rows, bucketed by id into 16 buckets) it loads M
rows, then times batches of N Debezium changes (70 % updates, 20 % inserts, 10 % deletes, keys
over every bucket: the "mixed" batches, handed to `apply_changes` as an Arrow table of
envelopes unless `--envelopes dicts`; the dicts' conversion to Arrow is timed apart, as
`dicts_to_arrow_s`), then batches of N updates whose keys all hash to one bucket, then a
`load` of N rows (the baseline: an append, no lookup). The lookup of the
current ROW__IDs uses the key index of the buckets the keys hash to (docs/format.md §24; the
first batch indexes the loaded files, so its `rows_scanned` is the table, later ones 0);
without it, it would scan those buckets, and the all-bucket batch would grow with M.

Reads, on the largest size right after its mixed batches (so the table holds the load and
exactly those changes; its one-bucket batches and load come after): the snapshot read
(`Table.to_arrow()`) of the upserted table against a freshly loaded table of exactly the same
rows (goal: within 1.3x), then again after a major compaction of the upserted table (goal:
within 1.05x); medians of `--read-repeats` interleaved rounds. The baselines apply the same
mixed batches to their own table of M rows.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa

import ingest
from ingest.acid.format import bucket_ids
from ingest.bench.support import (
    Batch,
    deltalake_seconds,
    median_seconds_interleaved,
    pyiceberg_seconds,
    report,
)
from ingest.records.changes import from_debezium
from ingest.table import Table
from ingest.table.write import create_table

_SCHEMA = "id BIGINT, value STRING, v BIGINT, amount DOUBLE"
_BASELINES = {"deltalake": deltalake_seconds, "pyiceberg": pyiceberg_seconds}


def _rows(ids: np.ndarray, version: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "value": pa.array([f"value-{i}-{version}" for i in ids.tolist()]),
                     "v": pa.array(np.full(len(ids), version), pa.int64()),
                     "amount": pa.array(ids * 0.5)})


def _changes(rng: np.random.Generator, live: np.ndarray, next_id: int, n: int,
             version: int) -> tuple[list[dict], pa.Table, np.ndarray, np.ndarray, Batch]:
    """N Debezium events on distinct keys: (events as dicts, the same events as an Arrow
    table of envelopes, ids deleted, ids inserted, the same changes for the baselines)."""
    updates, deletes = int(n * 0.7), int(n * 0.1)
    picked = rng.choice(live, updates + deletes, replace=False)
    inserted = np.arange(next_id, next_id + n - updates - deletes)
    images = pa.concat_tables([_rows(picked[:updates], version), _rows(inserted, version)])
    events: list[dict] = [{"op": "u", "after": r} for r in images.to_pylist()[:updates]]
    events += [{"op": "d", "before": {"id": int(i)}} for i in picked[updates:]]
    events += [{"op": "c", "after": r} for r in images.to_pylist()[updates:]]
    images = images.combine_chunks()
    after = pa.StructArray.from_arrays([c.chunk(0) for c in images.columns],
                                       names=images.column_names)
    none = np.full(deletes, -1)
    at = np.concatenate([np.arange(updates), none, np.arange(updates, images.num_rows)])
    before = pa.StructArray.from_arrays([pa.array(picked[updates:], pa.int64())], names=["id"])
    of_delete = np.concatenate([np.full(updates, -1), np.arange(deletes),
                                np.full(images.num_rows - updates, -1)])
    arrow = pa.table({
        "op": pa.array(["u"] * updates + ["d"] * deletes + ["c"] * (n - updates - deletes)),
        "after": after.take(pa.array(at, mask=at < 0)),
        "before": before.take(pa.array(of_delete, mask=of_delete < 0))})
    return events, arrow, picked[updates:], inserted, Batch(images, pa.array(picked[updates:]),
                                                            len(inserted))


@dataclass
class _Sized:
    """A table of one size as its batches leave it: what the next batches draw keys from."""

    table: Table
    rng: np.random.Generator
    live: np.ndarray
    next_id: int


def _mixed(rows: int, *, keys: int, buckets: int, batches: int, root: str,
           changes: list[Batch], mixed: list[float], mixed_cpu: list[float],
           envelopes: str) -> tuple[dict[str, float], _Sized]:
    """Load `rows` rows, then time the mixed batches (the spec's changes, nothing else),
    given to `apply_changes` as `envelopes` ("arrow": an Arrow table; "dicts"); `changes`
    receives them, `mixed` their seconds and `mixed_cpu` the process's CPU seconds (which
    other processes on the machine move less), in order (as the table grows). Also times, not
    applying it, the dicts' conversion to Arrow (`dicts_to_arrow_s`)."""
    location = f"{root}/t{rows}"
    create_table(location, _SCHEMA, buckets=buckets, bucketed_by=["id"])
    table = ingest.open_table(location)
    table.load(_rows(np.arange(rows), 0))
    rng = np.random.default_rng(rows)
    live = np.arange(rows)
    scanned, lookup, indexed, from_dicts = [], [], [], []
    next_id = rows
    for b in range(1, batches + 1):
        events, arrow, deleted, inserted, batch = _changes(rng, live, next_id, keys, b)
        changes.append(batch)
        next_id += len(inserted)
        started = time.perf_counter()
        from_debezium(events)  # what a caller holding dicts pays on top, not applied
        from_dicts.append(time.perf_counter() - started)
        started, cpu = time.perf_counter(), time.process_time()
        result = table.apply_changes(arrow if envelopes == "arrow" else events, key=["id"])
        mixed.append(time.perf_counter() - started)
        mixed_cpu.append(time.process_time() - cpu)
        scanned.append(result.counts.rows_scanned)
        lookup.append(result.counts.lookup_s)
        indexed.append(result.counts.buckets_indexed)
        live = np.setdiff1d(live, deleted)  # updates and deletes pick loaded rows
    return {"batch_s": statistics.median(mixed), "rows_scanned": statistics.median(scanned),
            "lookup_s": statistics.median(lookup),
            "buckets_indexed": statistics.median(indexed),
            "dicts_to_arrow_s": statistics.median(from_dicts)}, _Sized(table, rng, live, next_id)


def _one_bucket(sized: _Sized, *, keys: int, buckets: int, batches: int) -> dict[str, float]:
    """Time `batches` upserts of `keys` live keys that all hash to bucket 0, then a load of
    `keys` new rows (the baseline: an append, no lookup)."""
    table, rng, live = sized.table, sized.rng, sized.live
    bucket_of = np.asarray(bucket_ids(pa.table({"id": pa.array(live, pa.int64())}), ["id"],
                                      buckets))
    in_bucket = live[bucket_of == 0]
    one_bucket = []
    for b in range(1, batches + 1):
        in_zero = rng.choice(in_bucket, min(keys, len(in_bucket)), replace=False)
        started = time.perf_counter()
        table.upsert(_rows(in_zero, 100 + b), key=["id"])
        one_bucket.append(time.perf_counter() - started)
    started = time.perf_counter()
    table.load(_rows(np.arange(sized.next_id, sized.next_id + keys), 0))
    load_s = time.perf_counter() - started
    return {"one_bucket_batch_s": statistics.median(one_bucket), "load_s": load_s}


def _directories(location: str) -> dict[str, int]:
    """How many deltas and delete deltas the table's directory holds (obsolete ones too)."""
    fs, path = fsspec.core.url_to_fs(location)
    names = [name.rstrip("/").rsplit("/", 1)[-1] for name in fs.ls(path, detail=False)]
    return {"deltas": sum(n.startswith("delta_") for n in names),
            "delete_deltas": sum(n.startswith("delete_delta_") for n in names)}


def _reads(table: Table, *, buckets: int, root: str, repeats: int) -> dict[str, Any]:
    """The snapshot read of the upserted `table` against a fresh table of the same rows, then
    again after a major compaction of `table` (each round reads both: load drift hits both)."""
    rows = table.to_arrow()
    location = f"{root}/fresh{rows.num_rows}"
    create_table(location, _SCHEMA, buckets=buckets, bucketed_by=["id"])
    fresh = ingest.open_table(location)
    fresh.load(rows)
    got = fresh.to_arrow()
    if got.num_rows != rows.num_rows or got.sort_by("id") != rows.sort_by("id"):
        raise RuntimeError(f"the fresh table reads {got.num_rows} rows, not the upserted "
                           f"table's {rows.num_rows} rows")
    dirs = _directories(table.location)
    before = median_seconds_interleaved({"upserted": table.to_arrow, "fresh": fresh.to_arrow},
                                        repeats=repeats)
    started = time.perf_counter()
    table.compact("major")
    compact_s = time.perf_counter() - started
    after = median_seconds_interleaved({"upserted": table.to_arrow, "fresh": fresh.to_arrow},
                                       repeats=repeats)
    if table.to_arrow().num_rows != rows.num_rows:  # a compaction that lost rows reads faster
        raise RuntimeError("the upserted table reads a different number of rows after its "
                           "major compaction")
    return {"read_rows": rows.num_rows, "read_s_after_batches": before["upserted"][0],
            "read_s_fresh": before["fresh"][0], "read_s_after_major": after["upserted"][0],
            "read_s_fresh_after_major": after["fresh"][0],
            "read_ratio_after_batches": before["upserted"][0] / before["fresh"][0],
            "read_ratio_after_major": after["upserted"][0] / after["fresh"][0],
            "compact_s": compact_s, "deltas_before_major": dirs["deltas"],
            "delete_deltas_before_major": dirs["delete_deltas"],
            "read_runs_s": {name: [round(x, 4) for x in times[case][1]]
                            for name, times, case in (
                                ("after_batches", before, "upserted"),
                                ("fresh", before, "fresh"),
                                ("after_major", after, "upserted"),
                                ("fresh_after_major", after, "fresh"))}}


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ingest.bench upsert",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,1000000",
                        help="table sizes, comma-separated (default: %(default)s)")
    parser.add_argument("--keys", type=int, default=1000, help="changes per batch")
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--batches", type=int, default=3, help="batches timed per size")
    parser.add_argument("--envelopes", choices=["arrow", "dicts"], default="arrow",
                        help="how the mixed batches reach apply_changes: an Arrow table of "
                        "envelopes (as the baselines get Arrow) or Python dicts "
                        "(default: %(default)s)")
    parser.add_argument("--read-repeats", type=int, default=3,
                        help="rounds of the snapshot reads (median)")
    parser.add_argument("--baselines", default=",".join(_BASELINES),
                        help="baselines run on the largest size, comma-separated, from "
                        f"{', '.join(_BASELINES)} (default: %(default)s)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="skip every baseline (as --baselines '')")
    args = parser.parse_args(argv)
    chosen = [] if args.no_baselines else [n for n in args.baselines.split(",") if n]
    if unknown := sorted(set(chosen) - set(_BASELINES)):
        parser.error(f"unknown baseline {', '.join(unknown)}; choose from "
                     f"{', '.join(_BASELINES)}")
    sizes = [int(s) for s in args.rows.split(",") if s]
    figures: dict[int, dict[str, float]] = {}
    per_batch: dict[int, list[float]] = {}
    per_batch_cpu: dict[int, list[float]] = {}
    baselines: dict[str, float | str] = {}
    reads: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ingest-bench-upsert-") as root:
        for rows in sizes:
            changes: list[Batch] = []
            per_batch[rows], per_batch_cpu[rows] = [], []
            f, sized = _mixed(rows, keys=args.keys, buckets=args.buckets,
                              batches=args.batches, root=root, changes=changes,
                              mixed=per_batch[rows], mixed_cpu=per_batch_cpu[rows],
                              envelopes=args.envelopes)
            if rows == sizes[-1]:  # the reads see the spec's changes and nothing else
                reads = _reads(sized.table, buckets=args.buckets, root=root,
                               repeats=args.read_repeats)
            f |= _one_bucket(sized, keys=args.keys, buckets=args.buckets,
                             batches=args.batches)
            figures[rows] = f
            print(f"upsert {args.keys:,} keys into {rows:,} rows ({args.buckets} buckets): "
                  f"{f['batch_s'] * 1000:,.0f} ms a batch over all buckets "
                  f"(lookup {f['lookup_s'] * 1000:,.0f} ms, {f['rows_scanned']:,.0f} rows "
                  f"scanned, {f['buckets_indexed']:,.0f} buckets from the key index), "
                  f"{f['one_bucket_batch_s'] * 1000:,.0f} ms with every key in one "
                  f"bucket; load of {args.keys:,} rows {f['load_s'] * 1000:,.0f} ms; "
                  f"per batch as the table grows "
                  f"{[round(x * 1000) for x in per_batch[rows]]} ms, CPU "
                  f"{[round(x * 1000) for x in per_batch_cpu[rows]]} ms ({args.envelopes} "
                  f"envelopes; dicts to Arrow would add {f['dicts_to_arrow_s'] * 1000:,.0f} "
                  "ms)", flush=True)
        print(f"snapshot read of {reads['read_rows']:,} rows after {args.batches} batches "
              f"({reads['deltas_before_major']} deltas, {reads['delete_deltas_before_major']} "
              f"delete deltas): {reads['read_s_after_batches'] * 1000:,.0f} ms, a fresh table "
              f"of the same rows {reads['read_s_fresh'] * 1000:,.0f} ms: "
              f"{reads['read_ratio_after_batches']:.3f}x (goal 1.3x); after a major compaction "
              f"({reads['compact_s']:.2f} s) {reads['read_s_after_major'] * 1000:,.0f} ms, "
              f"fresh {reads['read_s_fresh_after_major'] * 1000:,.0f} ms in the same rounds: "
              f"{reads['read_ratio_after_major']:.3f}x (goal 1.05x); rounds "
              f"{reads['read_runs_s']} s", flush=True)
        if chosen:
            baselines = _baselines(sizes[-1], changes, root, figures[sizes[-1]]["batch_s"],
                                   chosen)
    largest = figures[sizes[-1]]
    changes_per_s = args.keys / largest["batch_s"]
    load_per_s = args.keys / largest["load_s"]
    report("upsert", rows=sizes, keys_per_batch=args.keys, buckets=args.buckets,
           batch_s={str(r): round(f["batch_s"], 4) for r, f in figures.items()},
           one_bucket_batch_s={str(r): round(f["one_bucket_batch_s"], 4)
                               for r, f in figures.items()},
           rows_scanned={str(r): f["rows_scanned"] for r, f in figures.items()},
           buckets_indexed={str(r): f["buckets_indexed"] for r, f in figures.items()},
           ingest_rows_per_s=round(changes_per_s, 1), baseline_rows_per_s=round(load_per_s, 1),
           batches_s={str(r): [round(x, 4) for x in t] for r, t in per_batch.items()},
           batches_cpu_s={str(r): [round(x, 4) for x in t] for r, t in per_batch_cpu.items()},
           envelopes=args.envelopes,
           dicts_to_arrow_s={str(r): round(f["dicts_to_arrow_s"], 4)
                             for r, f in figures.items()},
           ratio=round(changes_per_s / load_per_s, 3),
           **{k: round(v, 4) if isinstance(v, float) else v for k, v in reads.items()},
           **baselines)


def _baselines(rows: int, changes: list[Batch], root: str, ingest_s: float,
               names: list[str]) -> dict[str, float | str]:
    """Apply `changes` to a Delta and an Iceberg table of the same `rows` rows; the figures
    for the report (a missing library is named instead)."""
    out: dict[str, float | str] = {}
    keys = statistics.median(b.changes for b in changes)
    initial = _rows(np.arange(rows), 0)
    for name in names:
        run_baseline = _BASELINES[name]
        try:
            seconds, left = run_baseline(initial, changes, f"{root}/{name}")
        except ImportError as e:
            out[f"{name}_missing"] = f"{e}; pip install 'ingest[bench]'"
            print(f"{name} baseline skipped: {e}", flush=True)
            continue
        expected = rows + sum(b.inserted - len(b.deleted) for b in changes)
        if left != expected:  # a baseline that skipped work would flatter it
            raise RuntimeError(f"the {name} baseline holds {left} rows after the batches, "
                               f"expected {expected}")
        median = statistics.median(seconds)
        out[f"{name}_batch_s"] = round(median, 4)
        out[f"{name}_changes_per_s"] = round(keys / median, 1)
        out[f"ratio_vs_{name}"] = round(median / ingest_s, 3)
        print(f"{name}: {median * 1000:,.0f} ms a batch of {keys:,.0f} changes into "
              f"{rows:,} rows (ingest {ingest_s * 1000:,.0f} ms); per batch "
              f"{[round(x * 1000) for x in seconds]} ms", flush=True)
    return out
