"""Write a small ACID table through BucketWriter and the metastore, dying at a crash point.

Run as `python writer_script.py TABLE_DIR MODE CRASH_TXN [COMPRESSION]`; MODE is `batch` (one
delta_1_N directory, the file reopened for each transaction, like Hive Streaming) or `single`
(one delta_i_i_0000 directory per transaction). INGEST_CRASH_AT from the environment is armed
only from transaction CRASH_TXN (1-based) on, so earlier transactions commit normally.
Transaction i writes ids [100*i, 100*i + 40) in two flushes of 20 rows.
"""

from __future__ import annotations

import os
import sys

import pyarrow as pa

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.names import format_delta
from ingest.faults import ENV_VAR
from ingest.txn import Metastore, TableDefinition, default_metastore_url

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])
TXNS = 3


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "value": [f"v{i}" for i in range(start, start + n)]}, schema=SCHEMA)


def main() -> None:
    root, mode, crash_txn = sys.argv[1], sys.argv[2], int(sys.argv[3])
    compression = sys.argv[4] if len(sys.argv) > 4 else "zstd"
    armed = os.environ.pop(ENV_VAR, "")
    store = Metastore.open(default_metastore_url(root))
    table = store.create_table(TableDefinition("default.crash", root, SCHEMA))
    txns = store.allocate_write_ids(table.name, TXNS, agent="crash-test")
    for i, txn in enumerate(txns, start=1):
        if i == crash_txn and armed:
            os.environ[ENV_VAR] = armed
        if mode == "batch":
            name = format_delta(txns[0].write_id, txns[-1].write_id, None)
            path = f"{root}/{name}/bucket_00000"
        else:
            path = f"{root}/{format_delta(txn.write_id, txn.write_id, 0)}/bucket_00000"
        if os.path.exists(path):
            w = BucketWriter.open_append(path, BucketFileOptions(write_id=txn.write_id))
        else:
            w = BucketWriter.create(path, BucketFileOptions(write_id=txn.write_id,
                                                            row_schema=SCHEMA,
                                                            compression=compression))
        for half in range(2):
            w.write(rows(100 * i + 20 * half, 20))
            w.flush()
        store.commit(txn)
        if mode == "batch" and i < TXNS:
            w.abandon()  # keep the side file: the next transaction reopens the file
        else:
            w.close()
    store.close()


if __name__ == "__main__":
    main()
