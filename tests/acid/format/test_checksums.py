"""Stripe checksums (`ingest.stripe.checksums`, docs/format.md §16): written at every flush,
carried over by open_append, checked by our reader and by verify's helpers; files without
them read as before."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.orc as po
import pyorc
import pytest
from support import SIMPLE_SCHEMA, simple_table

from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList, read_events
from ingest.acid.format.checksums import (
    CHECK_ENV,
    CHECKSUMS_KEY,
    find_mismatches,
    parse_checksums,
    stripe_checksum,
)
from ingest.acid.format.names import format_delta
from ingest.acid.format.side_file import read_flush_lengths
from ingest.acid.read.reader import read_table
from ingest.errors import CorruptFileError
from ingest.orc import Message, read_tail, serialize_tail
from ingest.orc.proto_fields import Footer, UserMetadataItem

FS = fsspec.filesystem("file")


def write_delta(root: Path, write_id: int, ids: range, *, flush_every: int = 0) -> str:
    path = str(root / format_delta(write_id, write_id) / "bucket_00000")
    with BucketWriter.create(path, BucketFileOptions(write_id=write_id,
                                                     row_schema=SIMPLE_SCHEMA)) as w:
        step = flush_every or len(ids)
        for start in range(ids.start, ids.stop, step):
            w.write(simple_table(range(start, min(start + step, ids.stop))))
            if flush_every:
                w.flush()
    return path


def recorded(path: str, length: int | None = None) -> list[int]:
    length = FS.size(path) if length is None else length
    values = parse_checksums(read_tail(FS, path, length).user_metadata.get(CHECKSUMS_KEY), path)
    assert values is not None, f"{path} at {length} has no {CHECKSUMS_KEY}"
    return values


def actual(path: str, length: int | None = None) -> list[int]:
    data = Path(path).read_bytes()
    tail = read_tail(FS, path, len(data) if length is None else length)
    return [stripe_checksum(data[s.offset:s.end]) for s in tail.stripes]


def flip(path: str, offset: int) -> None:
    data = bytearray(Path(path).read_bytes())
    data[offset] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def strip_checksums(path: str) -> None:
    """Rewrite the file's last tail without our key, as Hive would have written it."""
    data = Path(path).read_bytes()
    tail = read_tail(FS, path, len(data))
    footer = Message([f for f in tail.footer.fields if not (
        f[0] == Footer.METADATA
        and Message.decode(f[2]).string(UserMetadataItem.NAME) == CHECKSUMS_KEY)])
    new_tail = serialize_tail(postscript=tail.postscript, footer=footer,
                              metadata=tail.metadata, compression=tail.compression,
                              block_size=tail.block_size)
    Path(path).write_bytes(data[:tail.start] + new_tail)
    assert CHECKSUMS_KEY not in read_tail(FS, path, FS.size(path)).user_metadata


def test_every_intermediate_footer_holds_every_stripes_checksum(tmp_path: Path) -> None:
    path = str(tmp_path / format_delta(1, 3) / "bucket_00000")
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA))
    lengths = []
    for k in range(3):
        w.write(simple_table(range(k * 10, k * 10 + 10)))
        lengths.append(w.flush())
    assert read_flush_lengths(FS, path)[1:] == lengths
    for k, length in enumerate(lengths):
        values = recorded(path, length)
        assert len(values) == k + 1
        assert values == actual(path, length)
    w.close()
    assert recorded(path) == actual(path) and len(recorded(path)) == 3
    raw = read_tail(FS, path, FS.size(path)).user_metadata[CHECKSUMS_KEY]
    assert raw.startswith(b"xxh3_64\x00") and len(raw) == len(b"xxh3_64\x00") + 4 * 8
    body = raw[:-8]
    assert raw[-8:] == stripe_checksum(body).to_bytes(8, "big")
    assert [int.from_bytes(body[i:i + 8], "big") for i in range(8, len(body), 8)] == actual(path)


def test_other_readers_ignore_the_key(tmp_path: Path) -> None:
    path = write_delta(tmp_path, 1, range(100), flush_every=30)
    assert po.ORCFile(path).read().num_rows == 100
    with open(path, "rb") as f:
        reader = pyorc.Reader(f)
        assert len(list(reader)) == 100
        assert CHECKSUMS_KEY in reader.user_metadata


def test_open_append_carries_checksums_over(tmp_path: Path) -> None:
    path = write_delta(tmp_path, 1, range(20), flush_every=10)
    before = recorded(path)
    with BucketWriter.open_append(path, BucketFileOptions(write_id=2)) as w:
        w.write(simple_table(range(20, 30)))
        w.flush()
        assert recorded(path, w.bytes_written)[:2] == before
        w.write(simple_table(range(30, 40)))
    after = recorded(path)
    assert after[:2] == before and len(after) == 4 and after == actual(path)


def test_open_append_keeps_the_recorded_checksum_of_a_damaged_stripe(tmp_path: Path) -> None:
    path = write_delta(tmp_path, 1, range(200))
    tail = read_tail(FS, path, FS.size(path))
    stripe = tail.stripes[0]
    flip(path, stripe.offset + stripe.index_length + 5)
    with BucketWriter.open_append(path, BucketFileOptions(write_id=2)) as w:
        w.write(simple_table(range(200, 210)))
    (m,) = find_mismatches(FS, path, read_tail(FS, path, FS.size(path)))
    assert (m.stripe, m.offset, m.end, m.write_ids) == (0, stripe.offset, stripe.end, (1, 1))


