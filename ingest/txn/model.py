"""Plain values the transaction store hands out: table definitions, transactions, progress.

Mirrors the metastore's `Table` (with `transactional=true`, `bucketing_version=2` as Hive's
full-ACID tables carry), `TxnInfo` and the Hive Streaming API's agent info. Knows no SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import pyarrow as pa

from ingest.errors import ConfigError
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
    """

    name: str
    location: str
    row_schema: pa.Schema
    partition_columns: tuple[str, ...] = ()
    bucket_count: int = 0
    bucket_columns: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict, hash=False)

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


class SinkProgress(NamedTuple):
    """Which micro-batch of which streaming sink a commit completes (exactly-once key)."""

    sink_id: str
    batch_id: int


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


__all__ = [
    "REQUIRED_PROPERTIES",
    "TXN_STATES",
    "OffsetRange",
    "SinkProgress",
    "TableDefinition",
    "Transaction",
    "TransactionInfo",
    "TxnState",
    "qualify_table_name",
]
