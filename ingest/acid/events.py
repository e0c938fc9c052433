"""The ACID event: Hive's root struct around every user row, and what its fields mean.

struct<operation:int, originalTransaction:bigint, bucket:int, rowId:bigint,
currentTransaction:bigint, row:struct<...>> (orc-core SchemaEvolution.createEventSchema).
"""

from __future__ import annotations

import pyarrow as pa

from ingest.errors import SchemaMismatchError

INSERT, UPDATE, DELETE = 0, 1, 2
ACID_FIELD_NAMES = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction",
                    "row")


def acid_event_schema(row_schema: pa.Schema) -> pa.Schema:
    """The Arrow schema of ACID events carrying rows of `row_schema`."""
    return pa.schema([
        pa.field("operation", pa.int32()),
        pa.field("originalTransaction", pa.int64()),
        pa.field("bucket", pa.int32()),
        pa.field("rowId", pa.int64()),
        pa.field("currentTransaction", pa.int64()),
        pa.field("row", pa.struct([f.with_nullable(True) for f in row_schema])),
    ])


def row_schema_of(event_schema: pa.Schema, *, path: str = "") -> pa.Schema:
    """The user row schema inside an ACID file's schema.

    Raises:
        SchemaMismatchError: the file is not an ACID file (its root fields are not Hive's six).
    """
    names = tuple(n.lower() for n in event_schema.names)
    if names != tuple(n.lower() for n in ACID_FIELD_NAMES):
        raise SchemaMismatchError(
            f"{path or 'file'} is not a Hive ACID file: its root fields are {event_schema.names}, "
            f"expected {list(ACID_FIELD_NAMES)}")
    row_type = event_schema.field(5).type
    return pa.schema(list(row_type))
