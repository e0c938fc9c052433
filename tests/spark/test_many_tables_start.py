"""The start of a many-table `ingest stream` (docs/many-tables.md, "Offsets and restarts"), run
as `python -m ingest stream` against a real Apache Kafka broker into SQLite-metastore tables,
with the single-table stream's checks: a topic of the anchor's progress deleted and created
again while the stream was down is refused before anything is written; a torn bucket file of
a routed table is cut back to its last complete footer before the stream adds to it; a routed
table found with other columns than --schema keeps its own (a --route-schema that differs is
refused at start)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from kafka.test_kafka_life import recreate_topic
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from spark.test_many_tables_cli import _ids, _produce, _stream

from ingest.acid.format import encode_length, side_file_path
from ingest.acid.read.reader import read_table
from ingest.records.routing import table_name_for
from ingest.spark.sink import DEAD_LETTER_DDL, dead_letter_location
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")


def _transactions(location: str) -> list[tuple[int, str, str]]:
    with Metastore.open(default_metastore_url(location)) as store:
        return [(i.txn_id, i.table, i.state) for i in store.transactions()]


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_a_topic_recreated_while_the_stream_was_down_is_refused_writing_nothing(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = f"a{tag}", f"b{tag}"
    apache_kafka.create_topic(a, partitions=2)
    apache_kafka.create_topic(b, partitions=1)
    warehouse, checkpoint = tmp_path / "wh", tmp_path / "ck"
    table_a, table_b = (str(warehouse / table_name_for(t)) for t in (a, b))
    _produce(apache_kafka, a, range(10), 2)
    _produce(apache_kafka, b, range(100, 106), 1)
    first = _stream(apache_kafka, f"{a},{b}", warehouse, checkpoint)
    assert first.returncode == 0, first.stderr[-4000:]
    assert _ids(table_b) == list(range(100, 106))
    before = _transactions(table_a)

    recreate_topic(apache_kafka, b, partitions=1)  # fewer records than were committed
    _produce(apache_kafka, b, range(200, 202), 1)
    _produce(apache_kafka, a, range(10, 14), 2)
    again = _stream(apache_kafka, f"{a},{b}", warehouse, checkpoint)
    assert again.returncode != 0, again.stdout[-2000:]
    assert f"Kafka partition {b}-0" in again.stderr, again.stderr[-4000:]
    assert "now ends at offset 2, below offset 6" in again.stderr, again.stderr[-4000:]
    assert f"topic '{b}' was deleted and created again" in again.stderr
    assert "Traceback" not in again.stderr, again.stderr[-4000:]
    # Nothing written: no transaction, the tables' records as the first run left them.
    assert _transactions(table_a) == before
    assert _ids(table_a) == list(range(10))
    assert _ids(table_b) == list(range(100, 106))


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_a_torn_bucket_file_of_a_routed_table_is_repaired_when_the_stream_restarts(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    """A bucket file left as a streaming writer killed mid-stripe leaves it (its side file
    naming the last flushed length, bytes of a stripe past it) is cut back to that length
    and its side file removed before the restarted stream writes; its records read as
    before, once. (Without a side file the bytes past a committed file's footer are left
    alone, as run_stream's repair leaves them: they may hold committed rows.)"""
    tag = uuid.uuid4().hex[:8]
    a, b = f"a{tag}", f"b{tag}"
    apache_kafka.create_topic(a, partitions=1)
    apache_kafka.create_topic(b, partitions=1)
    warehouse, checkpoint = tmp_path / "wh", tmp_path / "ck"
    table_a, table_b = (str(warehouse / table_name_for(t)) for t in (a, b))
    _produce(apache_kafka, a, range(8), 1)
    _produce(apache_kafka, b, range(100, 103), 1)
    first = _stream(apache_kafka, f"{a},{b}", warehouse, checkpoint)
    assert first.returncode == 0, first.stderr[-4000:]
    files = sorted(Path(table_b).rglob("bucket_*"))
    assert files, "the first run wrote table b"
    torn = files[0]
    whole = torn.stat().st_size
    Path(side_file_path(str(torn))).write_bytes(encode_length(whole))
    with torn.open("ab") as f:
        f.write(b"ORC half a stripe")

    _produce(apache_kafka, a, range(8, 11), 1)
    again = _stream(apache_kafka, f"{a},{b}", warehouse, checkpoint)
    assert again.returncode == 0, again.stderr[-4000:]
    assert torn.stat().st_size == whole, "cut back to its last complete footer"
    assert not Path(side_file_path(str(torn))).exists(), "the dead side file is removed"
    assert json.loads(again.stdout.strip().splitlines()[-1])["rows"] == 3
    assert _ids(table_a) == list(range(11))
    assert _ids(table_b) == list(range(100, 103))


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_a_routed_table_found_with_other_columns_than_schema_keeps_its_own(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    """Table a exists (with its dead-letter table) holding other columns than --schema: its
    records are written by its own columns (a record of --schema's columns is its dead
    letter: `name` is no column of it), and b is created with --schema. A --route-schema
    for a that is not a's columns is refused at start, naming both, writing nothing."""
    from confluent_kafka import Producer

    tag = uuid.uuid4().hex[:8]
    a, b = f"a{tag}", f"b{tag}"
    apache_kafka.create_topic(a, partitions=1)
    apache_kafka.create_topic(b, partitions=1)
    warehouse, checkpoint = tmp_path / "wh", tmp_path / "ck"
    table_a, table_b = (str(warehouse / table_name_for(t)) for t in (a, b))
    create_table(table_a, "id BIGINT, note STRING", name=f"default.{table_name_for(a)}")
    create_table(dead_letter_location(table_a), DEAD_LETTER_DDL,
                 name=f"default.{table_name_for(a)}__dead_letter")
    producer = Producer({**apache_kafka.client_config(), "linger.ms": 0})
    for i in range(4):
        producer.produce(a, value=json.dumps({"id": i, "note": f"x{i}"}).encode())
    assert producer.flush(30) == 0
    _produce(apache_kafka, a, range(4, 5), 1)  # {"id", "name"}: no column name in a
    _produce(apache_kafka, b, range(100, 102), 1)
    refused = _stream(apache_kafka, f"{a},{b}", warehouse, tmp_path / "ck2",
                      "--route", f"{a}={table_a}", "--route-schema", f"{a}=id BIGINT")
    assert refused.returncode != 0, refused.stdout[-2000:]
    assert ("it has columns (id BIGINT, note STRING) but --route-schema "
            f"{a} gives (id BIGINT)") in refused.stderr, refused.stderr[-4000:]
    assert _ids(table_a) == []
    done = _stream(apache_kafka, f"{a},{b}", warehouse, checkpoint)
    assert done.returncode == 0, done.stderr[-4000:]
    with Metastore.open(default_metastore_url(table_a)) as store:
        rows = read_table(table_a, store.snapshot(table_a)).to_pylist()
        dead = read_table(dead_letter_location(table_a),
                          store.snapshot(dead_letter_location(table_a))).to_pylist()
        assert [f.name for f in store.get_table(table_b).row_schema] == ["id", "name"]
    assert sorted(rows, key=lambda r: r["id"]) == [{"id": i, "note": f"x{i}"} for i in range(4)]
    assert [r["offset"] for r in dead] == [4] and "name" in dead[0]["error"]
    assert _ids(table_b) == [100, 101]
