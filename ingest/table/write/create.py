"""Create a transactional table: its directory and its metastore entry (Hive's CREATE TABLE).

Also names a table nobody named: `default_table_name` is the one rule the CLI and the
streaming job share. Knows the metastore's public interface and schema DDL; writes no data.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from dataclasses import replace

import fsspec
import pyarrow as pa

from ingest.acid import has_directories
from ingest.acid.format import MAX_BUCKET_COUNT, parse_schema, reserved_column_reason
from ingest.errors import ConfigError, IngestError, TableExistsError
from ingest.io import storage
from ingest.records import location_table_name
from ingest.table.core import (
    ADOPTED_PROPERTY,
    MARKER_NAME,
    TOKEN_PROPERTY,
    AcidLayout,
    MetastoreRef,
    OwnerMarker,
    StorageOptions,
    check_create,
    check_properties,
    ddl_type,
    is_in_memory,
    new_token,
    open_store,
    read_marker,
    remove_empty_dirs,
    scan_layout,
    write_marker,
)
from ingest.txn import (
    Metastore,
    TableDefinition,
    default_metastore_url,
    normalize_location,
    redact_url,
)


def create_table(
    location: str,
    schema_ddl: str,
    *,
    name: str | None = None,
    partitioned_by: Sequence[str] = (),
    buckets: int = 0,
    bucketed_by: Sequence[str] = (),
    properties: dict[str, str] | None = None,
    metastore: MetastoreRef = None,
    adopt: bool = False,
    storage_options: StorageOptions = None,
) -> TableDefinition:
    """Create a transactional table: its directory, and its entry in the metastore.

    Args:
        location: the table root, a path or fsspec URL.
        schema_ddl: Hive columns, e.g. ``"id BIGINT, value STRING, dt STRING"``; partition
            columns may be listed here (they must then be STRING) or left out.
        name: `[db.]table`; default: `default_table_name(location)`.
        partitioned_by: partition columns, outermost first (values are strings).
        buckets: number of buckets (0: unbucketed); needs `bucketed_by`.
        bucketed_by: columns hashed into buckets (Hive bucketing version 2).
        properties: extra table properties (`orc.compress` picks the load compression);
            known ones are checked (`check_properties`).
        metastore: where to register it; default `default_metastore_url(location)`. It
            becomes the location's one owner: a hidden marker in the directory names it
            (docs/invariants.md, 7), and writes through any other metastore are refused.
        adopt: take over ACID data already under `location`: its rows count as committed
            and new write ids continue above every write id on disk. Without it such a
            location is refused, since the new table's writes would reuse those write ids.
        storage_options: fsspec options of the table's storage (endpoint, credentials);
            None: fsspec's own config and environment.

    Returns:
        The stored definition.

    Raises:
        ConfigError: bad schema (no data column, a column named ROW__ID), partition, bucket
            or property options, a location that is a file or too long, or metastore URL;
            another metastore lists the location (its marker's, or the one placed beside
            it).
        TableExistsError: the metastore has a table of that name or location, or the
            location holds ACID data and `adopt` is False.
        MetastoreError: the metastore cannot be opened or written.
    """
    schema = parse_schema(schema_ddl)
    partition_columns = _split_names(partitioned_by)
    table_name = name or default_table_name(location)
    for column in [*schema.names, *partition_columns]:
        reason = reserved_column_reason(column)
        if reason is not None:
            raise ConfigError(f"Cannot create table {table_name}: {reason}",
                              hint="rename the column, e.g. to row_id")
    for column in partition_columns:
        if column in schema.names and not pa.types.is_string(schema.field(column).type):
            raise ConfigError(
                f"Cannot create table at {location}: partition column {column!r} is "
                f"{ddl_type(schema.field(column))}, but partition values are strings",
                hint=f"declare it as `{column} STRING`, or leave it out of --schema")
    row_schema = pa.schema([f for f in schema if f.name not in partition_columns],
                           metadata=schema.metadata)
    if not len(row_schema):
        # Hive refuses a table whose only columns are partition columns too (error 10043,
        # "Either list of columns or a custom serializer should be specified"): the rows
        # would have no data column to hold them.
        raise ConfigError(
            f"Cannot create table {table_name} at {normalize_location(location)}: every "
            f"column is a partition column ({', '.join(partition_columns)}); a table needs at "
            "least one data column",
            hint="add a data column to --schema, e.g. --schema 'id BIGINT, "
            + ", ".join(f"{c} STRING" for c in partition_columns) + "'")
    defn = TableDefinition(
        name=table_name, location=location, row_schema=row_schema,
        partition_columns=partition_columns, bucket_count=buckets,
        bucket_columns=_split_names(bucketed_by),
        # ZLIB by default: Hive 3 reads ORC with orc-core 1.5, which has no ZSTD.
        properties={"orc.compress": "ZLIB",
                    **check_properties(properties or {}, table=table_name)})
    if buckets > MAX_BUCKET_COUNT:
        raise ConfigError(f"Cannot create table {defn.name}: {buckets} buckets, at most "
                          f"{MAX_BUCKET_COUNT} are possible (Hive's bucket id has 12 bits)")
    fs, root = storage.url_to_fs(defn.location, storage_options)
    _check_location(fs, root, defn)
    layout = scan_layout(fs, root)
    next_write_id = 1
    if layout.directories:
        if not adopt:
            raise _holds_acid_data(defn, layout, metastore)
        next_write_id = layout.max_write_id + 1
        defn = replace(defn, properties={**defn.properties,
                                         ADOPTED_PROPERTY: str(layout.max_write_id)})
    target = (metastore.url if isinstance(metastore, Metastore)
              else metastore or default_metastore_url(defn.location))
    marker = None
    if not is_in_memory(target):
        check_create(fs, root, defn, target)
        marker = OwnerMarker(redact_url(target), defn.name, new_token())
        defn = replace(defn, properties={**defn.properties, TOKEN_PROPERTY: marker.token})
    made = _make_root(fs, root, defn, storage_options)
    before = read_marker(fs, root) if marker is not None else None
    try:
        if marker is not None:
            # Before the metastore's entry: a registered table is never without its marker.
            write_marker(fs, root, marker)
        with open_store(metastore, defn.location, create=True) as store:
            return store.create_table(defn, next_write_id=next_write_id)
    except BaseException:
        if marker is not None:
            _restore_marker(fs, root, before)
        remove_empty_dirs(fs, made)
        raise


def _restore_marker(fs: fsspec.AbstractFileSystem, root: str,
                    before: OwnerMarker | None) -> None:
    """Put back the marker a failed create replaced (or remove the one it wrote)."""
    if before is not None:
        write_marker(fs, root, before)
        return
    try:
        fs.rm_file(f"{root.rstrip('/')}/{MARKER_NAME}")
    except FileNotFoundError:
        pass


def _check_location(fs: fsspec.AbstractFileSystem, root: str, defn: TableDefinition) -> None:
    if fs.exists(root) and not fs.isdir(root):
        raise ConfigError(
            f"Cannot create table {defn.name} at {defn.location}: it is a file, not a "
            "directory", hint="give the path of a new or empty directory for the table")


def _make_root(fs: fsspec.AbstractFileSystem, root: str, defn: TableDefinition,
               storage_options: StorageOptions) -> list[str]:
    """Create the table root and its missing parents; return those created, deepest first.
    On failure remove them again, so a refused path leaves nothing behind.

    Raises:
        ConfigError: the path cannot be a directory (a file on the way, a name too long).
        OSError: any other storage failure.
    """
    if not has_directories(fs):
        # Nothing to make: an object store's directories are its keys' prefixes. Its
        # makedirs would create a missing bucket; a table location never does.
        storage.check_bucket(fs, defn.location, storage_options)
        return []
    missing, p = [], root.rstrip("/")
    while p and not fs.exists(p):
        missing.append(p)
        p = p.rsplit("/", 1)[0] if "/" in p else ""
    try:
        fs.makedirs(root, exist_ok=True)
    except OSError as e:
        remove_empty_dirs(fs, [m for m in missing if fs.exists(m)])
        if e.errno not in (errno.ENAMETOOLONG, errno.ENOTDIR, errno.EEXIST):
            raise
        longest = max(root.split("/"), key=len)
        found = (f" (its longest name has {len(longest.encode())} bytes)"
                 if e.errno == errno.ENAMETOOLONG else "")
        raise ConfigError(
            f"Cannot create table {defn.name} at {defn.location}: the path cannot be a "
            f"directory: {e.strerror}{found}",
            hint="give a shorter path of a new or empty directory, whose parents are "
            "directories") from e
    return missing


def _holds_acid_data(defn: TableDefinition, layout: AcidLayout,
                     metastore: MetastoreRef) -> TableExistsError:
    """The error for creating a table over ACID data without adopting it: the metastore's
    own TableExistsError when it already lists the table, else one naming the data."""
    known = _registered(metastore, defn.location)
    if known is not None:
        return TableExistsError(
            f"Cannot create table {defn.name} at {defn.location}: table {known.name} already "
            f"exists at {known.location}", table=known.name,
            hint=f"load into it with `ingest load {defn.location} --input FILE`")
    first = layout.directories[0][0]
    return TableExistsError(
        f"Cannot create table {defn.name} at {defn.location}: the directory already holds "
        f"ACID data ({len(layout.directories)} directories with write ids up to "
        f"{layout.max_write_id}, e.g. {first}) that the metastore does not list; a new table "
        "would hand out those write ids again", table=defn.name,
        hint="if another metastore lists this table, use it (--metastore or INGEST_METASTORE);"
        " to make the data on disk the new table's committed rows, rerun this `ingest create` "
        "with --adopt (write ids then continue above "
        f"{layout.max_write_id})")


def _registered(metastore: MetastoreRef, location: str) -> TableDefinition | None:
    """The table `metastore` lists at `location`, opened read-only; None when it has none
    or cannot be read (creating the table reports that)."""
    if isinstance(metastore, Metastore):
        return metastore.find_table(location)
    try:
        with Metastore.open(metastore or default_metastore_url(location),
                            read_only=True) as store:
            return store.find_table(location)
    except IngestError:
        return None


def default_table_name(location: str) -> str:
    """The name of a table created at `location` without one: `default.<directory name>`.

    The directory name is lower-cased, every character but ASCII letters, digits and `_`
    becomes `_`, and `t_` goes in front unless it then starts with a letter (so SQL engines
    need no quotes), e.g. ``/wh/2026-Events`` -> ``default.t_2026_events``.

    Raises:
        ValueError: `location` is empty.
    """
    return "default." + location_table_name(normalize_location(location))


def _split_names(names: Sequence[str] | str) -> tuple[str, ...]:
    items = [names] if isinstance(names, str) else list(names)
    return tuple(n.strip() for item in items for n in item.split(",") if n.strip())
