"""`ingest clean PATH [--retention SECONDS] [--partition dt=...] [--dry-run]`: remove obsolete
and aborted directories no reader can use any more."""

from __future__ import annotations

import time
from typing import Any

import click

from ingest.cli._options import SECONDS, storage_option
from ingest.cli._output import dumps, progress, progress_bar
from ingest.cli.load import write_options
from ingest.table import open_table_root
from ingest.table.maintain import DEFAULT_TXN_TIMEOUT_S, CleanReport, PartitionClean


@click.command(
    "clean",
    epilog="""\b
Examples:
  ingest clean warehouse/events --dry-run
  ingest clean warehouse/events --partition dt=2026-01-01 --retention 0 --json""",
)
@click.argument("path")
@storage_option
@click.option("--retention", "retention_s", type=SECONDS, metavar="SECONDS",
              help="Keep what became obsolete less than this long ago, for readers that do "
                   "not register in the metastore (Hive, Spark reading the files).  "
                   "[default: the table property ingest.cleaner.retention.seconds, else 300]")
@click.option("--partition", "partitions", multiple=True, metavar="COL=VALUE",
              help="Clean only this partition (a=1/b=2 for several levels); repeatable. "
                   "Default: every partition.")
@click.option("--dry-run", is_flag=True,
              help="Only show what would be removed and what must stay; remove nothing.")
@click.option("--txn-timeout-s", type=SECONDS, default=DEFAULT_TXN_TIMEOUT_S,
              show_default=True,
              help="A registered reader whose last heartbeat is older counts as dead.")
@write_options
def command(path: str, retention_s: float | None, partitions: tuple[str, ...], dry_run: bool,
            txn_timeout_s: float, metastore: str | None, as_json: bool, quiet: bool,
            storage_options: dict[str, Any]) -> None:
    """Remove directories no reader of the table at PATH can use any more.

    Changes the disk unless --dry-run: deletes, file by file, the directories a compaction
    made obsolete (hidden by a newer base or a wider delta), directories whose write ids
    all aborted, and hidden leftovers of crashed compactions. An obsolete directory stays
    while a reader registered in the metastore (`ingest cat`, the streaming job) may still
    use it, and for the retention time; a directory with a side file (an open transaction
    batch) always stays. Never removes a row any snapshot can see. Prints one line per
    partition and a summary.
    """
    progress(f"{'Planning the cleaning of' if dry_run else 'Cleaning'} {path}",
             quiet=quiet or as_json)
    started = time.monotonic()

    table = open_table_root(path, metastore, storage_options)
    with progress_bar("Cleaning", unit="partitions", quiet=quiet or as_json) as bar:

        def show(p: PartitionClean) -> None:  # a line per partition when no bar is drawn
            progress(_line(p, dry_run=dry_run), quiet=quiet or as_json or bar.active)

        report = table.clean(retention_s=retention_s, dry_run=dry_run,
                             partitions=list(partitions) or None, txn_timeout_s=txn_timeout_s,
                             on_partition=show, on_progress=bar)
    seconds = time.monotonic() - started
    if as_json:
        click.echo(dumps(_as_dict(report, seconds)))
        return
    for p in report.partitions:
        for r in p.removed:
            why = f"hidden by {r.covered_by}" if r.covered_by else r.kind
            click.echo(f"{'would remove' if dry_run else 'removed'} {_where(p)}/{r.name} "
                       f"({why}): {r.files} files, {r.size_bytes:,} bytes")
        for k in p.kept:
            click.echo(f"kept {_where(p)}/{k.name}: {k.reason}")
    done = "would be removed (dry run: nothing removed)" if dry_run else "removed"
    click.echo(f"{report.directories} directories, {report.files} files, "
               f"{report.size_bytes:,} bytes {done} in {len(report.partitions)} partitions of "
               f"{report.table} ({sum(len(p.kept) for p in report.partitions)} kept, "
               f"retention {report.retention_s:g} s, {report.live_readers} live readers, "
               f"{seconds:.2f} s).")


def _where(p: PartitionClean) -> str:
    return p.partition or "(table)"


def _line(p: PartitionClean, *, dry_run: bool) -> str:
    verb = "would remove" if dry_run else "removed"
    return (f"{_where(p)}: {verb} {len(p.removed)} directories, {p.files} files, "
            f"{p.size_bytes:,} bytes; {len(p.kept)} kept")


def _as_dict(report: CleanReport, seconds: float) -> dict[str, object]:
    return {
        "table": report.table, "location": report.location, "dry_run": report.dry_run,
        "retention_s": report.retention_s, "snapshot": report.snapshot,
        "live_readers": report.live_readers, "directories": report.directories,
        "files": report.files, "bytes": report.size_bytes,
        "compactions_cleaned": list(report.compactions_cleaned),
        "seconds": round(seconds, 3),
        "partitions": [{
            "partition": p.partition, "directories": len(p.removed), "files": p.files,
            "bytes": p.size_bytes,
            "removed": [{"name": r.name, "kind": r.kind, "covered_by": r.covered_by,
                         "files": r.files, "bytes": r.size_bytes} for r in p.removed],
            "kept": [{"name": k.name, "reason": k.reason} for k in p.kept],
        } for p in report.partitions],
    }
