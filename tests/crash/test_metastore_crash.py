"""kill -9 inside the metastore's commit: the commit must roll back, never half-apply."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.txn import Metastore, OffsetRange, SinkProgress, TableDefinition

pytestmark = pytest.mark.crash

SCRIPT = textwrap.dedent("""
    import sys
    from ingest.txn import Metastore, OffsetRange, SinkProgress
    with Metastore.open(sys.argv[1]) as store:
        txn = store.open_transaction("default.events", agent="crash-test")
        print(txn.write_id, flush=True)
        store.commit(txn, sink=SinkProgress("s", 7), offsets=[OffsetRange("t", 0, 0, 10)])
""")


def test_kill_during_commit_leaves_the_transaction_open_and_nothing_recorded(
        tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/_ingest_metastore.sqlite"
    with Metastore.open(url) as store:
        store.create_table(TableDefinition(
            name="default.events", location=str(tmp_path / "events"),
            row_schema=pa.schema([("id", pa.int64())])))
    env = {**os.environ, "INGEST_CRASH_AT": "metastore.during_commit"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, url], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    write_id = int(done.stdout.split()[0])
    with Metastore.open(url) as store:
        assert store.write_id_states("default.events") == {write_id: "open"}
        assert store.committed_write_id("s", 7) is None
        assert store.offset_ranges("default.events") == []
        assert not store.snapshot("default.events").is_valid(write_id)
        aborted = store.abort_timed_out(0)
        assert [t.write_id for t in aborted] == [write_id]
    # The same batch can now be committed by a new transaction.
    with Metastore.open(url) as store:
        txn = store.open_transaction("default.events")
        store.commit(txn, sink=SinkProgress("s", 7), offsets=[OffsetRange("t", 0, 0, 10)])
        assert store.committed_write_id("s", 7) == txn.write_id
