"""ORC tail: protobuf wire round trips, every codec, clear errors on cut or foreign bytes, and
the cheap check of a later tail against an earlier one."""

from __future__ import annotations

import io

import fsspec
import pyarrow as pa
import pyarrow.orc as po
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.errors import CorruptFileError, TailError
from ingest.orc import (
    Message,
    StripeInfo,
    check_extends,
    compress_stream,
    decompress_stream,
    parse_tail,
    read_tail,
    serialize_tail,
)
from ingest.orc._protobuf import FIXED32, FIXED64, LENGTH, VARINT
from ingest.orc.compression import CODECS
from ingest.orc.proto_fields import Footer, Metadata

PYARROW_NAME = {"none": "uncompressed"}

fields = st.lists(st.one_of(
    st.tuples(st.integers(1, 9000), st.just(VARINT), st.integers(0, 2**64 - 1)),
    st.tuples(st.integers(1, 9000), st.just(LENGTH), st.binary(max_size=40)),
    st.tuples(st.integers(1, 9000), st.just(FIXED64), st.binary(min_size=8, max_size=8)),
    st.tuples(st.integers(1, 9000), st.just(FIXED32), st.binary(min_size=4, max_size=4)),
), max_size=20)


@given(fields)
def test_message_round_trips_unknown_fields_byte_for_byte(raw: list) -> None:
    message = Message(list(raw))
    encoded = message.encode()
    assert Message.decode(encoded).fields == raw
    assert Message.decode(encoded).encode() == encoded


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=5000), block=st.sampled_from([7, 100, 65536]))
def test_stream_compression_round_trips(codec: str, data: bytes, block: int) -> None:
    assert decompress_stream(codec, compress_stream(codec, data, block), block) == data


def _orc_bytes(codec: str, rows: int = 5000) -> bytes:
    table = pa.table({"a": pa.array(range(rows), pa.int64()),
                      "s": pa.array([f"x{i}" for i in range(rows)])})
    sink = io.BytesIO()
    po.write_table(table, sink, compression=PYARROW_NAME.get(codec, codec))
    return sink.getvalue()


@pytest.mark.parametrize("codec", CODECS)
def test_tail_of_pyarrow_file_parses_and_reserialises_to_same_messages(codec: str) -> None:
    data = _orc_bytes(codec)
    tail = parse_tail(data, len(data))
    assert tail.compression == codec
    assert tail.number_of_rows == 5000
    assert sum(s.number_of_rows for s in tail.stripes) == 5000
    again = serialize_tail(postscript=tail.postscript, footer=tail.footer,
                           metadata=tail.metadata, compression=codec,
                           block_size=tail.block_size)
    rebuilt = data[:tail.start] + again
    tail2 = parse_tail(rebuilt, len(rebuilt))
    assert tail2.footer.fields == tail.footer.fields
    assert tail2.metadata.fields == tail.metadata.fields
    assert po.ORCFile(io.BytesIO(rebuilt)).read().num_rows == 5000


@pytest.mark.parametrize("cut", [1, 2, 10, 50])
def test_cut_file_is_rejected_with_offset(cut: int) -> None:
    data = _orc_bytes("zstd")
    with pytest.raises(TailError) as info:
        parse_tail(data[:-cut], len(data) - cut)
    assert info.value.offset is not None


def test_foreign_bytes_are_not_orc() -> None:
    with pytest.raises(TailError, match="no ORC postscript ends at offset 35"):
        parse_tail(b"PAR1 this is some parquet-ish text\n", 35)


def _flushed_twice(codec: str) -> tuple[bytes, int]:
    """An ORC file as a writer that flushed after all but its last stripe leaves it: the
    earlier tail, then the last stripe, then a tail repeating the earlier entries and adding
    the last stripe's. Returns (bytes, where the earlier tail ends)."""
    rows = 50000
    table = pa.table({"a": pa.array(range(rows), pa.int64()),
                      "s": pa.array([f"x{i}" for i in range(rows)])})
    sink = io.BytesIO()
    po.write_table(table, sink, compression=PYARROW_NAME.get(codec, codec), stripe_size=4096)
    data = sink.getvalue()
    tail = parse_tail(data, len(data))
    stripes, stats = tail.stripes, tail.metadata.encoded_messages(Metadata.STRIPE_STATS)
    assert len(stripes) >= 2

    def serialized(kept: list[StripeInfo], kept_stats: list[bytes]) -> bytes:
        footer = Message(list(tail.footer.fields))
        footer.set_messages(Footer.STRIPES, [s.to_message() for s in kept])
        footer.set_uint(Footer.NUMBER_OF_ROWS, sum(s.number_of_rows for s in kept))
        metadata = Message()
        metadata.set_messages(Metadata.STRIPE_STATS, kept_stats)
        return serialize_tail(postscript=tail.postscript, footer=footer, metadata=metadata,
                              compression=codec, block_size=tail.block_size)

    last = stripes[-1]
    head = data[:last.offset] + serialized(stripes[:-1], stats[:-1])
    later = serialized([*stripes[:-1], last.moved_to(len(head))], stats)
    return head + data[last.offset:last.end] + later, len(head)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_later_tail_extends_earlier(codec: str) -> None:
    data, earlier_end = _flushed_twice(codec)
    earlier = parse_tail(data[:earlier_end], earlier_end)
    later = parse_tail(data, len(data), check=False)
    check_extends(later, earlier)
    parse_tail(data, len(data))  # the full check agrees
    assert po.ORCFile(io.BytesIO(data)).read().num_rows == 50000
    with pytest.raises(TailError, match="does not come before"):
        check_extends(earlier, later)


