"""Driver side of the "hive-acid" source: the options, the table, and the read split into tasks.

Finds the table's metastore; the read itself is planned by the one read planner
(`ingest.acid.read.plan.plan_files`, from the metastore's read view), and its scan tasks are
packed here into few, balanced Spark input partitions by size: a scan task (one bucket's
insert files and the delete-delta files that apply to them) is never split, so each Spark
task applies every delete of its rows. Tasks carry plain values (the snapshot, scan tasks
with their checked read lengths, the filter as an expression and as a condition tree, the
lease) to executors.
"""

from __future__ import annotations

import difflib
import heapq
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TypeVar

import fsspec
import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid import ValidWriteIdList
from ingest.acid.predicate import Condition
from ingest.acid.read import DataFile, ScanTask
from ingest.errors import ConfigError
from ingest.io import storage
from ingest.table.core import check_snapshot_table, locate_table
from ingest.txn import Metastore, TableDefinition, normalize_location

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
        storage_options: the table's fsspec options (`storage_options` as a JSON object, or
            one `storage_option.<key>` per option); the driver makes the table's
            filesystem with them, and the planned tasks carry that filesystem (which
            pickles with exactly these options) to the executors.
    """

    path: str
    metastore: str | None = None
    snapshot: str | None = None
    columns: tuple[str, ...] | None = None
    where: str | None = None
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    min_partitions: int = 2
    max_write_ids_per_trigger: int | None = None
    # Credentials among them: never in a repr.
    storage_options: Mapping[str, object] = field(default_factory=dict, repr=False,
                                                  hash=False)

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
        storage_options = _storage_options(options)
        columns = options.get("columns")
        names = tuple(c.strip() for c in columns.split(",") if c.strip()) if columns else None
        return cls(path, options.get("metastore") or None, options.get("snapshot") or None,
                   names or None, options.get("where") or None,
                   _positive(options, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES),
                   _positive(options, "minPartitions", 2),
                   _positive(options, "maxWriteIdsPerTrigger", None), storage_options)


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


_Default = TypeVar("_Default", bound=int | None)


def _positive(options: Mapping[str, str], key: str, default: _Default) -> int | _Default:
    text = options.get(key)
    if text is None:
        return default
    if not text.strip().isdigit() or int(text) <= 0:
        raise ConfigError(f"Option {key}={text!r} of the hive-acid source is not a positive "
                          "integer", hint=f'for example .option("{key}", "4")')
    return int(text)


def table_of(options: SourceOptions) -> TableDefinition:
    """The definition of the table at (or above) `options.path`, with the columns of
    `options.snapshot` when one is given (`snapshot_definition`).

    Raises:
        TableNotFoundError: no metastore lists a table there.
        ConfigError: `snapshot` is not a write-id list of this table.
        MetastoreError: the metastore cannot be read.
    """
    with open_metastore(options) as (store, defn):
        return snapshot_definition(store, defn, options.snapshot)


def snapshot_definition(store: Metastore, defn: TableDefinition, snapshot: str | None
                        ) -> TableDefinition:
    """`defn` with the row columns and schema version a given snapshot reads with
    (`Metastore.snapshot_schema`, docs/format.md §25), so the schema Spark is given is the
    one the read pins; `defn` itself when no snapshot is given.

    Raises:
        ConfigError: `snapshot` is not Hive's write-id list form, or is another table's.
        MetastoreError: the metastore cannot be read.
    """
    if snapshot is None:
        return defn
    check_snapshot_table(snapshot, defn.name, where=f"table {defn.name}")
    version, columns = store.snapshot_schema(
        defn.name, ValidWriteIdList.from_hive_string(snapshot))
    return replace(defn, row_schema=columns, schema_version=version)


class open_metastore:  # noqa: N801 - used as a context manager, like open()
    """`with open_metastore(options) as (store, defn)`: read-only, closed on exit."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.store: Metastore | None = None

    def __enter__(self) -> tuple[Metastore, TableDefinition]:
        if self.options.metastore is None:
            self.store, defn = locate_table(self.options.path)
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


@contextmanager
def lease_store(options: SourceOptions, *, url: str | None = None) -> Iterator[Metastore]:
    """The table's metastore opened to hold a reader's lease: writable only when this process
    may write it (`Metastore.open_for_reading`; otherwise the read goes unregistered).

    Args:
        options: the source's options.
        url: the metastore's URL when the caller has found it already (the reader's setup
            did, in the same planning process); None finds it as `open_metastore` does.

    Raises:
        TableNotFoundError, MetastoreError: as for `open_metastore`.
    """
    if url is None:
        with open_metastore(options) as (store, _):
            url = store.url
    with Metastore.open_for_reading(url) as store:
        yield store


