"""Hive tables as `TableDefinition`s: register one (its database too), find one by name or by
location, list them. Below `HiveMetastore`; knows the HMS connection and the model, not
transactions.

A database created here has the table's parent directory as its location and, on Hive 4, as
its managed location (set by `alter_database`: Hive 4.0.1 refuses to create a database whose
managed directory exists), since Hive 4 keeps a managed table inside its database's managed
location or the warehouse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ingest.errors import ConfigError, TableNotFoundError
from ingest.txn.hms.thrift import (
    HiveColumn,
    HiveTable,
    HiveTableSpec,
    HmsConnection,
    create_database,
    create_table,
    get_table,
    get_tables,
    hadoop_location,
    ttypes,
)
from ingest.txn.locations import normalize_location
from ingest.txn.model import TableDefinition, TableIdentifier, table_key

# The table parameter holding its schema version (docs/format.md §25): set with the columns in
# one `alter_table_with_cascade`, absent (version 0) until the first column change.
SCHEMA_VERSION_PARAMETER = "ingest.schema.version"


def to_definition(table: HiveTable, uri: str) -> TableDefinition:
    """Our definition of a full-ACID Hive table; its parameters become the properties.

    Raises:
        UnsupportedFormatError: the table is not full-ACID ORC (naming the property).
        ConfigError: a column type our reader does not know.
    """
    table.require_full_acid(uri)
    properties = dict(table.properties)
    version = properties.pop(SCHEMA_VERSION_PARAMETER, "0")
    return TableDefinition(
        name=table.name, location=normalize_location(table.location),
        row_schema=table.row_schema,
        partition_columns=tuple(c.name for c in table.partition_columns),
        bucket_count=table.bucket_count if table.bucket_columns else 0,
        bucket_columns=table.bucket_columns if table.bucket_count else (),
        properties=properties,
        schema_version=int(version) if version.isdigit() else 0)


def schema_version(table: HiveTable) -> int:
    """The table's schema version (its `ingest.schema.version` parameter, 0 without)."""
    value = (table.thrift.parameters or {}).get(SCHEMA_VERSION_PARAMETER, "0")
    return int(value) if value.isdigit() else 0


def find_hive_table(conn: HmsConnection, ref: TableIdentifier) -> HiveTable | None:
    """The Hive table `ref` names (by name, or by location), or None.

    The metastore has no lookup by location. The name this process last found at a location
    is tried first, and kept only while that table still lies there (tables are dropped,
    renamed and moved); otherwise every table's location is compared, normalised.

    Raises:
        MetastoreError: the metastore failed.
    """
    what, value = table_key(ref)
    if what == "name":
        try:
            return get_table(conn, value)
        except TableNotFoundError:
            return None
    known = _NAME_AT_LOCATION.get((conn.service_uri, value))
    if known is not None:
        try:
            table = get_table(conn, known)
        except TableNotFoundError:
            table = None
        if table is not None and _lies_at(table, value):
            return table
        del _NAME_AT_LOCATION[(conn.service_uri, value)]
    for table in all_tables(conn):
        if _lies_at(table, value):
            _NAME_AT_LOCATION[(conn.service_uri, value)] = table.name
            return table
    return None


def find_hive_tables(conn: HmsConnection, refs: Sequence[TableIdentifier]
                     ) -> list[HiveTable | None]:
    """`find_hive_table` of each of `refs`, in their order: the names in one
    `get_table_objects_by_name_req` a database, each location as `find_hive_table` finds it.

    Raises:
        ConfigError: a name that is not `table` or `db.table`.
        MetastoreError: the metastore failed.
    """
    keys = [table_key(ref) for ref in refs]
    names = sorted({value for what, value in keys if what == "name"})
    by_name = get_tables(conn, names) if names else {}
    return [by_name.get(value) if what == "name" else find_hive_table(conn, ref)
            for ref, (what, value) in zip(refs, keys, strict=True)]


# (metastore URI, normalised location) -> the name of the table found there last.
_NAME_AT_LOCATION: dict[tuple[str, str], str] = {}


def _lies_at(table: HiveTable, location: str) -> bool:
    return bool(table.location) and normalize_location(table.location) == location


def all_tables(conn: HmsConnection) -> list[HiveTable]:
    """Every table of every database, views and non-ACID tables included, by name: one
    `get_table_objects_by_name_req` per database.

    Raises:
        MetastoreError: the metastore failed.
    """
    out = []
    for db in sorted(conn.call("get_all_databases")):
        names = [f"{db}.{name}" for name in sorted(conn.call("get_all_tables", db))]
        found = get_tables(conn, names) if names else {}
        out += [found[n] for n in names if n in found]  # absent: dropped meanwhile
    return out


