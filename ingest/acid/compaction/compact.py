"""Major and minor compaction of one partition, as of a compactor snapshot (Hive's CompactorMR).

Major writes `base_N` (N: the compactor's high watermark) holding every visible row with its
ROW__ID, insert events only, one file per bucket, `_orc_acid_version` and `_metadata_acid`.
Minor folds the chosen deltas into `delta_min_max` and `delete_delta_min_max`, events copied
unchanged, aborted ones dropped. Inputs are planned by the one read planner (`plan.plan_files`)
under the compactor's `ReadView`, so a committed input that is missing, cut or changed stops
the compaction before anything is written. Output is written under a hidden name, checked
(tail, event count, stripe checksums) and renamed into place, optionally with Hive 4's `_vT`
suffix (visible once txn T commits); inputs are never touched (docs/invariants.md, 3). Takes
the view as a value.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import fsspec
import numpy as np
import pyarrow as pa

from ingest.acid.compaction._check import check_outputs
from ingest.acid.format import (
    COMPACTION_TEMP_PREFIX,
    CURRENT_TRANSACTION,
    INSERT,
    ROW,
    CommittedFile,
    ValidWriteIdList,
    acid_event_schema,
    bucket_file_name,
    format_base,
    format_delta,
    half_renamed_minor,
    parse_directory,
    write_acid_version_file,
    write_compacted_marker,
)
from ingest.acid.read import (
    ROW_ID_COLUMN,
    AcidState,
    DataFile,
    Merger,
    Partition,
    ReadView,
    VisibleTxn,
    plan_files,
    plan_partition,
    read_events,
    read_length,
    readable_length,
    valid_mask,
)
from ingest.acid.write import BucketFileOptions, Compression, WriterOptions, write_bucket
from ingest.errors import CommitConflictError, CorruptFileError, UnsupportedFormatError
from ingest.faults import crash_point
from ingest.io import files as _files

CompactionKind = Literal["major", "minor"]
# Output is written under this prefix + its final name: hidden from every reader (Hive's
# hidden-file filter skips names starting with "." or "_") until it is renamed.
TEMP_PREFIX = COMPACTION_TEMP_PREFIX


def compactor_snapshot(snapshot: ValidWriteIdList) -> ValidWriteIdList:
    """The compactor's write-id list (`TxnCommonUtils.createValidCompactWriteIdList`).

    Its high watermark is just below the lowest open write id, so nothing an open transaction
    may still write is compacted; only aborted write ids remain as exceptions.
    """
    low = snapshot.min_open_write_id
    hwm = snapshot.high_watermark if low is None else min(snapshot.high_watermark, low - 1)
    return ValidWriteIdList(snapshot.table, hwm, (),
                            tuple(w for w in snapshot.aborted_write_ids if w <= hwm))


@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction of one partition reads and writes.

    Attributes:
        partition: the partition directory.
        kind: "major" or "minor".
        snapshot: the compactor snapshot the inputs were chosen with; its high watermark
            may be below the one asked for (see `plan_compaction`).
        inputs: names of the directories (and original files) read, in read order.
        outputs: names of the directories written.
        state: the partition's `AcidState` under `snapshot`.
        files: the input files in read order.
        read_lengths: the read length of each input the manifest lists, checked against it
            (`plan_files`); the others are read up to their side file or last footer.
    """

    partition: str
    kind: CompactionKind
    snapshot: ValidWriteIdList
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    state: AcidState
    files: tuple[DataFile, ...] = field(default=(), repr=False, compare=False)
    read_lengths: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class CompactionResult:
    """What `compact_partition` wrote (or, with dry_run, would write).

    Attributes:
        plan: inputs and outputs.
        rows: events written (rows of the base for major compaction).
        input_bytes: bytes of the input files, up to their readable lengths.
        output_bytes: bytes of the files written.
        seconds: wall time.
        dry_run: nothing was written.
        output_files: the manifest entries of the files written, made when they were checked
            before the renames (paths relative to the table root); empty for a dry run.
    """

    plan: CompactionPlan
    rows: int
    input_bytes: int
    output_bytes: int
    seconds: float
    dry_run: bool = False
    output_files: tuple[CommittedFile, ...] = ()


