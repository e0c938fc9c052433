"""The ACID event: operation codes, the root struct's field names and positions, the key.

struct<operation:int, originalTransaction:bigint, bucket:int, rowId:bigint,
currentTransaction:bigint, row:struct<...>> (orc-core SchemaEvolution.createEventSchema);
the schema functions live in ingest.acid.schema. Code names a field by these constants only.
"""

from __future__ import annotations

from ingest.acid.schema import ACID_FIELD_NAMES, acid_event_schema, row_schema_of

INSERT, UPDATE, DELETE = 0, 1, 2

# Named from the one tuple that orders them.
OPERATION, ORIGINAL_TRANSACTION, BUCKET, ROW_ID, CURRENT_TRANSACTION, ROW = ACID_FIELD_NAMES
# Where `row` sits in a file's root struct: found by position, as readers match names
# case-insensitively.
ROW_POSITION = ACID_FIELD_NAMES.index(ROW)
# The key of an ACID event, in Hive's sort order (RecordIdentifier: write id, bucket, row id).
KEY_COLUMNS = (ORIGINAL_TRANSACTION, BUCKET, ROW_ID)

__all__ = ["ACID_FIELD_NAMES", "BUCKET", "CURRENT_TRANSACTION", "DELETE", "INSERT",
           "KEY_COLUMNS", "OPERATION", "ORIGINAL_TRANSACTION", "ROW", "ROW_ID", "ROW_POSITION",
           "UPDATE", "acid_event_schema", "row_schema_of"]
