"""Plain values the metastore hands out: table definitions, transactions, progress, readers
and compactions, whatever backend holds them.

Mirrors the metastore's `Table` (with `transactional=true`, `bucketing_version=2` as Hive's
full-ACID tables carry), `TxnInfo`, `ShowCompactResponseElement` and the Hive Streaming API's
agent info. Knows no SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import pyarrow as pa

from ingest.acid.read import ReadView
from ingest.errors import ConfigError, TableNotFoundError
from ingest.txn.locations import normalize_location

TxnState = Literal["open", "committed", "aborted"]
TXN_STATES: tuple[TxnState, ...] = ("open", "committed", "aborted")

# Properties every full-ACID ORC table carries in Hive 3 (`TBLPROPERTIES`).
REQUIRED_PROPERTIES = {"transactional": "true", "bucketing_version": "2"}


def qualify_table_name(name: str) -> str:
    """Hive's `db.table` form, lower case; a bare name goes to the `default` database.

    Raises:
        ConfigError: the name is empty or has more than one dot.
    """
    parts = name.strip().lower().split(".")
    if len(parts) == 1:
        parts.insert(0, "default")
    if len(parts) != 2 or not all(parts):
        raise ConfigError(
            f"Cannot use table name {name!r}: expected '<table>' or '<database>.<table>'",
            hint="for example 'default.events'",
        )
    return ".".join(parts)


@dataclass(frozen=True)
class TableDefinition:
    """One transactional table as the metastore records it.

    Attributes:
        name: `db.table`; a bare name is put in `default`.
        location: normalised fsspec URL of the table root (`file:///wh/events`).
        row_schema: the columns stored in the ORC `row` struct (no partition columns).
        partition_columns: partition column names, outermost first; their values are strings.
        bucket_count: number of buckets, 0 for an unbucketed table.
        bucket_columns: columns hashed into buckets (empty when unbucketed).
        properties: table properties; always include `transactional=true`, `bucketing_version=2`.
        schema_version: how many column changes the table has had (0 as created); each
            `Metastore.alter_columns` adds one, in the same metastore transaction as the
            columns (docs/format.md §25). Not part of equality.
    """

    name: str
    location: str
    row_schema: pa.Schema
    partition_columns: tuple[str, ...] = ()
    bucket_count: int = 0
    bucket_columns: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict, hash=False)
    schema_version: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", qualify_table_name(self.name))
        object.__setattr__(self, "location", normalize_location(self.location))
        object.__setattr__(self, "partition_columns", tuple(self.partition_columns))
        object.__setattr__(self, "bucket_columns", tuple(self.bucket_columns))
        object.__setattr__(self, "properties", {**self.properties, **REQUIRED_PROPERTIES})
        self._validate()

    def _validate(self) -> None:
        columns = set(self.row_schema.names)
        clash = sorted(columns.intersection(self.partition_columns))
        if clash:
            raise ConfigError(
                f"Cannot define table {self.name}: partition columns {clash} are also row columns",
                hint="leave partition columns out of the row schema",
            )
        if len(set(self.partition_columns)) != len(self.partition_columns):
            raise ConfigError(f"Cannot define table {self.name}: repeated partition column")
        if self.bucket_count < 0:
            raise ConfigError(
                f"Cannot define table {self.name}: bucket_count is {self.bucket_count}, "
                "expected 0 (unbucketed) or more"
            )
        missing = sorted(set(self.bucket_columns) - columns)
        if missing:
            raise ConfigError(
                f"Cannot define table {self.name}: bucket columns {missing} are not row columns"
            )
        if bool(self.bucket_count) != bool(self.bucket_columns):
            raise ConfigError(
                f"Cannot define table {self.name}: bucket_count {self.bucket_count} with "
                f"bucket columns {list(self.bucket_columns)}",
                hint="give both bucket_count > 0 and bucket_columns, or neither",
            )


@dataclass(frozen=True)
class PinnedView(ReadView):
    """A `ReadView` with the table's columns as of its snapshot (its schema version), which
    every read of the view uses, however long it runs and whatever ALTER runs meanwhile
    (docs/format.md §25).

    Attributes:
        row_schema: the row columns of the snapshot's schema version; None only for a view
            made without a metastore.
        schema_version: that version (`TableDefinition.schema_version`).
    """

    row_schema: pa.Schema | None = None
    schema_version: int = 0


class SinkProgress(NamedTuple):
    """Which micro-batch of which streaming sink a commit completes (exactly-once key)."""

    sink_id: str
    batch_id: int


TopicPartitionKey = tuple[str, int]
"""A Kafka topic partition, (topic, partition): the key of offsets and ranges in every layer."""


class OffsetRange(NamedTuple):
    """Kafka records [from_offset, until_offset) of one topic partition consumed by a commit."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int


