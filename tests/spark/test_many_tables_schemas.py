"""Schemas per table in a many-table `ingest stream` (docs/many-tables.md, issue 34 item 3), run
as `python -m ingest stream` against a real Apache Kafka broker into SQLite-metastore tables:
each table created from its route's --route-schema (a column list or @FILE) holds exactly the
records sent to it, in its own columns; a record that does not fit its table's columns is that
table's dead letter, as for one table; a table found with its own columns is written by them;
without --schema, a key whose table does not exist routes nowhere with the reason."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from schema_registry import schema_registry  # noqa: F401 - the fixture
from support import job_env, kafka_rows

from ingest.acid.read.reader import read_table
from ingest.errors import TableNotFoundError
from ingest.records.routing import RoutingRules, TableTemplate, TopicSelection, table_name_for
from ingest.spark.job import ensure_tables, table_layout
from ingest.spark.sink import DEAD_LETTER_DDL, ManyTableSink, dead_letter_location
from ingest.table import open_table
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")


def _send(kafka: ApacheKafka, topic: str, values: list[Any]) -> None:
    from confluent_kafka import Producer

    producer = Producer({**kafka.client_config(), "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=json.dumps(value).encode())
    assert producer.flush(30) == 0, f"records of {topic} not delivered"


def _rows(location: str) -> list[dict[str, Any]]:
    with Metastore.open(default_metastore_url(location)) as store:
        table = read_table(location, store.snapshot(location))
    return sorted(table.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


@pytest.mark.spark
@pytest.mark.slow
def test_the_sink_parses_each_table_by_its_own_columns_in_one_micro_batch(
        spark: Any, warehouse: Path) -> None:
    """ManyTableSink in local Spark: `orders` and `payments` of other columns are written in
    one job, each record by its own table's columns (one not fitting them is that table's
    dead letter); `other`, whose table cannot be made, routes nowhere with the reason."""
    columns = {str(warehouse / "orders"): "id BIGINT, note STRING",
               str(warehouse / "payments"): "id BIGINT, amount DOUBLE"}

    def create(location: str) -> Any:
        for where, ddl in columns.items():
            if location.endswith(where):
                return ensure_tables(location, table_layout(ddl, None))
        raise TableNotFoundError(f"no columns for {location}", table=location)

    anchor = str(warehouse / "_unrouted")
    create_table(anchor, DEAD_LETTER_DDL, name="default._unrouted")
    rules = RoutingRules(TopicSelection(topics=("orders", "payments", "other")), {},
                         TableTemplate.parse(str(warehouse / "{topic}"), placeholder="topic"))

    def rows(topic: str, values: list[Any]) -> list[tuple[str, int, int, bytes | None]]:
        return [(topic, 0, n, json.dumps(v).encode()) for n, v in enumerate(values)]

    orders = [{"id": i, "note": f"n{i}"} for i in range(3)]
    payments = [{"id": 10 + i, "amount": i / 2} for i in range(3)]
    with ManyTableSink(rules, open_table(anchor).ref, sink_id="many@ckpt",
                       create=create) as sink:
        sink(kafka_rows(spark, rows("orders", [*orders, {"id": 3, "amount": 1.0}])
                        + rows("payments", [*payments, {"id": 13, "note": "x"}])
                        + rows("other", [{"id": 20}])), 0)
    report = sink.reports[-1]
    assert _rows(str(warehouse / "orders")) == orders
    assert _rows(str(warehouse / "payments")) == payments
    assert report.tables["default.orders"].dead_letters == 1
    assert report.tables["default.payments"].dead_letters == 1
    assert [r["offset"] for r in _rows(str(warehouse / "orders__dead_letter"))] == [3]
    assert report.unrouted == {"other": f"topic 'other' cannot use table "
                                        f"'file://{warehouse}/other': no columns for "
                                        f"file://{warehouse}/other"}
    assert [r["topic"] for r in _rows(anchor)] == ["other"]


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_each_table_gets_its_own_columns_from_its_route_schema_or_the_found_table(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    """No --schema: `a` is created from --route-schema a=DDL, `b` from b=@FILE, `d` exists
    with columns of its own; `c` has no table and no schema, so its records go to the anchor
    with the reason. A record of `a` with a field `a` has no column for, and one of `b` whose
    id is not a number, are their tables' dead letters."""
    tag = uuid.uuid4().hex[:8]
    a, b, c, d = (f"{x}{tag}" for x in "abcd")
    for topic in (a, b, c, d):
        apache_kafka.create_topic(topic, partitions=1)
    warehouse = tmp_path / "wh"
    table_a, table_b, table_c, table_d = (str(warehouse / table_name_for(t))
                                          for t in (a, b, c, d))
    create_table(table_d, "id BIGINT, label STRING", name=f"default.{table_name_for(d)}")
    create_table(dead_letter_location(table_d), DEAD_LETTER_DDL,
                 name=f"default.{table_name_for(d)}__dead_letter")
    b_schema = tmp_path / "b.ddl"
    b_schema.write_text("id BIGINT,\n amount DOUBLE,\n paid BOOLEAN\n")
    sent_a = [{"id": i, "note": f"n{i}"} for i in range(5)]
    sent_b = [{"id": 100 + i, "amount": i * 1.5, "paid": i % 2 == 0} for i in range(4)]
    sent_d = [{"id": 200 + i, "label": f"l{i}"} for i in range(3)]
    _send(apache_kafka, a, [*sent_a, {"id": 5, "note": "x", "amount": 1.5}])
    _send(apache_kafka, b, [*sent_b, {"id": "not a number", "amount": 2.0, "paid": True}])
    _send(apache_kafka, c, [{"id": 300}, {"id": 301}])
    _send(apache_kafka, d, sent_d)
    done = subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", apache_kafka.plaintext,
         "--topic", f"{a},{b},{c},{d}", "--table-template", f"{warehouse}/{{topic}}",
         "--unrouted-table", str(warehouse / "_unrouted"),
         "--route-schema", f"{a}=id BIGINT, note STRING", "--route-schema", f"{b}=@{b_schema}",
         "--checkpoint", str(tmp_path / "ck"), "--starting-offsets", "earliest",
         "--available-now", "--compact", "off", "--clean", "off", "--json"],
        env=job_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert _rows(table_a) == sent_a
    assert _rows(table_b) == sent_b
    assert _rows(table_d) == sent_d
    dead_a, dead_b = _rows(dead_letter_location(table_a)), _rows(dead_letter_location(table_b))
    assert [(r["offset"], "amount" in r["error"]) for r in dead_a] == [(5, True)], dead_a
    assert [r["offset"] for r in dead_b] == [4], dead_b
    assert json.loads(dead_b[0]["value"])["id"] == "not a number"
    with Metastore.open(default_metastore_url(table_c)) as store:
        assert store.find_table(table_c) is None, "no columns: not created"
    unrouted = _rows(str(warehouse / "_unrouted"))
    assert [(r["topic"], r["offset"]) for r in unrouted] == [(c, 0), (c, 1)]
    why = "neither --schema nor a --route-schema of its routing key gives the columns"
    assert all(why in r["error"] for r in unrouted), unrouted[0]["error"]
    assert done.stderr.count(f"the records of routing key {c!r} go to") == 1, done.stderr[-4000:]


ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]}]}
PAYMENT = {"type": "record", "name": "Payment", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "double"},
    {"name": "paid", "type": "boolean"}]}


