"""The table catalogue in SQL: create, alter, find, list and drop transactional tables.

Mirrors Hive's metastore `createTable`, `alter_table` (TBLPROPERTIES), `getTable` and
`dropTable`; a table's NEXT_WRITE_ID is a column of its row. Knows SQL, not files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from ingest.errors import CommitConflictError, ConfigError, TableExistsError
from ingest.txn.model import TableDefinition, TableRef, table_key
from ingest.txn.sql._database import Database
from ingest.txn.sql._manifest import Manifest
from ingest.txn.sql._schema import sink_progress, tables, txn_to_write_id, txns

_COLUMNS = (tables.c.name, tables.c.location, tables.c.row_schema,
            tables.c.partition_columns, tables.c.bucket_count, tables.c.bucket_columns,
            tables.c.properties)


def _from_row(row: Sequence[Any]) -> TableDefinition:
    name, location, schema, partitions, bucket_count, buckets, properties = row
    return TableDefinition(
        name=name,
        location=location,
        row_schema=pa.ipc.read_schema(pa.py_buffer(bytes(schema))),
        partition_columns=tuple(json.loads(partitions)),
        bucket_count=int(bucket_count),
        bucket_columns=tuple(json.loads(buckets)),
        properties=dict(json.loads(properties)),
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

    def set_properties(self, table: TableRef, properties: dict[str, str]) -> TableDefinition:
        """See `Metastore.set_properties`; one write transaction."""
        db = self._db
        with db.translate("alter table"), db.write() as c:
            name = db.resolve(c, table)
            found = self._select(c, "name", name)
            if found is None:
                raise db.not_found(table)
            merged = {**found.properties, **properties}
            c.execute(sa.update(tables).where(tables.c.name == name)
                      .values(properties=json.dumps(merged, sort_keys=True)))
            updated = self._select(c, "name", name)
        if updated is None:
            raise db.not_found(table)
        return updated

    def alter_columns(self, table: TableRef, row_schema: pa.Schema, *,
                      expected: pa.Schema) -> TableDefinition:
        """See `Metastore.alter_columns`; the check and the update are one write
        transaction, and the update is conditioned on the schema it checked."""
        db = self._db
        with db.translate("alter table columns"), db.write() as c:
            name = db.resolve(c, table)
            found = self._select(c, "name", name)
            if found is None:
                raise db.not_found(table)
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
            updated = self._select(c, "name", name)
        if updated is None:
            raise db.not_found(table)
        return updated

    def find_table(self, table: TableRef) -> TableDefinition | None:
        """See `Metastore.find_table`."""
        column, value = table_key(table)
        db = self._db
        with db.translate("read tables"), db.read() as c:
            return self._select(c, column, value)

    def list_tables(self) -> list[TableDefinition]:
        """See `Metastore.list_tables`."""
        db = self._db
        with db.translate("list tables"), db.read() as c:
            rows = c.execute(sa.select(*_COLUMNS)).all()
        # Sorted here: the database's collation (PostgreSQL's locale) may order otherwise.
        return [_from_row(row) for row in sorted(rows, key=lambda r: r[0])]

    def drop_table(self, table: TableRef) -> None:
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
            c.execute(sa.delete(txn_to_write_id).where(txn_to_write_id.c.table_name == name))
            c.execute(sa.delete(tables).where(tables.c.name == name))

    @staticmethod
    def _select(c: sa.Connection, column: str, value: str) -> TableDefinition | None:
        found = c.execute(sa.select(*_COLUMNS).where(tables.c[column] == value)).first()
        return None if found is None else _from_row(found)


__all__ = ["Tables"]
