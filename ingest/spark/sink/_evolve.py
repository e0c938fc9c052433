"""--on-new-field on the driver, shared by the single-table and the many-table sinks.

After a micro-batch's tasks ran and before anything is published, each table's tasks report
the top-level fields its records held that it has no column for (`NewFields`):
- `columns_to_add`: `fail` raises; `dead-letter` and `ignore` write the micro-batch as it is
  (the tasks already dead-lettered or dropped the fields); `evolve` gives the columns (name,
  Hive type: the JSON kinds seen, or `--evolve-type`) the table needs;
- `add_columns`: adds them to one table (a compare-and-swap of its columns in the metastore);
- `write_evolving`: runs a micro-batch's write until a round meets no new fields: a round
  that met some aborted its transaction and added the columns, the next writes the
  micro-batch again with the evolved tables (`Evolved` says what a round added).
The caller aborts its transaction (removing its files) before adding columns, so no
transaction of the sink holds a table whose columns change, and fires the crash point
`sink.after_evolve` once the columns are in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa

from ingest.errors import CommitConflictError, IngestError, SchemaMismatchError
from ingest.records import FieldSeen, column_type, merge_fields, new_columns
from ingest.spark.options import SinkOptions
from ingest.spark.sink._results import NewFields, TaskResult
from ingest.table.core import evolve_schema
from ingest.txn import Metastore, TableDefinition

log = logging.getLogger(__name__)

# Rounds of adding columns a micro-batch may take: one finds the new fields, the next writes.
EVOLVE_ROUNDS = 3

Column = tuple[str, str]  # (name, Hive type)
R = TypeVar("R")


@dataclass(frozen=True)
class Evolved:
    """A round that met new fields: its transaction was aborted and these columns added,
    as "name TYPE" by table name (empty when another writer had added them meanwhile)."""

    added: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def columns_to_add(store: Metastore, table: TableDefinition, written: pa.Schema,
                   results: Sequence[TaskResult], options: SinkOptions,
                   batch_id: int) -> list[Column] | None:
    """The columns `table` needs for the new fields its tasks saw (evolve), after which the
    micro-batch must run again; None: write the micro-batch as it is (no new field, the
    policy keeps the records, or the fields held only nulls and nobody changed the
    columns). `written` is the row schema the tasks wrote.

    Raises:
        SchemaMismatchError: `fail`, and a record held a field the table lacks.
    """
    seen = merge_fields(*(r.fields for r in results if isinstance(r, NewFields)))
    policy = options.on_new_field
    if not seen or policy in ("ignore", "dead-letter"):
        return None
    if policy == "fail":
        raise new_field_error(table, seen, batch_id)
    fresh = store.get_table(table.location)
    columns = new_columns(seen, [*fresh.row_schema.names, *fresh.partition_columns],
                          options.evolve_type_map)
    if not columns and same_columns(fresh.row_schema, written):
        return None  # only fields holding nulls: nothing to add yet
    return columns


def add_columns(store: Metastore, table: TableDefinition, columns: Sequence[Column],
                batch_id: int) -> tuple[TableDefinition, tuple[str, ...]]:
    """Add `columns` to `table` (one compare-and-swap of its columns in the metastore);
    returns the table as stored afterwards and the columns added, as "name TYPE".

    A column already there is not added again: after a crash between this change and the
    micro-batch's commit, the replay finds the fields known and writes them.

    Raises:
        ConfigError: the metastore refuses to change the columns.
    """
    fresh = store.get_table(table.location)
    known = {n.lower() for n in fresh.row_schema.names}
    adding = [(n, t) for n, t in columns if n.lower() not in known]
    if not adding:
        return fresh, ()
    ddl = ", ".join(f"`{name}` {kind}" for name, kind in adding)
    schema, _ = evolve_schema(fresh, add_columns=ddl)
    try:
        fresh = store.alter_columns(fresh.name, schema, expected=fresh.row_schema)
    except CommitConflictError:  # another writer changed them: the next round sees
        return store.get_table(table.location), ()
    log.warning("batch %d: added columns %s to %s for new fields (--on-new-field evolve); "
                "writing the micro-batch again", batch_id, ddl, fresh.name)
    return fresh, tuple(f"{name} {kind}" for name, kind in adding)


def write_evolving(write: Callable[[], R | Evolved], *, batch_id: int,
                   into: str) -> tuple[R, dict[str, tuple[str, ...]]]:
    """Run `write` (one transaction for the micro-batch) until a round meets no new fields;
    returns its outcome and the columns every round added, by table name.

    Raises:
        IngestError: new fields still after `EVOLVE_ROUNDS` rounds (another writer keeps
            changing the columns); nothing of the micro-batch was committed.
    """
    added: dict[str, tuple[str, ...]] = {}
    for _ in range(EVOLVE_ROUNDS):
        outcome = write()
        if not isinstance(outcome, Evolved):
            return outcome, added
        for name, columns in outcome.added.items():
            added[name] = added.get(name, ()) + columns
    raise IngestError(
        f"Cannot write micro-batch {batch_id} into {into}: it still held new fields after "
        f"{EVOLVE_ROUNDS} rounds of adding columns (another writer keeps changing the "
        "columns?); nothing of it was committed",
        hint="restart the stream; it writes the micro-batch again")


def same_columns(a: pa.Schema, b: pa.Schema) -> bool:
    """Whether two row schemas have the same column names and types, in order."""
    return a.names == b.names and all(x.type == y.type for x, y in zip(a, b, strict=True))


def extends(table: pa.Schema, given: pa.Schema) -> bool:
    """Whether the table's columns are the given ones followed by more (columns that
    --on-new-field evolve added)."""
    return len(table) > len(given) and same_columns(pa.schema(list(table)[:len(given)]), given)


def new_field_error(table: TableDefinition, seen: Mapping[str, FieldSeen],
                    batch_id: int) -> SchemaMismatchError:
    """The error of --on-new-field fail: the first record's field, where it is, the others."""
    name, first = min(seen.items(), key=lambda kv: (kv[1].topic, kv[1].partition,
                                                    kv[1].offset, kv[0]))
    others = [n for n in seen if n != name]
    more = f"; other new fields: {', '.join(repr(n) for n in others)}" if others else ""
    kind = column_type(first.kinds) or "STRING"
    return SchemaMismatchError(
        f"Cannot write micro-batch {batch_id} into {table.name}: Kafka record "
        f"{first.topic}-{first.partition} offset {first.offset} has field {name!r} (a JSON "
        f"{' or '.join(sorted(first.kinds))}, in {first.records:,} records), which the table "
        f"has no column for{more}; nothing of the micro-batch was committed (--on-new-field fail)",
        hint=f"add the column and restart (`ingest alter {table.location} --add-columns "
             f"\"{name} {kind}\"`), or restart with --on-new-field evolve, dead-letter or "
             "ignore")


__all__ = ["EVOLVE_ROUNDS", "Evolved", "add_columns", "columns_to_add", "extends",
           "new_field_error", "same_columns", "write_evolving"]
