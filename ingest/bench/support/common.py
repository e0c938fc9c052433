"""Shared helpers for benchmarks: sample data, timing, reporting."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa


def sample_rows(rows: int, *, seed: int = 0) -> pa.Table:
    """A 6-column table resembling events: ids, a timestamp, a category, a text, a measure."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    categories = np.array(["click", "view", "purchase", "signup", "logout"])
    return pa.table({
        "id": ids,
        "user_id": rng.integers(0, 1_000_000, rows, dtype=np.int64),
        "ts": pa.array(1_763_700_000_000_000 + ids * 1000, type=pa.timestamp("us")),
        "event": pa.array(categories[rng.integers(0, len(categories), rows)]),
        "page": pa.array([f"/page/{i % 5000}" for i in range(rows)]),
        "amount": rng.random(rows) * 100,
    })


def median_seconds(fn: Callable[[], Any], *, repeats: int) -> tuple[float, list[float]]:
    """Median wall time of `repeats` calls, and every time."""
    return median_seconds_interleaved({"": fn}, repeats=repeats)[""]


def median_seconds_interleaved(
    cases: dict[str, Callable[[], Any]], *, repeats: int,
) -> dict[str, tuple[float, list[float]]]:
    """Median wall time of each case over `repeats` rounds; each round runs every case once,
    so a machine that speeds up or slows down during the run affects all cases alike."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(t), t) for name, t in times.items()}


def report(name: str, **figures: Any) -> None:
    """Print the benchmark's JSON result as the last line of output."""
    print(json.dumps({"benchmark": name, **figures}))
