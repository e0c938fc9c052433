"""spark-submit entry for `ingest recover`: its options (but --no-backup and --quiet; the
table's --metastore and --storage-option declared once with the other jobs'), same method,
same exit codes.

    spark-submit jobs/recover.py warehouse/events --backup-dir /tmp/ingest-backup
    spark-submit jobs/recover.py /data/events --metastore thrift://hms:9083
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from ingest.errors import ConfigError, IngestError
from ingest.io import storage
from ingest.spark import TableOptions, add_arguments
from ingest.table import open_table_or_files
from ingest.table.maintain import DEFAULT_TXN_TIMEOUT_S


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="recover.py", description=(
        "Bring a table back to a clean state after writers died, losing no committed row."))
    parser.add_argument("path")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--backup-dir")
    parser.add_argument("--txn-timeout-s", type=float, default=DEFAULT_TXN_TIMEOUT_S)
    parser.add_argument("--json", action="store_true")
    add_arguments(parser, TableOptions)  # --metastore, --storage-option
    args = parser.parse_args(argv)
    options: dict[str, object] = {}
    try:
        where = TableOptions(args.metastore, args.storage_options)
        options = where.storage
        table = open_table_or_files(args.path, where.metastore, options)
        result = table.recover(dry_run=args.dry_run, backup_dir=args.backup_dir,
                               txn_timeout_s=args.txn_timeout_s)
    except IngestError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ConfigError) else 3
    except OSError as e:
        failure = storage.describe_failure(e, args.path, options)
        if failure is None and not isinstance(
                e, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        # A missing or unreadable path is exit 3, as for `ingest recover`.
        print(f"Error: {failure or e}", file=sys.stderr)
        return 3
    report = result.report
    if args.json:
        print(json.dumps({"path": report.path, "clean": result.clean,
                          "files": [asdict(f) for f in report.files],
                          "aborted_directories": list(report.aborted_directories)}))
    else:
        for f in report.files:
            print(f"{f.action:<18} {f.old_length:>14,} {f.new_length:>14,}  {f.path}"
                  + (f"  backup: {f.backup_path}" if f.backup_path else ""))
    print(f"{len(report.files)} files, {len(report.changed)} changed, "
          f"{len(report.unrecoverable)} unrecoverable", file=sys.stderr)
    return 0 if result.clean else 1


if __name__ == "__main__":
    sys.exit(main())
