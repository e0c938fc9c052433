"""`ingest verify PATH`: read-only consistency check of a table's metastore and files."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import click

from ingest.cli._options import SECONDS, metastore_option, storage_option
from ingest.cli._output import dumps, progress_bar
from ingest.cli.recover import Problems
from ingest.errors import MetastoreError
from ingest.table import Table, open_table, open_table_or_files
from ingest.table.maintain import DEFAULT_TXN_TIMEOUT_S, verify_table


@click.command(
    "verify",
    epilog="""\b
Examples:
  ingest verify warehouse/events
  ingest verify warehouse/events --json --shallow""",
)
@click.argument("path")
@storage_option
@metastore_option
@click.option("--txn-timeout-s", type=SECONDS, default=DEFAULT_TXN_TIMEOUT_S,
              show_default=True, help="Report open transactions silent for this long.")
@click.option("--shallow", is_flag=True, help="Read file tails only, not every stripe.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
def command(path: str, txn_timeout_s: float, shallow: bool, as_json: bool,
            quiet: bool, metastore: str | None, storage_options: dict[str, Any]) -> None:
    """Check that a table's metastore and files agree; exit 1 listing every problem.

    Read-only, metastore included. Checks: a metastore lists
    the ACID data under PATH and can be read; every committed write id has a directory; no
    directory holds a write id the metastore never allocated; no directory is named like an
    ACID one without being one; Kafka offset ranges per partition have no gaps or overlaps;
    open transactions heartbeat; every bucket file is readable up to its flush length and
    needs no recovery, files of open transactions included.
    """
    started = time.monotonic()
    table, unreadable = _open(path, metastore, storage_options)
    with progress_bar("Verifying", unit="files", quiet=quiet or as_json) as bar:
        report = verify_table(table, txn_timeout_s=txn_timeout_s, deep=not shallow,
                              unreadable_metastore=unreadable, shown_as=path,
                              on_progress=bar)
    seconds = time.monotonic() - started
    if as_json:
        click.echo(dumps({"path": report.path, "table": report.table, "ok": report.ok,
                          "problems": [asdict(p) for p in report.problems],
                          "files_checked": report.files_checked,
                          "write_ids_checked": report.write_ids_checked,
                          "notes": list(report.notes), "seconds": round(seconds, 3)}))
    else:
        for p in report.problems:
            click.echo(f"{p.kind}: {p.message}")
    if not quiet:
        for note in report.notes:
            click.echo(f"Note: {note}", err=True)
        click.echo(f"{report.files_checked} files, {report.write_ids_checked} write ids checked,"
                   f" {len(report.problems)} problems, in {seconds:.2f} s", err=True)
    if not report.ok:
        raise Problems(f"{len(report.problems)} problems found in {report.path}.")


def _open(path: str, metastore: str | None, storage_options: dict[str, Any],
          ) -> tuple[Table, MetastoreError | None]:
    """The table at PATH with its metastore; when that metastore cannot be read, its files
    alone and why: verify reports an unreadable metastore as a problem, and never repairs
    it (a read-only command does not rebuild a metastore)."""
    try:
        return open_table_or_files(path, metastore, storage_options), None
    except MetastoreError as e:
        return open_table(path, metastore=False, storage_options=storage_options), e
