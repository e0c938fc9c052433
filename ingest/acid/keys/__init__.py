"""Key lookup without the metastore: where the live rows of keys are in a table's files.

Each write id's key index (`key_index`: hashes of the key columns by row, sorted runs in side
files), the bucket-restricted lookup of live ROW__IDs that upserts and keyed streams decide
against (`current`), the visible delete events it subtracts (`_delete_events`), sorted runs of
hashes (`_runs`) and the process's cache of small files read again (`_file_cache`). Takes the
read view and the committed-file manifest as values (`ReadView`, `CommittedFiles`).
"""

from ingest.acid.keys.current import (
    BUCKET_PROPERTY,
    ROW_ID,
    WRITE_ID,
    CurrentRows,
    find_current_rows,
    read_rows_by_id,
)
from ingest.acid.keys.key_index import (
    build_entries,
    declare_key_columns,
    index_data_file,
    read_key_columns,
    remove_index_files,
    row_hashes,
    write_index,
)

__all__ = [
    "BUCKET_PROPERTY",
    "ROW_ID",
    "WRITE_ID",
    "CurrentRows",
    "build_entries",
    "declare_key_columns",
    "find_current_rows",
    "index_data_file",
    "read_key_columns",
    "read_rows_by_id",
    "remove_index_files",
    "row_hashes",
    "write_index",
]
