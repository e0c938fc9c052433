"""Executor side of a "hive-acid" read's lease: a task renews it while it reads.

A batch read is planned in a short-lived Python process on the driver that ends before its
tasks run, and Spark's Python data source API tells no Python code when the query ends, so
the planner leaves its lease registered and every task renews it: once when it starts (if the
planner's renewal is older than one heartbeat) and every heartbeat while it reads. When no task
reads any more, the lease lapses after the transaction time-out (docs/invariants.md, 7).
Renewing never decides what is read: a task reads exactly its planned files, and one the
cleaner removed fails the task naming it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ingest.errors import IngestError
from ingest.spark.source._plan import Lease
from ingest.txn import Metastore

log = logging.getLogger(__name__)


@contextmanager
def renewing(lease: Lease | None) -> Iterator[None]:
    """Keep `lease` renewed while the block runs (nothing when None).

    A renewal that fails (the metastore cannot be reached or written from this executor) or
    finds the lease gone is logged, never raised: the read stays exact either way.
    """
    if lease is None:
        yield
        return
    renewer = _Renewer(lease)
    if time.time() - lease.taken_at >= lease.heartbeat_s:
        renewer.renew()  # before any file is opened: the planner's renewal is getting old
    stop = threading.Event()
    beat = threading.Thread(target=renewer.every, args=(stop,), daemon=True,
                            name="ingest-spark-read-lease")
    beat.start()
    try:
        yield
    finally:
        stop.set()
        beat.join()
        renewer.close()


class _Renewer:
    """Renews one lease through a metastore connection opened on first use."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.store: Metastore | None = None
        self.warned = False

    def every(self, stop: threading.Event) -> None:
        while not stop.wait(self.lease.heartbeat_s):
            self.renew()

    def renew(self) -> None:
        try:
            if self.store is None:
                self.store = Metastore.open(self.lease.metastore, create=False)
            if self.store.heartbeat_reader(self.lease.reader_id) or self.warned:
                return
            self.warned = True
            log.warning("the lease %d of this hive-acid read has lapsed (the query was planned "
                        "more than the transaction time-out ago); a file the cleaner removed "
                        "since fails the read, load() the table again to read its current "
                        "snapshot", self.lease.reader_id)
        except IngestError:
            log.warning("could not renew the lease %d of this hive-acid read; the cleaner "
                        "keeps its files until the transaction time-out after the last "
                        "renewal", self.lease.reader_id, exc_info=True)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


__all__ = ["renewing"]