@dataclass(frozen=True)
class Lease:
    """The read's registration with the metastore, which tasks renew while they read.

    Attributes:
        metastore: the metastore's URL (left out of the repr: it may hold a password).
        reader_id: the registration.
        taken_at: when the planner last renewed it (seconds since the epoch).
        heartbeat_s: how often a reading task renews it.
    """

    metastore: str = field(repr=False)
    reader_id: int
    taken_at: float
    heartbeat_s: float


@dataclass(frozen=True)
class ReadTask:
    """What one Spark task reads: plain values that pickle to the executors.

    Attributes:
        fs: the table's filesystem.
        snapshot: the one snapshot the whole query (or micro-batch) reads with.
        row_schema: the table's row columns.
        partition_columns: the table's partition columns.
        read_columns: columns the merge returns (output plus those the filter needs).
        output: the columns, in order and with Arrow types, the task yields.
        filter: rows to keep, exactly, or None for all.
        condition: the filter as a condition tree, to skip stripes whose statistics rule out
            every row (never decides a row itself); None skips none.
        condition_columns: the columns `condition` reads.
        write_ids: (after, up to]: keep only rows these write ids inserted (streaming).
        lease: the registration tasks renew while they read; None when unregistered.
        scans: the scan tasks of this Spark task, from the planner.
    """

    fs: fsspec.AbstractFileSystem
    snapshot: ValidWriteIdList
    row_schema: pa.Schema
    partition_columns: tuple[str, ...]
    read_columns: tuple[str, ...]
    output: pa.Schema
    filter: pc.Expression | None
    condition: Condition | None
    condition_columns: tuple[str, ...]
    write_ids: tuple[int, int] | None
    lease: Lease | None = None
    scans: tuple[ScanTask, ...] = field(default=())


def cost_bytes(fs: fsspec.AbstractFileSystem, task: ScanTask) -> int:
    """What a scan task costs to read, as Spark counts files: bytes plus an open cost per
    file (the checked read length where the planner has one, else the file's size)."""
    lengths = dict(task.read_lengths)
    return sum(lengths[f.path] if f.path in lengths else int(fs.size(f.path))
               for f in task.files) + OPEN_COST_BYTES * len(task.files)


def holding_write_ids(tasks: Sequence[ScanTask], write_ids: tuple[int, int]
                      ) -> list[ScanTask]:
    """The scan tasks cut to the insert files that may hold rows of write ids in
    (after, up to], with all their delete files; tasks left without insert files dropped."""
    out = []
    for t in tasks:
        inserts = [f for f in t.files if f.kind != "delete_delta" and _may_hold(f, write_ids)]
        if inserts:
            deletes = [f for f in t.files if f.kind == "delete_delta"]
            out.append(ScanTask(t.partition, t.bucket_id, (*inserts, *deletes),
                                t.read_lengths))
    return out


def _may_hold(f: DataFile, write_ids: tuple[int, int]) -> bool:
    # Rows keep the write id that inserted them through compaction, so a base or a compacted
    # delta covering these write ids must be read too; original files hold write id 0.
    d = f.directory
    if d is None:
        return False
    low = 0 if d.kind == "base" else d.min_write_id
    return d.max_write_id > write_ids[0] and low <= write_ids[1]


def pack(tasks: Sequence[tuple[ScanTask, int]], *, max_partition_bytes: int,
         min_partitions: int) -> list[tuple[ScanTask, ...]]:
    """Scan tasks (with their costs) packed into few, balanced Spark tasks.

    As many Spark tasks as `min_partitions` asks (never more than there are scan tasks) or as
    the total needs at `max_partition_bytes` each, whichever is more; the largest scan task
    goes first, each to the least loaded Spark task, and one that would push even that past
    `max_partition_bytes` starts a Spark task of its own. A scan task is never split. (Spark's
    own packing fills each task up to a size and then opens the next, which for four equal
    buckets and two cores gives three tasks: two rounds of work where one suffices.)
    """
    if not tasks:
        return []
    total = sum(cost for _, cost in tasks)
    count = min(len(tasks), max(min_partitions, -(-total // max_partition_bytes), 1))
    # (bytes so far, position, scan tasks): the least loaded first, ties by position.
    groups: list[tuple[int, int, list[ScanTask]]] = [(0, i, []) for i in range(count)]
    for task, cost in sorted(tasks, key=lambda tc: tc[1], reverse=True):
        size, i, group = heapq.heappop(groups)
        if group and size + cost > max_partition_bytes:
            heapq.heappush(groups, (size, i, group))
            size, i, group = 0, len(groups), []
        group.append(task)
        heapq.heappush(groups, (size + cost, i, group))
    return [tuple(g) for _, _, g in sorted(groups, key=lambda g: g[1]) if g]


__all__ = [
    "DEFAULT_MAX_PARTITION_BYTES",
    "OPEN_COST_BYTES",
    "Lease",
    "ReadTask",
    "SourceOptions",
    "arrow_schema",
    "cost_bytes",
    "holding_write_ids",
    "lease_store",
    "open_metastore",
    "output_schema",
    "pack",
    "snapshot_definition",
    "table_of",
]