def plan_compaction(
    fs: fsspec.AbstractFileSystem, partition_dir: str, snapshot: ValidWriteIdList | ReadView,
    *, root: str | None = None, kind: CompactionKind = "major",
    visibility_txn_id: int | None = None, visible_txn: VisibleTxn | None = None,
) -> CompactionPlan | None:
    """Choose what to compact in one partition and check it; None when there is nothing to do.

    `snapshot` is the table's current snapshot: the metastore's `ReadView` (its manifest and
    `_vT` visibility), or a bare write-id list, checked against no manifest, whose earlier
    `_vT` outputs `visible_txn` judges (None: all committed). With `visibility_txn_id` (the
    compactor's own transaction) the outputs are named with Hive 4's `_v<txn>` suffix.

    The snapshot is first turned into the compactor's (`compactor_snapshot`). A delta that
    reaches past its high watermark (a transaction batch some of whose transactions are still
    open) is never split: the high watermark is lowered below it
    (`ValidCompactorWriteIdList.isWriteIdRangeValid` is NONE for such a range). The inputs
    are then planned by `plan_files` under that snapshot, before deciding whether there is
    anything to do: a damaged partition never reads as "nothing to compact", and never
    compacts into an output without the rows of a file its commit recorded.

    Args:
        root: the table root the view's manifest paths are relative to (default: the
            partition, as for an unpartitioned table).

    Raises:
        FileNotFoundError: the partition directory does not exist.
        CorruptFileError: an input the manifest lists is missing (with its directory too),
            emptied, cut below its committed length, or its tail changed.
        NotEnoughHistoryError, UnsupportedFormatError: see `acid_state`.
    """
    directory = partition_dir.rstrip("/")
    view = _as_view(snapshot, visible_txn)
    snap = compactor_snapshot(view.snapshot)
    while True:
        state, files = plan_partition(fs, Partition(directory), snap,
                                      visible_txn=view.visible_txn)
        over = [d for d in state.deltas if d.max_write_id > snap.high_watermark]
        if not over:
            break
        hwm = min(d.min_write_id for d in over) - 1
        snap = ValidWriteIdList(snap.table, hwm, (),
                                tuple(w for w in snap.aborted_write_ids if w <= hwm))
    lengths = _checked_lengths(fs, directory, replace(view, snapshot=snap), root=root)
    inserts, deletes = state.insert_deltas, state.delete_deltas
    if kind == "major":
        if not state.deltas and not state.original_files:
            return None
        base = [state.base.name] if state.base is not None else []
        inputs = (*state.original_files, *base, *(d.name for d in state.deltas))
        return CompactionPlan(directory, kind, snap, inputs,
                              (format_base(snap.high_watermark, visibility_txn_id),), state,
                              tuple(files), lengths)
    if len(inserts) <= 1 and len(deletes) <= 1:
        return None
    low = min(d.min_write_id for d in state.deltas)
    high = snap.high_watermark
    outputs = []
    # An output shadows every delta of its range, of either kind (findBestWorkingDeltas), so
    # the pair is written whenever both kinds are in the range.
    if inserts:
        outputs.append(format_delta(low, high, None, visibility_txn_id=visibility_txn_id))
    if deletes:
        outputs.append(format_delta(low, high, None, delete=True,
                                    visibility_txn_id=visibility_txn_id))
    # Minor compaction reads only deltas (a delete delta may hold events of a bucket with no
    # insert delta in the range: it is copied all the same).
    return CompactionPlan(directory, kind, snap, tuple(d.name for d in state.deltas),
                          tuple(outputs), state,
                          tuple(f for f in files if f.kind in ("delta", "delete_delta")),
                          lengths)


def _as_view(snapshot: ValidWriteIdList | ReadView, visible_txn: VisibleTxn | None) -> ReadView:
    if isinstance(snapshot, ReadView):
        if visible_txn is not None:
            raise TypeError("visible_txn is for a bare write-id list; a ReadView has its own")
        return snapshot
    return ReadView(snapshot.table, snapshot, visible_txn=visible_txn)


def _checked_lengths(fs: fsspec.AbstractFileSystem, directory: str, view: ReadView, *,
                     root: str | None) -> dict[str, int]:
    """The partition's inputs checked against the manifest (`plan_files`), and their read
    lengths; a damaged input stops the compaction before anything is written."""
    try:
        plan = plan_files(fs, directory, view, root=root)
    except CorruptFileError as e:
        raise CorruptFileError(
            f"Cannot compact {directory}, nothing was written: {e.message[:1].lower()}"
            f"{e.message[1:]}", path=e.path, offset=e.offset, hint=e.hint) from e
    return plan.read_lengths()


