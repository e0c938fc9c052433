"""Tables in a Hive Metastore: register a full-ACID ORC table, read one back, refuse the rest.

A table registered here is what Hive's `CREATE TABLE ... STORED AS ORC TBLPROPERTIES
('transactional'='true')` makes: a MANAGED_TABLE with the ORC serde and formats,
`transactional=true`, `transactional_properties=default` and `bucketing_version=2`. Hive 4
wants the client's capabilities with the request (`MetastoreDefaultTransformer` refuses an
ACID create without HIVEFULLACIDWRITE) and a managed table's location inside the warehouse or
its database's managed location.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ingest.acid import COMMENT_KEY, format_partition, parse_schema, to_orc_type_string
from ingest.errors import (
    ConfigError,
    MetastoreError,
    TableExistsError,
    TableNotFoundError,
    UnknownMethodError,
    UnsupportedFormatError,
)
from ingest.txn.hms.thrift import _stubs
from ingest.txn.hms.thrift.connection import HmsConnection

ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
ORC_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ACID_PROPERTIES: Mapping[str, str] = {
    "transactional": "true",
    "transactional_properties": "default",
    "bucketing_version": "2",
}
PROCESSOR_CAPABILITIES = ("HIVEFULLACIDREAD", "HIVEFULLACIDWRITE", "HIVEBUCKET2", "EXTREAD",
                          "EXTWRITE")
"""What we tell Hive 4 we can do: read and write full-ACID tables, bucketing version 2, and
external tables. Not insert-only (MM) tables, which we refuse."""
PROCESSOR_ID = "ingest"
_DEFAULT_CATALOG = "hive"


@dataclass(frozen=True)
class HiveColumn:
    """One column as the metastore holds it (`FieldSchema`): Hive's lower-case type name."""

    name: str
    type: str
    comment: str | None = None


def hive_columns(schema: pa.Schema) -> tuple[HiveColumn, ...]:
    """The metastore's columns for an Arrow schema, e.g. `bigint`, `struct<a:int>`.

    Raises:
        UnsupportedFormatError: a type Hive cannot hold (e.g. unsigned integers).
    """
    out = []
    for f in schema:
        # One-field struct named c: what follows "struct<c:" is the field's type name.
        spelled = to_orc_type_string(pa.schema([pa.field("c", f.type, metadata=f.metadata)]))
        comment = (f.metadata or {}).get(COMMENT_KEY)
        out.append(HiveColumn(f.name, spelled[len("struct<c:"):-1],
                              None if comment is None else comment.decode()))
    return tuple(out)


def qualified_name(name: str) -> tuple[str, str]:
    """(database, table) of `db.table`, lower case; a bare name is in `default`.

    Raises:
        ConfigError: empty, or more than one dot.
    """
    parts = name.strip().lower().split(".")
    if len(parts) == 1:
        parts.insert(0, "default")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(f"Cannot use table name {name!r}: expected '<table>' or "
                          "'<database>.<table>'", hint="for example 'default.events'")
    return parts[0], parts[1]


@dataclass(frozen=True)
class HiveTableSpec:
    """A full-ACID ORC table to register.

    Attributes:
        name: `db.table` (a bare name goes to `default`).
        columns: the row columns, in order (no partition columns).
        partition_columns: partition keys, outermost first (our writers use `string`).
        bucket_columns: columns hashed into buckets; empty when unbucketed.
        bucket_count: number of buckets, 0 when unbucketed.
        location: the table directory URL; None lets the metastore choose
            (`<warehouse>/<db>.db/<table>`).
        properties: extra table properties; the ACID ones are always set.
    """

    name: str
    columns: tuple[HiveColumn, ...]
    partition_columns: tuple[HiveColumn, ...] = ()
    bucket_columns: tuple[str, ...] = ()
    bucket_count: int = 0
    location: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_schema(cls, name: str, row_schema: pa.Schema, *,
                    partition_columns: Sequence[str] = (), bucket_columns: Sequence[str] = (),
                    bucket_count: int = 0, location: str | None = None,
                    properties: Mapping[str, str] | None = None) -> HiveTableSpec:
        """A spec from an Arrow row schema; partition columns are strings, as our writers'.

        Raises:
            UnsupportedFormatError: a column type Hive cannot hold.
        """
        return cls(name, hive_columns(row_schema),
                   tuple(HiveColumn(c, "string") for c in partition_columns),
                   tuple(bucket_columns), bucket_count, location, dict(properties or {}))


