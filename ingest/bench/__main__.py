"""`python -m ingest.bench NAME [options]`: run one benchmark by name."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "compact": "ingest.bench.compact",
    "day": "ingest.bench.day",
    "reader": "ingest.bench.reader",
    "recover": "ingest.bench.recover",
    "spark-read": "ingest.bench.spark_read",
    "stream": "ingest.bench.stream",
    "upsert": "ingest.bench.upsert",
    "writer": "ingest.bench.writer",
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in BENCHMARKS:
        print(f"usage: python -m ingest.bench {{{','.join(sorted(BENCHMARKS))}}} [options]",
              file=sys.stderr)
        sys.exit(2)
    importlib.import_module(BENCHMARKS[sys.argv[1]]).run(sys.argv[2:])


main()
