"""A table location belongs to one metastore: the marker that says which, and its checks.

Two metastores listing one location hand out the same write ids twice: one commits a delta
the other then records as aborted, and its cleaner deletes committed rows. `create` writes a
hidden marker `_ingest_metastore` into the table directory (hidden: Hive and our scans skip
names starting with `_`) naming the metastore (URL without password) and a random token that
the metastore's table definition carries as property `ingest.location_token`. Writes through
a metastore whose definition lacks the token are refused; so is `create` (or `--adopt`) where
another metastore lists the location. Tables without a marker (older ones) keep working.
"""

from __future__ import annotations

import errno
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fsspec

from ingest.errors import ConfigError, IngestError
from ingest.io import storage
from ingest.txn import (
    MEMORY_URL,
    Metastore,
    TableDefinition,
    default_metastore_url,
    placed_metastore_url,
    redact_url,
)

MARKER_NAME = "_ingest_metastore"
TOKEN_PROPERTY = "ingest.location_token"


@dataclass(frozen=True)
class OwnerMarker:
    """What a table directory's marker says.

    Attributes:
        metastore: the owning metastore's URL, without password.
        table: the table's name there.
        token: the value of its definition's `ingest.location_token`.
    """

    metastore: str
    table: str
    token: str

    def encode(self) -> bytes:
        return (json.dumps({"metastore": self.metastore, "table": self.table,
                            "token": self.token}, indent=1) + "\n").encode()


def is_in_memory(url: str) -> bool:
    """An in-memory metastore belongs to one process: it owns no location on disk."""
    return url in (MEMORY_URL, "sqlite:///:memory:")


def new_token() -> str:
    return uuid.uuid4().hex


def marker_path(root: str) -> str:
    return f"{root.rstrip('/')}/{MARKER_NAME}"


def read_marker(fs: fsspec.AbstractFileSystem, root: str) -> OwnerMarker | None:
    """The marker in the table directory `root`, or None when there is none.

    Raises:
        ConfigError: the marker is not what `create` writes (edited by hand?).
    """
    path = marker_path(root)
    try:
        data = fs.cat_file(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            raise
        return None  # no such directory can exist; creating it names the problem
    try:
        fields = json.loads(data)
        return OwnerMarker(str(fields["metastore"]), str(fields["table"]), str(fields["token"]))
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(
            f"Cannot tell which metastore owns {root}: its marker {path} is not the JSON "
            "object ingest writes ({metastore, table, token})",
            hint="restore the file; `ingest create` writes it") from e


def write_marker(fs: fsspec.AbstractFileSystem, root: str, marker: OwnerMarker) -> None:
    """Write (or replace) the marker of the table directory `root`."""
    fs.pipe_file(marker_path(root), marker.encode())


def check_owner(defn: TableDefinition, store_url: str,
                storage_options: Mapping[str, Any] | None = None) -> None:
    """Refuse a write to `defn`'s location through a metastore that does not own it.

    Args:
        defn: the table.
        store_url: the metastore the write goes through.
        storage_options: the table's storage options (to read its marker).

    Raises:
        ConfigError: the location's marker names another metastore's table (both named).
    """
    fs, root = storage.url_to_fs(defn.location, storage_options)
    marker = read_marker(fs, root)
    if marker is None or defn.properties.get(TOKEN_PROPERTY) == marker.token:
        return
    raise ConfigError(
        f"Cannot write table {defn.name} at {defn.location} through metastore "
        f"{redact_url(store_url)}: the location belongs to metastore {marker.metastore} "
        f"(table {marker.table}); a location belongs to one metastore, since two would hand "
        "out the same write ids",
        hint=f"use that metastore: --metastore {marker.metastore} (or INGEST_METASTORE)")


def check_create(fs: fsspec.AbstractFileSystem, root: str, defn: TableDefinition,
                 store_url: str) -> None:
    """Refuse to create (or adopt) a table at `defn.location` in metastore `store_url` when
    another metastore owns the location: the one its marker names, while that one still
    lists it; without a marker, the metastore placed beside the location or chosen by
    `$INGEST_METASTORE`, when it lists the location.

    Raises:
        ConfigError: another metastore lists the location (both named).
    """
    marker = read_marker(fs, root)
    if marker is not None:
        if _same(marker.metastore, store_url):
            return  # the owner itself, e.g. re-created empty and adopting its data again
        others = [marker.metastore]
    else:
        others = [placed_metastore_url(defn.location), default_metastore_url(defn.location)]
    for url in dict.fromkeys(others):
        if _same(url, store_url) or is_in_memory(url):
            continue
        listed = _listed(url, defn.location)
        if listed is not None:
            raise ConfigError(
                f"Cannot create table {defn.name} at {defn.location} in metastore "
                f"{redact_url(store_url)}: metastore {redact_url(url)} already lists "
                f"{listed}; a location belongs to one metastore, since two would hand out "
                "the same write ids",
                hint=f"use that metastore (--metastore {redact_url(url)} or INGEST_METASTORE)"
                     ", or create the table at another location")


def _listed(url: str, location: str) -> str | None:
    """What metastore `url` lists at `location` ("table db.t"), or None (also when there is
    no such metastore). One that cannot be read is taken as listing it: ownership unknown."""
    if url.startswith("sqlite:///") and not os.path.isfile(url[len("sqlite://"):]):
        return None
    try:
        with Metastore.open(url, create=False, read_only=True) as store:
            found = store.find_table(location)
    except IngestError as e:
        return f"the location as far as anyone can tell (it cannot be read: {e.message})"
    return None if found is None else f"table {found.name}"


def _same(a: str, b: str) -> bool:
    """Whether two metastore URLs name one database (passwords and SQLite path spellings
    aside)."""
    return _identity(a) == _identity(b)


def _identity(url: str) -> str:
    if url.startswith("sqlite:///"):
        # sqlite:////abs (SQLAlchemy's spelling) and sqlite:///abs name one file.
        return "sqlite://" + os.path.realpath("/" + url[len("sqlite://"):].lstrip("/"))
    return redact_url(url)


__all__ = ["MARKER_NAME", "TOKEN_PROPERTY", "OwnerMarker", "check_create", "check_owner",
           "is_in_memory", "new_token", "read_marker", "write_marker"]
