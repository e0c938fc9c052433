"""Keeps a sink's open transactions alive while micro-batches run (Hive's heartbeat thread).

Without it, a micro-batch running longer than the transaction timeout, or the unused write
ids of a transaction batch waiting for their turn, would be aborted by any recovery run
(`ingest recover`, or another stream starting on the same table).
"""

from __future__ import annotations

import logging
import threading

from ingest.errors import IngestError
from ingest.txn import Metastore, Transaction

log = logging.getLogger(__name__)


class Heartbeat:
    """A daemon thread that heartbeats every open transaction whose agent ends with `tag`."""

    def __init__(self, metastore_url: str, tables: list[str], tag: str, *,
                 interval_s: float = 60.0) -> None:
        self._url, self._tables, self._tag = metastore_url, tables, tag
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ingest-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def beat(self) -> int:
        """Heartbeat every open transaction of this sink once; returns how many."""
        count = 0
        # A connection of its own (another thread); the tables exist, so never create one.
        with Metastore.open(self._url, create=False) as store:
            for table in self._tables:
                for info in store.transactions(table, states=("open",)):
                    if not info.agent.endswith(self._tag):
                        continue
                    try:
                        store.heartbeat(Transaction(info.txn_id, info.table, info.write_id,
                                                    info.opened_at, info.agent))
                        count += 1
                    except IngestError:
                        pass  # committed or aborted since it was listed: nothing to keep alive
        return count

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - a missed beat is retried; the sink goes on
                log.warning("heartbeat of open transactions failed; retrying in %.0f s",
                            self._interval_s, exc_info=True)
