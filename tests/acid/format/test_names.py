"""ACID names: formatting, parsing, BucketCodec and the two marker files."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.acid.format.names import (
    DEFAULT_PARTITION_NAME,
    ParsedDirectory,
    bucket_file_name,
    decode_bucket_property,
    encode_bucket_property,
    format_base,
    format_delta,
    format_directory,
    format_partition,
    is_compacted_base,
    is_side_file,
    parse_bucket_file,
    parse_directory,
    parse_partition,
    side_file_path,
    write_acid_version_file,
    write_compacted_marker,
)
from ingest.errors import CorruptFileError, UnsupportedFormatError

write_ids = st.integers(min_value=0, max_value=10**12)
statement_ids = st.none() | st.integers(min_value=0, max_value=9999)
visibility = st.none() | st.integers(min_value=1, max_value=10**12)


@pytest.fixture
def memfs() -> Iterator[tuple[fsspec.AbstractFileSystem, str]]:
    fs = fsspec.filesystem("memory")
    root = f"/names-{uuid.uuid4().hex}"
    fs.makedirs(root, exist_ok=True)
    try:
        yield fs, root
    finally:
        fs.rm(root, recursive=True)


def test_delta_names() -> None:
    assert format_delta(5, 10, 0) == "delta_0000005_0000010_0000"
    assert format_delta(5, 10, None) == "delta_0000005_0000010"
    assert format_delta(5, 10, 3, delete=True) == "delete_delta_0000005_0000010_0003"
    assert format_delta(5, 10, None, visibility_txn_id=123) == "delta_0000005_0000010_v0000123"
    # AcidUtils.addVisibilitySuffix: txn 0 means no suffix.
    assert format_delta(5, 10, None, visibility_txn_id=0) == "delta_0000005_0000010"
    # Wider numbers are not truncated (Hive parses with Long.parseLong).
    assert format_delta(12345678, 12345678, 0) == "delta_12345678_12345678_0000"


def test_base_names() -> None:
    assert format_base(20) == "base_0000020"
    assert format_base(20, 123) == "base_0000020_v0000123"


def test_parse_examples() -> None:
    assert parse_directory("delta_0000005_0000010_0000") == ParsedDirectory(
        "delta", 5, 10, 0, None, "delta_0000005_0000010_0000"
    )
    d = parse_directory("delete_delta_0000005_0000010")
    assert d is not None and d.kind == "delete_delta" and d.statement_id is None
    d = parse_directory("delta_0000005_0000010_v0000123")
    assert d is not None and (d.statement_id, d.visibility_txn_id) == (None, 123)
    d = parse_directory("delta_0000005_0000010_0002_v0000123")
    assert d is not None and (d.statement_id, d.visibility_txn_id) == (2, 123)
    b = parse_directory("base_0000020_v0000007")
    assert b is not None and b.kind == "base" and b.write_id == 20 and b.visibility == 7
    assert parse_directory("base_0000020/") == parse_directory("base_0000020")


@pytest.mark.parametrize(
    "name",
    ["", "delta_", "delta_1", "delta_x_y", "base_", "base_x", "bucket_00000", "000000_0",
     "delta_1_2_3_4", "base_1_2", "_orc_acid_version", "deltas_1_2", "delta_-1_2"],
)
def test_parse_rejects_non_acid_names(name: str) -> None:
    assert parse_directory(name) is None


def _parsed(name: str) -> ParsedDirectory:
    parsed = parse_directory(name)
    assert parsed is not None
    return parsed


def test_side_file_rules() -> None:
    assert not _parsed("delta_0000005_0000005_0000").may_contain_side_file
    assert _parsed("delta_0000005_0000010").may_contain_side_file
    assert not _parsed("delete_delta_0000005_0000010").may_contain_side_file
    assert not _parsed("delta_0000005_0000010_v0000009").may_contain_side_file


@settings(max_examples=300)
@given(write_ids, write_ids, statement_ids, st.booleans(), visibility)
def test_delta_round_trip(
    a: int, b: int, stmt: int | None, delete: bool, vis: int | None
) -> None:
    lo, hi = min(a, b), max(a, b)
    name = format_delta(lo, hi, stmt, delete=delete, visibility_txn_id=vis)
    parsed = parse_directory(name)
    assert parsed == ParsedDirectory(
        "delete_delta" if delete else "delta", lo, hi, stmt, vis, name
    )
    assert format_directory(parsed) == name


@settings(max_examples=200)
@given(write_ids, visibility)
def test_base_round_trip(wid: int, vis: int | None) -> None:
    name = format_base(wid, vis)
    parsed = parse_directory(name)
    assert parsed == ParsedDirectory("base", wid, wid, None, vis, name)
    assert format_directory(parsed) == name


@settings(max_examples=200)
@given(st.text(max_size=30))
def test_parse_never_raises(name: str) -> None:
    parsed = parse_directory(name)
    if parsed is not None:
        assert parse_directory(format_directory(parsed)) is not None


def test_format_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="min_write_id 10 > max_write_id 5"):
        format_delta(10, 5)
    with pytest.raises(ValueError, match="statement_id"):
        format_delta(1, 1, 10000)
    with pytest.raises(ValueError, match=">= 0"):
        format_base(-1)


def test_bucket_file_names() -> None:
    assert bucket_file_name(0) == "bucket_00000"
    assert bucket_file_name(17, attempt=2) == "bucket_00017_2"
    assert parse_bucket_file("bucket_00017") == 17
    assert parse_bucket_file("bucket_00017_2") == 17
    assert parse_bucket_file("/t/delta_0000001_0000001_0000/bucket_00003") == 3
    assert parse_bucket_file("bucket_00000_flush_length") is None
    assert parse_bucket_file("000000_0") is None
    with pytest.raises(ValueError, match="0..4095"):
        bucket_file_name(4096)


@given(st.integers(0, 4095), st.none() | st.integers(0, 10**6))
def test_bucket_file_round_trip(bucket: int, attempt: int | None) -> None:
    assert parse_bucket_file(bucket_file_name(bucket, attempt)) == bucket


def test_side_file() -> None:
    p = "/t/delta_0000011_0000020/bucket_00000"
    assert side_file_path(p) == "/t/delta_0000011_0000020/bucket_00000_flush_length"
    assert is_side_file(side_file_path(p))
    assert not is_side_file(p)


def test_bucket_codec_examples() -> None:
    # docs/format.md §7: bucket 0 / stmt 0 = 536870912, bucket 1 = 536936448.
    assert encode_bucket_property(0, 0) == 536870912 == 0x20000000
    assert encode_bucket_property(1, 0) == 536936448 == 0x20010000
    assert encode_bucket_property(3, -1) == encode_bucket_property(3, 0)
    assert encode_bucket_property(4095, 4095) == 0x2FFF0FFF
    assert decode_bucket_property(536936448) == (1, 1, 0)
    assert decode_bucket_property(7) == (0, 7, 0)


def test_bucket_codec_ranges() -> None:
    with pytest.raises(ValueError, match="Bucket id 4096"):
        encode_bucket_property(4096, 0)
    with pytest.raises(ValueError, match="Bucket id -1"):
        encode_bucket_property(-1, 0)
    with pytest.raises(ValueError, match="Statement id 4096"):
        encode_bucket_property(0, 4096)
    with pytest.raises(UnsupportedFormatError, match="codec version 2"):
        decode_bucket_property(2 << 29)
    with pytest.raises(UnsupportedFormatError, match="codec version 7"):
        decode_bucket_property(-1)


@given(st.integers(0, 4095), st.integers(0, 4095))
def test_bucket_codec_round_trip(bucket: int, stmt: int) -> None:
    assert decode_bucket_property(encode_bucket_property(bucket, stmt)) == (1, bucket, stmt)


def test_partition_names_escape_like_hive() -> None:
    assert format_partition("dt", "2026-01-01") == "dt=2026-01-01"
    # FileUtils.escapePathName: charToEscape as %XX (upper-case hex), the rest kept.
    assert format_partition("k", "a/b:c=d%") == "k=a%2Fb%3Ac%3Dd%25"
    assert format_partition("k", "x\x01\x7f{[]^#?*'\"\\") == (
        "k=x%01%7F%7B%5B%5D%5E%23%3F%2A%27%22%5C")
    assert format_partition("a=b", "é ü") == "a%3Db=é ü"
    assert format_partition("c", None) == f"c={DEFAULT_PARTITION_NAME}"
    assert format_partition("c", "") == "c=__HIVE_DEFAULT_PARTITION__"


def test_parse_partition_examples() -> None:
    assert parse_partition("dt=2026-01-01") == ("dt", "2026-01-01")
    assert parse_partition("k=a%2Fb%3Ac%3Dd%25") == ("k", "a/b:c=d%")
    assert parse_partition("k=a=b") == ("k", "a=b")
    assert parse_partition("k=") == ("k", "")
    assert parse_partition(f"c={DEFAULT_PARTITION_NAME}") == ("c", None)
    assert parse_partition("a%3Db=x") == ("a=b", "x")


@pytest.mark.parametrize(
    "name", ["delta_0000001_0000001_0000", "bucket_00000", "=x", "_tmp=1", ".hidden=1", "x"])
def test_parse_partition_rejects_other_names(name: str) -> None:
    assert parse_partition(name) is None


@settings(max_examples=300)
@given(st.text(min_size=1).filter(lambda c: not c.startswith(("_", "."))),
       st.none() | st.text())
def test_partition_round_trip(column: str, value: str | None) -> None:
    name = format_partition(column, value)
    assert "/" not in name
    expected = None if value in (None, "", DEFAULT_PARTITION_NAME) else value
    assert parse_partition(name) == (column, expected)


@settings(max_examples=200)
@given(st.text(max_size=30))
def test_parse_partition_never_raises(name: str) -> None:
    parse_partition(name)


def test_acid_version_file(memfs: tuple[fsspec.AbstractFileSystem, str]) -> None:
    fs, root = memfs
    d = f"{root}/delta_0000001_0000001_0000"
    fs.makedirs(d)
    assert write_acid_version_file(fs, d) is True
    assert fs.cat(f"{d}/_orc_acid_version") == b"2"
    assert write_acid_version_file(fs, d) is False
    assert fs.cat(f"{d}/_orc_acid_version") == b"2"


def test_compacted_marker(memfs: tuple[fsspec.AbstractFileSystem, str]) -> None:
    fs, root = memfs
    d = f"{root}/base_0000010"
    fs.makedirs(d)
    assert is_compacted_base(fs, d) is False
    write_compacted_marker(fs, d)
    assert json.loads(fs.cat(f"{d}/_metadata_acid")) == {
        "thisFileVersion": "0",
        "dataFormat": "compacted",
    }
    assert is_compacted_base(fs, d) is True
    with pytest.raises(FileExistsError):
        write_compacted_marker(fs, d)


def test_compacted_marker_versions(memfs: tuple[fsspec.AbstractFileSystem, str]) -> None:
    fs, root = memfs
    d = f"{root}/base_0000010"
    fs.makedirs(d)
    fs.pipe(f"{d}/_metadata_acid", b'{"dataFormat":"compacted","thisFileVersion":"1"}')
    with pytest.raises(UnsupportedFormatError, match="thisFileVersion '1' found"):
        is_compacted_base(fs, d)
    fs.pipe(f"{d}/_metadata_acid", b'{"thisFileVersion":"0","dataFormat":"truncated"}')
    assert is_compacted_base(fs, d) is False
    fs.pipe(f"{d}/_metadata_acid", b'{"thisFileVersion":"0","dataFormat":"weird"}')
    with pytest.raises(UnsupportedFormatError, match="dataFormat 'weird'"):
        is_compacted_base(fs, d)
    fs.pipe(f"{d}/_metadata_acid", b"not json")
    with pytest.raises(CorruptFileError) as info:
        is_compacted_base(fs, d)
    assert info.value.path.endswith("/base_0000010/_metadata_acid")
