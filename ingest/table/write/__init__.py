"""Operations that write a table: create (and adopt), alter, load, delete, upsert and apply
change events (`keyed`: key rules and last-wins), each one committed write id. Imports the
base (`ingest.table.core`).
"""

from ingest.table.write.alter import AlterResult, alter_table
from ingest.table.write.create import create_table, default_table_name
from ingest.table.write.delete import DeleteResult, delete
from ingest.table.write.keyed import KeySpec, check_keyed_table, resolve
from ingest.table.write.load import (
    LoadResult,
    MissingColumns,
    check_missing_columns,
    load,
    load_file,
)
from ingest.table.write.upsert import (
    ChangeCounts,
    UpsertResult,
    apply_changes,
    upsert,
    upsert_file,
    write_changes,
)

__all__ = [
    "alter_table",
    "AlterResult",
    "apply_changes",
    "ChangeCounts",
    "check_keyed_table",
    "check_missing_columns",
    "create_table",
    "default_table_name",
    "delete",
    "DeleteResult",
    "KeySpec",
    "load",
    "load_file",
    "LoadResult",
    "MissingColumns",
    "resolve",
    "upsert",
    "upsert_file",
    "UpsertResult",
    "write_changes",
]
