"""Driver side of the "hive-acid" source: the table, its snapshot, and the read split into tasks.

Finds the table's metastore, takes one snapshot, lists the files it reads per partition and
packs them into input partitions by bucket: a bucket's base, delta and delete-delta files
always travel together, so each task applies every delete of its rows. Tasks carry plain
values (the snapshot's string form, file lists, a pyarrow expression) to the executors.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid import ValidWriteIdList, storage
from ingest.acid.snapshot import DataFile, Partition, list_partitions, plan_partition
from ingest.acid.state import VisibleTxn
from ingest.errors import ConfigError
from ingest.spark._datasource_filters import Condition
from ingest.txn import Metastore, TableDefinition, find_metastore_for, normalize_location

# The options the source reads (Spark passes option keys case-insensitively).
KNOWN_OPTIONS = ("path", "metastore", "snapshot", "columns", "where", "maxPartitionBytes",
                 "minPartitions", "maxWriteIdsPerTrigger", "storage_options")
STORAGE_OPTION_PREFIX = "storage_option."
# Keys Spark itself puts into a source's options: `load(path)` passes "path" (above), and
# `load(path1, path2)` "paths"; a real read (tests/spark/test_datasource.py) shows no other.
_SPARK_OPTIONS = ("paths",)

# Spark's own file sources count opening a file as this many bytes when packing partitions
# (spark.sql.files.openCostInBytes), so many small files do not all land in one task.
OPEN_COST_BYTES = 4 << 20
DEFAULT_MAX_PARTITION_BYTES = 128 << 20


@dataclass(frozen=True)
class SourceOptions:
    """The options of `spark.read.format("hive-acid")`, checked.

    Attributes:
        path: the table root, or a partition directory inside it.
        metastore: a `sqlite://` or `postgresql://` URL; None finds the table's metastore as
            `ingest cat` does.
        snapshot: Hive's write-id list string; None takes the metastore's current snapshot.
        columns: row and partition columns to return, in order; None for all.
        where: a predicate in `ingest delete --where` syntax, applied exactly.
        max_partition_bytes: largest input partition (bytes plus the open cost per file).
        min_partitions: split into at least this many tasks when the table is big enough.
        max_write_ids_per_trigger: streaming only: at most this many write ids per batch.

    The storage options (`storage_options` as a JSON object, or one `storage_option.<key>`
    per option) are registered for the bucket of `path` when parsed, in the process that
    plans the read; the planned tasks carry the filesystem itself to the executors.
    """

    path: str
    metastore: str | None = None
    snapshot: str | None = None
    columns: tuple[str, ...] | None = None
    where: str | None = None
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    min_partitions: int = 2
    max_write_ids_per_trigger: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Raises:
            ConfigError: an option the source does not know (a misspelt one would be
                ignored), several paths, no path, or a number option that is not a
                positive integer.
        """
        _check_keys(options)
        path = options.get("path")
        if not path:
            raise ConfigError("The hive-acid source needs the table's location",
                              hint='spark.read.format("hive-acid").load("/warehouse/events")')
        storage.register(storage.root_of(path), _storage_options(options))
        columns = options.get("columns")
        names = tuple(c.strip() for c in columns.split(",") if c.strip()) if columns else None
        return cls(path, options.get("metastore") or None, options.get("snapshot") or None,
                   names or None, options.get("where") or None,
                   _positive(options, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES),
                   _positive(options, "minPartitions", 2),
                   _positive(options, "maxWriteIdsPerTrigger", None))


def _check_keys(options: Mapping[str, str]) -> None:
    """Refuse keys the source does not read, suggesting the closest known one.

    Raises:
        ConfigError: an unknown key, or Spark's "paths" (several locations).
    """
    known = {k.lower(): k for k in KNOWN_OPTIONS}
    for key in options:
        lower = key.lower()
        if lower in known or lower.startswith(STORAGE_OPTION_PREFIX):
            continue
        if lower in _SPARK_OPTIONS:
            raise ConfigError("The hive-acid source reads one table: give one location, "
                              f"not several ({options[key]})",
                              hint='spark.read.format("hive-acid").load("/warehouse/events")')
        close = difflib.get_close_matches(lower, list(known), n=1, cutoff=0.6)
        raise ConfigError(
            f"Unknown option {key!r} of the hive-acid source"
            + (f"; did you mean {known[close[0]]!r}?" if close else ""),
            hint=f"its options are {', '.join(KNOWN_OPTIONS)} and "
                 f"{STORAGE_OPTION_PREFIX}<key>")


