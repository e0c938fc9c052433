"""Hash-sorted runs merged from the small committed files of one bucket (their key-index
entries, their delete events), so a lookup probes a bucket in a few passes however many
deltas it holds, instead of one pass per file. Each run is kept in the process's file cache
(`_file_cache.py`); the next write's files become a new run, merged into the one before
while it is at least half as large (as a log-structured merge), and a run of
`SEALED_ENTRIES` takes no more, so the runs stay few and a merge never copies much. A
member is named by its committed-file identity, so a run whose member the snapshot no longer
reads (compaction replaced it) is dropped, never probed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from ingest.acid.keys._file_cache import FILES

SEALED_ENTRIES = 1 << 17
"""A run of this many entries takes no more members; a file this large is probed alone."""
HASH, MEMBER, POSITION = "hash", "member", "position"


@dataclass(frozen=True)
class Run:
    """Columns sorted by `hash`; `member` gives each entry's index into `members`, the
    identities of the files merged, and `position` its position in that member's columns
    (both absent for a one-file run, whose columns are the file's own, and for a run made
    without positions)."""

    members: tuple[Hashable, ...]
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns[HASH])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.columns.values())

    def member_of(self, at: np.ndarray) -> np.ndarray:
        """Each entry's member index."""
        found = self.columns.get(MEMBER)
        return np.zeros(len(at), dtype=np.int32) if found is None else found[at]

    def position_of(self, at: np.ndarray) -> np.ndarray:
        """Each entry's position in its member's columns."""
        found = self.columns.get(POSITION)
        return at if found is None else found[at]


Columns = Callable[[], dict[str, np.ndarray]]
"""A member's columns (with `hash`, sorted by it), asked for only when it is merged."""


def runs_of(group: Hashable, members: Sequence[tuple[Hashable, int, Columns]], *,
            positions: bool = True) -> list[Run]:
    """Runs that together hold exactly `members` ((identity, entries, columns) of the
    files a lookup reads now, in one bucket). A file of `SEALED_ENTRIES` or more is a run of
    its own, sharing its columns; the others are merged into cached runs of `group`, which
    say where each entry came from (`member`, `position`) unless `positions` is False (the
    caller needs only the columns)."""
    out: list[Run] = []
    small: dict[Hashable, Columns] = {}
    for identity, entries, columns in members:
        if entries >= SEALED_ENTRIES:
            out.append(Run((identity,), columns()))
        else:
            small[identity] = columns
    if not small:
        return out
    key = ("runs", group)
    cached = FILES.get(key)
    kept: list[Run] = [r for r in cached if all(m in small for m in r.members)] \
        if isinstance(cached, tuple) else []
    covered = {m for r in kept for m in r.members}
    new = [(m, make) for m, make in small.items() if m not in covered]
    if new:
        kept.append(_merge([], new, positions))
        # Merge the newest run into the one before while it is at least half as large (and
        # that one not sealed): a few runs of growing sizes, each entry copied a few times.
        while (len(kept) > 1 and len(kept[-2]) < SEALED_ENTRIES
               and 2 * len(kept[-1]) >= len(kept[-2])):
            kept[-2:] = [_merge(kept[-2:], [], positions)]
    if new or not isinstance(cached, tuple) or len(kept) != len(cached):
        FILES.put(key, tuple(kept), sum(r.nbytes for r in kept))
    return out + kept


def _merge(runs: list[Run], new: list[tuple[Hashable, Columns]], positions: bool) -> Run:
    """One run of `runs` and the members `new` (a stable sort of presorted pieces: a
    merge)."""
    members: list[Hashable] = []
    pieces: list[dict[str, np.ndarray]] = []
    for run in runs:
        every = np.arange(len(run))
        pieces.append({**run.columns, MEMBER: run.member_of(every) + len(members),
                       POSITION: run.position_of(every)} if positions else run.columns)
        members.extend(run.members)
    for identity, make in new:
        columns = make()
        n = len(columns[HASH])
        pieces.append({**columns, MEMBER: np.full(n, len(members), dtype=np.int32),
                       POSITION: np.arange(n, dtype=np.int64)} if positions else columns)
        members.append(identity)
    names = list(pieces[0])
    merged = {name: np.concatenate([p[name] for p in pieces]) for name in names}
    order = np.argsort(merged[HASH], kind="stable")
    return Run(tuple(members), {name: values[order] for name, values in merged.items()})


__all__ = ["HASH", "MEMBER", "POSITION", "SEALED_ENTRIES", "Run", "runs_of"]
