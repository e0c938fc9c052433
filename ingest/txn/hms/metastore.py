"""`HiveMetastore`: the `Metastore` behind `thrift://host:port`, kept in a Hive Metastore (Hive
4.x, 3.1) so that Hive, Trino and Spark see our tables and our commits.

Transactions follow Hive Streaming v2: `open_txns`, `allocate_table_write_ids`, one lock
request (SHARED_READ for INSERT on every table written), heartbeats on a connection of their
own at half `hive.txn.timeout`, then the written partitions added (`add_partitions`,
`add_dynamic_partitions`) and `commit_txn`, or `abort_txn`. Compactions: Hive 4's compaction
queue, or a table parameter on Hive 3 (`ingest.txn.hms.compactions`); the cleaner waits for
the open transactions and the locks held outside one (`live_readers`). A streaming sink's
progress (micro-batch id, Kafka offset ranges) and the committed-file manifest are rows of
hidden side tables written in the same HMS transaction as the data (`progress.py`,
`manifest.py`, docs/invariants.md, 8.11). A reader's lease is a read transaction holding a
SHARED_READ lock (`leases.py`).

A connection the server dropped (it was restarted, or stopped) is replaced by a new one at
the next call, retried for up to `RECONNECT_S`; reads that failed on it are retried once.

The class is put together from one mixin per job: the connection and lookups (`_base.py`),
tables (`_table_ops.py`), write transactions and their commit (`_commit.py`), sink progress
(`_progress_ops.py`), the manifest outside a commit (`_manifest_ops.py`), snapshots and leases
(`_read_ops.py`) and compactions (`_compaction_ops.py`).
"""

from __future__ import annotations

from ingest.txn.hms._base import RECONNECT_S
from ingest.txn.hms._commit import TRANSACTION_BATCHES_REFUSED, Commits
from ingest.txn.hms._compaction_ops import CompactionOps
from ingest.txn.hms._read_ops import ReadOps
from ingest.txn.hms._table_ops import TableOps


class HiveMetastore(TableOps, Commits, ReadOps, CompactionOps):
    """A `Metastore` in a Hive Metastore reached over Thrift; see `Metastore` for the contract.

    One connection serves the object's calls (one at a time: it may be shared by threads);
    each open transaction is heartbeated by a `Heartbeater` on a connection of its own (the
    server's version and timeout reused from this one's, so it costs no calls to open).

    Attributes:
        server_version: what the server says it is ("4.0.1"; Hive 3.1 says "3.0").
    """

    keeps_sink_progress = True
    refuses_transaction_batches = TRANSACTION_BATCHES_REFUSED


__all__ = ["RECONNECT_S", "HiveMetastore"]