def compact_partition(
    partition_dir: str,
    snapshot: ValidWriteIdList | ReadView,
    *,
    row_schema: pa.Schema,
    root: str | None = None,
    kind: CompactionKind = "major",
    fs: fsspec.AbstractFileSystem | None = None,
    compression: Compression | None = None,
    tuning: WriterOptions | None = None,
    dry_run: bool = False,
    visibility_txn_id: int | None = None,
    visible_txn: VisibleTxn | None = None,
    aborted_txn: Callable[[int], bool] | None = None,
) -> CompactionResult | None:
    """Compact one partition (or an unpartitioned table's root); None if nothing to do.

    Reads bucket by bucket: memory holds one bucket's delete events and a stripe of output,
    or one bucket's events when they must be sorted (inputs whose keys interleave). Every
    output file is checked before anything is renamed into place: its tail ends the file and
    counts the events written, and every stripe hashes to its recorded checksum. On any
    failure before the renames, the hidden output is removed: nothing is left behind.

    Args:
        partition_dir: the partition directory.
        snapshot: the table's current snapshot, as the metastore's `ReadView` (manifest and
            `_vT` visibility; its lease keeps the inputs from the cleaner while this runs)
            or a bare write-id list (see `plan_compaction`); the compactor's is derived from it.
        row_schema: the table's row columns (output files use these names).
        root: the table root, as `fs` names it: the manifest's paths, and those of
            `CompactionResult.output_files`, are relative to it (default: `partition_dir`).
        kind: "major" (a new base) or "minor" (deltas folded into one delta and one delete
            delta).
        fs: the filesystem (default: from the URL).
        compression: codec of the output (default: zstd).
        tuning: stripe size and encoder settings of the output.
        dry_run: only plan (and check the inputs); nothing is written.
        visibility_txn_id: the compactor's open transaction: outputs are named
            `base_N_v<txn>` / `[delete_]delta_A_B_v<txn>` and count for readers only once it
            commits (the caller commits it after this returns); None: Hive 3 names, visible
            once renamed.
        visible_txn: with a bare write-id list, which compactor transactions are committed,
            for earlier `_v` outputs already in the partition (None: all).
        aborted_txn: whether a compactor transaction T is aborted, asked of the metastore
            after this compactor took the partition over: `_vT` outputs of a dead compactor
            whose T aborted are removed before anything is written (`finish_interrupted`).

    Raises:
        FileNotFoundError: the partition directory does not exist.
        CommitConflictError: an output directory already exists (another compaction won).
        CorruptFileError: an input differs from its manifest entry or cannot be read (run
            `ingest verify`), or an output failed its check after writing.
        NotEnoughHistoryError, UnsupportedFormatError: see `acid_state`.
    """
    started = time.monotonic()
    fs, directory = _files.resolve(partition_dir, fs)
    directory = directory.rstrip("/")
    table_root = directory if root is None else root.rstrip("/")
    if not dry_run:
        finish_interrupted(fs, directory, aborted_txn=aborted_txn)
    plan = plan_compaction(fs, directory, snapshot, root=table_root, kind=kind,
                           visibility_txn_id=visibility_txn_id, visible_txn=visible_txn)
    if plan is None:
        return None
    input_bytes = sum(_readable_bytes(fs, f.path) for f in plan.files)
    if dry_run:
        return CompactionResult(plan, 0, input_bytes, 0, time.monotonic() - started, True)
    for name in plan.outputs:
        if fs.exists(f"{directory}/{name}"):
            raise CommitConflictError(
                f"Cannot compact {directory}: {name} already exists",
                hint="another compaction wrote it; run `ingest compact` again to re-plan")
    options = BucketFileOptions(write_id=plan.snapshot.high_watermark, row_schema=row_schema,
                                compression=compression, tuning=tuning or WriterOptions())
    try:
        if kind == "major":
            rows, written, events = _major(fs, plan, options)
        else:
            rows, written, events = _minor(fs, plan, options)
        output_files = check_outputs(fs, directory, plan.outputs, events, root=table_root,
                                     write_id=plan.snapshot.high_watermark)
    except BaseException:
        # Nothing was renamed: the hidden output was never seen by a reader.
        for name in plan.outputs:
            if fs.exists(f"{directory}/{TEMP_PREFIX}{name}"):
                fs.rm(f"{directory}/{TEMP_PREFIX}{name}", recursive=True)
        raise
    crash_point("compact.after_write")
    # Renamed in the order of `outputs`. Minor compaction's pair cannot appear at once under
    # Hive 3 names, and either half alone shadows the other kind's deltas of its range. The
    # insert delta goes first: while its delete twin is still hidden, our readers skip it
    # (`names.half_renamed_minor`) and read the untouched inputs; a crash between the renames
    # is rolled forward by the next compaction (`finish_interrupted`): both halves were
    # complete before either was renamed. With the `_v` suffix no rename makes anything
    # visible: the commit of the compactor's transaction does, after both; a crash leaves
    # outputs of a transaction that never commits, which readers skip.
    for i, name in enumerate(plan.outputs):
        temp, final = f"{directory}/{TEMP_PREFIX}{name}", f"{directory}/{name}"
        if fs.exists(final):
            raise CommitConflictError(f"Cannot compact {directory}: {name} appeared meanwhile",
                                      hint="run `ingest compact` again to re-plan")
        if i:
            crash_point("compact.between_renames")
        _files.move_directory(fs, temp, final)
    crash_point("compact.after_rename")
    return CompactionResult(plan, rows, input_bytes, written, time.monotonic() - started,
                            output_files=output_files)


