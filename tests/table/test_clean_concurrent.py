"""Cleaning while a writer loads and registered readers read: every read returns exactly the
rows its snapshot commits, none missing, none twice, and the cleaner still gets to clean."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ingest.acid.read.reader import read_batches, read_table
from ingest.table import open_table
from ingest.table.maintain import compact
from ingest.table.write import create_table, load
from ingest.txn import Metastore, default_metastore_url

pytestmark = pytest.mark.slow

LOADS = 40
WRITER = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from ingest.table import open_table
    from ingest.table.write import load
    location, done = sys.argv[1], sys.argv[2]
    table = open_table(location)
    for i in range(1, int(sys.argv[3])):
        ids = list(range(i * 10, i * 10 + 10))
        load(table, pa.table({"id": ids, "value": [str(x) for x in ids]}))
    open(done, "w").close()
""")
CLEANER = textwrap.dedent("""
    import os, sys
    from ingest.table import open_table
    from ingest.table.maintain import clean, compact
    location, done = sys.argv[1], sys.argv[2]
    table = open_table(location)
    removed = rounds = 0
    while True:
        finished = os.path.exists(done)
        compact(table, kind="minor")
        compact(table, kind="major")
        removed += clean(table, retention_s=0).directories
        rounds += 1
        if finished:
            break
    print(removed, rounds, flush=True)
""")


def test_reads_stay_exact_while_loads_compactions_and_cleaning_run(tmp_path: Path) -> None:
    import pyarrow as pa

    location = str(tmp_path / "wh" / "events")
    create_table(location, "id BIGINT, value STRING")
    load(open_table(location),
         pa.table({"id": list(range(10)), "value": [str(x) for x in range(10)]}))
    # A base from the start: an old snapshot always finds one it may use.
    compact(open_table(location))
    done = tmp_path / "writer.done"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, location, str(done), str(LOADS)],
                              env=env, stderr=subprocess.PIPE, text=True)
    cleaner = subprocess.Popen([sys.executable, "-c", CLEANER, location, str(done)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reads = 0
    deadline = time.monotonic() + 240
    try:
        with Metastore.open(default_metastore_url(location), create=False) as store:
            while cleaner.poll() is None:
                assert time.monotonic() < deadline, "the writer or the cleaner hung"
                with store.reading(location, agent="test-reader") as snapshot:
                    # A slow reader, as `ingest cat` is: files chosen now, opened later.
                    batches = read_batches(location, snapshot)
                    time.sleep(0.05)
                    got = sorted(i for b in batches for i in b.column("id").to_pylist())
                # Load w (write id w) wrote ids 10*(w-1) .. 10*w - 1.
                expected = sorted(i for w in range(1, snapshot.high_watermark + 1)
                                  if snapshot.is_valid(w) for i in range(10 * (w - 1), 10 * w))
                assert got == expected, snapshot
                reads += 1
                time.sleep(0.05)  # gaps in which no reader is registered
        assert writer.wait(timeout=60) == 0, writer.stderr.read() if writer.stderr else ""
        out, err = cleaner.communicate(timeout=60)
        assert cleaner.returncode == 0, err
    finally:
        for p in (writer, cleaner):
            if p.poll() is None:
                p.kill()
                p.wait()
    removed, rounds = map(int, out.split())
    assert reads >= 5 and rounds >= 2 and removed > 0, (reads, rounds, removed)
    compact(open_table(location))
    with Metastore.open(default_metastore_url(location), create=False) as store:
        from ingest.table.maintain import clean

        clean(open_table(location, metastore=store), retention_s=0)
        final = sorted(read_table(location, store.snapshot(location)).column("id").to_pylist())
    assert final == list(range(10 * LOADS))
    assert [p.name for p in Path(location).iterdir()
            if not p.name.startswith(("_", "."))] == [f"base_{LOADS:07d}"]
