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
    name, argv = sys.argv[1], sys.argv[2:]
    if name == "stream" and any(a == "--topics" or a.startswith("--topics=") for a in argv):
        # N topics into N tables against one table: a benchmark of its own, built on
        # stream's broker and topics (so stream cannot be the one to call it)
        importlib.import_module("ingest.bench.stream_topics").run(argv)
        return
    importlib.import_module(BENCHMARKS[name]).run(argv)


main()
