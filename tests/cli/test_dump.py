"""`ingest dump`: events as JSON lines, --meta, and clear errors with the documented exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import SIMPLE_SCHEMA, simple_table

from ingest.acid import BucketFileOptions, BucketWriter


def run_ingest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ingest", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def open_bucket(tmp_path: Path) -> str:
    path = str(tmp_path / "delta_0000001_0000002" / "bucket_00000")
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA))
    w.write(simple_table(range(1, 3)))
    w.flush()
    w.write(simple_table(range(3, 4)))  # written but never flushed: must stay invisible
    w.abandon()
    return path


def test_dump_prints_one_hive_style_json_line_per_visible_event(open_bucket: str) -> None:
    result = run_ingest("dump", open_bucket)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == ('{"operation":0,"originalTransaction":1,"bucket":536870912,"rowId":0,'
                        '"currentTransaction":1,"row":{"id":1,"value":"v1"}}')
    assert [json.loads(x)["row"]["id"] for x in lines] == [1, 2]


def test_dump_meta_shows_stripes_metadata_and_flush_lengths(open_bucket: str) -> None:
    result = run_ingest("dump", "--meta", open_bucket)
    assert result.returncode == 0, result.stderr
    meta = json.loads(result.stdout)
    assert meta["flush_lengths"][0] == 0
    assert meta["readable_length"] == meta["flush_lengths"][-1]
    assert meta["rows"] == 2 and len(meta["stripes"]) == 1
    assert meta["user_metadata"]["hive.acid.key.index"] == "1,536870912,1;"
    assert meta["user_metadata"]["hive.acid.version"] == "2"


def test_dump_of_a_file_that_is_not_orc_fails_with_exit_3(tmp_path: Path) -> None:
    path = tmp_path / "bucket_00000"
    path.write_text("id,value\n1,a\n")
    result = run_ingest("dump", str(path))
    assert result.returncode == 3
    assert result.stdout == ""
    assert f"Cannot read ORC file {path}" in result.stderr
    assert "no ORC postscript" in result.stderr


def test_dump_of_a_cut_file_names_the_offset_and_errors_as_json(tmp_path: Path) -> None:
    path = tmp_path / "bucket_00000"
    with BucketWriter.create(str(path), BucketFileOptions(write_id=1,
                                                          row_schema=SIMPLE_SCHEMA)) as w:
        w.write(simple_table(range(10)))
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    result = run_ingest("dump", "--json", str(path))
    assert result.returncode == 3
    error = json.loads(result.stderr.strip().splitlines()[-1])["error"]
    assert error["type"] == "CorruptFileError"
    assert error["path"] == str(path)
    assert isinstance(error["offset"], int)


def test_dump_of_a_missing_file_fails_with_exit_3(tmp_path: Path) -> None:
    result = run_ingest("dump", str(tmp_path / "nope"))
    assert result.returncode == 3
    assert "nope" in result.stderr


def test_help_lists_exit_codes() -> None:
    result = run_ingest("--help")
    assert result.returncode == 0
    assert "Exit codes: 0 ok" in result.stdout
    assert "dump" in result.stdout
