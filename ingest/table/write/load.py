"""Load a batch of rows into a table in one transaction (Hive's INSERT INTO).

Rows are cast to the table's columns, split by partition and bucket (`split`) and written as
`<partition>/delta_W_W_0000/bucket_N` insert events; the files of a load that does not
commit are removed (`_written`). Talks to the metastore through `ingest.txn`, writes ORC
through `ingest.acid`; the CLI's `ingest load`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format import bucket_ids, format_delta, to_ddl
from ingest.acid.write import Compression
from ingest.errors import ConfigError, SchemaMismatchError
from ingest.io import storage
from ingest.records import (
    InputFormat,
    ProgressFn,
    describe_decimal_error,
    read_input,
    split_rows,
    to_decimal,
    to_timestamp,
)
from ingest.table.core import (
    ResolvedTable,
    agent_name,
    commit,
    ddl_type,
    join_path,
    table_compression,
    table_schema,
    writing,
)
from ingest.txn import TableDefinition

MissingColumns = Literal["error", "null"]
"""What `load` does with a table column the input lacks: refuse (the default) or, for a
nullable column, load NULL."""


@dataclass(frozen=True)
class LoadResult:
    """What `load` committed. write_id is None when there were no rows (nothing committed)."""

    table: str
    location: str
    write_id: int | None
    rows: int
    files: tuple[str, ...]
    partitions: tuple[str, ...]
    bytes_written: int


def load(
    table: ResolvedTable,
    data: pa.Table,
    *,
    agent: str = "",
    compression: Compression | None = None,
    missing_columns: MissingColumns = "error",
    on_progress: ProgressFn | None = None,
) -> LoadResult:
    """Insert rows into a table in one transaction (Hive's INSERT INTO).

    The data is checked and cast to the table's columns first (nothing is written if any
    column does not fit), split by partition values (null or '' go to
    `__HIVE_DEFAULT_PARTITION__`) and by bucket (bucketing v2; unbucketed tables use
    bucket 0), and written as `<partition>/delta_W_W_0000/bucket_N` plus
    `_orc_acid_version`; all files are closed before the commit.

    Args:
        table: the table, opened at its root (`ingest.open_table`); its metastore, filesystem
            and storage options are the load's.
        data: row and partition columns, in any order; names match case-insensitively.
        agent: recorded with the transaction; default host:pid:ingest-load.
        compression: ORC codec; default the table's `orc.compress` property, else zlib.
        missing_columns: a table column the data lacks altogether is refused ("error"), or
            loaded as NULL when the column is nullable ("null"); the same for every type.
        on_progress: called with (rows written, rows in all, the partition) as bucket files
            are written, every few tens of thousands of rows.

    Returns:
        Counts, files and the write id (None for an empty input: nothing is committed).

    Raises:
        TableNotFoundError: the metastore no longer lists the table.
        SchemaMismatchError: columns are missing or extra, or values do not fit their types.
        ConfigError: `missing_columns` is neither "error" nor "null"; the table was opened
            without a metastore or at a partition.
        CommitConflictError: the transaction was aborted meanwhile (e.g. timed out).
        MetastoreError: the metastore failed.
    """
    check_missing_columns(missing_columns)
    with table.to_write("load rows") as (store, defn):
        rows, partitions = _conform(data, defn, missing_columns)
        codec = compression or table_compression(defn)
        if rows.num_rows == 0:
            return LoadResult(defn.name, defn.location, None, 0, (), (), 0)
        fs, root = table.fs, table.path
        buckets = (bucket_ids(rows, defn.bucket_columns, defn.bucket_count)
                   if defn.bucket_count else None)
        parts: list[str] = []
        count = _RowsWritten(on_progress, rows.num_rows)
        with writing(store, defn, fs, agent=agent or agent_name("load")) as (txn, written):
            w = txn.write_id
            for part, bucket, chunk in split_rows(rows, partitions, bucket_ids=buckets):
                directory = join_path(root, part, format_delta(w, w, 0))
                if directory not in written.directories:
                    written.make_directory(join_path(root, part), directory)
                    parts.append(part)
                written.write_bucket(directory, bucket, chunk, row_schema=rows.schema,
                                     write_id=w, compression=codec,
                                     on_rows=count.counter(part))
                store.heartbeat(txn)
        commit(store, txn, written)
        return LoadResult(defn.name, defn.location, w, rows.num_rows,
                          tuple(fs.unstrip_protocol(p) for p in written.files), tuple(parts),
                          written.bytes)


def load_file(
    table: ResolvedTable,
    input_path: str,
    *,
    format: InputFormat | None = None,
    agent: str = "",
    missing_columns: MissingColumns = "error",
    on_read_progress: ProgressFn | None = None,
    on_progress: ProgressFn | None = None,
) -> LoadResult:
    """`read_input` with the table's column types, then `load`.

    The input file is read with the table's storage options when it lies in the table's
    bucket (the CLI's `--storage-option` names the table's bucket), else with fsspec's own
    config alone. `on_read_progress` is `read_input`'s `on_progress` (bytes read),
    `on_progress` is `load`'s (rows written).

    Raises:
        As `read_input` and `load`.
    """
    check_missing_columns(missing_columns)
    defn = table.require_root("load rows")
    # The columns as resolved: `load` conforms the rows to the definition current when
    # it writes, so a column changed meanwhile is refused or cast there, not missed.
    beside = storage.same_root(input_path, defn.location)
    data = read_input(input_path, format=format, schema=table_schema(defn),
                      storage_options=table.storage_options if beside else None,
                      on_progress=on_read_progress)
    return load(table, data, agent=agent, missing_columns=missing_columns,
                on_progress=on_progress)


class _RowsWritten:
    """Adds up the rows of one load's bucket files for its `on_progress`."""

    def __init__(self, on_progress: ProgressFn | None, total: int) -> None:
        self.on_progress = on_progress
        self.total = total
        self.done = 0

    def counter(self, partition: str) -> Callable[[int], None] | None:
        """`Written.write_bucket`'s `on_rows` for a bucket file of `partition`."""
        on_progress = self.on_progress
        if on_progress is None:
            return None

        def add(rows: int) -> None:
            self.done += rows
            on_progress(self.done, self.total, partition)

        return add


