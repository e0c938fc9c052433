"""`ingest recover PATH`: truncate bucket files to their last complete footer after a crash."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import click

from ingest.acid.recovery import FileRecovery
from ingest.cli._options import SECONDS, metastore_option, storage_option
from ingest.cli._output import dumps, progress_bar
from ingest.table import open_table_or_files
from ingest.table.maintain import DEFAULT_TXN_TIMEOUT_S, TableRecovery


def recovery_json(result: TableRecovery, seconds: float) -> dict[str, Any]:
    """The --json document (snake_case keys, stable)."""
    report = result.report
    return {
        "path": report.path,
        "table": result.table,
        "dry_run": report.dry_run,
        "clean": result.clean,
        "nothing_to_do": report.nothing_to_do,
        "files": [asdict(f) for f in report.files],
        "aborted_transactions": [{"txn_id": t, "write_id": w, "reason": r}
                                 for t, w, r in result.aborted],
        "aborted_directories": list(report.aborted_directories),
        "stray_directories": list(report.stray_directories),
        "warnings": list(report.warnings),
        "seconds": round(seconds, 3),
    }


def render_text(result: TableRecovery) -> list[str]:
    """One line per file (before / after length, action), then the aborted transactions."""
    report = result.report
    lines = [f"{'action':<18} {'before':>14} {'after':>14}  file"]
    for f in report.files:
        before = "-" if f.old_length < 0 else f"{f.old_length:,}"
        lines.append(f"{f.action:<18} {before:>14} {f.new_length:>14,}  {f.path}")
        if f.changed or f.action == "unrecoverable":
            lines.append(f"{'':<18} {f.reason}")
        if f.backup_path:
            lines.append(f"{'':<18} backup: {f.backup_path}")
    for txn_id, write_id, reason in result.aborted:
        lines.append(f"aborted transaction {txn_id} (write id {write_id}): {reason}")
    for d in report.aborted_directories:
        lines.append(f"only aborted data (for the cleaner): {d}")
    return lines


def _unrecoverable_line(f: FileRecovery) -> str:
    """The file, its length and the rows readable at its last complete footer."""
    rows = "" if f.readable_rows is None else (
        f", {f.readable_rows:,} rows readable at its last complete footer")
    return f"{f.path}: left untouched ({f.old_length:,} bytes{rows})"


class Problems(click.ClickException):
    """The command ran and the table is not clean: exit 1, "Error: ..." on stderr."""

    exit_code = 1


@click.command(
    "recover",
    epilog="""\b
Examples:
  ingest recover warehouse/events
  ingest recover warehouse/events --dry-run --json
  ingest recover warehouse/events --backup-dir /tmp/ingest-backup""",
)
@click.argument("path")
@storage_option
@metastore_option
@click.option("--dry-run", is_flag=True, help="Report what would be done; change nothing.")
@click.option("--backup-dir", metavar="DIR",
              help="Keep cut bytes, removed files and side files here.  [default: "
                   "PATH/_ingest_recovery_backup/<UTC timestamp>, created only when needed]")
@click.option("--no-backup", is_flag=True, help="Keep nothing that is cut or removed.")
@click.option("--txn-timeout-s", type=SECONDS, default=DEFAULT_TXN_TIMEOUT_S,
              show_default=True, help="Abort open transactions silent for this long.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
def command(path: str, dry_run: bool, backup_dir: str | None, no_backup: bool,
            txn_timeout_s: float, as_json: bool, quiet: bool, metastore: str | None,
            storage_options: dict[str, Any]) -> None:
    """Bring a table back to a clean state after writers died, losing no committed row.

    Changes files (unless --dry-run): aborts timed-out transactions in the metastore, cuts
    each bucket file back to its last complete flush (never below a committed transaction's
    rows), and removes side files no live writer owns; every byte removed is kept in the
    backup directory unless --no-backup. Files it cannot repair (a committed file with a
    damaged tail, stripes that do not decode) are left untouched and named. Safe to run at
    any time and twice in a row. Exit 0 when the table is clean afterwards, 1 when files
    are unrecoverable (or, with --dry-run, when there is work to do).
    """
    if no_backup and backup_dir is not None:
        raise click.UsageError("--no-backup and --backup-dir exclude each other.")
    started = time.monotonic()
    table = open_table_or_files(path, metastore, storage_options)
    with progress_bar("Recovering", unit="files", quiet=quiet or as_json) as bar:
        result = table.recover(dry_run=dry_run, backup_dir=backup_dir, backup=not no_backup,
                               txn_timeout_s=txn_timeout_s, check_data=True, on_progress=bar)
    seconds = time.monotonic() - started
    report = result.report
    if as_json:
        click.echo(dumps(recovery_json(result, seconds)))
    else:
        for line in render_text(result):
            click.echo(line)
    if not quiet:
        for warning in report.warnings:
            click.echo(f"Warning: {warning}", err=True)
        verb = "would change" if dry_run else "changed"
        click.echo(f"{len(report.files)} files, {verb} {len(report.changed)}, "
                   f"{len(report.unrecoverable)} unrecoverable, {len(result.aborted)} "
                   f"transactions aborted, in {seconds:.2f} s"
                   + ("; nothing to do" if report.nothing_to_do else ""), err=True)
    if report.unrecoverable or report.stray_directories:
        named = [f"  {_unrecoverable_line(f)}" for f in report.unrecoverable]
        named += [f"  {d}: named like an ACID directory but is not one, and readers refuse "
                  "its partition; move it away or rename it to start with '_'"
                  for d in report.stray_directories]
        raise Problems(f"{len(named)} files or directories cannot be recovered:\n"
                       + "\n".join(named) + "\nHint: restore damaged files from a backup.")
    if not result.clean:
        raise Problems(f"{len(report.changed)} files need recovery.\nHint: rerun without "
                       "--dry-run.")
