"""What a table definition says to the operations: its input columns, its load codec.

Plain functions of an `ingest.txn.TableDefinition`; no files, no metastore.
"""

from __future__ import annotations

import pyarrow as pa

from ingest.acid.schema import to_ddl
from ingest.acid.writer import Compression
from ingest.errors import ConfigError
from ingest.txn import TableDefinition

# Set by `create_table(adopt=True)`: the highest write id found on disk when the table took
# over existing ACID data. Write ids up to it are committed without a metastore record.
ADOPTED_PROPERTY = "ingest.adopted_max_write_id"


def table_schema(defn: TableDefinition) -> pa.Schema:
    """Row columns followed by partition columns (strings): what a load's input holds."""
    return pa.schema(list(defn.row_schema) + [pa.field(c, pa.string())
                                              for c in defn.partition_columns])


def table_compression(defn: TableDefinition) -> Compression:
    """The ORC codec of the table's `orc.compress` property (zlib when unset).

    Raises:
        ConfigError: the property names no codec the writer has.
    """
    value = defn.properties.get("orc.compress", "zlib").lower()
    if value not in ("none", "zlib", "snappy", "lz4", "zstd"):
        raise ConfigError(f"Cannot load into {defn.name}: table property orc.compress={value!r}"
                          " is not one of NONE, ZLIB, SNAPPY, LZ4, ZSTD")
    return value  # type: ignore[return-value]


def adopted_max_write_id(defn: TableDefinition) -> int:
    """The highest write id the table adopted from disk at create (0: none)."""
    value = defn.properties.get(ADOPTED_PROPERTY, "0")
    return int(value) if value.isdigit() else 0


def ddl_type(field: pa.Field) -> str:
    """The Hive type of one column, as `--schema` spells it (e.g. ``BIGINT``)."""
    return to_ddl(pa.schema([field])).split(" ", 1)[1]
