"""What `run_many_stream` adds around its sink per table, besides what `StreamOperations` does
for every stream (the listener, the group commit): the lag per topic after each commit (for the
batch lines and the summary), the `ManyBatchView`s the listener logs, and the maintenance
signals of every table a micro-batch wrote (docs/many-tables.md).

Nothing here is on the data path: the lag is informational (None when the broker does not
answer in time), and maintenance only gets a signal, as for one table (docs/invariants.md 8.10).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from ingest.errors import IngestError
from ingest.io import storage
from ingest.kafka import KafkaConnection, LagProbe, PartitionLag
from ingest.spark.maintenance import StreamMaintenance
from ingest.spark.progress import ManyBatchView
from ingest.spark.sink import ManyBatchReport, dead_letter_location
from ingest.table import TableRef
from ingest.txn import Metastore, TopicPartitionKey

# The views kept for the listener, whose progress events come shortly after each commit.
RECENT_VIEWS = 1000


class TopicsLag(LagProbe):
    """The lag of the topics a stream of several tables committed: a `LagProbe` that
    learns its topics from the offsets it is asked about (a pattern's new topic too).
    Serves the batch lines and, as a `LagSource`, the metrics (one instance each: each has
    its own consumer)."""

    def __init__(self, connection: KafkaConnection, *, timeout_s: float) -> None:
        super().__init__(connection, timeout_s=timeout_s, learns_topics=True)

    def lag(self, committed: Mapping[TopicPartitionKey, int]) -> list[PartitionLag]:
        """Every partition of the committed topics with its lag (see `LagProbe.lag`); none
        before anything is committed.

        Raises:
            IngestError: the broker cannot be reached in time.
        """
        return super().lag(committed) if committed else []

    def by_topic(self, committed: Mapping[TopicPartitionKey, int]) -> dict[str, int] | None:
        """Records on the broker past `committed`, summed per topic; None when the broker
        did not answer (the lag is informational: the batch is already committed)."""
        try:
            found = self.lag(committed)
        except IngestError:
            return None
        out: dict[str, int] = {}
        for p in found:
            out[p.topic] = out.get(p.topic, 0) + p.lag_records
        return out

class ManyBatchViews:
    """Each micro-batch's `ManyBatchView` (its report and the lag per topic after it), kept for
    the listener (`__call__` by batch id) and the summary (`last_lag`), and the stream's
    committed offsets (every topic's), moved on by each commit."""

    def __init__(self, lag: TopicsLag | None,
                 committed: Mapping[TopicPartitionKey, int] | None = None) -> None:
        self._lag = lag
        self.committed: dict[TopicPartitionKey, int] = dict(committed or {})
        self._views: deque[ManyBatchView] = deque(maxlen=RECENT_VIEWS)
        self.last_lag: dict[str, int] | None = None

    def add(self, report: ManyBatchReport) -> ManyBatchView:
        """After the sink's commit (or skip) of `report`'s micro-batch."""
        for r in report.offsets:
            key = (r.topic, r.partition)
            self.committed[key] = max(self.committed.get(key, 0), r.until_offset)
        lag = None
        if self._lag is not None and not report.skipped:
            lag = self._lag.by_topic(self.committed)
            if lag is not None:
                self.last_lag = lag
        view = ManyBatchView(report, lag)
        self._views.append(view)
        return view

    def __call__(self, batch_id: int) -> ManyBatchView | None:
        return next((v for v in reversed(list(self._views)) if v.batch_id == batch_id), None)

    def close(self) -> None:
        if self._lag is not None:
            self._lag.close()


class TableMaintenanceSignals:
    """Signals the stream's maintenance thread after each commit: every table the micro-batch
    wrote (its partition directories) and its dead-letter table, and the anchor (its records
    routed nowhere). A table's location is read from the metastore once, by name, the first
    time the stream writes it in this run."""

    def __init__(self, maintenance: StreamMaintenance, anchor: TableRef) -> None:
        assert anchor.metastore is not None
        self.maintenance, self.anchor = maintenance, anchor
        self._refs: dict[str, tuple[TableRef, TableRef]] = {}

    def _refs_of(self, name: str) -> tuple[TableRef, TableRef]:
        refs = self._refs.get(name)
        if refs is None:
            url = self.anchor.metastore
            assert url is not None
            with Metastore.open(url, create=False) as store:
                location = store.get_table(name).location
            options = self.anchor.storage_options
            refs = (TableRef(location, url, options),
                    TableRef(dead_letter_location(location), url, options))
            self._refs[name] = refs
        return refs

    def committed(self, report: ManyBatchReport) -> None:
        """Signal the tables `report`'s micro-batch committed (nothing for a replay)."""
        if report.skipped:
            return
        for name, one in sorted(report.tables.items()):
            table, dead = self._refs_of(name)
            self.maintenance.committed(table, one.partition_dirs)
            self.maintenance.committed(dead, one.dead_letter_dirs)
        root = storage.url_to_fs(self.anchor.location, self.anchor.storage_options)[1]
        self.maintenance.committed(self.anchor, [root] if report.unrouted_records else [])


__all__ = ["ManyBatchViews", "TableMaintenanceSignals", "TopicsLag"]
