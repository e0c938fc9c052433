"""StreamOptions: one declaration behind `ingest stream`, `jobs/kafka_to_acid.py` and the sink."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from click.testing import CliRunner

from ingest.cli.stream import command
from ingest.errors import ConfigError
from ingest.spark.options import (
    SinkOptions,
    StreamOptions,
    add_arguments,
    option_specs,
    stream_trigger,
)

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = dict(bootstrap_servers="h:1", topic="t", table="/wh/t", schema_ddl="id BIGINT",
                checkpoint="/ck")


def test_flags_and_defaults() -> None:
    specs = {s.flag: s for s in option_specs()}
    assert list(specs) == [
        "--bootstrap-servers", "--topic", "--table", "--topic-pattern", "--table-template",
        "--route", "--routes", "--route-field", "--unrouted-table", "--max-new-tables-per-batch",
        "--schema", "--route-schema",
        "--checkpoint", "--trigger",
        "--available-now", "--starting-offsets", "--partition-by", "--metastore",
        "--txns-per-delta",
        "--flush-rows", "--on-bad-record", "--on-tombstone", "--file-layout", "--writer-split-rows",
        "--one-task-records", "--mode", "--key", "--route-key", "--cdc-format", "--order-by",
        "--value-format", "--avro-schema", "--schema-registry", "--schema-registry-option",
        "--on-new-field", "--evolve-type", "--max-offsets-per-trigger", "--kafka-timeout-s",
        "--kafka-option", "--kafka-config", "--fail-on-data-loss", "--compact", "--clean",
        "--maintenance-interval-s", "--buckets", "--metrics-port", "--metrics-host",
        "--storage-option", "--log-format", "--commit-offsets-to-group", "--kafka-source"]
    # --topic and --table: one of --topic and --topic-pattern, --table for one topic
    # (checked by StreamOptions, tests/spark/test_many_tables_options.py)
    assert [f for f, s in specs.items() if s.required] == ["--bootstrap-servers", "--checkpoint"]
    defaults = {f: s.default for f, s in specs.items() if not s.required}
    assert defaults == {
        "--topic": None, "--table": None, "--topic-pattern": None, "--table-template": None,
        "--route": (), "--routes": None, "--route-field": None, "--unrouted-table": None,
        "--max-new-tables-per-batch": 100,
        "--schema": None, "--route-schema": (), "--trigger": "60", "--available-now": False,
        "--starting-offsets": "earliest",
        "--partition-by": None, "--metastore": None, "--txns-per-delta": 1,
        "--flush-rows": 100_000,
        "--on-bad-record": "dead-letter", "--on-tombstone": "skip",
        "--file-layout": "partition", "--writer-split-rows": 1_000_000,
        "--one-task-records": 20_000,
        "--mode": "append", "--key": None, "--route-key": (),
        "--cdc-format": "debezium", "--order-by": None,
        "--value-format": "json", "--avro-schema": None, "--schema-registry": None,
        "--schema-registry-option": (), "--kafka-option": (), "--kafka-config": (),
        "--fail-on-data-loss": "true", "--on-new-field": "dead-letter", "--evolve-type": (),
        "--max-offsets-per-trigger": None,
        "--kafka-timeout-s": 30.0, "--compact": "auto", "--clean": "auto",
        "--maintenance-interval-s": 60.0, "--buckets": 8, "--metrics-port": None,
        "--metrics-host": None, "--storage-option": (), "--log-format": "text",
        "--commit-offsets-to-group": None, "--kafka-source": "python"}
    assert [f for f, s in specs.items() if s.multiple] == [
        "--route", "--route-schema", "--route-key", "--schema-registry-option", "--evolve-type",
        "--kafka-option", "--kafka-config",
        "--storage-option"]
    assert specs["--on-new-field"].choices == ("dead-letter", "fail", "ignore", "evolve")
    assert specs["--file-layout"].choices == ("partition", "task")
    assert specs["--compact"].choices == specs["--clean"].choices == ("auto", "off")
    assert specs["--on-bad-record"].choices == ("dead-letter", "fail")
    assert specs["--on-tombstone"].choices == ("skip", "dead-letter")
    assert specs["--mode"].choices == ("append", "upsert", "cdc")
    assert specs["--value-format"].choices == ("json", "avro")
    assert specs["--log-format"].choices == ("text", "json")
    assert specs["--kafka-source"].choices == ("python", "jvm")
    options = StreamOptions(**REQUIRED)
    assert options.sink == SinkOptions() and options.schedule == (60.0, False)


def test_cli_and_job_take_the_same_flags_with_the_same_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    job_flags = {a.option_strings[0]: a.default for a in parser._actions if a.option_strings
                 and a.dest != "help"}
    cli_flags = {p.opts[0]: p.default for p in command.params
                 if p.name not in ("master", "as_json", "quiet")}
    assert job_flags == cli_flags
    assert job_flags == {s.flag: s.default for s in option_specs()}
    parsed = vars(parser.parse_args(["--bootstrap-servers", "h:1", "--topic", "t", "--table",
                                     "/wh/t", "--schema", "id BIGINT", "--checkpoint", "/ck",
                                     "--flush-rows", "10", "--trigger", "available-now"]))
    options = StreamOptions.from_flags(parsed)
    assert options.sink.flush_rows == 10 and options.schedule == (0.0, True)
    assert options == StreamOptions(**REQUIRED, trigger="available-now",
                                    sink=SinkOptions(flush_rows=10))


def test_bad_values_are_config_errors_in_one_place() -> None:
    with pytest.raises(ConfigError, match="--flush-rows must be at least 1, got 0"):
        SinkOptions(flush_rows=0)
    with pytest.raises(ConfigError, match="--on-bad-record must be dead-letter or fail"):
        StreamOptions.from_flags({**REQUIRED, "on_bad_record": "drop"})
    with pytest.raises(ConfigError, match="--kafka-timeout-s must be greater than 0"):
        StreamOptions(**REQUIRED, kafka_timeout_s=0)
    with pytest.raises(ConfigError, match="--trigger must be a positive number of seconds"):
        StreamOptions(**REQUIRED, trigger="0")
    with pytest.raises(ConfigError, match="Cannot parse trigger 'soon'"):
        StreamOptions(**REQUIRED, trigger="soon")
    with pytest.raises(TypeError, match="partition_expression"):
        StreamOptions.from_flags({**REQUIRED, "partition_expression": "dt"})
    with pytest.raises(ConfigError, match="--log-format must be text or json, got 'xml'"):
        StreamOptions(**REQUIRED, log_format="xml")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--commit-offsets-to-group needs a Kafka consumer"):
        StreamOptions(**REQUIRED, commit_offsets_to_group=" ")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--txns-per-delta", "0"])
    assert info.value.code == 2
    result = CliRunner().invoke(command, ["--txns-per-delta", "0"])
    assert result.exit_code == 2


def test_trigger() -> None:
    assert stream_trigger("2min") == (120.0, False)
    assert stream_trigger("30s") == (30.0, False)
    assert stream_trigger("available-now") == (0.0, True)


def test_keyed_modes_refuse_options_that_do_not_fit() -> None:
    assert SinkOptions(mode="cdc", key="id, dt").key_columns == ("id", "dt")
    with pytest.raises(ConfigError, match="--mode upsert needs --key") as info:
        SinkOptions(mode="upsert")
    assert "--key id" in str(info.value.hint)
    with pytest.raises(ConfigError, match="--key applies to --mode upsert or cdc"):
        SinkOptions(key="id")
    with pytest.raises(ConfigError, match="--key and --order-by apply to --mode upsert"):
        SinkOptions(key="id", order_by="v")
    with pytest.raises(ConfigError, match="--txns-per-delta 3 with --mode cdc"):
        SinkOptions(mode="cdc", key="id", txns_per_delta=3)
    with pytest.raises(ConfigError, match="--on-tombstone dead-letter with --mode upsert"):
        SinkOptions(mode="upsert", key="id", on_tombstone="dead-letter")
    with pytest.raises(ConfigError, match="--mode must be append or upsert or cdc"):
        SinkOptions(mode="merge")  # type: ignore[arg-type]


def test_metrics_host_needs_metrics_port_and_defaults_to_every_interface() -> None:
    base = dict(REQUIRED)
    assert StreamOptions.from_flags({**base, "metrics_port": 9100}).metrics_bind_host == (
        "0.0.0.0")
    assert StreamOptions.from_flags({**base, "metrics_port": 9100,
                                     "metrics_host": "127.0.0.1"}).metrics_bind_host == (
        "127.0.0.1")
    with pytest.raises(ConfigError, match="--metrics-host applies to --metrics-port"):
        StreamOptions.from_flags({**base, "metrics_host": "127.0.0.1"})
