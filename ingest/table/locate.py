"""The table holding a path, for commands that only look: with the metastore that lists it,
or, when none does and none was chosen (`--metastore`, passed as a value), its files as they
are on disk.

One rule for `ingest status` and `ingest cat`; metastores are opened read-only
(docs/invariants.md, 7).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from ingest.errors import TableNotFoundError
from ingest.table._open import StorageOptions
from ingest.table.api import Table, open_table
from ingest.txn import Metastore, TableDefinition, ancestors, find_metastore_for, redact_url


@contextmanager
def metastore_if_any(path: str, metastore: str | Metastore | Literal[False] | None = None,
                     ) -> Iterator[tuple[Metastore | None, TableDefinition | None]]:
    """The read-only metastore listing the table at or above `path` and the table, or
    (None, None) when no metastore lists it; the metastore is closed on exit.

    Args:
        path: a table root or a directory inside.
        metastore: the metastore URL the caller chose (a command's `--metastore`), or an
            open one (used as it is, left open); None: `$INGEST_METASTORE`, else the one
            beside the table; False: none, (None, None).

    Raises:
        TableNotFoundError: a chosen metastore does not list the table (no fallback then).
        MetastoreError: a metastore file exists but cannot be read, or is empty.
    """
    if metastore is False:
        yield None, None
        return
    if isinstance(metastore, Metastore):
        yield metastore, _table_above(metastore, path)
        return
    try:
        store, table = find_metastore_for(path, read_only=True, metastore=metastore)
    except TableNotFoundError:
        if metastore is not None:
            raise
        yield None, None
        return
    try:
        yield store, table
    finally:
        store.close()


def _table_above(store: Metastore, path: str) -> TableDefinition:
    """The table of `store` at or above `path`.

    Raises:
        TableNotFoundError: `store` lists none.
    """
    for candidate in ancestors(path):
        found = store.find_table(candidate)
        if found is not None:
            return found
    raise TableNotFoundError(f"Cannot find a table at or above {path} in metastore "
                             f"{redact_url(store.url)}", table=path)


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
    options = dict(storage_options) if storage_options is not None else None
    try:
        return open_table(path, metastore=metastore, storage_options=options)
    except TableNotFoundError:
        if metastore is not None:
            raise
        return open_table(path, metastore=False, storage_options=options)


__all__ = ["metastore_if_any", "open_table_or_files"]
