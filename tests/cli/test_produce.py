"""`ingest produce` through ingest.cli.main.main: exit codes, stdout/stderr, --json."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from support import run_cli as _run


@pytest.mark.kafka
def test_produce_sample_json(kafka_broker: str, topic: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["produce", "--bootstrap-servers", kafka_broker, "--topic", topic,
                           "--sample", "15", "--partitions", "3", "--json"], capsys)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["topic"] == topic and summary["records"] == 15
    assert f"Produced 15 records to topic {topic}" in err


@pytest.mark.kafka
def test_produce_jsonl_file(kafka_broker: str, topic: str, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"id": 1}\n\n{"id": 2, "x": "y"}\n')
    code, out, err = _run(["produce", "--bootstrap-servers", kafka_broker, "--topic", topic,
                           "--file", str(path), "--key-field", "id", "--quiet"], capsys)
    assert (code, out, err) == (0, "", "")


def test_bad_jsonl_line_is_a_config_error(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1}\nnot json\n')
    code, out, err = _run(["produce", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t",
                           "--file", str(path), "--json"], capsys)
    assert code == 2 and out == ""
    error = json.loads(err)["error"]
    assert error["type"] == "ConfigError"
    assert error["message"].startswith(f"Line 2 of {path} is not JSON:")
    assert error["hint"] == "--file takes JSON Lines: one JSON document per line"


def test_sample_and_file_are_exclusive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["produce", "--bootstrap-servers", "h:1", "--topic", "t"], capsys)
    assert code == 2 and out == ""
    assert "Give exactly one of --sample N or --file PATH.jsonl." in err


def test_unreachable_broker_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, err = _run(["produce", "--bootstrap-servers", f"127.0.0.1:{port}", "--topic", "t",
                           "--sample", "1", "--timeout-s", "1", "--json"], capsys)
    assert code == 3 and out == ""
    error = json.loads(err)["error"]
    assert error["type"] == "KafkaConnectError"
    assert f"on Kafka at 127.0.0.1:{port}: no broker answered within 1 s" in error["message"]
    assert "check that the brokers run" in error["hint"]
