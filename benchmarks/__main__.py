"""`python -m benchmarks NAME [options]`: run one benchmark by name."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "compact": "benchmarks.compact",
    "day": "benchmarks.day",
    "reader": "benchmarks.reader",
    "recover": "benchmarks.recover",
    "spark-read": "benchmarks.spark_read",
    "stream": "benchmarks.stream",
    "upsert": "benchmarks.upsert",
    "writer": "benchmarks.writer",
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in BENCHMARKS:
        print(f"usage: python -m benchmarks {{{','.join(sorted(BENCHMARKS))}}} [options]",
              file=sys.stderr)
        sys.exit(2)
    importlib.import_module(BENCHMARKS[sys.argv[1]]).run(sys.argv[2:])


main()
