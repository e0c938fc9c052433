"""Keeping transactions alive: a daemon thread that heartbeats a range of transactions on its
own connection every half `hive.txn.timeout`, as Hive Streaming's TransactionBatch does.

A heartbeat that fails to reach the server is retried at the next tick (the server only aborts
after a whole timeout without one); a server that answers "aborted" or "no such transaction"
ends the thread, and `check()` then raises for the writer before it commits. With several
metastore hosts (`uri` lists them all), a beat that fails moves to another host: the
connection itself for a beat cut off mid-flight (`HmsConnection.call`), else the reconnect
below, which tries the host just lost last.
"""

from __future__ import annotations

import threading
from types import TracebackType

from ingest.errors import CommitConflictError, MetastoreError
from ingest.txn.hms.thrift.connection import HmsConnection, ServerInfo, connect
from ingest.txn.hms.thrift.txns import HeartbeatResult, heartbeat


class Heartbeater:
    """Heartbeat transactions `first_txn..last_txn` until stopped.

    Use as a context manager, or call `start()` and `stop()`.

    Attributes:
        interval_s: seconds between heartbeats.
        beats: heartbeats the server acknowledged so far.
    """

    def __init__(self, uri: str, first_txn: int, last_txn: int | None = None, *,
                 interval_s: float | None = None, info: ServerInfo | None = None,
                 fresh: bool = False) -> None:
        """`info`: what another connection learnt about the server, so that opening this
        one asks it nothing (`connect`). `fresh`: the transactions were opened just now, so
        the first beat waits one interval (opening set their heartbeat time); otherwise it
        is sent at once."""
        self.uri = uri
        self._info = info
        self._fresh = fresh
        self.first_txn = first_txn
        self.last_txn = first_txn if last_txn is None else last_txn
        self._interval_s = interval_s
        self.interval_s = 0.0
        self.beats = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._lost: HeartbeatResult | None = None
        self._last_error: MetastoreError | None = None
        self._conn: HmsConnection | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeater:
        """Open the heartbeat's own connection and start beating (the first beat at once,
        unless `fresh`).

        Raises:
            MetastoreError: the metastore cannot be reached.
        """
        self._conn = connect(self.uri, info=self._info)
        self.interval_s = (self._interval_s if self._interval_s is not None
                           else self._conn.info.heartbeat_interval_s)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"hms-heartbeat-{self.first_txn}")
        self._thread.start()
        return self

    def advance(self, first_txn: int) -> None:
        """Stop heartbeating transactions below `first_txn` (they committed or aborted)."""
        with self._lock:
            self.first_txn = first_txn

    def check(self) -> None:
        """Raise if the server said a transaction of the range is gone.

        Raises:
            CommitConflictError: naming the aborted or unknown transactions.
        """
        lost = self._lost
        if lost is None:
            return
        raise CommitConflictError(
            f"Transactions of the Hive Metastore at {self.uri} are no longer open: aborted "
            f"{sorted(lost.aborted)}, unknown {sorted(lost.missing)}",
            hint="a heartbeat came too late (hive.txn.timeout) or another client aborted them; "
                 "the write must be redone in a new transaction")

    @property
    def last_error(self) -> MetastoreError | None:
        """The last failure to reach the server, if the latest heartbeat failed."""
        return self._last_error

    def stop(self) -> None:
        """Stop beating and close the connection; waits for a beat in flight."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._conn is not None:
            self._conn.close()

    def _run(self) -> None:
        if self._fresh:
            self._stop.wait(self.interval_s)
        while not self._stop.is_set():
            with self._lock:
                first, last = self.first_txn, self.last_txn
            if first <= last:
                self._beat(first, last)
                if self._lost is not None:
                    return
            self._stop.wait(self.interval_s)

    def _beat(self, first: int, last: int) -> None:
        assert self._conn is not None
        try:
            result = heartbeat(self._conn, first, last)
        except MetastoreError as e:
            # The server aborts only after a whole timeout without a heartbeat: try again at
            # the next tick, on a new connection (the failed one is out of step).
            self._last_error = e
            self._conn.close()
            try:
                self._conn = connect(self.uri, info=self._info, avoid=self._conn.uri)
            except MetastoreError as again:
                self._last_error = again
            return
        self._last_error = None
        if result.ok:
            self.beats += 1
        else:
            self._lost = result

    def __enter__(self) -> Heartbeater:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
