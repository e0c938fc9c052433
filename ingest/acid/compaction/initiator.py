"""Whether a partition needs compaction, and which kind: Hive's Initiator policy
(`Initiator.determineCompactionType` and its aborted-transaction trigger), plus a trigger of
ours on delete events: every read pays for them until a major compaction applies them
(keyed upserts write one per update, docs/format.md §24).

`measure_backlog` lists one partition as the compactor snapshot sees it; `decide` is the pure
policy over those numbers and a table's thresholds. Knows names, sizes and the event counts
in ORC footers, not row data or the metastore (the thresholds arrive as a value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import fsspec

from ingest.acid.compaction.compact import compactor_snapshot
from ingest.acid.format import ValidWriteIdList, is_hidden, parse_directory
from ingest.acid.read import VisibleTxn, acid_state
from ingest.errors import CorruptFileError
from ingest.orc import read_tail

Kind = Literal["major", "minor"]


@dataclass(frozen=True)
class CompactionThresholds:
    """When a partition needs compaction (Hive's names and defaults).

    Attributes:
        delta_num: more current deltas (of both kinds) than this ask for a minor compaction
            (`hive.compactor.delta.num.threshold`, 10).
        delta_pct: delta bytes over base bytes above this ask for a major compaction
            (`hive.compactor.delta.pct.threshold`, 0.1).
        aborted: more aborted write ids with data in the partition than this ask for a
            major compaction (`hive.compactor.abortedtxn.threshold`, 1000).
        auto: False when the table opts out (`no_auto_compaction=true`).
        delete_pct: delete events over stored rows above this ask for a major compaction
            (ours, `ingest.compactor.delete.pct.threshold`, 0.1; Hive has none).
    """

    delta_num: int = 10
    delta_pct: float = 0.1
    aborted: int = 1000
    auto: bool = True
    delete_pct: float = 0.1


@dataclass(frozen=True)
class Backlog:
    """What a partition holds that compaction would fold, under the compactor snapshot.

    Attributes:
        deltas: current insert deltas (directories the snapshot reads).
        delete_deltas: current delete deltas.
        base: the chosen base's name, or None.
        base_bytes: bytes of the base (or of original files when there is none).
        delta_bytes: bytes of the current deltas of both kinds.
        aborted_write_ids: aborted write ids above the base with a directory in the
            partition (their events are still on disk).
        rows: insert events in the base (or original files) and the current insert deltas,
            from their ORC footers.
        delete_events: events in the current delete deltas, from their ORC footers.
    """

    deltas: int
    delete_deltas: int
    base: str | None
    base_bytes: int
    delta_bytes: int
    aborted_write_ids: int
    rows: int = 0
    delete_events: int = 0

    @property
    def current_deltas(self) -> int:
        """Deltas of both kinds: what Hive's delta-count threshold counts."""
        return self.deltas + self.delete_deltas


@dataclass(frozen=True)
class Decision:
    """What the initiator asks for one partition.

    Attributes:
        kind: "major", "minor", or None (nothing to do).
        reason: why, with the numbers, e.g. "12 deltas > 10".
    """

    kind: Kind | None
    reason: str


def decide(backlog: Backlog, thresholds: CompactionThresholds) -> Decision:
    """Hive's policy, branch for branch: too many aborted write ids -> major; no base and
    too many deltas -> major; delta bytes over base bytes above `delta_pct` -> major; more
    deltas than `delta_num` -> minor; else nothing. Then ours: where Hive's asks for no
    major, delete events over stored rows above `delete_pct` -> major (a minor compaction
    keeps every delete event; the reason then names Hive's choice too).

    Args:
        backlog: the partition's numbers (`measure_backlog`).
        thresholds: the table's.

    Returns:
        The decision with its reason.
    """
    hive = _hive_decision(backlog, thresholds)
    b, t = backlog, thresholds
    if hive.kind == "major" or not t.auto or not b.delete_events:
        return hive
    if b.delete_events > t.delete_pct * b.rows:
        share = f"{b.delete_events / b.rows:.1%} of {b.rows} rows" if b.rows else "no rows"
        return Decision("major", f"{b.delete_events} delete events, {share} > "
                                 f"{t.delete_pct:.1%} (else: {hive.reason})")
    return hive


def _hive_decision(b: Backlog, t: CompactionThresholds) -> Decision:
    if not t.auto:
        return Decision(None, "automatic compaction is off (no_auto_compaction=true)")
    if b.aborted_write_ids > t.aborted:
        return Decision("major", f"{b.aborted_write_ids} aborted write ids > {t.aborted}")
    count = f"{b.current_deltas} deltas"
    if b.base_bytes == 0:
        if b.current_deltas > t.delta_num:
            return Decision("major", f"no base and {count} > {t.delta_num}")
        return Decision(None, f"no base, {count} <= {t.delta_num}")
    pct = b.delta_bytes / b.base_bytes
    if pct > t.delta_pct:
        return Decision("major", f"delta bytes {pct:.1%} of the base > {t.delta_pct:.1%}")
    if b.current_deltas > t.delta_num:
        return Decision("minor", f"{count} > {t.delta_num} (delta bytes {pct:.1%} of the base)")
    return Decision(None, f"{count} <= {t.delta_num}, delta bytes {pct:.1%} of the base "
                          f"<= {t.delta_pct:.1%}")


def measure_backlog(fs: fsspec.AbstractFileSystem, partition_dir: str,
                    snapshot: ValidWriteIdList, *,
                    visible_txn: VisibleTxn | None = None) -> Backlog:
    """List one partition and size what the compactor snapshot of `snapshot` reads.

    Args:
        fs: the filesystem holding the table.
        partition_dir: the partition (or unpartitioned table) directory.
        snapshot: the table's snapshot; the compactor snapshot is taken from it.
        visible_txn: whether the compactor transaction T of a `_vT` directory is committed
            (the metastore's compactor visibility). An output of an open or aborted T is
            no base or delta here, as for every reader; None takes all as committed.

    Raises:
        FileNotFoundError: the partition directory does not exist.
        NotEnoughHistoryError, UnsupportedFormatError, CorruptFileError: see `acid_state`.
    """
    root = partition_dir.rstrip("/")
    snap = compactor_snapshot(snapshot)
    state = acid_state(fs, root, snap, visible_txn=visible_txn)
    base_bytes = _bytes(fs, state.path(state.base.name)) if state.base is not None else 0
    if state.base is None:
        base_bytes = sum(_size(fs, state.path(f)) for f in state.original_files)
    delta_bytes = sum(_bytes(fs, state.path(d.name)) for d in state.deltas)
    floor = state.base.write_id if state.base is not None else 0
    aborted = {w for w in snap.aborted_write_ids if w > floor}
    ranges = [(d.min_write_id, d.max_write_id) for d in state.deltas]
    for name in state.aborted:
        parsed = _parse(name)
        if parsed is not None:
            ranges.append(parsed)
    present = {w for w in aborted if any(lo <= w <= hi for lo, hi in ranges)}
    inserts = [state.base.name] if state.base is not None else []
    inserts += [d.name for d in state.insert_deltas]
    rows = sum(_events(fs, state.path(d)) for d in inserts)
    rows += sum(_file_events(fs, state.path(f)) for f in state.original_files)
    deletes = sum(_events(fs, state.path(d.name)) for d in state.delete_deltas)
    return Backlog(len(state.insert_deltas), len(state.delete_deltas),
                   None if state.base is None else state.base.name, base_bytes, delta_bytes,
                   len(present), rows, deletes)


def _parse(name: str) -> tuple[int, int] | None:
    parsed = parse_directory(name)
    if parsed is None or parsed.is_base:
        return None
    return parsed.min_write_id, parsed.max_write_id


def _bytes(fs: fsspec.AbstractFileSystem, directory: str) -> int:
    """Bytes of the visible files directly in a directory (Hive's `sumDirSize`)."""
    total = 0
    for info in fs.ls(directory, detail=True):
        name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
        if info.get("type") == "file" and not is_hidden(name):
            total += int(info.get("size") or 0)
    return total


def _events(fs: fsspec.AbstractFileSystem, directory: str) -> int:
    """Events in the visible files directly in a directory, from their footers."""
    total = 0
    for info in fs.ls(directory, detail=True):
        name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
        if info.get("type") == "file" and not is_hidden(name):
            total += _file_events(fs, str(info["name"]), int(info.get("size") or 0))
    return total


def _file_events(fs: fsspec.AbstractFileSystem, path: str, size: int | None = None) -> int:
    """A file's row count from its footer; 0 for a file with no complete tail at its end
    (one a streaming writer still appends to): the initiator only weighs, the compactor
    checks every input against the manifest before it reads."""
    length = _size(fs, path) if size is None else size
    if length <= 0:
        return 0
    try:
        return read_tail(fs, path, length, check=False).number_of_rows
    except CorruptFileError:
        return 0


def _size(fs: fsspec.AbstractFileSystem, path: str) -> int:
    return int(fs.size(path) or 0)


__all__ = ["Backlog", "CompactionThresholds", "Decision", "decide", "measure_backlog"]
