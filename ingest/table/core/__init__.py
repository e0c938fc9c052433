"""The table's base, shared by its rooms: opening a table's metastore and filesystem (`_open`),
the owner marker (`_owner`), the table as `open_table` resolved it, which every operation
takes (`_resolved`), the table's definition and properties (`_definition`), its layout
on disk (`_layout`), checks of the Python API's arguments (`_arguments`), the committed-file
manifest's checks (`_committed`), the files a write created and their removal when it does
not commit (`_written`), schema versions (`schema_versions`) and Hive's evolution rules
(`evolve`). Imports no other room of `ingest.table`.
"""

from ingest.table.core._arguments import (
    check_columns,
    check_limit,
    check_snapshot_table,
    check_storage_options,
    ddl_type,
    rows_as_table,
)
from ingest.table.core._committed import (
    committed_length_of,
    find_damage,
    guard_recovery,
    keeping,
    mark_unrecoverable,
    relative_path,
    table_manifest,
)
from ingest.table.core._definition import (
    ADOPTED_PROPERTY,
    adopted_max_write_id,
    check_properties,
    cleaner_retention_s,
    compaction_thresholds,
    table_compression,
    table_schema,
    uses_visibility_suffix,
)
from ingest.table.core._layout import AcidLayout, partition_dirs, scan_layout
from ingest.table.core._open import (
    MetastoreRef,
    StorageOptions,
    agent_name,
    check_root,
    find_table,
    locate_table,
    open_store,
    table_fs,
)
from ingest.table.core._owner import (
    MARKER_NAME,
    TOKEN_PROPERTY,
    OwnerMarker,
    check_create,
    check_owner,
    is_in_memory,
    new_token,
    read_marker,
    write_marker,
)
from ingest.table.core._resolved import ResolvedTable
from ingest.table.core._written import (
    AbortedWriteRemoval,
    Written,
    check_written_columns,
    commit,
    join_path,
    remove_aborted_writes,
    remove_empty_dirs,
    write_set,
    writing,
)
from ingest.table.core.evolve import SchemaChange, evolve_schema
from ingest.table.core.progress import StreamProgress, stream_progress
from ingest.table.core.schema_versions import (
    check_written_tables,
    pinned_definition,
    written_schema_problem,
)

__all__ = [
    "ADOPTED_PROPERTY",
    "AbortedWriteRemoval",
    "AcidLayout",
    "MARKER_NAME",
    "MetastoreRef",
    "OwnerMarker",
    "ResolvedTable",
    "SchemaChange",
    "StorageOptions",
    "StreamProgress",
    "TOKEN_PROPERTY",
    "Written",
    "adopted_max_write_id",
    "agent_name",
    "check_columns",
    "check_create",
    "check_limit",
    "check_owner",
    "check_properties",
    "check_root",
    "check_snapshot_table",
    "check_storage_options",
    "check_written_columns",
    "check_written_tables",
    "cleaner_retention_s",
    "commit",
    "committed_length_of",
    "compaction_thresholds",
    "ddl_type",
    "evolve_schema",
    "find_damage",
    "find_table",
    "guard_recovery",
    "is_in_memory",
    "join_path",
    "keeping",
    "locate_table",
    "mark_unrecoverable",
    "new_token",
    "open_store",
    "partition_dirs",
    "pinned_definition",
    "read_marker",
    "relative_path",
    "remove_aborted_writes",
    "remove_empty_dirs",
    "rows_as_table",
    "scan_layout",
    "stream_progress",
    "table_compression",
    "table_fs",
    "table_manifest",
    "table_schema",
    "uses_visibility_suffix",
    "write_marker",
    "write_set",
    "writing",
    "written_schema_problem",
]
