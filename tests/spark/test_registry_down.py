"""A schema registry that is down or failing: asked again with backoff, within a bound, then
an IngestError naming the registry and the schema id, which fails the task (so the micro-batch:
nothing committed, nothing dead-lettered for the registry's fault).

The decoder runs without Spark against a dead port and against a real registry (Apicurio,
tests/schema_registry.py) killed between batches; HTTP answers a registry gives while failing
(503, a hang) come from a small loopback server here, which counts the requests. A stream
end to end (Kafka, Spark, Apicurio killed between two runs): the micro-batch that needs the
dead registry fails the stream with the task's IngestError, the rows committed before stay,
nothing is dead-lettered, and once a registry answers at the URL again the restarted stream
commits that micro-batch.
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import fastavro
import pyarrow as pa
import pytest
from external import free_port
from schema_registry import Registry, own_schema_registry  # noqa: F401 - the fixture

from ingest.acid.read.reader import read_table
from ingest.errors import IngestError
from ingest.records import RegistryRetry, SchemaRegistry, avro_to_arrow, confluent_frame
from ingest.records.avro_values import AvroFormat, decode_avro_values
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url

V1: dict[str, Any] = {"type": "record", "name": "Reading", "namespace": "down",
                      "fields": [{"name": "id", "type": "long"}]}
V2: dict[str, Any] = {**V1, "fields": [*V1["fields"], {"name": "unit", "type": "string",
                                                        "default": "C"}]}
TABLE = avro_to_arrow(V1)
DEFAULT = RegistryRetry()
# The waits between the default's attempts (0.5 + 1 + 2 + 4 s): a dead port refuses at once.
DEFAULT_WAITS_S = 7.5


def framed(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return confluent_frame(schema_id, out.getvalue())


def decode(url: str, items: list[bytes]) -> list[dict[str, Any]]:
    parsed = decode_avro_values(pa.array(items, pa.binary()), TABLE, AvroFormat(registry_url=url))
    assert parsed.bad == []
    return list(parsed.rows.to_pylist())


def test_the_default_bound_is_about_half_a_minute() -> None:
    assert DEFAULT.attempts == 5 and DEFAULT.bound_s() == 5 * 4.0 + DEFAULT_WAITS_S


def test_a_dead_port_is_asked_again_then_fails_naming_the_registry_and_the_id() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(IngestError) as failed:
        decode(url, [framed(7, V1, {"id": 1})])
    took = time.monotonic() - started
    message = str(failed.value)
    assert message.startswith(f"Cannot read schema id 7 from the schema registry at {url}: it "
                              f"was unreachable or failing for 5 attempts over ")
    assert "ConnectError" in message and "commits and dead-letters nothing" in message
    # Every wait was taken (no early give-up), and the call stayed within its bound.
    assert DEFAULT_WAITS_S <= took < DEFAULT.bound_s()


def test_a_registry_killed_between_batches_fails_the_next_batch_that_needs_it(
        own_schema_registry: Registry) -> None:  # noqa: F811 - the fixture
    url = own_schema_registry.url
    # Registered through a client of its own: the decoder's per-process client has cached
    # nothing for this registry yet.
    writer = SchemaRegistry(url)
    v1 = writer.register("readings-value", json.dumps(V1))
    v2 = writer.register("readings-value", json.dumps(V2))
    assert v1 != v2
    assert decode(url, [framed(v1, V1, {"id": 1})]) == [{"id": 1}]

    own_schema_registry.kill()
    # An id this process has read is cached: a batch of it needs no registry.
    assert decode(url, [framed(v1, V1, {"id": 2})]) == [{"id": 2}]
    # A new writer's id must be asked for: the batch fails, none of its records is bad.
    started = time.monotonic()
    with pytest.raises(IngestError, match=f"Cannot read schema id {v2} from the schema registry "
                                          f"at {url}: it was unreachable or failing for 5 "
                                          "attempts"):
        decode(url, [framed(v1, V1, {"id": 3}), framed(v2, V2, {"id": 4, "unit": "F"})])
    assert time.monotonic() - started < DEFAULT.bound_s()


class _Failing(BaseHTTPRequestHandler):
    """Answers 503 to the first `failures` requests, then the schema (or 404)."""

    failures = 0
    requests: list[str] = []  # noqa: RUF012 - set per server below
    answer: int = 200
    schema: dict[str, Any] = V1  # noqa: RUF012 - read only

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.requests.append(self.path)
        if len(self.requests) <= self.failures:
            status, body = 503, {"error_code": 50301, "message": "Service Unavailable"}
        elif self.answer == 404:
            status, body = 404, {"error_code": 40403, "message": "Schema not found"}
        else:
            status, body = 200, {"schema": json.dumps(self.schema)}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def failing() -> Iterator[tuple[str, type[_Failing]]]:
    handler = type("Handler", (_Failing,), {"requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


QUICK = RegistryRetry(attempts=3, first_wait_s=0.05, timeout_s=1.0)


def test_5xx_answers_are_asked_again_until_the_registry_answers(
        failing: tuple[str, type[_Failing]]) -> None:
    url, handler = failing
    handler.failures = 2
    assert SchemaRegistry(url, QUICK).schema_by_id(5) == json.dumps(V1)
    assert handler.requests == ["/schemas/ids/5"] * 3


def test_5xx_answers_past_the_attempts_fail_with_the_registrys_status(
        failing: tuple[str, type[_Failing]]) -> None:
    url, handler = failing
    handler.failures = 10
    with pytest.raises(IngestError, match=f"Cannot read schema id 5 from the schema registry at "
                                          f"{url}: it was unreachable or failing for 3 attempts "
                                          r"over \d+\.\d s; the last: HTTP 503: Service "
                                          "Unavailable"):
        SchemaRegistry(url, QUICK).schema_by_id(5)
    assert len(handler.requests) == 3


def test_not_found_is_an_answer_not_asked_again(failing: tuple[str, type[_Failing]]) -> None:
    url, handler = failing
    handler.answer = 404
    assert SchemaRegistry(url, QUICK).schema_by_id(5) is None
    assert len(handler.requests) == 1


def test_a_registry_that_never_answers_times_out_each_request() -> None:
    # Listening, so connecting succeeds, but never accepting or answering: a hung registry.
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        retry = RegistryRetry(attempts=2, first_wait_s=0.05, timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(IngestError, match="for 2 attempts .* the last: ReadTimeout"):
            SchemaRegistry(url, retry).latest("readings-value")
        assert time.monotonic() - started < retry.bound_s() + 0.5


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.java
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_a_stream_whose_registry_dies_fails_its_micro_batch_and_keeps_what_it_committed(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path,
        own_schema_registry: Registry) -> None:  # noqa: F811 - the fixture
    """The stream end to end: a micro-batch that needs a schema the dead registry must give
    fails the query with the decoder's error (the registry's URL and the id), nothing of it is
    committed or dead-lettered, and the rows committed before stay as they were."""
    from ingest.kafka.produce import produce_events
    from ingest.spark.job import run_stream

    url = own_schema_registry.url
    writer = SchemaRegistry(url)
    v1 = writer.register(f"{topic}-value", json.dumps(V1))
    v2 = writer.register(f"{topic}-value", json.dumps(V2))
    location = str(warehouse / "readings")
    create_table(location, "id BIGINT, unit STRING")
    stream = {"bootstrap_servers": kafka_broker, "topic": topic, "table": location,
              "checkpoint": str(warehouse / "ck"), "available_now": True,
              "kafka_timeout_s": 10, "value_format": "avro", "schema_registry": url}
    produce_events(kafka_broker, topic, partitions=2,
                   events=[framed(v1, V1, {"id": i}) for i in range(20)])
    summary = run_stream(spark, **stream)
    assert summary.rows == 20 and summary.dead_letters == 0  # type: ignore[union-attr]
    committed = _rows(location)
    assert committed == [{"id": i, "unit": None} for i in range(20)]

    own_schema_registry.kill()
    # v2 was never read by a decoder, so its records need the registry.
    produce_events(kafka_broker, topic, partitions=2,
                   events=[framed(v2, V2, {"id": 100 + i, "unit": "F"}) for i in range(10)])
    started = time.monotonic()
    with pytest.raises(IngestError) as failed:
        run_stream(spark, **stream)
    # The task's error itself (not Spark's wrapper of it), with the micro-batch and its hint.
    assert type(failed.value) is IngestError
    assert failed.value.message.startswith(
        f"Micro-batch 1 of default.readings failed in a Spark task: Cannot read schema id {v2} "
        f"from the schema registry at {url}: it was unreachable or failing for 5 attempts "), \
        failed.value.message
    assert failed.value.hint is not None and "commits and dead-letters nothing" in \
        failed.value.hint
    assert time.monotonic() - started < 120
    assert _rows(location) == committed
    with Metastore.open(default_metastore_url(location)) as store:
        dead = store.find_table(location + "__dead_letter")
        dead_rows = [] if dead is None else read_table(
            location + "__dead_letter", store.snapshot(location + "__dead_letter")).to_pylist()
        assert dead_rows == []
        assert all(t.state != "open" for t in store.transactions(location))
    # The registry back at the same URL: a new Apicurio on the dead one's port (its storage
    # is in memory), given the same schemas in the same order, so it gives the same ids. The
    # restarted stream reads the failed micro-batch again and commits it.
    back_home = warehouse / "registry-back"
    back_home.mkdir()
    back = Registry(back_home, port=urlsplit(url).port)
    try:
        again = SchemaRegistry(url)
        assert [again.register(f"{topic}-value", json.dumps(schema))
                for schema in (V1, V2)] == [v1, v2]
        summary = run_stream(spark, **stream)
    finally:
        back.kill()
    assert summary.rows == 10 and summary.dead_letters == 0  # type: ignore[union-attr]
    assert _rows(location) == [*committed, *({"id": 100 + i, "unit": "F"} for i in range(10))]


def _rows(location: str) -> list[dict[str, Any]]:
    with Metastore.open(default_metastore_url(location)) as store:
        return sorted(read_table(location, store.snapshot(location)).to_pylist(),
                      key=lambda r: r["id"])
