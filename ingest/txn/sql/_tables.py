"""The table catalogue in SQL: create, alter, find, list and drop transactional tables.

Mirrors Hive's metastore `createTable`, `alter_table` (TBLPROPERTIES, columns), `getTable`
and `dropTable`; a table's NEXT_WRITE_ID is a column of its row. Column changes are kept as
schema versions (`table_schemas`, docs/format.md §25). Knows SQL, not files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from ingest.acid.format import ValidWriteIdList
from ingest.errors import CommitConflictError, ConfigError, TableExistsError
from ingest.txn.model import SCHEMA_CHANGE_AGENT, TableDefinition, TableIdentifier, table_key
from ingest.txn.sql._database import Database, matching_rows
from ingest.txn.sql._manifest import Manifest
from ingest.txn.sql._schema import sink_progress, table_schemas, tables, txn_to_write_id, txns
from ingest.txn.sql._table_offsets import TableOffsets
from ingest.txn.sql._transactions import insert_txn

_COLUMNS = (tables.c.name, tables.c.location, tables.c.row_schema,
            tables.c.partition_columns, tables.c.bucket_count, tables.c.bucket_columns,
            tables.c.properties)
SCHEMAS_VERSION = 4  # the metastore schema version that added `table_schemas`
# A table's schema version: its newest `table_schemas` row, 0 without one.
_VERSION = (sa.select(sa.func.coalesce(sa.func.max(table_schemas.c.version), 0))
            .where(table_schemas.c.table_name == tables.c.name)
            .scalar_subquery())


def _from_row(row: Sequence[Any]) -> TableDefinition:
    name, location, schema, partitions, bucket_count, buckets, properties, *version = row
    return TableDefinition(
        name=name,
        location=location,
        row_schema=pa.ipc.read_schema(pa.py_buffer(bytes(schema))),
        partition_columns=tuple(json.loads(partitions)),
        bucket_count=int(bucket_count),
        bucket_columns=tuple(json.loads(buckets)),
        properties=dict(json.loads(properties)),
        schema_version=int(version[0]) if version and version[0] is not None else 0,
    )


class Tables:
    """The `tables` table of one database; dropping a table also drops its manifest entries
    through the `Manifest`."""

    def __init__(self, db: Database, manifest: Manifest) -> None:
        self._db = db
        self._manifest = manifest

    def create_table(self, defn: TableDefinition, *, next_write_id: int = 1) -> TableDefinition:
        """See `Metastore.create_table`; the checks and the insert are one write
        transaction."""
        if next_write_id < 1:
            raise ConfigError(f"Cannot create table {defn.name}: next write id {next_write_id} "
                              "must be at least 1")
        db = self._db
        with db.translate(f"create table {defn.name}"), db.write() as c:
            for column, value in (("name", defn.name), ("location", defn.location)):
                found = self._select(c, column, value)
                if found is not None:
                    raise TableExistsError(
                        f"Cannot create table {defn.name} at {defn.location}: table "
                        f"{found.name} already exists at {found.location}",
                        table=found.name,
                        hint="choose another name or location, or drop the existing table",
                    )
            c.execute(sa.insert(tables).values(
                name=defn.name,
                location=defn.location,
                row_schema=defn.row_schema.serialize().to_pybytes(),
                partition_columns=json.dumps(list(defn.partition_columns)),
                bucket_count=defn.bucket_count,
                bucket_columns=json.dumps(list(defn.bucket_columns)),
                properties=json.dumps(defn.properties, sort_keys=True),
                next_write_id=next_write_id,
                created_at=db.clock(),
            ))
        return defn

    def set_properties(self, table: TableIdentifier, properties: dict[str, str]) -> TableDefinition:
        """See `Metastore.set_properties`; one write transaction."""
        db = self._db
        with db.translate("alter table"), db.write() as c:
            name, found = self._existing(c, table)
            merged = {**found.properties, **properties}
            c.execute(sa.update(tables).where(tables.c.name == name)
                      .values(properties=json.dumps(merged, sort_keys=True)))
            updated = self._select(c, "name", name)
        if updated is None:
            raise db.not_found(table)
        return updated

    def alter_columns(self, table: TableIdentifier, row_schema: pa.Schema, *,
                      expected: pa.Schema) -> TableDefinition:
        """See `Metastore.alter_columns`; the check and the update are one write
        transaction, and the update is conditioned on the schema it checked."""
        db = self._db
        with db.translate("alter table columns"), db.write() as c:
            name, found = self._existing(c, table)
            # The bytes as stored: the update is conditioned on them (compare-and-swap).
            old = c.execute(sa.select(tables.c.row_schema)
                            .where(tables.c.name == name)).scalar_one()
            if not found.row_schema.equals(expected, check_metadata=True):
                raise CommitConflictError(
                    f"Cannot alter the columns of table {name}: its columns were changed by "
                    "another process meanwhile", hint="read the table again and retry")
            TableDefinition(name=found.name, location=found.location, row_schema=row_schema,
                            partition_columns=found.partition_columns,
                            bucket_count=found.bucket_count,
                            bucket_columns=found.bucket_columns)  # its checks, before writing
            done = c.execute(sa.update(tables)
                             .where(tables.c.name == name, tables.c.row_schema == old)
                             .values(row_schema=row_schema.serialize().to_pybytes()))
            if done.rowcount != 1:
                raise CommitConflictError(
                    f"Cannot alter the columns of table {name}: its columns were changed by "
                    "another process meanwhile", hint="read the table again and retry")
            if self._versioned:
                self._record_version(c, name, found.schema_version, old, row_schema)
            updated = self._select(c, "name", name)
        if updated is None:
            raise db.not_found(table)
        return updated

    def _record_version(self, c: sa.Connection, name: str, version: int, old: bytes,
                        row_schema: pa.Schema) -> None:
        """Make the change a committed transaction of the table with a write id of its own
        (it writes no file), and add schema version `version + 1` starting at that write id
        (and version 0, the columns as created, at the first change), in the caller's write
        transaction: a snapshot holds the change exactly when its write id is at or below
        the snapshot's high watermark. A concurrent change of the same version fails on the
        primary key, as the compare-and-swap above would."""
        now = self._db.clock()
        txn_id = insert_txn(c, SCHEMA_CHANGE_AGENT, now)
        write_id = int(c.execute(sa.select(tables.c.next_write_id)
                                 .where(tables.c.name == name)).scalar_one())
        c.execute(sa.update(tables).where(tables.c.name == name)
                  .values(next_write_id=write_id + 1))
        c.execute(sa.insert(txn_to_write_id).values(txn_id=txn_id, table_name=name,
                                                    write_id=write_id, is_primary=1))
        c.execute(sa.update(txns).where(txns.c.txn_id == txn_id).values(
            state="committed", finished_at=now,
            reason=f"ALTER TABLE: schema version {version + 1}"))
        rows = [] if version else [dict(table_name=name, version=0, first_write_id=0,
                                        row_schema=bytes(old), changed_at=now)]
        rows.append(dict(table_name=name, version=version + 1, first_write_id=write_id,
                         row_schema=row_schema.serialize().to_pybytes(), changed_at=now))
        c.execute(sa.insert(table_schemas), rows)

    def snapshot_schema(self, table: TableIdentifier,
                        snapshot: ValidWriteIdList) -> tuple[int, pa.Schema]:
        """See `Metastore.snapshot_schema`: the newest version whose change's write id is
        at most the snapshot's high watermark (the change committed with it, so it is in
        the snapshot exactly then)."""
        db = self._db
        with db.translate("read table columns"), db.read() as c:
            name, found = self._existing(c, table)
            if not self._versioned or not found.schema_version:
                return found.schema_version, found.row_schema
            row = c.execute(
                sa.select(table_schemas.c.version, table_schemas.c.row_schema)
                .where(table_schemas.c.table_name == name,
                       table_schemas.c.first_write_id <= snapshot.high_watermark)
                .order_by(table_schemas.c.version.desc()).limit(1)).first()
        if row is None:  # cannot happen: version 0 starts at write id 0
            return found.schema_version, found.row_schema
        return int(row[0]), pa.ipc.read_schema(pa.py_buffer(bytes(row[1])))

    @property
    def _versioned(self) -> bool:
        """The database keeps schema versions (a read-only open of an older one does not)."""
        return self._db.schema_version >= SCHEMAS_VERSION

    def find_table(self, table: TableIdentifier) -> TableDefinition | None:
        """See `Metastore.find_table`."""
        column, value = table_key(table)
        db = self._db
        with db.translate("read tables"), db.read() as c:
            return self._select(c, column, value)

    def find_tables(self, identifiers: Sequence[TableIdentifier]) -> list[TableDefinition | None]:
        """See `Metastore.find_tables`: one read snapshot, a statement per kind of identifier
        (names, locations) and 400 of them, not a statement per table."""
        keys = [table_key(t) for t in identifiers]
        db = self._db
        with db.translate("read tables"), db.read() as c:
            found = {key: _from_row(row) for key, row in matching_rows(c, keys, self._columns)}
        return [found.get(key) for key in keys]

    def list_tables(self) -> list[TableDefinition]:
        """See `Metastore.list_tables`."""
        db = self._db
        with db.translate("list tables"), db.read() as c:
            rows = c.execute(sa.select(*self._columns)).all()
        # Sorted here: the database's collation (PostgreSQL's locale) may order otherwise.
        return [_from_row(row) for row in sorted(rows, key=lambda r: r[0])]

    def drop_table(self, table: TableIdentifier) -> None:
        """See `Metastore.drop_table`; one write transaction."""
        db = self._db
        with db.translate("drop table"), db.write() as c:
            name = db.resolve(c, table)
            open_txns = list(c.execute(
                sa.select(txn_to_write_id.c.txn_id)
                .join(txns, txns.c.txn_id == txn_to_write_id.c.txn_id)
                .where(txn_to_write_id.c.table_name == name, txns.c.state == "open")
                .order_by(txn_to_write_id.c.txn_id)).scalars())
            if open_txns:
                raise CommitConflictError(
                    f"Cannot drop table {name}: transactions {open_txns} writing it are open",
                    hint="stop the writers or abort the transactions first",
                )
            c.execute(sa.delete(sink_progress).where(sink_progress.c.table_name == name))
            self._manifest.drop_table(c, name)
            TableOffsets(db).drop_table(c, name)
            c.execute(sa.delete(txn_to_write_id).where(txn_to_write_id.c.table_name == name))
            if self._versioned:
                c.execute(sa.delete(table_schemas).where(table_schemas.c.table_name == name))
            c.execute(sa.delete(tables).where(tables.c.name == name))

    @property
    def _columns(self) -> tuple[Any, ...]:
        return (*_COLUMNS, _VERSION) if self._versioned else _COLUMNS

    def _existing(self, c: sa.Connection, table: TableIdentifier) -> tuple[str, TableDefinition]:
        """The table's name and definition, read in the open database transaction `c`.

        Raises:
            TableNotFoundError: no such table.
        """
        name = self._db.resolve(c, table)
        found = self._select(c, "name", name)
        if found is None:
            raise self._db.not_found(table)
        return name, found

    def _select(self, c: sa.Connection, column: str, value: str) -> TableDefinition | None:
        found = c.execute(sa.select(*self._columns).where(tables.c[column] == value)).first()
        return None if found is None else _from_row(found)


__all__ = ["Tables"]
