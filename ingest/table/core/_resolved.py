"""A table as `open_table` resolved it, once: its filesystem and path, its definition, its
metastore (a URL to open again, or an open `Metastore`) and its storage options. `Table`
is one; the operations of the rooms (`write`, `maintain`, `status`) take it instead of a
(location, metastore, storage options) triple, and open only what a call needs: the
metastore for a write, the lease of a read. Holds no connection of its own between calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

import fsspec

from ingest.errors import ConfigError
from ingest.table.core._owner import check_owner
from ingest.txn import Metastore, TableDefinition, normalize_location


class ResolvedTable:
    """The resolved table (see the module docstring); made by `open_table`."""

    def __init__(self, fs: fsspec.AbstractFileSystem, path: str,
                 definition: TableDefinition | None, metastore: str | Metastore | None,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        self._fs = fs
        self._path = path
        self.definition = definition
        self._metastore = metastore
        # The table's own options, read-only: every operation gets exactly these.
        self._storage_options: Mapping[str, Any] = MappingProxyType(
            dict(storage_options or {}))

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The filesystem of the table's files, made with its storage options."""
        return self._fs

    @property
    def path(self) -> str:
        """The opened directory (the root, or a partition inside it) as `fs` names it."""
        return self._path

    @property
    def name(self) -> str:
        """`db.table` from the metastore; the directory's name without one."""
        if self.definition is not None:
            return self.definition.name
        return self._path.rsplit("/", 1)[-1]

    @property
    def location(self) -> str:
        """The URL this table was opened at (the root, or a partition inside it)."""
        return normalize_location(self._fs.unstrip_protocol(self._path))

    @property
    def has_metastore(self) -> bool:
        return self.definition is not None

    @property
    def metastore_url(self) -> str | None:
        """The URL of the metastore the table was opened with (None: opened without one)."""
        if isinstance(self._metastore, Metastore):
            return self._metastore.url
        return self._metastore

    @property
    def storage_options(self) -> dict[str, Any]:
        """A copy of the fsspec options the table's files are reached with (secrets
        included: never log them; `ingest.io.storage.redacted` hides them)."""
        return dict(self._storage_options)

    def require_metastore(self, action: str) -> TableDefinition:
        """The definition; refused when opened without a metastore.

        Raises:
            ConfigError: opened without a metastore.
        """
        if self.definition is None:
            raise ConfigError(f"Cannot {action} of {self.location}: it was opened without a "
                              "metastore", hint="open it with ingest.open_table(location) or "
                              "metastore=URL")
        return self.definition

    def require_root(self, action: str) -> TableDefinition:
        """The definition; refused when opened without a metastore or at a partition.

        Raises:
            ConfigError: opened without a metastore, or at a directory inside the table.
        """
        defn = self.require_metastore(action)
        if self.location != defn.location:
            raise ConfigError(f"Cannot {action} through {self.location}: it is a directory "
                              f"inside table {defn.name}, not its root",
                              hint=f"open the table root: ingest.open_table({defn.location!r})")
        return defn

    @contextmanager
    def to_write(self, action: str) -> Iterator[tuple[Metastore, TableDefinition]]:
        """The metastore open for writing and the table's current definition, for an
        operation that changes the table at its root; the metastore must own the location
        (`check_owner`, reading the location's marker with the table's storage options).

        Raises:
            ConfigError: opened without a metastore or at a partition; the location belongs
                to another metastore.
            TableNotFoundError: the metastore no longer lists the table.
            MetastoreError: the metastore cannot be opened or read.
        """
        defn = self.require_root(action)
        with self.store(writable=True) as store:
            # Read again, not the definition resolved at open: a write must see the columns
            # and properties as they are now (another process may have altered the table).
            current = store.get_table(defn.location)
            check_owner(current, store.url, self._storage_options)
            yield store, current

    @contextmanager
    def store(self, *, writable: bool = False) -> Iterator[Metastore]:
        """The table's metastore: the open one it was resolved with (left open), else its
        URL opened for this block, read-only unless `writable`.

        Raises:
            ConfigError: opened without a metastore.
            MetastoreError: the metastore cannot be opened.
        """
        if isinstance(self._metastore, Metastore):
            yield self._metastore
            return
        if self._metastore is None:
            raise ConfigError(f"Cannot open the metastore of {self.location}: it was opened "
                              "without one", hint="open it with ingest.open_table(location)")
        store = (Metastore.open(self._metastore, create=False) if writable else
                 Metastore.open(self._metastore, create=False, read_only=True))
        try:
            yield store
        finally:
            store.close()

    @contextmanager
    def store_or_none(self, *, writable: bool = False) -> Iterator[Metastore | None]:
        """`store`, or None when the table was opened without a metastore."""
        if self.definition is None:
            yield None
            return
        with self.store(writable=writable) as store:
            yield store

    @contextmanager
    def lease_store(self) -> Iterator[Metastore]:
        """The metastore, writable only to hold a reader's lease (`open_for_reading` never
        creates, rebuilds or upgrades one; without write access reads go unregistered)."""
        if isinstance(self._metastore, Metastore):
            yield self._metastore
            return
        assert self._metastore is not None
        with Metastore.open_for_reading(self._metastore) as store:
            yield store


__all__ = ["ResolvedTable"]
