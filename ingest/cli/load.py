"""`ingest load PATH --input FILE`: insert the rows of a file into a table, in one transaction."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ingest.cli._options import METASTORE_HELP, storage_option
from ingest.cli._output import ProgressBar, dumps, progress, progress_bar
from ingest.table import open_table_root

_F = TypeVar("_F", bound=Callable[..., Any])

# Options of every command that writes to an existing table (load, delete), in --help order.
_WRITE_OPTIONS = (
    click.option("--metastore", metavar="URL", help=METASTORE_HELP),
    click.option("--json", "as_json", is_flag=True,
                 help="Print the result as one JSON document."),
    click.option("--quiet", "-q", is_flag=True,
                 help="No progress on stderr (--json implies it)."),
)


def write_options(command: _F) -> _F:
    """Add --metastore, --json and --quiet (parameters metastore, as_json, quiet)."""
    for option in reversed(_WRITE_OPTIONS):
        command = option(command)
    return command


def _after(first: ProgressBar, then: ProgressBar) -> Callable[[int, int, str], None]:
    """`then`, closing `first`'s line when `then` is first called (the bars stack)."""

    def call(done: int, total: int, item: str) -> None:
        first.close()
        then(done, total, item)

    return call if first.active else then


@click.command(
    "load",
    epilog="""\b
Examples:
  ingest load warehouse/events --input events.jsonl
  ingest load warehouse/events --input export.csv.gz --format csv --json""",
)
@click.argument("path")
@storage_option
@click.option("--input", "input_path", required=True, metavar="FILE",
              help="Rows to insert: JSON Lines, CSV (with a header) or Parquet; .gz, .bz2, "
                   ".zst, .lz4 are decompressed.")
@click.option("--format", "format_", type=click.Choice(["jsonl", "csv", "parquet"]),
              help="Input format  [default: from the file extension]")
@click.option("--missing-columns", type=click.Choice(["error", "null"]), default="error",
              show_default=True,
              help="A table column the input lacks altogether: refuse the load (error), or "
                   "load NULL into it (null; every Hive column is nullable).")
@write_options
def command(path: str, input_path: str, format_: str | None, missing_columns: str,
            metastore: str | None, as_json: bool, quiet: bool,
            storage_options: dict[str, Any]) -> None:
    """Insert every row of FILE into the table at PATH as one transaction.

    Changes the disk: writes delta_W_W_0000 directories (one per partition) and commits
    write id W in the metastore. All or nothing: if any row does not fit the table's
    columns (or a column is missing from the input, unless --missing-columns null), nothing
    is written; on any failure the files written so far are removed and
    the transaction is aborted.
    """
    progress(f"Loading {input_path} into {path}", quiet=quiet or as_json)
    started = time.monotonic()
    table = open_table_root(path, metastore, storage_options)
    # On a terminal: the bytes read (then parsing), then the rows written, with rate and ETA.
    with progress_bar("Reading", unit="bytes", quiet=quiet or as_json) as reading, \
            progress_bar("Writing", unit="rows", quiet=quiet or as_json,
                         rate_from="first-call") as writing:
        result = table.load_file(input_path, format=format_,  # type: ignore[arg-type]
                                 missing_columns=missing_columns,  # type: ignore[arg-type]
                                 on_read_progress=reading,
                                 on_progress=_after(reading, writing))
    seconds = time.monotonic() - started
    if as_json:
        click.echo(dumps({
            "table": result.table, "location": result.location, "input": input_path,
            "write_id": result.write_id, "rows": result.rows,
            "partitions": list(result.partitions), "files": list(result.files),
            "bytes": result.bytes_written, "seconds": round(seconds, 3),
        }))
    elif result.write_id is None:
        click.echo(f"{input_path} has no rows; nothing written to {result.table}.")
    else:
        where = (f" in {len(result.partitions)} partitions" if any(result.partitions) else "")
        click.echo(f"Loaded {result.rows:,} rows into {result.table} (write id "
                   f"{result.write_id}): {len(result.files)} files{where}, "
                   f"{result.bytes_written:,} bytes, {seconds:.1f} s.")
