"""The committed-file manifest in SQL: what each commit recorded about the bucket files it
wrote.

One row per (table, file path relative to the table root): the committed length, the hash of
the ORC tail ending there and the events below it (docs/format.md §20). A commit records its
files in the same database transaction that commits it (`Manifest.record`, called by
`Transactions.commit`); compaction outputs are recorded on their own. Hive has no such table;
it keeps invariant 7 of docs/invariants.md checkable. Knows SQL only.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from ingest.acid.format import CommittedFile
from ingest.errors import CommitConflictError, ConfigError
from ingest.txn.model import TableIdentifier
from ingest.txn.sql._database import Part
from ingest.txn.sql._schema import committed_files

MANIFEST_VERSION = 2  # the schema version that added `committed_files`
# Entries whose recorded rows one statement reads (well below SQLite's parameter limit).
_ENTRIES_A_READ = 400


class Manifest(Part):
    """The `committed_files` table of one database."""

    since_version = MANIFEST_VERSION
    what = "committed-file manifest"

    def record(self, c: sa.Connection, table_name: str, files: Iterable[CommittedFile], *,
               write_id: int | None = None) -> None:
        """Insert or update the entries of `files`, inside the caller's write transaction.

        An entry is updated only to a length at least the one recorded: a transaction batch's
        file grows from commit to commit, and a commit that would record less would hide rows
        an earlier commit promised.

        Args:
            c: the connection, inside a write transaction (`Database.write`).
            table_name: the stored table name.
            files: the entries.
            write_id: when given, every entry's write id must be this one (a commit's).

        Raises:
            ConfigError: an entry names another write id than `write_id`, or a path twice.
            CommitConflictError: an entry would lower a recorded committed length.
        """
        self.record_tables(c, [(table_name, files, write_id)])

    def record_tables(self, c: sa.Connection,
                      tables: Iterable[tuple[str, Iterable[CommittedFile], int | None]]) -> None:
        """`record` for several tables (stored name, entries, write id or None) at once: the
        recorded rows are read a few hundred entries a statement and the new entries inserted
        in one statement, so a commit of many tables costs a few statements, not two per
        file (the same checks, under the same write lock).

        Raises:
            ConfigError, CommitConflictError: as `record`.
        """
        entries: list[tuple[str, CommittedFile]] = []
        for table_name, files, write_id in tables:
            seen: set[str] = set()
            for f in files:
                if write_id is not None and f.write_id != write_id:
                    raise ConfigError(
                        f"Cannot record committed file {f.path} of {table_name} with write id "
                        f"{f.write_id}: the commit is of write id {write_id}")
                if f.path in seen:
                    raise ConfigError(f"Cannot record committed file {f.path} of {table_name} "
                                      "twice in one commit")
                seen.add(f.path)
                entries.append((table_name, f))
        recorded = self._recorded(c, entries)
        new: list[dict[str, object]] = []
        for table_name, f in entries:
            row = recorded.get((table_name, f.path))
            if row is not None and row[0] > f.length:
                raise CommitConflictError(
                    f"Cannot record committed file {f.path} of {table_name} with {f.length:,} "
                    f"bytes: write id {row[1]} committed it with {row[0]:,} bytes, and a "
                    "commit never lowers a committed length",
                    hint="the file was cut or rewritten after its commit; abort this "
                    "transaction and run `ingest verify` on the table")
            values = {"length": f.length, "tail_hash": f.tail_hash, "rows": f.rows}
            if row is None:
                new.append({"table_name": table_name, "path": f.path, "write_id": f.write_id,
                            **values})
            else:
                # Under the write lock nobody changes the row between the read above and here.
                c.execute(sa.update(committed_files).where(
                    committed_files.c.table_name == table_name,
                    committed_files.c.path == f.path).values(
                    write_id=max(row[1], f.write_id), **values))
        if new:
            c.execute(sa.insert(committed_files), new)

    @staticmethod
    def _recorded(c: sa.Connection, entries: list[tuple[str, CommittedFile]]
                  ) -> dict[tuple[str, str], tuple[int, int]]:
        """(length, write id) of the entries already recorded, by (table, path)."""
        out: dict[tuple[str, str], tuple[int, int]] = {}
        f = committed_files.c
        for at in range(0, len(entries), _ENTRIES_A_READ):
            chunk = entries[at:at + _ENTRIES_A_READ]
            wanted = {(t, e.path) for t, e in chunk}
            # Names and paths apart (portable SQL, both keys indexed): rows pairing a name
            # with another table's path are read too, and dropped here.
            rows = c.execute(sa.select(f.table_name, f.path, f.length, f.write_id).where(
                f.table_name.in_(sorted({t for t, _ in wanted})),
                f.path.in_(sorted({p for _, p in wanted}))))
            for row in rows:
                if (row[0], row[1]) in wanted:
                    out[(row[0], row[1])] = (int(row[2]), int(row[3]))
        return out

    def drop_table(self, c: sa.Connection, table_name: str) -> None:
        """Delete every entry of a table, inside the caller's write transaction (nothing
        without a manifest)."""
        if self.available:
            c.execute(sa.delete(committed_files)
                      .where(committed_files.c.table_name == table_name))

    def committed_files(self, table: TableIdentifier) -> dict[str, CommittedFile]:
        """See `Metastore.committed_files`; one read transaction."""
        db = self._db
        with db.translate("read committed files"), db.read() as c:
            name = db.resolve(c, table)
            if not self.available:
                return {}
            f = committed_files.c
            rows = c.execute(sa.select(f.path, f.write_id, f.length, f.tail_hash, f.rows)
                             .where(f.table_name == name)).all()
        return {row[0]: CommittedFile(row[0], int(row[1]), int(row[2]), row[3], int(row[4]))
                for row in sorted(rows, key=lambda r: r[0])}

    def record_committed_files(self, table: TableIdentifier,
                               files: Iterable[CommittedFile]) -> None:
        """See `Metastore.record_committed_files`; one write transaction."""
        self.require("record committed files")
        db = self._db
        with db.translate("record committed files"), db.write() as c:
            self.record(c, db.resolve(c, table), files)

    def forget_committed_files(self, table: TableIdentifier, paths: Iterable[str]) -> int:
        """See `Metastore.forget_committed_files`; one write transaction."""
        self.require("record committed files")
        db = self._db
        with db.translate("forget committed files"), db.write() as c:
            name = db.resolve(c, table)
            f = committed_files.c
            return sum(c.execute(sa.delete(committed_files)
                                 .where(f.table_name == name, f.path == p)).rowcount
                       for p in paths)


__all__ = ["MANIFEST_VERSION", "Manifest"]