def register_table(conn: HmsConnection, defn: TableDefinition) -> HiveTable:
    """Create the Hive table of `defn`, and its database when missing.

    Raises:
        TableExistsError: a table of that name exists.
        ConfigError: the server refused the definition (on Hive 4: a location outside the
            database's managed location and the warehouse, with the way out).
        UnsupportedFormatError: a column type Hive cannot hold.
        MetastoreError: the metastore failed.
    """
    database = defn.name.split(".", 1)[0]
    parent = defn.location.rstrip("/").rsplit("/", 1)[0]
    _ensure_database(conn, database, parent)
    spec = HiveTableSpec.from_schema(
        defn.name, defn.row_schema, partition_columns=defn.partition_columns,
        bucket_columns=defn.bucket_columns, bucket_count=defn.bucket_count,
        location=defn.location, properties=defn.properties)
    try:
        return create_table(conn, spec)
    except ConfigError as e:
        if "managed" not in e.message:
            raise
        raise ConfigError(
            f"Cannot create table {defn.name} at {defn.location} in the Hive Metastore at "
            f"{conn.uri}: Hive {conn.info.version} keeps a managed (transactional) table inside "
            f"its database's managed location or the warehouse ({e.message})",
            hint=_outside_warehouse_hint(defn)) from e


def _outside_warehouse_hint(defn: TableDefinition) -> str:
    # Said for every caller: `ingest stream` has no --name (it names its table after the
    # directory), but it streams into whatever table the metastore lists at its --table.
    short = defn.name.split(".", 1)[1]
    return (f"name the table in a database that does not exist yet (e.g. `ingest create "
            f"{defn.location} --name {short}_db.{short} --schema ...`): ingest creates it with "
            "the table's parent directory as its managed location; `ingest stream` names its "
            "table itself, so run that `ingest create` first with the stream's --schema, then "
            "stream into the same --table; or put the table under the database's managed "
            "location")


def _ensure_database(conn: HmsConnection, name: str, parent: str) -> None:
    t = ttypes()
    try:
        conn.call("get_database", name, expect=(t.NoSuchObjectException,))
        return
    except t.NoSuchObjectException:
        pass
    created = create_database(conn, name, location=parent)
    if created and conn.info.major >= 4:
        db: Any = conn.call("get_database", name)
        db.managedLocationUri = hadoop_location(parent)
        conn.call("alter_database", name, db)


def seed_write_ids(conn: HmsConnection, table: HiveTable, next_write_id: int) -> None:
    """Make the table's next write id `next_write_id` (adopting data on disk): Hive's
    `seed_write_id`, allowed only before any write id of the table was allocated.

    Raises:
        MetastoreError: the metastore refused it.
    """
    t = ttypes()
    conn.call("seed_write_id", t.SeedTableWriteIdsRequest(
        dbName=table.database, tableName=table.table_name, seedWriteId=next_write_id - 1))


def set_columns(conn: HmsConnection, table: HiveTable, columns: tuple[HiveColumn, ...]) -> None:
    """Hive's ALTER TABLE ... ADD COLUMNS / CHANGE COLUMN ... CASCADE: the table's columns
    and every partition's become `columns` (`alter_table_with_cascade`), and its schema
    version parameter goes up by one in the same call.

    Raises:
        ConfigError: the server refused the change, with its reason.
        MetastoreError: the metastore failed.
    """
    t = ttypes()
    thrift = table.thrift
    thrift.sd.cols = [t.FieldSchema(name=c.name, type=c.type, comment=c.comment)
                      for c in columns]
    thrift.parameters = {**(thrift.parameters or {}),
                         SCHEMA_VERSION_PARAMETER: str(schema_version(table) + 1)}
    try:
        conn.call("alter_table_with_cascade", table.database, table.table_name, thrift, True)
    except (t.InvalidOperationException, t.MetaException) as e:
        raise ConfigError(f"Cannot alter the columns of table {table.name}: the Hive "
                          f"Metastore refused: {getattr(e, 'message', e)}") from e


def set_parameters(conn: HmsConnection, table: HiveTable, properties: dict[str, str]) -> None:
    """Hive's ALTER TABLE ... SET TBLPROPERTIES: add or replace table parameters.

    Raises:
        MetastoreError: the metastore failed.
    """
    thrift = table.thrift
    thrift.parameters = {**(thrift.parameters or {}), **properties}
    conn.call("alter_table", table.database, table.table_name, thrift)

