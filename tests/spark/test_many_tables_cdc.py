"""`ingest stream --mode cdc` of several tables (docs/many-tables.md): one topic of Debezium
envelopes of three source tables, routed by `source.table` into a table each, each keyed by
its own `--route-key` columns; inserts, updates and deletes interleaved over several
micro-batches end equal to a model of each source table, and a second run (a restart, more
events) keeps them equal, no event applied twice. A fourth source table with no key routes
nowhere, with the reason, in the stream's table of records routed nowhere. Run as
`python -m ingest stream` against a real Apache Kafka broker into SQLite-metastore tables."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from support import job_env

from ingest.acid.read.reader import read_table
from ingest.txn import Metastore, default_metastore_url

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")

SCHEMA = "id BIGINT, code STRING, n BIGINT, name STRING"
KEYS = {"customers": ("id",), "products": ("code",), "order_lines": ("id", "n")}
Key = tuple[Any, ...]


class Source:
    """The three source tables (a dict by key each) and the Debezium events that made them,
    drawn at random: inserts, updates and deletes of keys interleaved across the tables."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.tables: dict[str, dict[Key, dict[str, Any]]] = {t: {} for t in KEYS}
        self.serial = 0

    def _row(self, table: str, key: Key | None = None) -> dict[str, Any]:
        self.serial += 1
        row = {"id": self.serial, "code": f"c{self.serial}", "n": self.serial % 4,
               "name": f"{table}-{self.serial}"}
        if key is not None:  # an update keeps the key columns
            row.update(zip(KEYS[table], key, strict=True))
        return row

    def events(self, count: int, *, op_first: str = "c") -> list[tuple[str, Key, dict]]:
        out = []
        for _ in range(count):
            table = self.rng.choice(list(KEYS))
            rows = self.tables[table]
            draw = self.rng.random()
            if not rows or draw < 0.45:
                after = self._row(table)
                key = tuple(after[c] for c in KEYS[table])
                rows[key] = after
                out.append((table, key, self._envelope(table, op_first, None, after)))
            elif draw < 0.8:
                key = self.rng.choice(sorted(rows))
                before, after = rows[key], self._row(table, key)
                rows[key] = after
                out.append((table, key, self._envelope(table, "u", before, after)))
            else:
                key = self.rng.choice(sorted(rows))
                before = rows.pop(key)
                out.append((table, key, self._envelope(table, "d", before, None)))
        return out

    @staticmethod
    def _envelope(table: str, op: str, before: dict | None, after: dict | None) -> dict:
        return {"before": before, "after": after, "op": op, "ts_ms": 0,
                "source": {"connector": "postgresql", "schema": "public", "table": table}}


def _produce(kafka: ApacheKafka, topic: str, events: list[tuple[str, Key, dict]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({**kafka.client_config(), "linger.ms": 0})
    for table, key, envelope in events:
        # Keyed by source table and key, as Debezium's: one key's events keep their order.
        producer.produce(topic, key=json.dumps([table, *key]).encode(),
                         value=json.dumps(envelope).encode())
    assert producer.flush(30) == 0


def _rows(location: str, table: str) -> dict[Key, dict[str, Any]]:
    with Metastore.open(default_metastore_url(location)) as store:
        rows = read_table(location, store.snapshot(location)).to_pylist()
    by_key = {tuple(r[c] for c in KEYS[table]): r for r in rows}
    assert len(by_key) == len(rows), f"{table}: a key held twice"
    return by_key


def _stream(kafka: ApacheKafka, topic: str, warehouse: Path, checkpoint: Path
            ) -> subprocess.CompletedProcess[str]:
    keys = [f"{t}={','.join(cols)}" for t, cols in KEYS.items()]
    return subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", kafka.plaintext,
         "--topic", topic, "--route-field", "source.table",
         "--table-template", f"{warehouse}/{{field}}",
         "--unrouted-table", str(warehouse / "_unrouted"), "--schema", SCHEMA,
         "--mode", "cdc", *[a for k in keys for a in ("--route-key", k)], "--buckets", "2",
         "--checkpoint", str(checkpoint), "--starting-offsets", "earliest", "--available-now",
         "--max-offsets-per-trigger", "50", "--compact", "off", "--clean", "off", "--json",
         "--quiet"],
        env=job_env(), capture_output=True, text=True, timeout=900, cwd=ROOT)


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_cdc_of_three_source_tables_routed_by_field_ends_equal_to_their_model(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    topic = f"dbz{uuid.uuid4().hex[:8]}.all"
    apache_kafka.create_topic(topic, partitions=2)
    source = Source(seed=34)
    first = source.events(40, op_first="r") + source.events(110)
    audit = ("audit", (1,), Source._envelope("audit", "c", None, {"id": 1}))
    _produce(apache_kafka, topic, first[:60] + [audit] + first[60:])
    warehouse, checkpoint = tmp_path / "wh", tmp_path / "ck"
    assert {e["op"] for _, _, e in first} == {"r", "c", "u", "d"}
    assert all(source.tables.values())  # every source table holds rows at the end

    done = _stream(apache_kafka, topic, warehouse, checkpoint)
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["batches"] >= 3  # 151 records, 50 a micro-batch
    for table in KEYS:
        assert _rows(str(warehouse / table), table) == source.tables[table], table
    anchor = str(warehouse / "_unrouted")
    with Metastore.open(default_metastore_url(anchor)) as store:
        unrouted = read_table(anchor, store.snapshot(anchor)).to_pylist()
        assert not Path(warehouse / "audit").exists()
    assert len(unrouted) == 1 and "needs the key of table" in unrouted[0]["error"]

    # A restart with more events: the committed ones are not applied again.
    _produce(apache_kafka, topic, source.events(70))
    again = _stream(apache_kafka, topic, warehouse, checkpoint)
    assert again.returncode == 0, again.stderr[-4000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["skipped"] == 0
    for table in KEYS:
        assert _rows(str(warehouse / table), table) == source.tables[table], table
    with Metastore.open(default_metastore_url(anchor)) as store:
        assert store.transactions(states=("open",)) == []
        assert len(read_table(anchor, store.snapshot(anchor))) == 1
        # Every record in exactly one committed micro-batch: the anchor's ranges tile each
        # partition from 0, none twice.
        ends: dict[int, int] = {}
        for r in sorted((r for _, r in store.offset_ranges(anchor)),
                        key=lambda r: (r.partition, r.from_offset)):
            assert r.from_offset == ends.get(r.partition, 0), r
            ends[r.partition] = r.until_offset
        assert sum(ends.values()) == 151 + 70
