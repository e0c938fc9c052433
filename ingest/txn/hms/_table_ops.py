"""`HiveMetastore`'s tables: create, alter, find, list and drop them (a table's side tables go
with it), over `_catalog.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from ingest.errors import CommitConflictError, ConfigError, TableExistsError
from ingest.txn.hms._catalog import (
    all_tables,
    find_hive_table,
    find_hive_tables,
    register_table,
    seed_write_ids,
    set_columns,
    set_parameters,
    to_definition,
)
from ingest.txn.hms._session import Session
from ingest.txn.hms._states import table_transactions
from ingest.txn.hms.side import MANIFEST, find_progress_table, is_side_table
from ingest.txn.hms.thrift import drop_table, hive_columns
from ingest.txn.model import TableDefinition, TableIdentifier


class TableOps:
    """Tables of a `HiveMetastore` (see `Metastore` for the contract)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def create_table(self, defn: TableDefinition, *, next_write_id: int = 1) -> TableDefinition:
        s = self._s
        if next_write_id < 1:
            raise ConfigError(f"Cannot create table {defn.name}: next_write_id is "
                              f"{next_write_id}, expected 1 or more")
        with s.lock:
            s.writable(f"create table {defn.name}")
            there = find_hive_table(s.conn, defn.location)
            if there is not None:
                raise TableExistsError(
                    f"Cannot create table {defn.name} at {defn.location}: table {there.name} of "
                    f"the Hive Metastore at {s.location} has that location",
                    table=there.name)
            table = register_table(s.conn, defn)
            if next_write_id > 1:
                seed_write_ids(s.conn, table, next_write_id)
            return to_definition(table, s.location)

    def set_properties(self, table: TableIdentifier, properties: dict[str, str]) -> TableDefinition:
        s = self._s
        with s.lock:
            s.writable("set table properties")
            found = s.hive_table(table)
            set_parameters(s.conn, found, properties)
            return to_definition(s.hive_table(found.name), s.location)

    def alter_columns(self, table: TableIdentifier, row_schema: pa.Schema, *,
                      expected: pa.Schema) -> TableDefinition:
        """See `Metastore.alter_columns`: `alter_table_with_cascade`, so partitions get the
        new columns too. The Hive Metastore has no compare-and-swap on columns: they are
        checked just before the call, under this store's lock only.
        """
        s = self._s
        with s.lock:
            s.writable("alter table columns")
            found = s.hive_table(table)
            if [(c.name.lower(), c.type) for c in found.columns] != [
                    (c.name.lower(), c.type) for c in hive_columns(expected)]:
                raise CommitConflictError(
                    f"Cannot alter the columns of table {found.name}: its columns were changed "
                    "by another process meanwhile", hint="read the table again and retry")
            set_columns(s.conn, found, hive_columns(row_schema))
            return to_definition(s.hive_table(found.name), s.location)

    def find_table(self, table: TableIdentifier) -> TableDefinition | None:
        """The table, or None; a Hive table that is not full-ACID ORC is refused.

        Raises:
            UnsupportedFormatError: the table exists but is not full-ACID ORC (naming the
                property), so no command treats it as ours.
            MetastoreError: the metastore failed.
        """
        s = self._s
        with s.lock:
            found = s.read_retrying(lambda: find_hive_table(s.conn, table))
            return None if found is None else to_definition(found, s.location)

    def find_tables(self, tables: Sequence[TableIdentifier]) -> list[TableDefinition | None]:
        """See `Metastore.find_tables`: the tables named in one request a database (found by
        location, one by one as `find_table`); a Hive table that is not full-ACID ORC is
        refused as there.

        Raises:
            UnsupportedFormatError: a table exists but is not full-ACID ORC.
            MetastoreError: the metastore failed.
        """
        s = self._s
        with s.lock:
            found = s.read_retrying(lambda: find_hive_tables(s.conn, tables))
            return [None if t is None else to_definition(t, s.location) for t in found]

    def list_tables(self) -> list[TableDefinition]:
        """The full-ACID ORC tables of every database (others are left out, and so are the
        hidden side tables: progress, manifest)."""
        s = self._s
        with s.lock:
            return [to_definition(t, s.location) for t in all_tables(s.conn)
                    if t.full_acid_problem() is None and not is_side_table(t.name)]

    def drop_table(self, table: TableIdentifier) -> None:
        """See `Metastore.drop_table`; the table's side tables (progress, manifest) go
        too. Hive drops a table whatever writes it, so its open transactions are looked up
        first (a writer that opens one meanwhile is not seen)."""
        s = self._s
        with s.lock:
            s.writable("drop a table")
            found = s.hive_table(table)
            writers = sorted({i.txn_id for i in table_transactions(
                s.conn, [found.name], ["open"])})
            if writers:
                raise CommitConflictError(
                    f"Cannot drop table {found.name}: transactions {writers} writing it are "
                    f"open in the Hive Metastore at {s.location}",
                    hint="stop the writers or abort the transactions first")
            drop_table(s.conn, found.name, delete_data=False)
            for side in (find_progress_table(s.conn, found), MANIFEST.find(s.conn, found)):
                if side is not None:
                    drop_table(s.conn, side.name, delete_data=False)
            s.progress_tables.pop(found.name, None)
            s.manifest_tables.pop(found.name, None)

    def side_tables(self, table: TableIdentifier) -> list[str]:
        """See `Metastore.side_tables`: the names of `table`'s progress and manifest tables
        that exist (none for a side table itself: they have none). Names, not locations: a
        name is one lookup here, a location a walk over every table."""
        s = self._s
        with s.lock:
            found = s.hive_table(table)
            if is_side_table(found.name):
                return []
            sides = (find_progress_table(s.conn, found), MANIFEST.find(s.conn, found))
            return [t.name for t in sides if t is not None]


__all__ = ["TableOps"]
