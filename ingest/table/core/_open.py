"""Find a table and the metastore that holds it, for `open_table` (`locate_table`, the one
place that searches, and `find_table`) and `create_table` (`open_store`).

A caller names a table by its location and, optionally, a metastore (a URL, an open
`Metastore`, or None for the one `ingest.txn.find_metastore_for` finds); the operations then
take the table `open_table` resolved (`_resolved`). Knows the metastore's public interface,
not ORC bytes.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import fsspec

from ingest.errors import ConfigError, TableNotFoundError
from ingest.io import storage
from ingest.txn import (
    Metastore,
    TableDefinition,
    ancestors,
    default_metastore_url,
    find_metastore_for,
    normalize_location,
    redact_url,
)

MetastoreRef = str | Metastore | None
"""A metastore URL, an open Metastore (left open), or None for the table's default one."""

StorageOptions = Mapping[str, Any] | None
"""The fsspec options of a table's files (endpoint, credentials, ...), given by the caller
with the table; None: fsspec's own config and environment alone."""


@contextmanager
def open_store(metastore: MetastoreRef, location: str, *, create: bool) -> Iterator[Metastore]:
    """The metastore `metastore` names (the table's default one when None); closed on exit
    unless the caller passed it open."""
    if isinstance(metastore, Metastore):
        yield metastore
        return
    store = Metastore.open(metastore or default_metastore_url(location), create=create)
    try:
        yield store
    finally:
        store.close()


def locate_table(path: str, metastore: str | None = None, *, read_only: bool = True,
                 ) -> tuple[Metastore, TableDefinition]:
    """The metastore listing the table at or above `path`, open (the caller closes it), and
    the table: the one place that searches for a table's metastore.

    Args:
        path: a table root or a directory inside.
        metastore: the metastore URL the caller chose (a command's `--metastore`), which must
            list the table: no search, no fallback; None: `$INGEST_METASTORE`, else the one
            beside the table (`ingest.txn.find_metastore_for`).
        read_only: open it for reading only.

    Raises:
        TableNotFoundError: no metastore (or not the chosen one) lists a table there.
        MetastoreError: a metastore cannot be opened or read.
    """
    return find_metastore_for(path, read_only=read_only, metastore=metastore)


def find_table(store: Metastore, location: str, hint: str | None) -> TableDefinition:
    """The table of `store` at or above `location`.

    Raises:
        TableNotFoundError: `store` lists no table there (with `hint`, what else to try).
    """
    for candidate in ancestors(location):
        found = store.find_table(candidate)
        if found is not None:
            return found
    raise TableNotFoundError(
        f"Cannot find a table at or above {location} in metastore {redact_url(store.url)}",
        table=location, hint=hint)


def check_root(defn: TableDefinition, location: str) -> None:
    """Refuse a location inside the table instead of its root.

    Raises:
        ConfigError: `location` is not `defn`'s root.
    """
    if defn.location != normalize_location(location):
        raise ConfigError(
            f"{location} is inside table {defn.name}, not its root {defn.location}",
            hint=f"give the table root: {defn.location}")


def table_fs(defn: TableDefinition, storage_options: StorageOptions = None,
             ) -> tuple[fsspec.AbstractFileSystem, str]:
    """The table's filesystem, made with the table's `storage_options`, and its root path on
    it (no trailing slash)."""
    fs, root = storage.url_to_fs(defn.location, storage_options)
    return fs, str(root).rstrip("/")


def agent_name(what: str) -> str:
    """The agent a transaction records by default: host:pid:ingest-<what>."""
    return f"{socket.gethostname()}:{os.getpid()}:ingest-{what}"
