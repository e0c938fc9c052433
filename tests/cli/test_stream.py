"""`ingest stream`: options, the checks before Spark starts, and one real run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import free_port

from ingest.cli.stream import command
from ingest.errors import ConfigError, IngestError


def test_help_names_every_option_and_an_example() -> None:
    result = CliRunner().invoke(command, ["--help"])
    assert result.exit_code == 0
    for option in ("--bootstrap-servers", "--topic", "--table", "--schema", "--checkpoint",
                   "--trigger", "--available-now", "--starting-offsets", "--partition-by",
                   "--txns-per-delta", "--flush-rows", "--on-bad-record", "--on-tombstone",
                   "--max-offsets-per-trigger", "--kafka-timeout-s"):
        assert option in result.output
    assert "ingest stream --bootstrap-servers" in result.output


def test_help_warns_that_plain_avro_carries_no_schema_id_and_names_metrics_host() -> None:
    # issue 32: a reordered --avro-schema of same-typed fields swaps columns, exit 0.
    result = CliRunner(env={"COLUMNS": "200"}).invoke(command, ["--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "WARNING: plain Avro carries no schema id" in text
    assert "fields {id, a, b} read as {id, b, a} (same types) commit every row with a and b " \
           "swapped" in text
    assert "--metrics-host HOST" in text and "Default: 0.0.0.0, every interface" in text


def test_bad_trigger_is_a_config_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, [
        "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--table", str(tmp_path / "t"),
        "--schema", "id BIGINT", "--checkpoint", str(tmp_path / "ck"), "--trigger", "soon"])
    assert isinstance(result.exception, ConfigError)
    assert "Cannot parse trigger 'soon'" in str(result.exception)


def test_unreachable_broker_fails_before_spark_starts(tmp_path: Path) -> None:
    servers = f"127.0.0.1:{free_port()}"
    result = CliRunner().invoke(command, [
        "--bootstrap-servers", servers, "--topic", "t", "--table", str(tmp_path / "t"),
        "--schema", "id BIGINT", "--checkpoint", str(tmp_path / "ck"), "--kafka-timeout-s", "2"])
    assert isinstance(result.exception, IngestError)
    assert f"on Kafka at {servers}" in str(result.exception)
    assert not (tmp_path / "t").exists()


def test_a_metastore_without_sink_progress_is_refused_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exactly once needs the offsets committed with the data: a backend that does not keep
    them (`keeps_sink_progress`) is refused before Kafka, Spark or any file. The Hive
    Metastore's does keep them: its stream goes on to the broker check."""
    from ingest.txn.hms.metastore import HiveMetastore

    args = ["--bootstrap-servers", f"127.0.0.1:{free_port()}", "--topic", "t",
            "--table", str(tmp_path / "t"), "--schema", "id BIGINT",
            "--checkpoint", str(tmp_path / "ck"), "--metastore", "thrift://127.0.0.1:1",
            "--kafka-timeout-s", "2"]
    result = CliRunner().invoke(command, args)
    assert isinstance(result.exception, IngestError), result.output
    assert "on Kafka at" in str(result.exception)

    monkeypatch.setattr(HiveMetastore, "keeps_sink_progress", False)
    result = CliRunner().invoke(command, args)
    assert isinstance(result.exception, ConfigError), result.output
    assert "cannot commit a micro-batch's Kafka offsets with its data" in str(result.exception)
    assert "thrift://127.0.0.1:1" in str(result.exception)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_stream_available_now_prints_a_json_summary(spark: Any, kafka_broker: str, topic: str,
                                                    tmp_path: Path) -> None:
    from ingest.kafka.produce import produce_events, sample_events

    produce_events(kafka_broker, topic, events=sample_events(30), partitions=2)
    result = CliRunner().invoke(command, [
        "--bootstrap-servers", kafka_broker, "--topic", topic, "--table", str(tmp_path / "ev"),
        "--schema", "id BIGINT, value STRING, ts TIMESTAMP", "--partition-by", "dt",
        "--checkpoint", str(tmp_path / "ck"), "--available-now", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rows"] == 30 and summary["table"] == "default.ev"


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_a_plain_avro_stream_whose_first_records_do_not_decode_is_refused_writing_nothing(
        spark: Any, kafka_broker: str, topic: str, tmp_path: Path) -> None:
    """Issue 32: an --avro-schema of another field order (of other types) than the writers'
    would dead-letter every record with exit 0; the first records tell, and the stream stops
    before its first transaction. With the writers' schema the same records all commit."""
    import io

    import fastavro
    from confluent_kafka import Producer

    from ingest.table import open_table

    fields = {"id": "long", "a": "string", "b": "long"}
    writer = {"type": "record", "name": "R",
              "fields": [{"name": n, "type": t} for n, t in fields.items()]}
    reordered = {**writer, "fields": [writer["fields"][i] for i in (0, 2, 1)]}
    producer = Producer({"bootstrap.servers": kafka_broker})
    for i in range(30):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(writer),
                                   {"id": i, "a": f"x{i}", "b": 7 * i})
        producer.produce(topic, out.getvalue())
    assert producer.flush(30) == 0
    (tmp_path / "writer.avsc").write_text(json.dumps(writer))
    (tmp_path / "reordered.avsc").write_text(json.dumps(reordered))

    def stream(schema_file: str) -> Any:
        return CliRunner().invoke(command, [
            "--bootstrap-servers", kafka_broker, "--topic", topic, "--table",
            str(tmp_path / "ev"), "--schema", "id BIGINT, a STRING, b BIGINT",
            "--value-format", "avro", "--avro-schema", str(tmp_path / schema_file),
            "--checkpoint", str(tmp_path / "ck"), "--available-now", "--json", "--quiet"])

    refused = stream("reordered.avsc")
    assert isinstance(refused.exception, ConfigError), refused.output
    message = str(refused.exception)
    assert "Refusing to stream into default.ev: its values are plain Avro" in message
    assert "none of its first 20 records decodes" in message
    assert "the --avro-schema is not the schema the producers wrote with" in message
    table = open_table(str(tmp_path / "ev"))
    assert table.to_arrow().num_rows == 0 and table.history() == []
    dead_letters = open_table(str(tmp_path / "ev__dead_letter"))
    assert dead_letters.to_arrow().num_rows == 0

    done = stream("writer.avsc")
    assert done.exit_code == 0, done.output
    rows = sorted(open_table(str(tmp_path / "ev")).to_arrow().to_pylist(),
                  key=lambda r: r["id"])
    assert rows == [{"id": i, "a": f"x{i}", "b": 7 * i} for i in range(30)]
