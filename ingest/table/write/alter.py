"""Change a table's properties (Hive's ALTER TABLE ... SET TBLPROPERTIES) and columns (ADD
COLUMNS, CHANGE COLUMN).

Checks properties as `create_table` does (`_definition.check_properties`) and column changes
by Hive's schema-evolution rules (`evolve`), then records them in the metastore; no data file
changes. A later load or micro-batch uses the new values; files written before read under
the new columns (missing ones as nulls, widened values widened).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ingest.errors import ConfigError
from ingest.table.core import (
    ResolvedTable,
    SchemaChange,
    check_properties,
    evolve_schema,
)
from ingest.txn import TableDefinition


@dataclass(frozen=True)
class AlterResult:
    """What `alter_table` changed: properties as (key, old value or None, new value), column
    changes, and the table as stored afterwards."""

    table: TableDefinition
    changed: tuple[tuple[str, str | None, str], ...]
    columns_changed: tuple[SchemaChange, ...] = ()


def alter_table(
    table: ResolvedTable,
    *,
    properties: Mapping[str, str] | None = None,
    add_columns: str | Sequence[str] | None = None,
    change_columns: str | Sequence[str] = (),
    columns: str | None = None,
) -> AlterResult:
    """Set table properties and change columns of `table`; the rest is kept.

    Column changes follow Hive's rules for transactional ORC tables (`evolve_schema`):
    append nullable columns, widen a type; anything else is refused before the metastore is
    written. Columns change first, in one metastore transaction; then properties.

    Args:
        table: the table, opened at its root (`ingest.open_table`).
        properties: the properties to set, e.g. ``{"orc.compress": "SNAPPY"}``.
        add_columns: columns to append, e.g. ``"source STRING COMMENT 'origin'"``, or a
            list of them, e.g. ``["source STRING", "n INT"]``.
        change_columns: ``"c NEWTYPE"`` each: widen column c, e.g. ``["id BIGINT"]``; a
            single string is one such change.
        columns: the whole new column list (Hive's REPLACE COLUMNS), checked the same way.

    Returns:
        The table as stored afterwards and what changed.

    Raises:
        ConfigError: nothing to change, a value the table cannot have, or a column change
            Hive's rules refuse (the message says why and what to do instead), or one the
            Hive Metastore refuses.
        CommitConflictError: another process changed the columns meanwhile.
        TableNotFoundError: the metastore no longer lists the table.
        MetastoreError: the metastore failed.
    """
    location = table.location
    if not properties and add_columns is None and not change_columns and columns is None:
        raise ConfigError(f"Cannot alter table at {location}: nothing to change",
                          hint=f"for example `ingest alter {location} --property "
                          "orc.compress=SNAPPY` or `--add-columns \"note STRING\"`")
    add_columns = _column_list(add_columns, "add_columns", location)
    changes = (change_columns,) if isinstance(change_columns, str) else change_columns
    _check_strings(changes, "change_columns", location)
    # `to_write` reads the columns again: the change is checked against, and expects
    # (`alter_columns(expected=)`), the columns as they are now.
    with table.to_write("alter") as (store, defn):
        wanted = (check_properties(properties, table=defn.name, action="alter")
                  if properties else {})
        changed = tuple((k, defn.properties.get(k), v) for k, v in sorted(wanted.items())
                        if defn.properties.get(k) != v)
        new_schema, column_changes = evolve_schema(
            defn, add_columns=add_columns, change_columns=changes, columns=columns)
        stored = defn
        if column_changes:
            stored = store.alter_columns(defn.name, new_schema, expected=defn.row_schema)
        if changed:
            stored = store.set_properties(defn.name, wanted)
        return AlterResult(stored, changed, column_changes)


def _column_list(given: str | Sequence[str] | None, argument: str, location: str) -> str | None:
    """`add_columns` as one column list: a list's items are joined, as Hive's ADD COLUMNS
    lists them."""
    if given is None or isinstance(given, str):
        return given
    _check_strings(given, argument, location)
    return ", ".join(given)


def _check_strings(given: object, argument: str, location: str) -> None:
    if not isinstance(given, Sequence) or not all(isinstance(s, str) for s in given):
        raise ConfigError(
            f"Cannot alter table at {location}: {argument}={given!r} is not a column "
            "specification string or a list of them",
            hint=f"e.g. {argument}=\"n BIGINT\" or {argument}=[\"n BIGINT\", \"m INT\"]")


__all__ = ["AlterResult", "alter_table"]
