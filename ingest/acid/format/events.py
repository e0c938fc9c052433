"""The ACID event: operation codes, the root struct's field names and positions, the key, and
the struct itself.

struct<operation:int, originalTransaction:bigint, bucket:int, rowId:bigint,
currentTransaction:bigint, row:struct<...>> (orc-core SchemaEvolution.createEventSchema;
docs/format.md §5). Code names a field by these constants only.
"""

from __future__ import annotations

import pyarrow as pa

from ingest.errors import UnsupportedFormatError

INSERT, UPDATE, DELETE = 0, 1, 2

ACID_FIELD_NAMES = ("operation", "originalTransaction", "bucket", "rowId",
                    "currentTransaction", "row")
OPERATION, ORIGINAL_TRANSACTION, BUCKET, ROW_ID, CURRENT_TRANSACTION, ROW = ACID_FIELD_NAMES
# Where `row` sits in a file's root struct: found by position, as readers match names
# case-insensitively.
ROW_POSITION = ACID_FIELD_NAMES.index(ROW)
# The key of an ACID event, in Hive's sort order (RecordIdentifier: write id, bucket, row id).
KEY_COLUMNS = (ORIGINAL_TRANSACTION, BUCKET, ROW_ID)


def acid_event_schema(row_schema: pa.Schema) -> pa.Schema:
    """The root struct of every ACID ORC data file, wrapping the table's columns.

    Fields in order: operation int32, originalTransaction int64, bucket int32, rowId int64,
    currentTransaction int64, row struct<table columns> (null for delete events). All fields,
    and the row struct's members, are nullable, as ORC readers report them.

    Args:
        row_schema: the table's columns.

    Returns:
        The six-field ACID event schema.
    """
    members = [f.with_nullable(True) for f in row_schema]
    return pa.schema([
        pa.field(OPERATION, pa.int32()),
        pa.field(ORIGINAL_TRANSACTION, pa.int64()),
        pa.field(BUCKET, pa.int32()),
        pa.field(ROW_ID, pa.int64()),
        pa.field(CURRENT_TRANSACTION, pa.int64()),
        pa.field(ROW, pa.struct(members), nullable=True),
    ])


def row_schema_of(event_schema: pa.Schema) -> pa.Schema:
    """The table columns inside an ACID event schema (orc-core `checkAcidSchema` rules).

    Raises:
        UnsupportedFormatError: the schema is not the six-field ACID struct.
    """
    names = [n.lower() for n in event_schema.names]
    if names != [n.lower() for n in ACID_FIELD_NAMES] or not pa.types.is_struct(
        event_schema.field(ROW_POSITION).type
    ):
        raise UnsupportedFormatError(
            f"Not an ACID event schema: root fields are {event_schema.names}, expected "
            f"{list(ACID_FIELD_NAMES)} with 'row' a struct"
        )
    row_type = event_schema.field(ROW_POSITION).type
    return pa.schema([row_type.field(i) for i in range(row_type.num_fields)])


__all__ = ["ACID_FIELD_NAMES", "BUCKET", "CURRENT_TRANSACTION", "DELETE", "INSERT",
           "KEY_COLUMNS", "OPERATION", "ORIGINAL_TRANSACTION", "ROW", "ROW_ID", "ROW_POSITION",
           "UPDATE", "acid_event_schema", "row_schema_of"]
