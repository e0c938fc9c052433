"""Arrow batches for the writer: user rows checked against the row schema, row keys
turned into delete events.

What OrcRecordUpdater.delete puts in each event (docs/format.md §5): operation 2, the row's key
(originalTransaction, bucket property, rowId), currentTransaction, and a null row. Insert
events are never built as Arrow batches: `_acid_stripes` adds their event columns to the
encoded user rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ingest.acid.format import DELETE, KEY_COLUMNS, ROW, decode_bucket_property, to_orc_type_string
from ingest.errors import SchemaMismatchError, UnsupportedFormatError

_KEY_TYPES = (pa.int64(), pa.int32(), pa.int64())


def conform_rows(data: pa.Table | pa.RecordBatch, row_schema: pa.Schema, *,
                 path: str) -> pa.Table | pa.RecordBatch:
    """The data with the row schema's exact Arrow types.

    Types that ORC stores the same way (timestamp units, string vs large_string) are cast:
    a reopened file reports the types pyarrow reads back, not those written.

    Raises:
        SchemaMismatchError: columns missing, extra, reordered, or of other types.
    """
    schema = data.schema
    if schema.names == row_schema.names:
        if all(a.type == b.type for a, b in zip(schema, row_schema, strict=True)):
            return data
        try:
            same_in_orc = to_orc_type_string(schema) == to_orc_type_string(row_schema)
        except UnsupportedFormatError:
            same_in_orc = False
        if same_in_orc:
            return data.cast(row_schema)
    problems = []
    for f in row_schema:
        if f.name not in schema.names:
            problems.append(f"column {f.name!r} ({f.type}) is missing")
        elif schema.field(f.name).type != f.type:
            problems.append(f"column {f.name!r} is {schema.field(f.name).type}, expected {f.type}")
    problems += [f"column {n!r} is not in the table" for n in schema.names
                 if n not in row_schema.names]
    if not problems:
        problems.append(f"columns are in order {schema.names}, expected {row_schema.names}")
    raise SchemaMismatchError(
        f"Cannot write to {path}: the batch does not match the row schema: " + "; ".join(problems))


def sorted_delete_keys(keys: pa.Table | pa.RecordBatch, *, path: str) -> pa.Table:
    """The key columns of `keys`, cast to the ACID types and sorted in Hive's order.

    Raises:
        SchemaMismatchError: a key column is missing, not an integer, or has nulls.
    """
    table = keys if isinstance(keys, pa.Table) else pa.Table.from_batches([keys])
    columns = []
    for name, type_ in zip(KEY_COLUMNS, _KEY_TYPES, strict=True):
        if name not in table.column_names:
            raise SchemaMismatchError(
                f"Cannot write delete events to {path}: key column {name!r} is "
                f"missing (columns: {table.column_names}, expected {list(KEY_COLUMNS)})")
        column = table.column(name)
        if not pa.types.is_integer(column.type) or column.null_count:
            raise SchemaMismatchError(
                f"Cannot write delete events to {path}: key column {name!r} must be "
                f"an integer without nulls, found {column.type} with "
                f"{column.null_count} nulls")
        columns.append(column.cast(type_))
    table = pa.table(dict(zip(KEY_COLUMNS, columns, strict=True)))
    return table.sort_by([(name, "ascending") for name in KEY_COLUMNS])


def check_delete_buckets(buckets: np.ndarray, bucket_property: int, *, path: str) -> None:
    """Every key must name this file's bucket: readers find delete events by the bucket id
    in the file name (docs/format.md §7).

    Raises:
        ValueError: a key's bucket property decodes to another bucket id.
    """
    _, own, _ = decode_bucket_property(bucket_property)
    values = buckets.astype(np.int64) & 0xFFFFFFFF
    ids = np.where((values >> 29) == 1, (values >> 16) & 0xFFF, values)
    wrong = ids != own
    if wrong.any():
        bad = int(buckets[int(np.argmax(wrong))])
        raise ValueError(
            f"Cannot write delete events to {path}: bucket property {bad} decodes to "
            f"bucket {decode_bucket_property(bad)[1]}, but this file is bucket {own}; "
            "write each bucket's deletes to its own bucket_N file")


def delete_events(keys: pa.RecordBatch, *, event_schema: pa.Schema,
                  write_id: int) -> pa.RecordBatch:
    """Delete events for sorted keys (operation 2, currentTransaction = write_id, null row)."""
    n = keys.num_rows
    return pa.RecordBatch.from_arrays([
        pa.array(np.full(n, DELETE, dtype=np.int32)),
        keys.column(0),
        keys.column(1),
        keys.column(2),
        pa.array(np.full(n, write_id, dtype=np.int64)),
        pa.nulls(n, event_schema.field(ROW).type),
    ], schema=event_schema)
