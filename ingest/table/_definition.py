"""What a table definition says to the operations: its input columns, its load codec.

Plain functions of an `ingest.txn.TableDefinition`; no files, no metastore.
"""

from __future__ import annotations

import pyarrow as pa

from ingest.acid.schema import to_ddl
from ingest.acid.writer import Compression
from ingest.errors import ConfigError
from ingest.txn import TableDefinition


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


def ddl_type(field: pa.Field) -> str:
    """The Hive type of one column, as `--schema` spells it (e.g. ``BIGINT``)."""
    return to_ddl(pa.schema([field])).split(" ", 1)[1]
