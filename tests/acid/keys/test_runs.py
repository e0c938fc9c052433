"""The merged runs of a bucket's small files (`ingest.acid.keys._runs`): they hold exactly the
members asked for, grow by merging the new ones, seal at `SEALED_ENTRIES`, and drop a run
whose member is no longer read."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.acid.keys._file_cache import FILES
from ingest.acid.keys._runs import HASH, runs_of


def _member(seed: int, n: int) -> tuple[str, int, object]:
    hashes = np.sort(np.random.default_rng(seed).integers(0, 2**63, n).astype(np.uint64))
    made = []

    def columns() -> dict[str, np.ndarray]:
        made.append(seed)
        return {HASH: hashes, "v": np.full(n, seed, np.int64)}

    columns.made = made  # type: ignore[attr-defined]
    return f"file{seed}", n, columns


def _held(runs: list) -> dict[str, set[tuple[int, int]]]:
    """(member, entries as (position, v)) of every run."""
    out: dict[str, set[tuple[int, int]]] = {}
    for run in runs:
        at = np.arange(len(run))
        assert (np.diff(run.columns[HASH].astype(np.float64)) >= 0).all()  # sorted
        for m, p, v in zip(run.member_of(at), run.position_of(at), run.columns["v"],
                           strict=True):
            out.setdefault(run.members[m], set()).add((int(p), int(v)))
    return out


def test_runs_merge_new_members_seal_and_drop_replaced_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    FILES.clear()
    monkeypatch.setattr("ingest.acid.keys._runs.SEALED_ENTRIES", 10)
    a, b, c, d, big = _member(1, 4), _member(2, 4), _member(3, 4), _member(4, 3), _member(5, 12)
    runs = runs_of("g", [a, b])
    assert len(runs) == 1 and _held(runs) == {
        "file1": {(i, 1) for i in range(4)}, "file2": {(i, 2) for i in range(4)}}
    runs = runs_of("g", [a, b, c, big])  # c merged into the open run; big alone
    assert len(runs) == 2 and len(runs[0]) == 12 and runs[0].members == ("file5",)
    assert set(_held(runs)) == {"file1", "file2", "file3", "file5"}
    assert a[2].made == [1] and b[2].made == [2]  # cached: not asked again
    runs = runs_of("g", [a, b, c, d, big])  # the run of 12 is sealed: d starts another
    assert [r.members for r in runs[1:]] == [("file1", "file2", "file3"), ("file4",)]
    runs = runs_of("g", [a, c, d, big])  # b replaced (compacted): its run is rebuilt
    held = _held(runs)
    assert set(held) == {"file1", "file3", "file4", "file5"}
    assert held["file3"] == {(i, 3) for i in range(4)}
    assert sum(len(r) for r in runs) == 4 + 4 + 3 + 12
