"""ORC tail: protobuf wire round trips, every codec, and clear errors on cut or foreign bytes."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.orc as po
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.orc import Message, compress_stream, decompress_stream, parse_tail, serialize_tail
from ingest.orc._protobuf import FIXED32, FIXED64, LENGTH, VARINT
from ingest.orc.compression import CODECS
from ingest.orc.tail import TailError

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
