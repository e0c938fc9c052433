"""Which columns a read or a write uses when the table's columns change (docs/format.md §25).

A read uses the columns of its snapshot's schema version (`PinnedView`), never those the
table was opened with: a change made while it reads shows in the next read, not in this
one. A write keeps the columns it began with; its commit checks that those still read by
position as the table's columns now (another process may have added or widened columns
meanwhile, which reads correctly) and fails with `CommitConflictError` otherwise, so files
never hold columns under other names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import pyarrow as pa

from ingest.errors import CommitConflictError
from ingest.table.core._definition import ddl_type
from ingest.table.core.evolve import widening_problem
from ingest.txn import Metastore, PinnedView, TableDefinition, TableIdentifier


def pinned_definition(defn: TableDefinition, view: object) -> TableDefinition:
    """`defn` with the row columns and schema version of `view`'s snapshot (when it is a
    metastore's `PinnedView`), for everything a read or compaction does under that view."""
    if not isinstance(view, PinnedView) or view.row_schema is None:
        return defn
    if view.schema_version == defn.schema_version and view.row_schema.equals(defn.row_schema):
        return defn
    return replace(defn, row_schema=view.row_schema, schema_version=view.schema_version)


def written_schema_problem(written: pa.Schema, table: pa.Schema) -> str | None:
    """Why files whose row struct is `written` would not read as the table's columns
    `table` by position (Hive's reader) and by name alike, or None when they do: the same
    names in the same places, each type the same or widened, the table's extra columns at
    the end."""
    if written.equals(table):
        return None  # the usual case, without a type's DDL for each column
    if len(written) > len(table):
        return (f"the files hold {len(written)} columns, the table {len(table)}: "
                f"{written.names[len(table):]} have no place")
    for i, f in enumerate(written):
        t = table.field(i)
        if f.name.lower() != t.name.lower():
            return (f"column {i + 1} is {f.name!r} in the files but {t.name!r} in the table, "
                    "so Hive would read its values under another name")
        old, new = _type(f), _type(t)
        if old != new and (problem := widening_problem(old, new)) is not None:
            return f"column {f.name!r}: {problem}"
    return None


def check_written_columns(store: Metastore, table: TableIdentifier, written: Iterable[pa.Schema],
                          *, began: TableDefinition, what: str) -> None:
    """Refuse to commit files written with `written` row structs when they no longer read
    as the table's columns (re-read now).

    Args:
        store: the metastore.
        table: the table written.
        written: the row structs of the files written.
        began: the definition the write began with (its schema version, for the message).
        what: the write, for the message ("load", "micro-batch 7").

    Raises:
        CommitConflictError: a written struct does not read as the table's columns now
            (the columns were changed by another process in a way this write cannot follow).
        TableNotFoundError: the table is gone.
        MetastoreError: the metastore failed.
    """
    schemas = _distinct(written)
    if schemas:
        _check(store.get_table(table), schemas, began=began, what=what)


def check_written_tables(store: Metastore,
                         writes: Sequence[tuple[TableIdentifier, Iterable[pa.Schema],
                                                TableDefinition]],
                         *, what: str) -> None:
    """`check_written_columns` of several tables written in one transaction, their
    definitions re-read in one metastore call (`Metastore.get_tables`): the same checks and
    messages, the first table refused (in the given order) raising.

    Args:
        store: the metastore.
        writes: per table, (the table, the row structs of its files, the definition its
            write began with).
        what: the write, for the message ("micro-batch 7").

    Raises:
        CommitConflictError: as `check_written_columns`, for the first table refused.
        TableNotFoundError: a table is gone.
        MetastoreError: the metastore failed.
    """
    checked = [(table, schemas, began) for table, written, began in writes
               if (schemas := _distinct(written))]
    if not checked:
        return
    now = store.get_tables([table for table, _, _ in checked])
    for (_, schemas, began), defn in zip(checked, now, strict=True):
        _check(defn, schemas, began=began, what=what)


def _distinct(written: Iterable[pa.Schema]) -> list[pa.Schema]:
    return list({s.serialize().to_pybytes(): s for s in written}.values())


def _check(now: TableDefinition, schemas: Sequence[pa.Schema], *, began: TableDefinition,
           what: str) -> None:
    """Refuse files of `schemas` that do not read as `now`'s columns."""
    for schema in schemas:
        problem = written_schema_problem(schema, now.row_schema)
        if problem is not None:
            raise CommitConflictError(
                f"Cannot commit the {what} to table {now.name}: its files were written with "
                f"the columns of schema version {began.schema_version} "
                f"({', '.join(_columns(schema))}), and the table's columns are now schema "
                f"version {now.schema_version} ({', '.join(_columns(now.row_schema))}): "
                f"{problem}",
                hint="another process changed the columns while this write ran; nothing was "
                     "committed: run the write again")


def _type(field: pa.Field) -> str:
    return ddl_type(field.remove_metadata())


def _columns(schema: pa.Schema) -> list[str]:
    return [f"{f.name} {_type(f)}" for f in schema]


__all__ = ["check_written_columns", "check_written_tables", "pinned_definition",
           "written_schema_problem"]