def finish_interrupted(fs: fsspec.AbstractFileSystem, partition_dir: str, *,
                       aborted_txn: Callable[[int], bool] | None = None) -> list[str]:
    """Finish a minor compaction that crashed between its two renames, and remove what
    other crashed compactions left; returns the names renamed into place.

    A hidden `delete_delta_A_B` output whose `delta_A_B` is already in place is renamed too:
    until it is, readers skip `delta_A_B` (`names.half_renamed_minor`). Any other hidden
    output was never seen by a reader and is removed. So is every `_vT` output whose
    compactor transaction T `aborted_txn` says aborted (a compactor that died after its
    renames): our readers and Hive's skip it, but Trino does not check T, and with this
    compaction's output of the same range beside it would read both (docs/format.md §17).
    The caller must be the partition's only compactor (the table layer holds its
    compaction record).

    Raises:
        OSError: the storage layer failed.
    """
    root = partition_dir.rstrip("/")
    if aborted_txn is not None:
        for name in aborted_outputs(fs, root, aborted_txn):
            fs.rm(f"{root}/{name}", recursive=True)
    names = [str(full).rstrip("/").rsplit("/", 1)[-1] for full in fs.ls(root, detail=False)]
    done = []
    for partner in sorted(half_renamed_minor(names)):
        parsed = parse_directory(partner)
        assert parsed is not None
        final = format_delta(parsed.min_write_id, parsed.max_write_id, None, delete=True)
        _files.move_directory(fs, f"{root}/{TEMP_PREFIX}{final}", f"{root}/{final}")
        done.append(final)
    for name in names:
        if name.startswith(TEMP_PREFIX) and name[len(TEMP_PREFIX):] not in done:
            fs.rm(f"{root}/{name}", recursive=True)
    return done


def aborted_outputs(fs: fsspec.AbstractFileSystem, root: str,
                    aborted_txn: Callable[[int], bool]) -> list[str]:
    """`_vT` directories in partition `root` whose compactor transaction T aborted: no
    reader that checks T ever uses them."""
    names = (str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False))
    out = []
    for name in sorted(names):
        parsed = None if name.startswith(("_", ".")) else parse_directory(name)
        if parsed is not None and parsed.visibility > 0 and aborted_txn(parsed.visibility):
            out.append(name)
    return out


def _readable_bytes(fs: fsspec.AbstractFileSystem, path: str) -> int:
    return readable_length(fs, path)[0]


def _temp_dir(fs: fsspec.AbstractFileSystem, root: str, name: str) -> str:
    """A fresh hidden directory for output `name`; a leftover of a crashed run is removed
    (it never held anything a reader could see)."""
    temp = f"{root}/{TEMP_PREFIX}{name}"
    if fs.exists(temp):
        fs.rm(temp, recursive=True)
    if _files.has_directories(fs):  # an object store's makedirs may create a bucket
        fs.makedirs(temp, exist_ok=True)
    write_acid_version_file(fs, temp)
    return temp


def _by_bucket(files: Sequence[DataFile]) -> tuple[dict[int, list[DataFile]],
                                                   dict[int, list[DataFile]]]:
    inserts: dict[int, list[DataFile]] = {}
    deletes: dict[int, list[DataFile]] = {}
    for f in files:
        (deletes if f.kind == "delete_delta" else inserts).setdefault(f.bucket_id, []).append(f)
    return inserts, deletes


