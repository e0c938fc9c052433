"""The table a command names, opened once at the edge (the CLI, the jobs, the stream's
maintenance) with the metastore and storage options it was given as values; the command then
calls the `Table`'s methods.

A command that changes a table opens its root (`open_table_root`); one that only looks opens
the table holding a path with the metastore that lists it, or, when none does and none was
chosen (`--metastore`), its files as they are on disk (`open_table_or_files`, for `ingest
status` and `ingest cat`). Metastores are opened read-only here (docs/invariants.md, 7).
"""

from __future__ import annotations

from typing import Any

from ingest.errors import TableNotFoundError
from ingest.table.api import Table, _open
from ingest.table.core import MetastoreRef, StorageOptions, check_root


def open_table_root(location: str, metastore: MetastoreRef = None,
                    storage_options: StorageOptions = None) -> Table:
    """The table whose root is `location`, for a command that changes it (`load`, `delete`,
    `compact`, `clean`, `alter`): resolved once here, its metastore and options then carried
    by the `Table` into every method.

    Args:
        location: the table root, a path or fsspec URL.
        metastore: the metastore URL the caller chose (it must list the table), an open
            `Metastore` (left open), or None: `$INGEST_METASTORE`, else the one beside the
            table.
        storage_options: the table's fsspec options.

    Raises:
        TableNotFoundError: no metastore lists a table at or above `location` (the hint says
            how to create one or name its metastore).
        ConfigError: `location` lies inside a table instead of being its root, or is a URL
            no filesystem serves.
        MetastoreError: the metastore cannot be opened or read.
    """
    table = _open(location, metastore, _options(storage_options), extra_hint=None)
    assert table.definition is not None  # opened with a metastore
    check_root(table.definition, location)
    return table


def open_table_or_files(path: str, metastore: str | None = None,
                        storage_options: StorageOptions = None) -> Table:
    """The table holding `path` with its metastore; without one, the files as on disk (a
    read then warns that rows of open or aborted transactions may show).

    Args:
        path: a table root or a directory inside.
        metastore: the metastore URL the caller chose; it must list the table.
        storage_options: the table's fsspec options.

    Raises:
        TableNotFoundError: a chosen metastore does not list the table.
        FileNotFoundError: no metastore lists it and `path` is not a directory.
        MetastoreError: a metastore exists but cannot be read.
    """
    options = _options(storage_options)
    try:
        return _open(path, metastore, options, extra_hint=None)
    except TableNotFoundError:
        if metastore is not None:
            raise
        return _open(path, False, options, extra_hint=None)


def _options(storage_options: StorageOptions) -> dict[str, Any] | None:
    return dict(storage_options) if storage_options is not None else None


__all__ = ["open_table_or_files", "open_table_root"]
