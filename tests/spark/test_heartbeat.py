"""The sink's heartbeat keeps exactly its own open transactions alive."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ingest.spark.sink._heartbeat import Heartbeat
from ingest.txn import Metastore, TableDefinition


def test_beat_touches_only_this_sinks_open_transactions(tmp_path: Path) -> None:
    clock = [1000.0]
    url = f"sqlite://{tmp_path}/m.sqlite"
    with Metastore.open(url, clock=lambda: clock[0]) as store:
        store.create_table(TableDefinition("default.t", str(tmp_path / "t"),
                                           pa.schema([("id", pa.int64())])))
        ours = store.open_transaction("default.t", agent="host:1:ingest-stream:s1")
        done = store.open_transaction("default.t", agent="host:1:ingest-stream:s1")
        store.commit(done)
        theirs = store.open_transaction("default.t", agent="host:2:ingest-stream:other")
    beat = Heartbeat(url, ["default.t"], ":ingest-stream:s1")
    assert beat.beat() == 1
    with Metastore.open(url, clock=lambda: clock[0] + 400) as store:
        aborted = {t.write_id for t in store.abort_timed_out(300)}
    assert theirs.write_id in aborted and ours.write_id not in aborted
