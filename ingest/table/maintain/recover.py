"""Recover a table with the metastore's help: abort timed-out transactions (Hive's
performTimeOuts), then bring its bucket files back to their last complete footer
(`ingest.acid.recovery`), leaving the open transactions' files and damaged committed files
alone, and never cutting below a committed length (docs/recovery.md).

Reads and writes files (`ingest.acid`) and the metastore (`ingest.txn`); `verify.py` runs the
same recovery as a dry run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import fsspec

from ingest.acid.format import parse_directory
from ingest.acid.recovery import RecoveryReport, default_backup_dir, recover_table
from ingest.errors import ConfigError
from ingest.io import storage
from ingest.table.core import (
    ResolvedTable,
    StorageOptions,
    check_owner,
    committed_length_of,
    find_damage,
    guard_recovery,
    keeping,
    mark_unrecoverable,
    table_manifest,
)
from ingest.txn import Transaction, TransactionInfo

DEFAULT_TXN_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class TableRecovery:
    """Outcome of `recover_table_with_metastore`.

    Attributes:
        report: the file-level recovery report.
        table: the table name, or None when no metastore lists the table.
        aborted: transactions aborted because their heartbeat timed out (in a dry run: those
            that would be), as (txn id, write id, reason).
    """

    report: RecoveryReport
    table: str | None
    aborted: tuple[tuple[int, int, str], ...] = ()

    @property
    def clean(self) -> bool:
        return self.report.clean


def _resolve(path: str, fs: fsspec.AbstractFileSystem | None,
             storage_options: StorageOptions) -> tuple[fsspec.AbstractFileSystem, str]:
    if fs is not None:
        return fs, str(fs._strip_protocol(path))
    found, stripped = storage.url_to_fs(str(path), storage_options)
    return found, str(stripped)


def live_files_of(open_write_ids: set[int],
                  high_watermark: int | None = None) -> Callable[[str], bool]:
    """A `live_files` predicate: a bucket file is live when an open write id lies in the range
    of its directory (an open transaction, or its batch, may still append to it), or when the
    range goes past `high_watermark`: it was allocated after the snapshot recovery works from,
    so its writer may be alive."""
    def live(path: str) -> bool:
        parsed = parse_directory(path.rstrip("/").rsplit("/", 2)[-2])
        if parsed is None or parsed.is_base:
            return False
        if high_watermark is not None and parsed.max_write_id > high_watermark:
            return True
        return any(parsed.min_write_id <= w <= parsed.max_write_id for w in open_write_ids)
    return live


def check_txn_timeout(txn_timeout_s: float) -> float:
    """`txn_timeout_s` if it is a finite number of seconds >= 0.

    Raises:
        ConfigError: it is NaN, infinite or negative.
    """
    if not math.isfinite(txn_timeout_s) or txn_timeout_s < 0:
        raise ConfigError(
            f"Cannot use a transaction timeout of {txn_timeout_s!r} s: it must be a finite "
            "number of seconds, at least 0",
            hint=f"for example --txn-timeout-s {DEFAULT_TXN_TIMEOUT_S:g} (the default)")
    return txn_timeout_s


def _timed_out(infos: list[TransactionInfo], now: float, timeout_s: float) -> list[TransactionInfo]:
    return [t for t in infos if t.state == "open" and now - t.heartbeat_at > timeout_s]


def recover_table_with_metastore(
    table: ResolvedTable,
    *,
    dry_run: bool = False,
    backup_dir: str | None = None,
    backup: bool = True,
    txn_timeout_s: float = DEFAULT_TXN_TIMEOUT_S,
    check_data: bool = False,
    on_progress: Callable[[int, int, str], None] | None = None,
) -> TableRecovery:
    """Abort timed-out transactions, then recover every bucket file no open transaction owns.

    Bytes that may hold rows of committed write ids are never cut or removed (files of
    committed write ids with a damaged tail are reported unrecoverable); a file the
    committed-file manifest lists is never cut below its committed length, and one that is
    missing, shorter or whose committed tail changed is left untouched and reported
    unrecoverable (docs/format.md §20). For a table opened without a metastore
    (`metastore=False`), every file is recovered as if no writer were live, and every write
    id counts as committed.

    Args:
        table: the table as `ingest.open_table` resolved it (its root or a partition
            directory; its metastore, else its files alone). The metastore is opened for
            writing unless `dry_run`.
        dry_run: change nothing, neither files nor the metastore.
        backup_dir: where cut bytes and removed files are kept (see `recover_table`); None
            means `<location>/_ingest_recovery_backup/<UTC timestamp>`, created only when
            something is removed; reached with the table's storage options when it lies in
            the table's bucket.
        backup: False keeps nothing (`backup_dir` is ignored).
        txn_timeout_s: an open transaction without heartbeat for this long is aborted.
        check_data: also decode the stripes of every file recovery leaves as it is (a file
            whose stripes do not decode is reported unrecoverable).
        on_progress: called after each bucket file recovered with (files done, files in
            all, the file's path): for a progress bar.

    Raises:
        ConfigError: txn_timeout_s is NaN, infinite or negative, or the table's location
            belongs to another metastore.
        FileNotFoundError: the table's directory does not exist.
        MetastoreError: the metastore failed.
    """
    check_txn_timeout(txn_timeout_s)
    path, fs, options = table.location, table.fs, table.storage_options
    if not backup:
        backup_dir = None
    elif backup_dir is None:
        backup_dir = default_backup_dir(path)
    backup_fs = None
    if backup_dir is not None:
        backup_fs = storage.url_to_fs(backup_dir, options if storage.same_root(
            backup_dir, path) else None)[0]
    with table.store_or_none(writable=not dry_run) as store:
        defn = table.definition
        if store is None or defn is None:
            return TableRecovery(recover_table(path, fs=fs, dry_run=dry_run,
                                               on_progress=on_progress,
                                               backup_dir=backup_dir, backup_fs=backup_fs,
                                               committed=lambda _w: True,
                                               check_data=check_data), None)
        check_owner(defn, store.url, options)
        if dry_run:
            now = time.time()
            infos = store.transactions(defn.name, states=("open",))
            dead = _timed_out(infos, now, txn_timeout_s)
            aborted = tuple((t.txn_id, t.write_id, "would abort: no heartbeat for "
                             f"{now - t.heartbeat_at:.1f} s") for t in dead)
            open_ids = {t.write_id for t in infos} - {t.write_id for t in dead}
        else:
            # The table's open write ids first: a Hive Metastore's aborted transactions come
            # back without the tables they wrote (its Thrift API does not say).
            held = {t.txn_id: t.write_id
                    for t in store.transactions(defn.name, states=("open",))}
            done: list[Transaction] = store.abort_timed_out(txn_timeout_s)
            aborted = tuple((t.txn_id, t.write_ids.get(defn.name) or held[t.txn_id],
                             f"no heartbeat within {txn_timeout_s:g} s")
                            for t in done if defn.name in t.write_ids or t.txn_id in held)
        # One snapshot decides which files are live: its open write ids, and anything
        # allocated after it (above its high-water mark) while the scan below runs.
        snapshot = store.snapshot(defn.name)
        if not dry_run:
            open_ids = set(snapshot.open_write_ids)
        if dry_run:
            extra = tuple(w for _, w, _ in aborted)
            snapshot = type(snapshot)(snapshot.table, snapshot.high_watermark,
                                      tuple(w for w in snapshot.open_write_ids if w not in extra),
                                      snapshot.aborted_write_ids + extra)
        live = live_files_of(open_ids, snapshot.high_watermark)
        manifest = table_manifest(store, defn)
        scan_fs, scan_root = _resolve(path, fs, options)
        damage = find_damage(scan_fs, manifest, under=scan_root)
        planned = None
        if len(manifest) and not dry_run:
            # A dry run first: whatever it would cut below a committed length is held back.
            planned = recover_table(path, fs=fs, dry_run=True, live_files=keeping(live, damage),
                                    valid_write_ids=snapshot,
                                    committed_length=committed_length_of(manifest))
        keep = guard_recovery(manifest, damage, planned)
        report = recover_table(path, fs=fs, dry_run=dry_run, backup_dir=backup_dir,
                               backup_fs=backup_fs, live_files=keeping(live, keep),
                               valid_write_ids=snapshot, check_data=check_data,
                               committed_length=committed_length_of(manifest),
                               on_progress=on_progress)
        return TableRecovery(mark_unrecoverable(report, keep, damage), defn.name, aborted)
