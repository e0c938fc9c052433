"""Several real processes allocating from one metastore (a SQLite file or a PostgreSQL
database) get distinct, dense ids; a reader in another process sees whole commits only."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pyarrow as pa

from ingest.txn import Metastore, TableDefinition

WORKER = textwrap.dedent(
    """
    import json, os, sys
    from ingest.txn import Metastore
    url, n = sys.argv[1], int(sys.argv[2])
    out = []
    with Metastore.open(url) as store:
        # Start barrier: all workers allocate at the same time, not one after another.
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(n):
            if i % 3 == 0:
                txns = store.allocate_write_ids("events", 2, agent=f"p{os.getpid()}")
            else:
                txns = [store.open_transaction("events", also=["dlq"])]
            for t in txns:
                out.append([t.txn_id, t.write_id, t.write_ids.get("default.dlq")])
                if t.write_id % 2:
                    store.commit(t, sink=("sink", t.txn_id))
                else:
                    store.abort(t)
    print(json.dumps(out))
    """
)


def test_processes_allocate_distinct_dense_ids(tmp_path: Path, shared_url: str) -> None:
    url = shared_url
    schema = pa.schema([("x", pa.int64())])
    with Metastore.open(url) as store:
        store.create_table(TableDefinition("events", f"{tmp_path}/events", schema))
        store.create_table(TableDefinition("dlq", f"{tmp_path}/dlq", schema))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, "12"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    results = []
    for p in procs:
        stdout, _ = p.communicate("go\n", timeout=120)
        assert p.returncode == 0
        results.extend(json.loads(stdout))
    txn_ids = sorted(r[0] for r in results)
    write_ids = sorted(r[1] for r in results)
    dlq_ids = sorted(r[2] for r in results if r[2] is not None)
    assert txn_ids == list(range(1, len(results) + 1))
    assert write_ids == list(range(1, len(results) + 1))
    assert dlq_ids == list(range(1, len(dlq_ids) + 1))
    with Metastore.open(url) as store:
        snap = store.snapshot("events")
        assert snap.high_watermark == len(results)
        assert snap.open_write_ids == ()
        assert snap.aborted_write_ids == tuple(w for w in write_ids if w % 2 == 0)


def test_threads_share_one_store(tmp_path: Path, shared_url: str) -> None:
    url = shared_url
    with Metastore.open(url) as store:
        store.create_table(
            TableDefinition("events", f"{tmp_path}/events", pa.schema([("x", pa.int64())]))
        )
        ids: list[int] = []

        def work() -> None:
            for _ in range(10):
                txn = store.open_transaction("events")
                store.heartbeat(txn)
                store.commit(txn)
                ids.append(txn.write_id)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(ids) == list(range(1, 41))
