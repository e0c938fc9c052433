"""Change a table's properties (Hive's ALTER TABLE ... SET TBLPROPERTIES).

Checks them as `create_table` does (`_definition.check_properties`), then records them in the
metastore; no data file changes. A later load or micro-batch uses the new values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ingest.errors import ConfigError
from ingest.table._definition import check_properties
from ingest.table._open import MetastoreRef, StorageOptions, open_table
from ingest.txn import TableDefinition


@dataclass(frozen=True)
class AlterResult:
    """What `alter_table` changed: (key, old value or None, new value), and the result."""

    table: TableDefinition
    changed: tuple[tuple[str, str | None, str], ...]


def alter_table(
    location: str,
    *,
    properties: Mapping[str, str],
    metastore: MetastoreRef = None,
    storage_options: StorageOptions = None,
) -> AlterResult:
    """Set table properties of the table at `location`; the others are kept.

    Args:
        location: the table root.
        properties: the properties to set, e.g. ``{"orc.compress": "SNAPPY"}``.
        metastore: as for `create_table`; default: found from the location.
        storage_options: the table's fsspec options, to read the location's owner marker.

    Returns:
        The table as stored afterwards and what changed.

    Raises:
        ConfigError: no properties, or a value the table cannot have.
        TableNotFoundError: no table at `location`.
        MetastoreError: the metastore failed.
    """
    if not properties:
        raise ConfigError(f"Cannot alter table at {location}: no property to set",
                          hint=f"for example `ingest alter {location} --property "
                          "orc.compress=SNAPPY`")
    with open_table(location, metastore, storage_options) as (store, defn):
        wanted = check_properties(properties, table=defn.name, action="alter")
        changed = tuple((k, defn.properties.get(k), v) for k, v in sorted(wanted.items())
                        if defn.properties.get(k) != v)
        stored = store.set_properties(defn.name, wanted) if changed else defn
        return AlterResult(stored, changed)


__all__ = ["AlterResult", "alter_table"]