def check_missing_columns(value: object) -> None:
    """Refuse a `missing_columns` that is not one of `MissingColumns`.

    Raises:
        ConfigError: it is not "error" or "null".
    """
    if value not in get_args(MissingColumns):
        raise ConfigError(f"Cannot load: missing_columns={value!r} is not one of "
                          f"{', '.join(map(repr, get_args(MissingColumns)))}",
                          hint='"error" refuses input without a table column; "null" loads '
                               "NULL into a nullable column the input lacks")


def conform_rows(data: pa.Table, defn: TableDefinition,
                 missing_columns: MissingColumns = "error") -> tuple[pa.Table, pa.Table]:
    """`data` cast to the table's columns as `load` casts them: (rows in the row schema,
    partition columns as strings).

    Raises:
        SchemaMismatchError: columns are missing or extra, or values do not fit their types.
    """
    return _conform(data, defn, missing_columns)


def _conform(data: pa.Table, defn: TableDefinition,
             missing_columns: MissingColumns = "error") -> tuple[pa.Table, pa.Table]:
    """(rows cast to the row schema, partition columns as strings), or SchemaMismatchError.

    A table column `data` lacks is refused, or with missing_columns="null" and a nullable
    column, filled with NULL: one rule for every type.
    """
    target = table_schema(defn)
    found: dict[str, str] = {}
    problems: list[str] = []
    for column in data.column_names:
        exact = column if column in target.names else None
        folded = [n for n in target.names if n.lower() == column.lower()]
        match = exact or (folded[0] if len(folded) == 1 else None)
        if match is None:
            problems.append(f"column {column!r} is not in the table")
        elif match in found:
            problems.append(f"columns {found[match]!r} and {column!r} both name {match!r}")
        else:
            found[match] = column
    absent = [f for f in target if f.name not in found]
    refused = [f for f in absent if missing_columns != "null" or not f.nullable]
    problems += [f"column {f.name!r} ({ddl_type(f)}) is missing" for f in refused]
    arrays: dict[str, pa.ChunkedArray] = {}
    for field in target:
        if field.name not in found:
            arrays[field.name] = pa.chunked_array([pa.nulls(data.num_rows, field.type)])
            continue
        column = data.column(found[field.name])
        try:
            if pa.types.is_decimal(field.type):
                arrays[field.name] = _decimal(column, field, problems)
                continue
            if pa.types.is_timestamp(field.type):
                arrays[field.name] = _timestamp(column, field, problems)
                continue
            arrays[field.name] = column.cast(field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            problems.append(f"column {field.name!r} is {column.type} and cannot be converted "
                            f"to {ddl_type(field)}: {e}")
    if problems:
        raise SchemaMismatchError(
            f"Cannot load {data.num_rows:,} rows into {defn.name}: " + "; ".join(problems),
            hint=f"the table's columns are: {to_ddl(defn.row_schema)}"
            + (f"; partitioned by {', '.join(defn.partition_columns)} (STRING)"
               if defn.partition_columns else "")
            + ("; to load NULL into the columns the input lacks, ask for it with "
               "`ingest load --missing-columns null` (Python: missing_columns=\"null\")"
               if missing_columns != "null" and any(f.nullable for f in refused) else ""))
    # A TIMESTAMP column holding a value outside nanoseconds stays timestamp[us].
    rows = pa.Table.from_arrays([arrays[f.name] for f in defn.row_schema], schema=pa.schema(
        [f.with_type(arrays[f.name].type) for f in defn.row_schema],
        metadata=defn.row_schema.metadata))
    parts = pa.table({c: arrays[c] for c in defn.partition_columns})
    return rows, parts


def _timestamp(column: pa.ChunkedArray, field: pa.Field, problems: list[str]) -> pa.Array:
    """Years 0001-9999 as Hive's, to the nanosecond when they fit (docs/format.md §19)."""
    converted = to_timestamp(column)
    if converted.bad_row is not None:
        problems.append(
            f"column {field.name!r} ({ddl_type(field)}) cannot hold the value of row "
            f"{converted.bad_row + 1:,}: {converted.reason}"
            + (f" ({converted.bad_count:,} such rows)" if converted.bad_count > 1 else ""))
    return converted.array


def _decimal(column: pa.ChunkedArray, field: pa.Field, problems: list[str]) -> pa.Array:
    """Hive's rule for every input form: round half up to the scale, refuse an overflow."""
    converted, bad = to_decimal(column, field.type)
    if pc.any(bad).as_py():
        rows = pc.indices_nonzero(bad)
        first = rows[0].as_py()
        problems.append(
            f"column {field.name!r} ({ddl_type(field)}) cannot hold the value of row "
            f"{first + 1:,}: {describe_decimal_error(column[first].as_py(), field.type)}"
            + (f" ({len(rows):,} such rows)" if len(rows) > 1 else ""))
    return converted


__all__ = ["LoadResult", "MissingColumns", "check_missing_columns", "conform_rows", "load",
           "load_file"]