def _avro(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.java
@pytest.mark.slow
def test_avro_values_of_each_topic_make_its_table_from_the_registry_subject(
        apache_kafka: ApacheKafka, schema_registry: str, tmp_path: Path,  # noqa: F811
        ) -> None:
    """--value-format avro --schema-registry, no --schema: each topic's table is created from
    its `<topic>-value` subject's latest schema and holds exactly its records; a topic with
    no subject routes nowhere with the reason; a record framed with an unknown schema id is
    its table's dead letter."""
    from confluent_kafka import Producer

    from ingest.records import confluent_frame, registry

    tag = uuid.uuid4().hex[:8]
    a, b, c = (f"{x}{tag}" for x in "abc")
    for topic in (a, b, c):
        apache_kafka.create_topic(topic, partitions=1)
    client = registry(schema_registry)
    order_id = client.register(f"{a}-value", json.dumps(ORDER))
    payment_id = client.register(f"{b}-value", json.dumps(PAYMENT))
    orders = [{"id": i, "note": None if i == 2 else f"n{i}"} for i in range(4)]
    payments = [{"id": 10 + i, "amount": i * 1.25, "paid": i % 2 == 1} for i in range(3)]
    producer = Producer({**apache_kafka.client_config(), "linger.ms": 0})
    for record in orders:
        producer.produce(a, value=confluent_frame(order_id, _avro(ORDER, record)))
    producer.produce(a, value=confluent_frame(987654, _avro(ORDER, {"id": 9, "note": None})))
    for record in payments:
        producer.produce(b, value=confluent_frame(payment_id, _avro(PAYMENT, record)))
    producer.produce(c, value=confluent_frame(order_id, _avro(ORDER, orders[0])))
    assert producer.flush(30) == 0
    warehouse = tmp_path / "wh"
    table_a, table_b, table_c = (str(warehouse / table_name_for(t)) for t in (a, b, c))
    done = subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", apache_kafka.plaintext,
         "--topic", f"{a},{b},{c}", "--table-template", f"{warehouse}/{{topic}}",
         "--unrouted-table", str(warehouse / "_unrouted"), "--value-format", "avro",
         "--schema-registry", schema_registry, "--checkpoint", str(tmp_path / "ck"),
         "--starting-offsets", "earliest", "--available-now", "--compact", "off", "--clean",
         "off", "--json", "--quiet"],
        env=job_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert _rows(table_a) == _rows_sorted(orders)
    assert _rows(table_b) == _rows_sorted(payments)
    with Metastore.open(default_metastore_url(table_a)) as store:
        assert [f.name for f in store.get_table(table_b).row_schema] == ["id", "amount", "paid"]
        assert store.find_table(table_c) is None
    dead = _rows(dead_letter_location(table_a))
    assert [r["offset"] for r in dead] == [4] and "987654" in dead[0]["error"], dead
    unrouted = _rows(str(warehouse / "_unrouted"))
    assert [r["topic"] for r in unrouted] == [c]
    assert f"subject '{c}-value'" in unrouted[0]["error"], unrouted[0]["error"]


def _rows_sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