def test_open_append_computes_missing_checksums(tmp_path: Path) -> None:
    path = write_delta(tmp_path, 1, range(20), flush_every=10)
    strip_checksums(path)
    with BucketWriter.open_append(path, BucketFileOptions(write_id=2)) as w:
        w.write(simple_table(range(20, 30)))
    assert len(recorded(path)) == 3 and recorded(path) == actual(path)


def test_reader_refuses_a_flipped_stripe_byte(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    write_delta(root, 1, range(100))
    path = write_delta(root, 2, range(100, 200), flush_every=50)
    snapshot = ValidWriteIdList.all_committed("default.t", 2)
    expected = read_table(str(root), snapshot)
    tail = read_tail(FS, path, FS.size(path))
    second = tail.stripes[1]
    flip(path, second.offset + second.index_length + second.data_length // 2)
    with pytest.raises(CorruptFileError) as info:
        read_table(str(root), snapshot)
    e = info.value
    assert e.path == path and e.offset == second.offset
    assert f"bucket file {path}: stripe 1 (bytes {second.offset:,}..{second.end:,}, " \
           "holding write ids 2..2)" in str(e)
    with pytest.raises(CorruptFileError, match="stripe 1"):
        list(read_events(path))
    # Turned off, the reader decodes the stripe as before (whatever it then yields).
    monkeypatch.setenv(CHECK_ENV, "0")
    try:
        got = read_table(str(root), snapshot)
        assert got.num_rows <= expected.num_rows
    except CorruptFileError as e:
        assert "Checksum" not in str(e)


def test_files_without_checksums_still_read(tmp_path: Path) -> None:
    root = tmp_path / "t"
    path = write_delta(root, 1, range(50), flush_every=20)
    snapshot = ValidWriteIdList.all_committed("default.t", 1)
    expected = read_table(str(root), snapshot)
    strip_checksums(path)
    assert read_table(str(root), snapshot).equals(expected)
    assert find_mismatches(FS, path, read_tail(FS, path, FS.size(path))) == []
    # A pyarrow-written original file (no user metadata at all) beside it.
    po.write_table(pa.table({"id": pa.array([900], pa.int64()), "value": ["x"]}),
                   str(root / "000000_0"))
    assert read_table(str(root), snapshot).num_rows == 51


def test_a_damaged_value_is_told_from_a_damaged_stripe(tmp_path: Path) -> None:
    def value(body: bytes) -> bytes:
        return body + stripe_checksum(body).to_bytes(8, "big")

    good = value(b"xxh3_64\x00" + (5).to_bytes(8, "big"))
    assert parse_checksums(good, "f") == [5]
    assert parse_checksums(value(b"xxh3_64\x00"), "f") == []
    assert parse_checksums(value(b"crc99\x00" + b"\x00" * 8), "f") is None  # unknown: unchecked
    assert parse_checksums(None, "f") is None
    for damaged in (good[:-1] + bytes([good[-1] ^ 1]), good[:10] + b"\xff" + good[11:],
                    b"xxh3_64\x00" + b"\x01" * 7, b"xxh3_64", b"xxh4_64" + good[7:]):
        with pytest.raises(CorruptFileError, match="fails its own check"):
            parse_checksums(damaged, "f")


def test_readers_read_through_a_damaged_value_and_verify_reports_it(tmp_path: Path) -> None:
    """Only the footer's checksum bytes changed: the stripes are intact, so readers read them
    unchecked (as a file without checksums); the value's own check still reports it."""
    root = tmp_path / "t"
    path = write_delta(root, 1, range(50), flush_every=20)
    snapshot = ValidWriteIdList.all_committed("default.t", 1)
    expected = read_table(str(root), snapshot)
    data = Path(path).read_bytes()
    tail = read_tail(FS, path, len(data))
    raw = tail.user_metadata[CHECKSUMS_KEY]
    items = [Message.decode(f[2]) for f in tail.footer.fields if f[0] == Footer.METADATA]
    (item,) = [m for m in items if m.string(UserMetadataItem.NAME) == CHECKSUMS_KEY]
    item.set_bytes(UserMetadataItem.VALUE, raw[:9] + bytes([raw[9] ^ 0x40]) + raw[10:])
    footer = Message([f for f in tail.footer.fields if f[0] != Footer.METADATA])
    footer.set_messages(Footer.METADATA, items)
    Path(path).write_bytes(data[:tail.start] + serialize_tail(
        postscript=tail.postscript, footer=footer, metadata=tail.metadata,
        compression=tail.compression, block_size=tail.block_size))
    assert read_table(str(root), snapshot).equals(expected)
    new_tail = read_tail(FS, path, FS.size(path))
    with pytest.raises(CorruptFileError, match="fails its own check"):
        find_mismatches(FS, path, new_tail)
    with pytest.raises(CorruptFileError, match="fails its own check"):
        BucketWriter.open_append(path, BucketFileOptions(write_id=2))