def _major(fs: fsspec.AbstractFileSystem, plan: CompactionPlan, options: BucketFileOptions
           ) -> tuple[int, int, dict[str, int]]:
    """Write the base: the rows the compactor snapshot sees, bucket by bucket; (events,
    bytes, events of each file written)."""
    (name,) = plan.outputs
    temp = _temp_dir(fs, plan.partition, name)
    write_compacted_marker(fs, temp)
    assert options.row_schema is not None
    merger = _timestamp_merger(fs, plan, options.row_schema, with_row_id=True)
    options = replace(options, row_schema=merger.row_schema)  # timestamp[us] if widened
    event_schema = acid_event_schema(options.row_schema)
    inserts, deletes = _by_bucket(plan.files)
    rows = written = 0
    events: dict[str, int] = {}
    for bucket in sorted(inserts):
        bucket_files = inserts[bucket] + deletes.get(bucket, [])

        def batches(bucket_files: list[DataFile] = bucket_files) -> Iterator[pa.RecordBatch]:
            for batch in merger.partition_batches({}, bucket_files):
                yield _insert_events(batch, event_schema)

        path = f"{temp}/{bucket_file_name(bucket)}"
        n, size = write_bucket(fs, path, replace(options, bucket_id=bucket, kind="insert"),
                                batches, keep_empty=True)
        rows, written, events[path] = rows + n, written + size, n
    return rows, written, events


def _insert_events(batch: pa.RecordBatch, event_schema: pa.Schema) -> pa.RecordBatch:
    """Rows read with ROW__ID -> insert events keeping it (currentTransaction = writeid)."""
    row_id = batch.column(batch.schema.get_field_index(ROW_ID_COLUMN))
    write_id = row_id.field("writeid")
    row_type = event_schema.field(ROW).type
    columns = [batch.column(batch.schema.get_field_index(f.name)) for f in row_type]
    row = pa.StructArray.from_arrays(
        [c if c.type == f.type else c.cast(f.type) for c, f in zip(columns, row_type,
                                                                  strict=True)],
        fields=list(row_type))
    n = batch.num_rows
    return pa.RecordBatch.from_arrays(
        [pa.array(np.full(n, INSERT, dtype=np.int32)), write_id, row_id.field("bucketid"),
         row_id.field("rowid"), write_id, row], schema=event_schema)


def _timestamp_merger(fs: fsspec.AbstractFileSystem, plan: CompactionPlan,
                      row_schema: pa.Schema | None, *, with_row_id: bool) -> Merger:
    """A reader of the inputs, to their checked read lengths, whose row schema has
    timestamp[us] where an input holds a value outside timestamp[ns]; it refuses to drop a
    digit (docs/format.md §19)."""
    assert row_schema is not None
    # A rewrite keeps every digit or refuses.
    return Merger(fs, plan.snapshot, row_schema=row_schema, files=plan.files,
                  lengths=plan.read_lengths, with_row_id=with_row_id, sub_microseconds="error")


def _minor(fs: fsspec.AbstractFileSystem, plan: CompactionPlan, options: BucketFileOptions
           ) -> tuple[int, int, dict[str, int]]:
    """Write the delta and delete delta: events of valid write ids, copied unchanged; (events,
    bytes, events of each file written)."""
    widened = _timestamp_merger(fs, plan, options.row_schema, with_row_id=False).row_schema
    if widened != options.row_schema:
        options = replace(options, row_schema=widened)
    inserts, deletes = _by_bucket(plan.files)
    rows = written = 0
    events: dict[str, int] = {}
    for name in plan.outputs:
        is_delete = name.startswith("delete_")
        temp = _temp_dir(fs, plan.partition, name)
        groups = deletes if is_delete else inserts
        for bucket in sorted(groups):

            def batches(bucket_files: list[DataFile] = groups[bucket]
                        ) -> Iterator[pa.RecordBatch]:
                for f in bucket_files:
                    # Up to the checked read length, else the file's last recorded flush
                    # length, as the snapshot reader reads it.
                    length = plan.read_lengths.get(f.path)
                    if length is None:
                        length = read_length(fs, f.path, plan.snapshot)
                    for batch in read_events(f.path, fs=fs, length=length):
                        yield batch.filter(valid_mask(batch[CURRENT_TRANSACTION],
                                                      plan.snapshot))

            path = f"{temp}/{bucket_file_name(bucket)}"
            try:
                n, size = write_bucket(
                    fs, path,
                    replace(options, bucket_id=bucket, kind="delete" if is_delete else "insert"),
                    batches, keep_empty=False)
            except pa.ArrowInvalid as e:
                if "would lose data" not in str(e):
                    raise
                raise UnsupportedFormatError(
                    f"Cannot rewrite partition {plan.partition}: its deltas hold timestamps "
                    "outside 1677-09-21 .. 2262-04-11, stored to the microsecond, and other "
                    f"timestamps with digits below the microsecond ({e})",
                    hint="leave these deltas uncompacted (readers see every row)") from e
            rows, written = rows + n, written + size
            if n:
                events[path] = n
    return rows, written, events


__all__ = ["TEMP_PREFIX", "CompactionKind", "CompactionPlan", "CompactionResult",
           "aborted_outputs", "compact_partition", "compactor_snapshot", "finish_interrupted",
           "plan_compaction"]