@dataclass(frozen=True)
class Transaction:
    """An opened transaction, as handed to the writer.

    One transaction has one global `txn_id` and one write id per table it writes. `table` and
    `write_id` name the table it was opened on; `other_write_ids` holds the write ids of further
    tables in the same transaction (e.g. the dead-letter table), as `(table, write_id)` pairs.
    """

    txn_id: int
    table: str
    write_id: int
    opened_at: float
    agent: str = ""
    other_write_ids: tuple[tuple[str, int], ...] = ()

    @property
    def write_ids(self) -> dict[str, int]:
        """Every table of the transaction mapped to its write id."""
        return {self.table: self.write_id, **dict(self.other_write_ids)}

    def write_id_for(self, table: str | TableDefinition) -> int:
        """The write id of `table` in this transaction.

        Raises:
            ConfigError: the transaction has no write id for that table.
        """
        name = table.name if isinstance(table, TableDefinition) else qualify_table_name(table)
        ids = self.write_ids
        if name not in ids:
            raise ConfigError(
                f"Transaction {self.txn_id} has no write id for table {name}: "
                f"it writes {sorted(ids)}",
                hint="call Metastore.allocate_write_id(txn, table) first",
            )
        return ids[name]


# The agent of a column change's own transaction (a metastore that makes each change a
# committed transaction with a write id, docs/format.md §25): it writes no file.
SCHEMA_CHANGE_AGENT = "ingest-alter"


@dataclass(frozen=True)
class TransactionInfo:
    """One (transaction, table) row for `ingest status` and `ingest verify`."""

    txn_id: int
    table: str
    write_id: int
    state: TxnState
    agent: str
    opened_at: float
    heartbeat_at: float
    finished_at: float | None
    reason: str | None

    @property
    def is_schema_change(self) -> bool:
        """The transaction of a column change (`Metastore.alter_columns`), which writes no
        file."""
        return self.agent == SCHEMA_CHANGE_AGENT


TableIdentifier = str | TableDefinition
"""A table given as its definition, its `db.table` name, or its location (path or URL)."""


def table_key(table: TableIdentifier) -> tuple[str, str]:
    """(what, value) identifying a table: ("name", `db.table`) or ("location", a normalised
    URL); a string with a slash or scheme is a location.

    Raises:
        ConfigError: a name that is not `table` or `db.table`.
    """
    if isinstance(table, TableDefinition):
        return "name", table.name
    if "://" in table or "/" in table or table.startswith(("~", "file:")):
        return "location", normalize_location(table)
    return "name", qualify_table_name(table)


def table_not_found(table: TableIdentifier, location: str) -> TableNotFoundError:
    """The error for a table the metastore at `location` (as messages name it) lacks."""
    _, value = table_key(table)
    return TableNotFoundError(
        f"Cannot find table {value} in metastore {location}",
        table=value,
        hint="create it with `ingest create`, or set INGEST_METASTORE to the metastore "
        "that holds it",
    )


@dataclass(frozen=True)
class ReaderInfo:
    """One registered reader (Hive's MIN_HISTORY_LEVEL row).

    Attributes:
        reader_id: its lease id.
        table: the table it reads (`db.table`).
        agent: who reads, e.g. "host:pid:ingest-cat".
        min_open_txn: the lowest transaction open when its snapshot was taken, or the next
            transaction id if none was: every transaction below it had finished.
        opened_at: registration time (seconds since the epoch).
        heartbeat_at: its last heartbeat.
    """

    reader_id: int
    table: str
    agent: str
    min_open_txn: int
    opened_at: float
    heartbeat_at: float


