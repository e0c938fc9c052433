"""The ACID event: operation codes and the root struct around every user row.

struct<operation:int, originalTransaction:bigint, bucket:int, rowId:bigint,
currentTransaction:bigint, row:struct<...>> (orc-core SchemaEvolution.createEventSchema);
the schema functions live in ingest.acid.schema.
"""

from __future__ import annotations

from ingest.acid.schema import ACID_FIELD_NAMES, acid_event_schema, row_schema_of

INSERT, UPDATE, DELETE = 0, 1, 2

__all__ = ["ACID_FIELD_NAMES", "DELETE", "INSERT", "UPDATE", "acid_event_schema",
           "row_schema_of"]
