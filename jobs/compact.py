"""spark-submit entry: compact a Hive ACID table's partitions in parallel on executors.

  spark-submit jobs/compact.py /wh/events --minor --partition dt=2026-11-21
  spark-submit jobs/compact.py /wh/events --auto --dry-run
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from ingest.errors import ConfigError, IngestError
    from ingest.spark import TableOptions, add_arguments

    p = argparse.ArgumentParser(prog="compact", description=__doc__.splitlines()[0])
    p.add_argument("table", metavar="PATH", help="table root (path or URL)")
    kind = p.add_mutually_exclusive_group()
    for name in ("major", "minor", "auto"):
        kind.add_argument(f"--{name}", dest="kind", action="store_const", const=name,
                          help=f"{name} compaction" + (" (default)" if name == "major" else
                                                       " where the deltas call for it"
                                                       if name == "auto" else ""))
    p.add_argument("--partition", action="append", default=None, metavar="SPEC",
                   help="e.g. dt=2026-11-21; repeat for several (default: every partition)")
    p.add_argument("--dry-run", action="store_true", help="plan only; write nothing")
    add_arguments(p, TableOptions)  # --metastore, --storage-option (reaches the executors)
    p.add_argument("--master", default=None, help="default local[2] outside spark-submit")
    args = p.parse_args(argv)
    try:
        storage_options = TableOptions(args.metastore, args.storage_options).storage
    except ConfigError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    from ingest.spark import compact_on_executors, job_session
    from ingest.table import open_table_root

    spark = job_session(f"compact {args.table}", args.master)
    try:
        # Resolved once here (its metastore, then its definition and storage options).
        table = open_table_root(args.table, args.metastore, storage_options)
        done = compact_on_executors(spark, table, kind=args.kind or "major",
                                    partitions=args.partition, dry_run=args.dry_run)
    except IngestError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ConfigError) else 3
    finally:
        spark.stop()
    print(done.line(), file=sys.stderr)
    return 3 if done.failures else 0


if __name__ == "__main__":
    sys.exit(main())
