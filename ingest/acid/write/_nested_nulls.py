"""Work around pyarrow's ORC writer on null structs: nested inside a struct, or sliced.

For a nested struct, pyarrow (checked on 26.0) writes a child's present stream only for slots
where the parent struct is non-null, but the child's values for every slot where the child
itself is non-null; after a null nested struct, readers then get their neighbours' values.
The ACID `row` struct makes every user struct column nested, so before writing we push each
struct's nulls down into its children (Arrow's `flatten`), which makes both streams agree.
A probe at first use checks that pyarrow still behaves this way.

pyarrow (26.0) also misplaces values of a struct column with nulls that is a slice (an Arrow
array with an offset), so such columns are copied to offset 0 before encoding (`unsliced`).
"""

from __future__ import annotations

import functools
import io

import pyarrow as pa
import pyarrow.orc as po


def _has_struct_below(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return any(pa.types.is_struct(f.type) or _has_struct_below(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.types.is_struct(t.value_type) or _has_struct_below(t.value_type)
    if pa.types.is_map(t):
        return any(pa.types.is_struct(x) or _has_struct_below(x) for x in (t.key_type, t.item_type))
    return False


def needs_fix(row_type: pa.DataType) -> bool:
    """Whether rows of this struct type hit the bug in the installed pyarrow."""
    return _has_struct_below(row_type) and _pyarrow_misplaces_nested_struct_children()


@functools.cache
def _pyarrow_misplaces_nested_struct_children() -> bool:
    inner = pa.array([{"x": 1}, None, {"x": 3}], pa.struct([("x", pa.int32())]))
    table = pa.table({"row": pa.StructArray.from_arrays([inner], names=["st"])})
    sink = io.BytesIO()
    po.write_table(table, sink)
    sink.seek(0)
    return po.ORCFile(sink).read().to_pylist() != table.to_pylist()


def prepare(arr: pa.Array) -> pa.Array:
    """`arr` with every struct's nulls also set in its children, recursively."""
    if arr.offset:
        arr = pa.concat_arrays([arr])  # rebuilding with a validity mask needs offset 0
    t = arr.type
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(t):
        children = [prepare(c) for c in arr.flatten()]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        cls = pa.ListArray if pa.types.is_list(t) else pa.LargeListArray
        return cls.from_arrays(arr.offsets, prepare(arr.values), type=t, mask=mask)
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(arr.offsets, prepare(arr.keys), prepare(arr.items),
                                       type=t, mask=mask)
    return arr


def prepare_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with `prepare` applied to every column."""
    return pa.RecordBatch.from_arrays([prepare(c) for c in batch.columns], schema=batch.schema)


def _has_struct(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) or _has_struct_below(t)


def unsliced(table: pa.Table) -> pa.Table:
    """`table` with every struct-holding column that is a slice copied to offset 0."""
    columns = list(table.columns)
    for i, column in enumerate(columns):
        if _has_struct(column.type) and any(chunk.offset for chunk in column.chunks):
            columns[i] = pa.chunked_array([pa.concat_arrays(column.chunks)], column.type)
    return pa.Table.from_arrays(columns, schema=table.schema)
