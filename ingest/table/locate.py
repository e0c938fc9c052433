"""The table holding a path, for commands that only look: with the metastore that lists it,
or, when none does and none was chosen (`--metastore`, `$INGEST_METASTORE`), its files as
they are on disk.

One rule for `ingest status` and `ingest cat`; metastores are opened read-only
(docs/invariants.md, 7).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ingest.errors import TableNotFoundError
from ingest.table.api import Table, open_table
from ingest.txn import Metastore, TableDefinition, chosen_metastore, find_metastore_for


@contextmanager
def metastore_if_any(path: str) -> Iterator[tuple[Metastore | None, TableDefinition | None]]:
    """The read-only metastore listing the table at or above `path` and the table, or
    (None, None) when no metastore lists it; the metastore is closed on exit.

    Raises:
        TableNotFoundError: a chosen metastore does not list the table (no fallback then).
        MetastoreError: a metastore file exists but cannot be read, or is empty.
    """
    try:
        store, table = find_metastore_for(path, read_only=True)
    except TableNotFoundError:
        if chosen_metastore() is not None:
            raise
        yield None, None
        return
    try:
        yield store, table
    finally:
        store.close()


def open_table_or_files(path: str) -> Table:
    """The table holding `path` with its metastore; without one, the files as on disk (a
    read then warns that rows of open or aborted transactions may show).

    Raises:
        TableNotFoundError: a chosen metastore does not list the table.
        FileNotFoundError: no metastore lists it and `path` is not a directory.
        MetastoreError: a metastore exists but cannot be read.
    """
    try:
        return open_table(path)
    except TableNotFoundError:
        if chosen_metastore() is not None:
            raise
        return open_table(path, metastore=False)


__all__ = ["metastore_if_any", "open_table_or_files"]
