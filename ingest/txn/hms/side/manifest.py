"""The committed-file manifest in a Hive Metastore: a hidden side table of events written in the
committing HMS transaction (docs/format.md §20, docs/invariants.md 8.11).

Each target `db.t` has `db.t__ingest_files` at `<t>/_ingest_files` (`table.py`). A transaction
that records or forgets entries allocates a write id on it, takes an EXCLUSIVE lock on it
(held until its commit or abort, so every other writer of `t`'s manifest waits and the checks
below see every entry committed before; a commit asks for it in the same lock request as its
other side tables and passes the snapshot in, `write_locked`), reads its committed events,
checks the new ones against them (a committed length is never lowered, a path once per
commit) and writes them as one delta, stamped with the next sequence number. The manifest
is the events of the committed snapshot folded in sequence order: a record sets a path's
entry, a forget removes it. Commit order is lock order, which the sequence keeps; write ids
are handed out before the lock and need not be in that order. Knows the metastore and the
side table, not the table's files.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa

from ingest.acid import ValidWriteIdList
from ingest.acid.format import CommittedFile
from ingest.errors import CommitConflictError, ConfigError, MetastoreError
from ingest.txn.hms.side.table import SideRows, SideTable, write_delta
from ingest.txn.hms.thrift import (
    Heartbeater,
    HiveTable,
    HmsConnection,
    abort_txn,
    allocate_write_ids,
    commit_txn,
    lock,
    open_txns,
    snapshot,
)

MANIFEST_SCHEMA = pa.schema([
    ("seq", pa.int64()),
    ("path", pa.string()),
    ("write_id", pa.int64()),
    ("length_bytes", pa.int64()),
    ("tail_hash", pa.string()),
    ("events", pa.int64()),
])
"""One row per event: `seq` orders commits; a record has every column, a forget only `seq`
and `path` (the others null). `events` is `CommittedFile.rows` (a word Hive reserves)."""
FILES_OF = "ingest.files_of"
"""The manifest table's parameter naming the table whose files it lists."""
MANIFEST = SideTable("files", MANIFEST_SCHEMA, FILES_OF, "the committed-file manifest")


@dataclass(frozen=True)
class _Event:
    seq: int
    path: str
    entry: CommittedFile | None  # None: forgotten


def _events_of(table: pa.Table) -> list[_Event]:
    return [_Event(int(r["seq"]), r["path"],
                   None if r["write_id"] is None else CommittedFile(
                       r["path"], int(r["write_id"]), int(r["length_bytes"]), r["tail_hash"],
                       int(r["events"])))
            for r in table.to_pylist()]