def _storage_options(options: Mapping[str, str]) -> dict[str, object]:
    """Raises: ConfigError: `storage_options` is not a JSON object."""
    found: dict[str, object] = {}
    text = options.get("storage_options")
    if text:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ConfigError("Option storage_options of the hive-acid source is not a JSON "
                              "object", hint='for example .option("storage_options", '
                              '\'{"endpoint_url": "http://127.0.0.1:9000"}\')')
        found.update(parsed)
    prefix = STORAGE_OPTION_PREFIX
    found.update(storage.parse_storage_options(
        [f"{k[len(prefix):]}={v}" for k, v in options.items() if k.lower().startswith(prefix)],
        flag="option storage_option.<key>"))
    return found


def _positive(options: Mapping[str, str], key: str, default: int | None) -> int | None:
    text = options.get(key)
    if text is None:
        return default
    if not text.strip().isdigit() or int(text) <= 0:
        raise ConfigError(f"Option {key}={text!r} of the hive-acid source is not a positive "
                          "integer", hint=f'for example .option("{key}", "4")')
    return int(text)


def table_of(options: SourceOptions) -> TableDefinition:
    """The definition of the table at (or above) `options.path`.

    Raises:
        TableNotFoundError: no metastore lists a table there.
        MetastoreError: the metastore cannot be read.
    """
    with open_metastore(options) as (_, defn):
        return defn


