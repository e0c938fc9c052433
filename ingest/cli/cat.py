"""`ingest cat PATH`: the rows a snapshot of an ACID table sees, as JSON lines.

Reads through the Python API (`ingest.open_table`); also holds the snapshot choice and the
warning display that `ingest status` shares.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import click

from ingest.acid import ValidWriteIdList
from ingest.cli._options import metastore_option, storage_option
from ingest.cli._output import dumps, rows
from ingest.errors import TableNotFoundError
from ingest.table import Table, check_snapshot_table, open_table
from ingest.txn import Metastore, TableDefinition, chosen_metastore, find_metastore_for


@dataclass(frozen=True)
class SnapshotChoice:
    """The snapshot a command reads with and where it came from."""

    snapshot: ValidWriteIdList | str | None
    source: str  # "option", "metastore" or "directories"
    table: TableDefinition | None = None


@contextmanager
def table_snapshot(path: str, option: str | None) -> Iterator[tuple[SnapshotChoice,
                                                                    Metastore | None]]:
    """--snapshot if given, else the metastore's current snapshot of the table holding `path`,
    else None (every write id on disk counts as committed). Yields the open metastore too,
    opened read-only: reading commands never create or change one (docs/invariants.md, 7).

    Raises:
        MetastoreError: a metastore file exists but cannot be read, or is empty.
        ConfigError: the --snapshot names another table.
    """
    store: Metastore | None = None
    table: TableDefinition | None = None
    try:
        store, table = find_metastore_for(path, read_only=True)
    except TableNotFoundError:
        if chosen_metastore() is not None:  # --metastore named one: no fallback
            raise
    try:
        if option is not None:
            if table is not None:
                check_snapshot_table(option, table.name, where=f"table {table.name}")
            yield SnapshotChoice(option, "option", table), store
        elif store is not None and table is not None:
            yield SnapshotChoice(store.snapshot(table.name), "metastore", table), store
        else:
            yield SnapshotChoice(None, "directories"), None
    finally:
        if store is not None:
            store.close()


@contextmanager
def warnings_to_stderr() -> Iterator[None]:
    """Show the reader's warnings (e.g. reading without a snapshot) as lines on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:
                click.echo(f"Warning: {w.message}", err=True)


@contextmanager
def warnings_as_they_come() -> Iterator[None]:
    """Show warnings as lines on stderr the moment they are raised (the reader raises them
    while rows stream: before the first row for a read without a snapshot)."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _echo_warning
        yield


def _echo_warning(message: Warning | str, *args: object, **kwargs: object) -> None:
    click.echo(f"Warning: {message}", err=True)


def _open(path: str) -> Table:
    """The table holding `path` with its metastore; without one, the files as on disk (the
    read then warns that rows of open or aborted transactions may show)."""
    try:
        return open_table(path)
    except TableNotFoundError:
        if chosen_metastore() is not None:
            raise
        return open_table(path, metastore=False)


@click.command(
    "cat",
    epilog="""\b
Examples:
  ingest cat warehouse/events --limit 10
  ingest cat warehouse/events/dt=2026-11-21 --row-id --snapshot "default.events:20:15:15,18:16\"""",
)
@click.argument("path")
@storage_option
@metastore_option
@click.option("--snapshot", metavar="DB.T:HWM:MINOPEN:OPEN:ABORTED",
              help="Read as of this valid write-id list (Hive's string form). Default: the "
                   "table's current snapshot from its metastore; without a metastore, every "
                   "write id on disk counts as committed (with a warning).")
@click.option("--columns", metavar="A,B", help="Only these row or partition columns, in order.")
@click.option("--row-id", "row_id", is_flag=True,
              help="Add Hive's ROW__ID as `row__id` {writeid, bucketid, rowid}.")
@click.option("--limit", type=click.IntRange(min=0), metavar="N", help="Stop after N rows.")
@click.option("--json", "as_json", is_flag=True,
              help="Errors as JSON on stderr (rows are always JSON lines).")
def command(path: str, snapshot: str | None, columns: str | None, row_id: bool,
            limit: int | None, as_json: bool) -> None:
    """Print every row a snapshot of an ACID table sees, one JSON object per line.

    Changes no table: the snapshot is registered in the metastore while rows are read, so
    `ingest clean` keeps what they come from, and unregistered at the end. PATH is a table
    root, one partition directory, or an unpartitioned table holding base_/delta_ directories.
    Partition columns come last, as strings. Rows of aborted or open transactions, rows past
    a bucket file's last flush length and deleted rows are left out, as Hive's readers do.
    """
    names = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    table = _open(path)
    with warnings_as_they_come():
        for batch in table.to_batches(names, snapshot=snapshot, limit=limit,
                                      with_row_id=row_id):
            for row in rows(batch):
                click.echo(dumps(row))