CompactionState = Literal["working", "ready for cleaning", "succeeded", "failed"]


@dataclass(frozen=True)
class CompactionInfo:
    """One row of the compaction history, with its transaction's state.

    Attributes:
        compaction_id: the row's id.
        table: `db.table`.
        partition: relative to the table root, "" when unpartitioned.
        kind: "major" or "minor".
        state: as recorded: 'working', 'ready for cleaning', 'succeeded' or 'failed'.
        txn_id: the compactor's transaction.
        txn_state: that transaction's state now (None if it is missing).
        agent: who ran the compaction (host:pid:ingest-compact).
        heartbeat_at: the transaction's last heartbeat.
        highest_write_id: the compactor snapshot's high watermark, once recorded.
        started_at, finished_at, cleaned_at: seconds since the epoch.
        rows: events written.
        inputs, outputs: directory names, relative to the partition.
        error: why it failed.
        next_txn_id: the highest transaction id allocated when the compactor's transaction
            committed (Hive's CQ_NEXT_TXN_ID), when the metastore records it: a transaction
            at or below it may have listed the partition before the output was visible.
    """

    compaction_id: int
    table: str
    partition: str
    kind: str
    state: CompactionState
    txn_id: int | None
    txn_state: TxnState | None
    agent: str
    heartbeat_at: float | None
    highest_write_id: int | None
    started_at: float
    finished_at: float | None
    cleaned_at: float | None
    rows: int | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    error: str | None
    next_txn_id: int | None = None

    @property
    def abandoned(self) -> bool:
        """Still 'working' although its transaction has ended: the compactor died (Hive's
        'attempted'). Its output, if renamed before it died, is in place all the same."""
        return self.state == "working" and self.txn_state != "open"


@dataclass(frozen=True)
class CompactorVisibility:
    """Which compactor transactions were committed when it was read: the predicate readers
    pass as `visible_txn` for `_vT` directories (Hive's `AcidUtils.isDirUsable`).

    Attributes:
        highest_txn: the highest txn id allocated then; later ones count as not committed.
        uncommitted: the table's compactor transactions then open or aborted.
        aborted: those of them aborted (their `_vT` outputs never become visible).
    """

    highest_txn: int
    uncommitted: frozenset[int]
    aborted: frozenset[int]

    def __call__(self, txn_id: int) -> bool:
        return txn_id <= self.highest_txn and txn_id not in self.uncommitted


@dataclass(frozen=True)
class MetastoreCapabilities:
    """What an open metastore records beyond tables, transactions and write ids, so callers
    ask instead of knowing a backend or its schema version.

    Attributes:
        committed_files: it keeps the committed-file manifest (docs/format.md §20):
            `record_committed_files` and `forget_committed_files` work; without it
            `committed_files` is empty and files read as they are.
        reader_leases: it can register readers (`leased_snapshot` may yield a lease; without
            it every read is unregistered and `live_readers` is empty).
        compaction_history: it records compactions (`begin_compaction` works; without it the
            history is empty).
        visibility_suffix: whether compactor output must carry Hive 4's `_vT` suffix for the
            metastore's own readers (True: a Hive 4 metastore; False: Hive 3, whose readers
            do not parse it); None: the table's property decides.
    """

    committed_files: bool
    reader_leases: bool
    compaction_history: bool
    visibility_suffix: bool | None = None


__all__ = [
    "REQUIRED_PROPERTIES",
    "SCHEMA_CHANGE_AGENT",
    "TXN_STATES",
    "CompactionInfo",
    "CompactionState",
    "CompactorVisibility",
    "MetastoreCapabilities",
    "OffsetRange",
    "PinnedView",
    "ReaderInfo",
    "SinkProgress",
    "TableDefinition",
    "TableIdentifier",
    "TopicPartitionKey",
    "Transaction",
    "TransactionInfo",
    "TxnState",
    "qualify_table_name",
    "table_key",
    "table_not_found",
]