class open_metastore:  # noqa: N801 - used as a context manager, like open()
    """`with open_metastore(options) as (store, defn)`: read-only, closed on exit."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.store: Metastore | None = None

    def __enter__(self) -> tuple[Metastore, TableDefinition]:
        if self.options.metastore is None:
            self.store, defn = find_metastore_for(self.options.path, read_only=True)
            return self.store, defn
        self.store = Metastore.open(self.options.metastore, read_only=True)
        try:
            location = normalize_location(self.options.path)
            for table in self.store.list_tables():
                if location == table.location or location.startswith(table.location + "/"):
                    return self.store, table
            return self.store, self.store.get_table(location)  # raises TableNotFoundError
        except BaseException:
            self.store.close()
            raise

    def __exit__(self, *exc: object) -> None:
        if self.store is not None:
            self.store.close()


def arrow_schema(defn: TableDefinition) -> pa.Schema:
    """Row columns, then partition columns as strings (what `ingest cat` returns)."""
    return pa.schema(list(defn.row_schema) + [pa.field(c, pa.string())
                                              for c in defn.partition_columns])


def output_schema(defn: TableDefinition, columns: Sequence[str] | None) -> pa.Schema:
    """The table's schema, or only `columns` in their order.

    Raises:
        ConfigError: a column the table does not have.
    """
    full = arrow_schema(defn)
    if columns is None:
        return full
    unknown = [c for c in columns if c not in full.names]
    if unknown:
        raise ConfigError(
            f"Cannot read columns {unknown} of table {defn.name}: it has row columns "
            f"{defn.row_schema.names} and partition columns {list(defn.partition_columns)}",
            hint='name them in .option("columns", "a,b")')
    return pa.schema([full.field(c) for c in columns])


@dataclass(frozen=True)
class BucketGroup:
    """The files of one bucket of one partition: they are read together so deletes apply."""

    values: tuple[tuple[str, str | None], ...]
    files: tuple[DataFile, ...]
    cost_bytes: int


@dataclass(frozen=True)
class ReadTask:
    """What one Spark task reads: plain values that pickle to the executors.

    Attributes:
        fs: the table's filesystem.
        snapshot: Hive's string form of the one snapshot the whole query reads with.
        row_schema: the table's row columns.
        partition_columns: the table's partition columns.
        read_columns: columns the merge returns (output plus those the filter needs).
        output: the columns, in order and with Arrow types, the task yields.
        condition: rows to keep, or None for all.
        write_ids: (after, up to]: keep only rows these write ids inserted (streaming).
        groups: the bucket groups of this task.
    """

    fs: fsspec.AbstractFileSystem
    snapshot: str
    row_schema: pa.Schema
    partition_columns: tuple[str, ...]
    read_columns: tuple[str, ...]
    output: pa.Schema
    condition: pc.Expression | None
    write_ids: tuple[int, int] | None
    groups: tuple[BucketGroup, ...] = field(default=())


def bucket_groups(
    fs: fsspec.AbstractFileSystem, path: str, snapshot: ValidWriteIdList,
    conditions: Sequence[Condition], partition_columns: Sequence[str], *,
    write_ids: tuple[int, int] | None = None, visible_txn: VisibleTxn | None = None,
) -> list[BucketGroup]:
    """The snapshot's files under `path`, one group per (partition, bucket) with inserts.

    Partitions that conditions on partition columns alone rule out are skipped; with
    `write_ids` (after, up to], so are insert files of directories holding none of them.
    `visible_txn` says which compactors' `_vT` outputs are committed (docs/format.md §17).

    Raises:
        FileNotFoundError: `path` does not exist.
        NotEnoughHistoryError, CorruptFileError, UnsupportedFormatError: see `plan_partition`.
    """
    groups: list[BucketGroup] = []
    for partition in list_partitions(path, fs=fs):
        if not _may_match(partition, conditions, partition_columns):
            continue
        inserts: dict[int, list[DataFile]] = {}
        deletes: dict[int, list[DataFile]] = {}
        for f in plan_partition(fs, partition, snapshot, visible_txn=visible_txn)[1]:
            if f.kind == "delete_delta":
                deletes.setdefault(f.bucket_id, []).append(f)
            elif write_ids is None or _may_hold(f, write_ids):
                inserts.setdefault(f.bucket_id, []).append(f)
        for bucket in sorted(inserts):
            files = tuple(inserts[bucket] + deletes.get(bucket, []))
            cost = sum(fs.size(f.path) + OPEN_COST_BYTES for f in files)
            groups.append(BucketGroup(partition.values, files, cost))
    return groups


def _may_hold(f: DataFile, write_ids: tuple[int, int]) -> bool:
    # Rows keep the write id that inserted them through compaction, so a base or a compacted
    # delta covering these write ids must be read too; original files hold write id 0.
    d = f.directory
    if d is None:
        return False
    low = 0 if d.kind == "base" else d.min_write_id
    return d.max_write_id > write_ids[0] and low <= write_ids[1]


def _may_match(partition: Partition, conditions: Sequence[Condition],
               partition_columns: Sequence[str]) -> bool:
    """False when a condition on partition columns only is not true for this partition."""
    values = dict(partition.values)
    for c in conditions:
        if not c.columns or not set(c.columns) <= set(partition_columns):
            continue
        one_row = pa.table({n: pa.array([values.get(n)], pa.string()) for n in c.columns})
        if one_row.filter(c.expression).num_rows == 0:
            return False
    return True


def pack(groups: Sequence[BucketGroup], *, max_partition_bytes: int, min_partitions: int
         ) -> list[tuple[BucketGroup, ...]]:
    """Bucket groups packed into tasks, Spark's way for files: the split size is the total
    spread over `min_partitions` tasks, at least one open cost, at most
    `max_partition_bytes`; the largest groups are placed first. A group is never split."""
    if not groups:
        return []
    total = sum(g.cost_bytes for g in groups)
    target = min(max_partition_bytes, max(OPEN_COST_BYTES, total // max(min_partitions, 1)))
    tasks: list[list[BucketGroup]] = []
    current: list[BucketGroup] = []
    size = 0
    for g in sorted(groups, key=lambda g: g.cost_bytes, reverse=True):
        if current and size + g.cost_bytes > target:
            tasks.append(current)
            current, size = [], 0
        current.append(g)
        size += g.cost_bytes
    if current:
        tasks.append(current)
    return [tuple(t) for t in tasks]


__all__ = [
    "DEFAULT_MAX_PARTITION_BYTES",
    "OPEN_COST_BYTES",
    "BucketGroup",
    "ReadTask",
    "SourceOptions",
    "arrow_schema",
    "bucket_groups",
    "open_metastore",
    "output_schema",
    "pack",
    "table_of",
]