@dataclass(frozen=True)
class HiveTable:
    """A table as the metastore holds it.

    Attributes:
        name: `db.table`, lower case.
        table_id: the metastore's id (Hive 4 commits carry it with a key/value); None on Hive 3.
        table_type: MANAGED_TABLE, EXTERNAL_TABLE, VIRTUAL_VIEW, ...
        location: the table directory as the metastore spells it (Hadoop's `file:/path`).
        columns, partition_columns: as in the metastore.
        bucket_columns, bucket_count: bucketing; 0 buckets when unbucketed.
        input_format, serde: the storage classes.
        properties: table parameters.
    """

    name: str
    table_id: int | None
    table_type: str
    location: str
    columns: tuple[HiveColumn, ...]
    partition_columns: tuple[HiveColumn, ...]
    bucket_columns: tuple[str, ...]
    bucket_count: int
    input_format: str
    serde: str
    properties: Mapping[str, str]
    thrift: Any = field(repr=False, compare=False, default=None)

    @property
    def database(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def table_name(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def row_schema(self) -> pa.Schema:
        """The row columns as an Arrow schema, each column's comment in its field metadata
        (as `parse_schema` puts a DDL `COMMENT`).

        Raises:
            ConfigError: a column type our reader does not know.
        """
        schema = parse_schema(", ".join(f"`{c.name.replace('`', '``')}` {c.type}"
                                        for c in self.columns))
        return pa.schema([
            f if c.comment is None else f.with_metadata({**(f.metadata or {}),
                                                         COMMENT_KEY: c.comment.encode()})
            for f, c in zip(schema, self.columns, strict=True)])

    def full_acid_problem(self) -> str | None:
        """Why this is not a full-ACID ORC table we can write, naming the property; None if
        it is one."""
        props = {k.lower(): v for k, v in self.properties.items()}
        if self.table_type == "VIRTUAL_VIEW":
            return "it is a view"
        transactional = props.get("transactional")
        if transactional is None or transactional.strip().lower() != "true":
            found = "is not set" if transactional is None else f"is {transactional!r}"
            return f"its property transactional {found}, expected 'true'"
        kind = (props.get("transactional_properties") or "default").strip().lower()
        if kind != "default":
            return (f"its property transactional_properties is {kind!r} (insert-only), expected "
                    "'default' (full ACID)")
        if self.input_format != ORC_INPUT_FORMAT:
            return f"it is stored as {self.input_format}, expected ORC ({ORC_INPUT_FORMAT})"
        return None

    def require_full_acid(self, uri: str) -> None:
        """Refuse a table that is not full-ACID ORC.

        Raises:
            UnsupportedFormatError: naming the property that is wrong.
        """
        problem = self.full_acid_problem()
        if problem is not None:
            raise UnsupportedFormatError(
                f"Cannot write table {self.name} in the Hive Metastore at {uri}: {problem}",
                hint="use a table created with STORED AS ORC TBLPROPERTIES "
                     "('transactional'='true'), or `ingest create`")

    def partition_name(self, values: Sequence[str | None]) -> str:
        """Hive's `k1=v1/k2=v2` for one partition (escaped as its directory is).

        Raises:
            ConfigError: the number of values differs from the partition keys'.
        """
        if len(values) != len(self.partition_columns):
            raise ConfigError(f"Cannot name a partition of {self.name} from values "
                              f"{list(values)}: the table has partition keys "
                              f"{[c.name for c in self.partition_columns]}")
        return "/".join(format_partition(c.name, v)
                        for c, v in zip(self.partition_columns, values, strict=True))


def hadoop_location(url: str) -> str:
    """A location as the metastore stores it (Hadoop's `Path.toString`): `file:///a/b/` becomes
    `file:/a/b`. Hive 4 checks a managed table's location with a plain string prefix
    (`FileUtils.isSubdirectory`), so both spellings must agree."""
    url = url.rstrip("/") or url
    if url.startswith("file:///"):
        return "file:/" + url[len("file:///"):]
    return url


def create_database(conn: HmsConnection, name: str, *, location: str | None = None,
                    managed_location: str | None = None) -> bool:
    """Create a database unless it exists; returns whether it was created.

    `managed_location` (Hive 4) is where its managed (ACID) tables may live; Hive 4.0.1
    creates that directory and refuses the database when it exists already.

    Raises:
        MetastoreError: the server refused it.
    """
    t = _stubs.ttypes()
    db = t.Database(name=name.lower(), description="",
                    locationUri=location and hadoop_location(location), parameters={},
                    ownerName=getpass.getuser(), ownerType=t.PrincipalType.USER,
                    catalogName=_DEFAULT_CATALOG,
                    managedLocationUri=managed_location and hadoop_location(managed_location))
    try:
        conn.call("create_database", db, expect=(t.AlreadyExistsException,))
    except t.AlreadyExistsException:
        return False
    return True


def create_table(conn: HmsConnection, spec: HiveTableSpec) -> HiveTable:
    """Register a full-ACID ORC table and return it as the metastore now holds it.

    Raises:
        TableExistsError: a table of that name exists.
        ConfigError: the server refused the definition (no such database, a location outside
            the managed warehouse, a bad type), with its reason.
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    db, name = qualified_name(spec.name)
    table = _thrift_table(t, db, name, spec)
    refused = (t.AlreadyExistsException, t.InvalidObjectException, t.MetaException,
               t.NoSuchObjectException)
    try:
        if conn.info.major >= 4:
            try:
                conn.call("create_table_req", t.CreateTableRequest(
                    table=table, processorCapabilities=list(PROCESSOR_CAPABILITIES),
                    processorIdentifier=PROCESSOR_ID), expect=refused)
            except UnknownMethodError:
                conn.call("create_table", table, expect=refused)
        else:
            conn.call("create_table", table, expect=refused)
    except t.AlreadyExistsException as e:
        raise TableExistsError(f"Cannot create table {db}.{name}: it exists in the Hive "
                               f"Metastore at {conn.uri}", table=f"{db}.{name}") from e
    except refused as e:
        raise ConfigError(
            f"Cannot create table {db}.{name} in the Hive Metastore at {conn.uri}: the server "
            f"refused it: {getattr(e, 'message', e)}",
            hint="create the database first; on Hive 4 a managed table must lie inside the "
                 "warehouse or its database's managed location") from e
    return get_table(conn, f"{db}.{name}")


def get_table(conn: HmsConnection, name: str) -> HiveTable:
    """The table as the metastore holds it.

    Raises:
        TableNotFoundError: no such table (or database).
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    db, table_name = qualified_name(name)
    # The old-style capability lets the server hand out an insert-only table at all ("Your
    # client does not appear to support insert-only tables"), so that full_acid_problem can
    # name what is wrong with it; we never write one.
    request = t.GetTableRequest(
        dbName=db, tblName=table_name, catName=_DEFAULT_CATALOG,
        capabilities=t.ClientCapabilities(values=[t.ClientCapability.INSERT_ONLY_TABLES]),
        processorCapabilities=list(PROCESSOR_CAPABILITIES), processorIdentifier=PROCESSOR_ID)
    try:
        result = conn.call("get_table_req", request, expect=(t.NoSuchObjectException,))
    except t.NoSuchObjectException as e:
        raise TableNotFoundError(f"Cannot find table {db}.{table_name} in the Hive Metastore at "
                                 f"{conn.uri}", table=f"{db}.{table_name}",
                                 hint="check the name, or create it with `ingest create`") from e
    return _from_thrift(result.table, conn.uri)


def get_tables(conn: HmsConnection, names: Sequence[str]) -> dict[str, HiveTable]:
    """The tables of `names` that exist, keyed by name as given: one
    `get_table_objects_by_name_req` per database (a table is one `get_table_req` otherwise).

    Raises:
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    wanted: dict[str, dict[str, str]] = {}  # database -> {table name: name as given}
    for given in names:
        db, table_name = qualified_name(given)
        wanted.setdefault(db, {})[table_name] = given
    out: dict[str, HiveTable] = {}
    for db, tables in wanted.items():
        request = t.GetTablesRequest(
            dbName=db, tblNames=list(tables), catName=_DEFAULT_CATALOG,
            capabilities=t.ClientCapabilities(values=[t.ClientCapability.INSERT_ONLY_TABLES]),
            processorCapabilities=list(PROCESSOR_CAPABILITIES),
            processorIdentifier=PROCESSOR_ID)
        try:
            result = conn.call("get_table_objects_by_name_req", request,
                               expect=(t.UnknownDBException,))
        except t.UnknownDBException:
            continue  # no database: none of its tables
        for found in result.tables or ():
            as_given = tables.get(str(found.tableName).lower())
            if as_given is not None:
                out[as_given] = _from_thrift(found, conn.uri)
    return out


def drop_table(conn: HmsConnection, name: str, *, delete_data: bool = False) -> None:
    """Drop a table from the metastore (its files too only when `delete_data`).

    Raises:
        TableNotFoundError: no such table.
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    db, table_name = qualified_name(name)
    try:
        conn.call("drop_table", db, table_name, delete_data, expect=(t.NoSuchObjectException,))
    except t.NoSuchObjectException as e:
        raise TableNotFoundError(f"Cannot drop table {db}.{table_name}: not in the Hive "
                                 f"Metastore at {conn.uri}", table=f"{db}.{table_name}") from e


def add_partitions(conn: HmsConnection, table: HiveTable,
                   partitions: Sequence[Sequence[str | None]]) -> list[str]:
    """Create the partitions that do not exist yet, each at `<table location>/<k=v/...>`, as
    Hive Streaming does before it commits (`createPartitionIfNotExists`).

    Returns:
        Hive's names (`k1=v1/k2=v2`) of all the given partitions.

    Raises:
        ConfigError: a partition's values do not match the table's keys.
        MetastoreError: the metastore failed.
    """
    if not partitions:
        return []
    t = _stubs.ttypes()
    names = [table.partition_name(values) for values in partitions]
    parts = []
    for values, part_name in zip(partitions, names, strict=True):
        sd = _copy_sd(t, table.thrift.sd, f"{table.location.rstrip('/')}/{part_name}")
        parts.append(t.Partition(values=[_stored_value(v) for v in values],
                                 dbName=table.database, tableName=table.table_name,
                                 catName=_DEFAULT_CATALOG, sd=sd, parameters={},
                                 createTime=int(time.time())))
    conn.call("add_partitions_req", t.AddPartitionsRequest(
        dbName=table.database, tblName=table.table_name, parts=parts, ifNotExists=True,
        needResult=False, catName=_DEFAULT_CATALOG))
    return names


def list_partition_names(conn: HmsConnection, table: HiveTable) -> list[str]:
    """Hive's names of the table's partitions (`k1=v1/k2=v2`), sorted.

    Raises:
        MetastoreError: the metastore failed.
    """
    return sorted(conn.call("get_partition_names", table.database, table.table_name, -1))


def _stored_value(value: str | None) -> str:
    # Hive stores a null partition value as its default partition name.
    return "__HIVE_DEFAULT_PARTITION__" if value in (None, "") else str(value)


def _copy_sd(t: Any, sd: Any, location: str) -> Any:
    serde = sd.serdeInfo
    return t.StorageDescriptor(
        cols=list(sd.cols), location=location, inputFormat=sd.inputFormat,
        outputFormat=sd.outputFormat, compressed=sd.compressed, numBuckets=sd.numBuckets,
        serdeInfo=t.SerDeInfo(name=serde.name, serializationLib=serde.serializationLib,
                              parameters=dict(serde.parameters or {})),
        bucketCols=list(sd.bucketCols or []), sortCols=list(sd.sortCols or []),
        parameters=dict(sd.parameters or {}))


def _thrift_table(t: Any, db: str, name: str, spec: HiveTableSpec) -> Any:
    if spec.bucket_count < 0 or bool(spec.bucket_count) != bool(spec.bucket_columns):
        raise ConfigError(f"Cannot define table {db}.{name}: bucket_count {spec.bucket_count} "
                          f"with bucket columns {list(spec.bucket_columns)}",
                          hint="give both bucket_count > 0 and bucket_columns, or neither")
    cols = [t.FieldSchema(name=c.name, type=c.type, comment=c.comment) for c in spec.columns]
    sd = t.StorageDescriptor(
        cols=cols, location=spec.location and hadoop_location(spec.location),
        inputFormat=ORC_INPUT_FORMAT,
        outputFormat=ORC_OUTPUT_FORMAT, compressed=False,
        numBuckets=spec.bucket_count or -1,  # Hive's -1: not bucketed
        serdeInfo=t.SerDeInfo(name=name, serializationLib=ORC_SERDE, parameters={}),
        bucketCols=list(spec.bucket_columns), sortCols=[], parameters={})
    now = int(time.time())
    return t.Table(
        tableName=name, dbName=db, owner=getpass.getuser(), createTime=now, lastAccessTime=0,
        retention=0, sd=sd,
        partitionKeys=[t.FieldSchema(name=c.name, type=c.type, comment=c.comment)
                       for c in spec.partition_columns],
        parameters={**spec.properties, **ACID_PROPERTIES}, tableType="MANAGED_TABLE",
        catName=_DEFAULT_CATALOG, ownerType=t.PrincipalType.USER)


def _from_thrift(table: Any, uri: str) -> HiveTable:
    sd = table.sd
    if sd is None:
        raise MetastoreError(f"Cannot use table {table.dbName}.{table.tableName} of the Hive "
                             f"Metastore at {uri}: it has no storage descriptor", location=uri)
    serde = sd.serdeInfo.serializationLib if sd.serdeInfo else ""
    return HiveTable(
        name=f"{table.dbName}.{table.tableName}".lower(),
        table_id=table.id,
        table_type=table.tableType or "",
        location=sd.location or "",
        columns=tuple(HiveColumn(c.name, c.type, c.comment) for c in sd.cols or []),
        partition_columns=tuple(HiveColumn(c.name, c.type, c.comment)
                                for c in table.partitionKeys or []),
        bucket_columns=tuple(sd.bucketCols or []),
        bucket_count=max(sd.numBuckets or 0, 0),
        input_format=sd.inputFormat or "",
        serde=serde or "",
        properties=dict(table.parameters or {}),
        thrift=table)
