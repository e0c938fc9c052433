"""Checks of the Python API's arguments, made before a read or write starts.

Each turns an argument that would otherwise be misread (a string split into characters, a
negative limit, another table's snapshot) into a `ConfigError` saying what to pass instead.
Knows values only: no files, no metastore.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from ingest.acid.format import ValidWriteIdList
from ingest.acid.read import ALL_ON_DISK
from ingest.errors import ConfigError
from ingest.table.core._definition import ddl_type


def check_columns(columns: object, *, where: str) -> list[str] | None:
    """`columns` as a list of names, or None for all.

    Raises:
        ConfigError: a single string (it would be read as one column per character), or
            anything but a sequence of strings.
    """
    if columns is None:
        return None
    if isinstance(columns, (str, bytes)):
        raise ConfigError(f"Cannot read {where}: columns={columns!r} is a string, not a list "
                          "of column names", hint=f"pass a list: columns=[{str(columns)!r}]")
    if not isinstance(columns, Sequence) or not all(isinstance(c, str) for c in columns):
        raise ConfigError(f"Cannot read {where}: columns={columns!r} is not a list of column "
                          "names", hint='for example columns=["id", "value"]')
    return list(columns)


def check_limit(limit: object, *, where: str) -> int | None:
    """`limit` as a row count (0: no rows), or None for no limit.

    Raises:
        ConfigError: not an integer, or below 0.
    """
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ConfigError(f"Cannot read {where}: limit={limit!r} must be an integer >= 0 "
                          "(0 returns no rows)", hint="pass limit=None to read every row")
    return limit


def check_snapshot_table(snapshot: object, table: str, *, where: str) -> None:
    """A snapshot given as a write-id list (or its Hive string) must be of `table`.

    Another table's list would read this table's files with that table's write ids.

    Raises:
        ConfigError: the list names another table (both are named), or a string is not
            Hive's write-id list form (naming the bad field).
    """
    if isinstance(snapshot, ValidWriteIdList):
        named = snapshot.table
    elif isinstance(snapshot, str) and snapshot != ALL_ON_DISK:
        named = ValidWriteIdList.from_hive_string(snapshot).table
    else:
        return
    # Hive's table names are case-insensitive.
    if named.lower() != table.lower():
        raise ConfigError(
            f"Cannot read {where} with snapshot {str(snapshot)!r}: it is a write-id list of "
            f"table {named}, not of {table}",
            hint=f"give a snapshot of {table} (its first field is the table name), or leave "
                 "it out to read the metastore's current one")


def check_storage_options(options: object, *, location: str) -> dict[str, Any] | None:
    """`storage_options` as a dict, or None.

    Raises:
        ConfigError: not a mapping of option names to values.
    """
    if options is None:
        return None
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise ConfigError(f"Cannot open table {location}: storage_options={options!r} is not "
                          "a dict of fsspec options", hint='for example storage_options='
                          '{"endpoint_url": "http://127.0.0.1:9000", "anon": False}')
    return dict(options)


def rows_as_table(data: object, *, where: str, schema: pa.Schema | None = None) -> pa.Table:
    """The rows a caller hands to `Table.load`, as an Arrow table.

    Accepts a `pyarrow.Table` or `RecordBatch`, a list of dicts (one per row), a pandas
    DataFrame, or anything `pyarrow.table()` takes (a dict of columns, ...). `schema`, the
    table's columns, only names a column's type in errors.

    Raises:
        ConfigError: none of these, or values Arrow cannot make columns of (an integer
            beyond 64 bits named with its column and the column's range).
    """
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    try:
        if isinstance(data, list) and all(isinstance(r, Mapping) for r in data):
            # Every key of any row, not just the first row's (`from_pylist` would drop, in
            # every row, a column the first row leaves out).
            names = list(dict.fromkeys(name for row in data for name in row))
            return pa.Table.from_pydict({name: [row.get(name) for row in data]
                                         for name in names})
        return pa.table(data)
    except OverflowError as e:
        raise _overflow(data, where, schema) from e
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise ConfigError(
            f"Cannot load rows into {where}: {type(data).__name__} is not rows Arrow can read "
            f"({e})", hint="pass a pyarrow.Table, a list of dicts (one per row), a dict of "
                           "column lists or a pandas DataFrame") from e


def _overflow(data: object, where: str, schema: pa.Schema | None) -> ConfigError:
    """The error for Python integers Arrow cannot hold (beyond 64 bits), naming the first."""
    rows = data if isinstance(data, list) else []
    found = next(((name, value) for row in rows if isinstance(row, Mapping)
                  for name, value in row.items()
                  if isinstance(value, int) and not isinstance(value, bool)
                  and not -2**63 <= value < 2**63), None)
    if found is None:
        return ConfigError(f"Cannot load rows into {where}: an integer is too large for a "
                           "64-bit column", hint="check the rows' integer values")
    name, value = found
    field = schema.field(name) if schema is not None and name in schema.names else None
    if field is not None and pa.types.is_integer(field.type):
        bits = field.type.bit_width
        kind = f"{ddl_type(field)} column {name!r}, whose range is {-2**(bits - 1)} to " \
               f"{2**(bits - 1) - 1}"
    else:
        kind = f"column {name!r}: no column holds integers beyond {-2**63} to {2**63 - 1}"
    return ConfigError(f"Cannot load rows into {where}: the value {value} is out of range "
                       f"for {kind}", hint=f"fix or leave out the rows whose {name} is {value}")


__all__ = ["check_columns", "check_limit", "check_snapshot_table", "check_storage_options",
           "rows_as_table"]
