"""The compactor's commit protocol for one partition (Hive's Worker with our metastore).

One copy, used by `ingest compact` (`ingest.table.maintain.compact`) and the Spark compaction job
(`ingest.spark.compact_job`): begin (a 'working' history row and an open compactor
transaction; one compaction per partition at a time) -> heartbeat while the outputs are
written and checked (`ingest.acid.compaction`) -> finish (the outputs' manifest entries, then
the row 'ready for cleaning' and the transaction committed), or forget (nothing was left to
compact), or fail (recorded, transaction aborted). Knows the metastore and the compaction's
result as a value, not how the outputs are written.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass, field
from types import TracebackType

from ingest.acid.compaction import CompactionKind, CompactionResult
from ingest.errors import IngestError
from ingest.faults import crash_point
from ingest.table.maintain.recover import DEFAULT_TXN_TIMEOUT_S
from ingest.txn import Metastore, TableDefinition, Transaction

# How often a running compaction heartbeats its transaction; a compactor silent for
# DEFAULT_TXN_TIMEOUT_S is taken for dead and the next one takes the partition over.
HEARTBEAT_INTERVAL_S = 30.0


@dataclass
class CompactorRun:
    """One partition's compaction in the metastore, from begin to its record.

    Usage (one process)::

        run = CompactorRun.begin(store, table, "dt=1", "major", agent=agent)
        with run:  # heartbeats; an exception is recorded as the compaction's failure
            result = compact_partition(..., visibility_txn_id=run.txn.txn_id)
        run.finish(result)

    Several runs may heartbeat at once (the Spark job enters each in an ExitStack and
    records each task's outcome with `finish` or `fail` after the block).

    Attributes:
        store: the metastore.
        table: the table.
        partition: relative to the table root ("" when unpartitioned).
        compaction_id: the history row.
        txn: the compactor's open transaction (its id names `_vT` outputs).
    """

    store: Metastore
    table: TableDefinition
    partition: str
    compaction_id: int
    txn: Transaction
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _beat: threading.Thread | None = field(default=None, init=False, repr=False)

    @classmethod
    def begin(cls, store: Metastore, table: TableDefinition, partition: str,
              kind: CompactionKind, *, agent: str) -> CompactorRun:
        """Record a 'working' compaction of `partition` and open its transaction; a working
        compactor silent for `DEFAULT_TXN_TIMEOUT_S`, or whose process is gone, is taken
        over (recorded failed).

        Raises:
            CommitConflictError: a live compaction of this partition is working.
            MetastoreError: the metastore failed.
        """
        cid, txn = store.begin_compaction(table, partition, kind, agent=agent,
                                          stale_after_s=DEFAULT_TXN_TIMEOUT_S,
                                          is_alive=agent_alive)
        return cls(store, table, partition, cid, txn)

    def __enter__(self) -> CompactorRun:
        """Heartbeat the transaction from a thread until the block ends."""
        self._beat = threading.Thread(target=self._beat_until_stopped,
                                      name=f"compactor-heartbeat-{self.txn.txn_id}",
                                      daemon=True)
        self._beat.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Stop heartbeating (before any record ends the transaction); record an error that
        leaves the block as the compaction's failure, and let it propagate."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if error is not None:
            self.fail(error)

    def _beat_until_stopped(self) -> None:
        while not self._stop.wait(HEARTBEAT_INTERVAL_S):
            try:
                self.store.heartbeat(self.txn)
            except IngestError:
                return  # the record at the end reports a lost transaction

    def finish(self, result: CompactionResult | None) -> None:
        """Record what the compaction wrote: the outputs' manifest entries (checked when
        they were written), then the row 'ready for cleaning' with its transaction
        committed; with no result (it only finished a crashed compaction's second rename),
        forget the row and abort the transaction.

        The commit comes only now that the output is in place: a crash before it leaves a
        'working' row whose transaction times out, and the next compaction takes over.

        Raises:
            CommitConflictError: the transaction is no longer open (it timed out and another
                compactor took over); the output stays where it is.
            MetastoreError: the metastore failed.
        """
        if result is None:
            self.store.forget_compaction(self.compaction_id, self.txn)
            return
        # The outputs' manifest entries (docs/format.md §20), then the record; a metastore
        # without a manifest (`capabilities.committed_files` False) reads files as they are.
        if self.store.capabilities.committed_files:
            self.store.record_committed_files(self.table, result.output_files)
        plan = result.plan
        self.store.finish_compaction(self.compaction_id, self.txn,
                                     highest_write_id=plan.snapshot.high_watermark,
                                     rows=result.rows, inputs=plan.inputs, outputs=plan.outputs)
        crash_point("compact.after_record")

    def fail(self, error: BaseException | str) -> None:
        """Record the compaction as failed and abort its transaction. A failure to record
        is added to `error` as a note (when it is an exception), never raised over it."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        try:
            self.store.fail_compaction(self.compaction_id, self.txn, text)
        except IngestError as record_error:
            if isinstance(error, BaseException):
                error.add_note(f"Also failed to record compaction {self.compaction_id} as "
                               f"failed: {record_error}")
                return
            raise


def agent_alive(agent: str) -> bool:
    """False only when `agent` (host:pid:...) names a process of this host that is gone."""
    host, _, rest = agent.partition(":")
    pid = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["HEARTBEAT_INTERVAL_S", "CompactorRun", "agent_alive"]
