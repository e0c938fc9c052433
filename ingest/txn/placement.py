"""Where a table's metastore lives when nobody says, and finding it again from a path.

A local warehouse directory holds one `_ingest_metastore.sqlite` beside its tables (Hive's
readers skip names starting with `_`), so sibling tables share transactions. Remote and
`memory://` tables get a file under `$INGEST_HOME/metastores/` keyed by the parent URL;
`$INGEST_METASTORE` (e.g. a shared `postgresql://` database) overrides both.
"""

from __future__ import annotations

import hashlib
import os

from ingest.errors import ConfigError, TableNotFoundError
from ingest.txn.locations import ancestors, is_local, local_path, parent_location
from ingest.txn.metastore import Metastore
from ingest.txn.model import TableDefinition

METASTORE_FILENAME = "_ingest_metastore.sqlite"
ENV_METASTORE = "INGEST_METASTORE"
ENV_HOME = "INGEST_HOME"


def ingest_home() -> str:
    """`$INGEST_HOME`, else `~/.cache/ingest`."""
    return os.environ.get(ENV_HOME) or os.path.join(os.path.expanduser("~"), ".cache", "ingest")


def _env_metastore_url() -> str | None:
    value = os.environ.get(ENV_METASTORE)
    if not value:
        return None
    if "://" in value:
        return value
    return "sqlite://" + os.path.abspath(os.path.expanduser(value))


def default_metastore_url(table_location: str) -> str:
    """The metastore URL for a table at `table_location`.

    `$INGEST_METASTORE` (a `sqlite://` or `postgresql://` URL, or a file path) wins; it is
    the default of the CLI and of `open_table`, read here at the edge, never stored. A local
    table uses `<parent of the table root>/_ingest_metastore.sqlite`; any other uses
    `$INGEST_HOME/metastores/<sha256(parent URL)[:16]>.sqlite`.

    Args:
        table_location: the table root, a path or fsspec URL.

    Returns:
        A URL for `Metastore.open` (`sqlite://` unless $INGEST_METASTORE says otherwise).

    Raises:
        ConfigError: table_location is empty.
    """
    env = _env_metastore_url()
    if env is not None:
        return env
    return placed_metastore_url(table_location)


def placed_metastore_url(table_location: str) -> str:
    """Where the metastore of a table at `table_location` lives when nobody chose one (no
    `--metastore`/`metastore=`, no `$INGEST_METASTORE`): beside a local table's directory,
    else under `$INGEST_HOME/metastores/`. `create` looks there for another metastore
    listing the location.

    Raises:
        ConfigError: table_location is empty.
    """
    if not table_location:
        raise ConfigError("Cannot place a metastore for an empty table location")
    parent = parent_location(table_location)
    if is_local(table_location):
        return "sqlite://" + os.path.join(local_path(parent), METASTORE_FILENAME)
    digest = hashlib.sha256(parent.encode()).hexdigest()[:16]
    return "sqlite://" + os.path.join(ingest_home(), "metastores", f"{digest}.sqlite")


def find_metastore_for(path: str, *, read_only: bool = False, metastore: str | None = None,
                       ) -> tuple[Metastore, TableDefinition]:
    """Find the table containing `path` (its root or a directory inside) and its metastore.

    With `metastore`, that metastore alone: it must exist and list the table (a chosen
    metastore never falls back to another). Without, walks up from `path`: each ancestor is
    tried as a table root, in the metastore `default_metastore_url` gives for it, nearest
    first; only existing metastore files are opened. The caller closes the returned metastore.

    Args:
        path: a table root or partition directory, as a path or fsspec URL.
        read_only: open the metastores read-only (SQLite `mode=ro`, PostgreSQL read-only
            transactions), for commands that must change nothing.
        metastore: the URL a caller chose (a command's `--metastore`), or None to search.

    Returns:
        (the open metastore, the table definition).

    Raises:
        TableNotFoundError: no metastore lists a table at or above `path` (or the chosen one
            does not).
        MetastoreError: a metastore file exists but cannot be read, or is empty.
        UnsupportedFormatError: a metastore file was written by a newer ingest.
    """
    tried: list[str] = []
    searched: list[str] = []  # as messages name them (no password)
    for candidate in ancestors(path):
        url = metastore or default_metastore_url(candidate)
        if url in tried:
            continue
        file = url[len("sqlite://") :]
        # Only a metastore found by searching may be missing; a chosen one must open.
        if url.startswith("sqlite:///") and not os.path.exists(file) and metastore is None:
            continue
        tried.append(url)
        store = Metastore.open(url, create=False, read_only=read_only)
        searched.append(store.location)
        try:
            found = _table_above(store, path)
        except BaseException:
            store.close()
            raise
        if found is not None:
            return store, found
        store.close()
    if metastore is not None:
        raise TableNotFoundError(
            f"Cannot find an ingest table at or above {path} in metastore "
            f"{Metastore.redact_url(metastore)}, the one chosen for it",
            table=path, hint="give the metastore that lists the table, or the table's own "
                             "location; a chosen metastore is never replaced by another")
    where = ", ".join(searched) or "none found"
    raise TableNotFoundError(
        f"Cannot find an ingest table at or above {path}: no metastore lists one "
        f"(metastores searched: {where})",
        table=path,
        hint="run `ingest create` on the table root first, or set INGEST_METASTORE",
    )


def _table_above(store: Metastore, path: str) -> TableDefinition | None:
    """The table of `store` whose location is `path` or its nearest ancestor."""
    for candidate in ancestors(path):
        found = store.find_table(candidate)
        if found is not None:
            return found
    return None


__all__ = [
    "ENV_HOME",
    "ENV_METASTORE",
    "METASTORE_FILENAME",
    "default_metastore_url",
    "find_metastore_for",
    "ingest_home",
    "placed_metastore_url",
]