class HmsManifest:
    """The manifests of one metastore's tables, their committed events read once each."""

    def __init__(self, location: str) -> None:
        """`location` names the metastore in messages."""
        self.location = location
        self._events = SideRows(MANIFEST_SCHEMA, _events_of)

    def entries(self, conn: HmsConnection, target: HiveTable) -> dict[str, CommittedFile]:
        """Every committed entry of `target`, by path, sorted (empty without a manifest).

        Raises:
            CorruptFileError: a committed delta of the manifest does not read.
            OSError: the storage failed.
            MetastoreError: the metastore failed.
        """
        table = MANIFEST.find(conn, target)
        if table is None:
            return {}
        table.require_full_acid(self.location)
        return self._fold(conn, table)[0]

    def _fold(self, conn: HmsConnection, table: HiveTable, *,
              ids: ValidWriteIdList | None = None) -> tuple[dict[str, CommittedFile], int]:
        """(the entries, the highest sequence number) of the committed snapshot (`ids`, or
        the table's now)."""
        events = self._events.rows(table, ids if ids is not None else snapshot(conn, table.name))
        entries: dict[str, CommittedFile] = {}
        for e in sorted(events, key=lambda e: e.seq):
            if e.entry is None:
                entries.pop(e.path, None)
            else:
                entries[e.path] = e.entry
        return dict(sorted(entries.items())), max((e.seq for e in events), default=0)

    def write(self, conn: HmsConnection, txn_id: int, target: HiveTable, *,
              record: Iterable[CommittedFile] = (), forget: Iterable[str] = (),
              write_id: int | None = None, agent: str = "") -> int:
        """Record entries and forget paths in open transaction `txn_id`, committed with it
        (module docstring); returns how many entries were recorded or forgotten. Nothing is
        allocated or written when there is nothing to do (no entries; no forgotten path
        listed).

        Args:
            write_id: when given, every recorded entry's write id must be this one (a
                commit's on `target`).
            agent: who writes, for the lock.

        Raises:
            ConfigError: an entry names another write id than `write_id`, or a path twice.
            CommitConflictError: an entry would lower a recorded committed length, the lock
                was not granted in time, or the transaction is no longer open.
            OSError: the delta could not be written.
            MetastoreError: the metastore failed.
        """
        entries = checked(target.name, list(record), write_id)
        paths = list(dict.fromkeys(forget))
        if not entries and not paths:
            return 0
        if not entries:
            table = MANIFEST.find(conn, target)
            if table is None or not set(paths) & set(self._fold(conn, table)[0]):
                return 0
        table = self.table(conn, target)
        own = allocate_write_ids(conn, table.name, [txn_id])[txn_id]
        lock(conn, txn_id, table, lock_type="EXCLUSIVE", operation="INSERT", agent=agent)
        return self.write_locked(conn, table, own, target, ids=snapshot(conn, table.name),
                                 record=entries, forget=paths)

    def table(self, conn: HmsConnection, target: HiveTable) -> HiveTable:
        """`target`'s manifest table, registered first when missing.

        Raises:
            UnsupportedFormatError: the table there is not full-ACID ORC.
            ConfigError: the server refused the definition.
            MetastoreError: the metastore failed.
        """
        table = MANIFEST.ensure(conn, target)
        table.require_full_acid(self.location)
        return table

    def write_locked(self, conn: HmsConnection, table: HiveTable, own: int,
                     target: HiveTable, *, ids: ValidWriteIdList,
                     record: Sequence[CommittedFile] = (), forget: Sequence[str] = ()) -> int:
        """The second half of `write`, for a transaction that allocated write id `own` of
        manifest table `table` and holds its EXCLUSIVE lock: check `record` (entries already
        `checked`) against the committed events of snapshot `ids` (taken under the lock) and
        write the one delta; returns how many entries were recorded or forgotten.

        Raises:
            CommitConflictError: an entry would lower a recorded committed length.
            OSError: the delta could not be written.
            MetastoreError: the metastore failed.
        """
        entries, paths = list(record), list(forget)
        now, seq = self._fold(conn, table, ids=ids)
        for f in entries:
            before = now.get(f.path)
            if before is not None and before.length > f.length:
                raise CommitConflictError(
                    f"Cannot record committed file {f.path} of {target.name} with "
                    f"{f.length:,} bytes: write id {before.write_id} committed it with "
                    f"{before.length:,} bytes, and a commit never lowers a committed length",
                    hint="the file was cut or rewritten after its commit; abort this "
                         "transaction and run `ingest verify` on the table")
        gone = [p for p in paths if p in now]
        rows = [{"seq": seq + 1, "path": f.path,
                 "write_id": max(f.write_id, now[f.path].write_id) if f.path in now
                 else f.write_id,
                 "length_bytes": f.length, "tail_hash": f.tail_hash, "events": f.rows}
                for f in entries]
        rows += [{"seq": seq + 1, "path": p, "write_id": None, "length_bytes": None,
                  "tail_hash": None, "events": None} for p in gone if p not in
                 {f.path for f in entries}]
        if not rows:
            # Raced: what was to be forgotten went meanwhile. A committed write id without
            # its delta would make every reader read the whole table, so none is committed.
            raise _NothingLeft(own)
        write_delta(table, own, pa.Table.from_pylist(rows, schema=MANIFEST_SCHEMA))
        return len(entries) + len(gone)


class _NothingLeft(Exception):
    """Raised inside `own_transaction` to abort it: the write found nothing to do."""

    def __init__(self, write_id: int) -> None:
        super().__init__(f"nothing left to write under manifest write id {write_id}")


def checked(table: str, entries: list[CommittedFile],
            write_id: int | None) -> list[CommittedFile]:
    """`entries` of `table`, each of write id `write_id` (when given) and path once.

    Raises:
        ConfigError: an entry names another write id, or a path twice.
    """
    seen: set[str] = set()
    for f in entries:
        if write_id is not None and f.write_id != write_id:
            raise ConfigError(f"Cannot record committed file {f.path} of {table} with write "
                              f"id {f.write_id}: the commit is of write id {write_id}")
        if f.path in seen:
            raise ConfigError(f"Cannot record committed file {f.path} of {table} twice in "
                              "one commit")
        seen.add(f.path)
    return entries


@contextmanager
def own_transaction(conn: HmsConnection, *, agent: str) -> Iterator[int]:
    """A transaction of its own for manifest writes outside a commit (compaction outputs,
    the cleaner's forgets): heartbeated while open, committed on a clean exit, aborted on an
    exception (also when `HmsManifest.write` found nothing left to write).

    Raises:
        CommitConflictError: the server aborted the transaction before the commit.
        MetastoreError: the metastore failed.
    """
    (txn_id,) = open_txns(conn, 1, agent=agent)
    beats = None
    try:
        beats = Heartbeater(conn.uri, txn_id, info=conn.info, fresh=True).start()
        yield txn_id
        beats.check()
    except _NothingLeft:
        _abort(conn, txn_id, beats)
        return
    except BaseException:
        _abort(conn, txn_id, beats)
        raise
    beats.stop()
    commit_txn(conn, txn_id)


def _abort(conn: HmsConnection, txn_id: int, beats: Heartbeater | None) -> None:
    if beats is not None:
        beats.stop()
    try:
        abort_txn(conn, txn_id)
    except MetastoreError:
        pass  # the caller's error says what failed; the server's timeout aborts it


__all__ = ["FILES_OF", "MANIFEST", "MANIFEST_SCHEMA", "HmsManifest", "checked", "own_transaction"]
