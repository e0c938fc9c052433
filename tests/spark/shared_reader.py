"""A reader process for tests/spark/test_shared_metastore.py: reads two tables again and again
through one metastore until told to stop, and checks every read against the metastore.

A read is consistent when it holds exactly the records of the micro-batches its snapshot calls
committed: as many rows as the Kafka offset ranges of those write ids, no id twice. Prints one
JSON line per table read: {"table", "rows", "committed_write_ids", "expected"}.

  python shared_reader.py METASTORE_URL STOP_FILE LOCATION [LOCATION ...]
"""

from __future__ import annotations

import json
import os
import sys
import time

from ingest.errors import TableNotFoundError
from ingest.table import open_table
from ingest.txn import MetastoreError


def read_once(location: str, metastore: str) -> dict[str, object]:
    table = open_table(location, metastore=metastore)
    snapshot = table.snapshot()
    ids = table.to_arrow(columns=["id"], snapshot=snapshot).column("id").to_pylist()
    committed = [c for c in table.history() if snapshot.is_valid(c.write_id)]
    expected = sum(r.until_offset - r.from_offset for c in committed for r in c.offsets)
    if len(ids) != len(set(ids)):
        raise AssertionError(f"{location}: an id appears twice in one read")
    return {"table": location, "rows": len(ids), "expected": expected,
            "committed_write_ids": len(committed)}


def main(argv: list[str]) -> int:
    metastore, stop_file, *locations = argv
    seen: set[str] = set()
    while not os.path.exists(stop_file):
        for location in locations:
            try:
                result = read_once(location, metastore)
            except (TableNotFoundError, MetastoreError):
                if location in seen:
                    raise
                continue  # the jobs have not created the metastore or this table yet
            seen.add(location)
            print(json.dumps(result), flush=True)
        time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