def test_later_tail_with_a_changed_earlier_stripe_does_not_extend() -> None:
    data, earlier_end = _flushed_twice("none")
    earlier = parse_tail(data[:earlier_end], earlier_end)
    later = parse_tail(data, len(data))
    moved = later.stripes
    moved[0] = moved[0].moved_to(moved[0].offset + 1)  # still in bounds: only the copy tells
    later.footer.set_messages(Footer.STRIPES, [s.to_message() for s in moved])
    with pytest.raises(TailError, match="does not repeat the stripes"):
        check_extends(later, earlier)


@pytest.mark.parametrize("codec", ["none", "zstd"])
@given(data=st.data())
def test_damaged_later_tail_passes_the_cheap_check_only_if_it_passes_the_full_one(
        codec: str, data: st.DataObject) -> None:
    """What `check_extends` lets through, the full check lets through too, with the earlier
    stripes as the writer wrote them: a flipped byte never redirects a reader to other bytes
    of earlier flushes (the added stripes are the caller's to decode)."""
    raw, earlier_end = _flushed_twice(codec)
    earlier = parse_tail(raw[:earlier_end], earlier_end)
    good = parse_tail(raw, len(raw))
    buf = bytearray(raw)
    at = data.draw(st.integers(good.start, len(raw) - 1), label="at")
    buf[at] ^= data.draw(st.integers(1, 255), label="xor")
    try:
        later = parse_tail(bytes(buf), len(buf), check=False)
        check_extends(later, earlier)
    except TailError:
        return
    full = parse_tail(bytes(buf), len(buf))
    kept = len(earlier.stripes)
    assert [s.to_message().encode() for s in full.stripes[:kept]] == [
        s.to_message().encode() for s in good.stripes[:kept]]


def test_read_tail_reuses_a_parse_only_for_the_same_bytes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Tails are kept by their bytes: the same file reads the same parsed tail, a footer
    damaged in place since is parsed (and refused) anew, every time."""
    fs = fsspec.filesystem("file")
    path = str(tmp_path / "f.orc")
    data = _orc_bytes("zlib")
    with open(path, "wb") as f:
        f.write(data)
    first = read_tail(fs, path, len(data))
    assert read_tail(fs, path, len(data)) is first
    assert first.stripes is not first.stripes  # callers get their own lists
    # Flip a byte inside the footer (after the metadata, before the postscript).
    ps_len = data[-1]
    damaged = bytearray(data)
    damaged[len(data) - ps_len - 3] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(damaged))
    for _ in range(2):
        with pytest.raises(CorruptFileError):
            read_tail(fs, path, len(data))
    with open(path, "wb") as f:
        f.write(data)
    assert read_tail(fs, path, len(data)).footer.fields == first.footer.fields


def test_parsed_tails_stay_within_their_bounds() -> None:
    from ingest.orc.reader import _ParsedTails

    tails = [_orc_bytes(codec) for codec in ("zlib", "zstd", "snappy")]
    ends = [t[-(parse_tail(t, len(t)).length - parse_tail(t, len(t)).start):] for t in tails]
    kept = _ParsedTails(entries=2, tail_bytes=10**6)
    for t, end in zip(tails, ends, strict=True):
        kept.parse(end, len(t), check=True)
    assert len(kept._items) == 2 and (len(tails[0]), True, ends[0]) not in kept._items
    small = _ParsedTails(entries=10, tail_bytes=max(len(end) for end in ends))
    for t, end in zip(tails, ends, strict=True):
        small.parse(end, len(t), check=True)
    assert len(small._items) == 1 and small._held == len(ends[2])
