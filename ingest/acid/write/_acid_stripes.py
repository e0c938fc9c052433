"""ACID stripes: insert events built around stripes of the user's rows, or stripes of
whole events (deletes) as pyarrow encoded them.

pyarrow encodes only the user's columns, as a plain ORC file whose root struct becomes the
ACID `row` column. This module turns each of its stripes into an ACID stripe: it adds the
root struct and the five event columns, and rewrites the stripe footer with the user's
column ids shifted by six (ORC numbers columns in pre-order: root 0, operation 1 ...
currentTransaction 5, row 6). The event columns are encoded by `_event_columns`: encoded by
pyarrow they took a quarter of the encoding time (0.46 s of 1.83 s for 2M rows of the
writer benchmark's table). The encoded stripe's bytes are copied unchanged: stripes hold no
absolute offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from ingest.acid.format import INSERT, KEY_COLUMNS
from ingest.acid.write._event_columns import event_column
from ingest.orc import (
    VARINT,
    ColumnEncoding,
    ColumnEncodingKind,
    CompressionKind,
    FileTail,
    Footer,
    Message,
    Stream,
    StreamKind,
    StripeFooter,
    StripeInfo,
    compress_stream,
    decompress_stream,
)

# Columns in front of the user's: root, operation, originalTransaction, bucket, rowId,
# currentTransaction; the encoded file's root becomes `row`, column 6.
EVENT_COLUMNS = 6
# Streams that go in a stripe's index area, before its data.
INDEX_KINDS = frozenset({StreamKind.ROW_INDEX, StreamKind.BLOOM_FILTER,
                         StreamKind.BLOOM_FILTER_UTF8})


@dataclass(frozen=True)
class AcidStripe:
    """One encoded ACID stripe, ready to be placed in a bucket file.

    Attributes:
        pieces: its bytes, in file order.
        info: its StripeInformation, at offset 0 (the writer moves it).
        statistics: its column statistics, in ACID column order.
        last_key: (originalTransaction, bucket, rowId) of its last event (the key index).
    """

    pieces: list[bytes | memoryview]
    info: StripeInfo
    statistics: list[Message]
    last_key: tuple[int, int, int]


def event_stripe(encoded: bytes | memoryview, tail: FileTail, events: pa.Table) -> AcidStripe:
    """The stripe of `encoded`, a file pyarrow wrote from whole ACID `events`, unchanged."""
    (stripe,) = tail.stripes
    w, b, r = (events.column(n)[-1].as_py() for n in KEY_COLUMNS)
    return AcidStripe([memoryview(encoded)[stripe.offset:stripe.end]], stripe.moved_to(0),
                      tail.stripe_statistics[0], (w, b, r))


@dataclass(frozen=True)
class _UserStripe:
    """The one stripe of a file pyarrow wrote from a group of user columns, taken apart."""

    view: memoryview
    info: StripeInfo
    streams: list[Message]  # index streams first, the root's row index first of all
    encodings: list[Message]
    statistics: list[Message]
    footer: Message
    index_count: int  # streams in the index area
    root_index_length: int
    row_index_stride: int

    @classmethod
    def parse(cls, encoded: bytes | memoryview, tail: FileTail) -> _UserStripe:
        (info,) = tail.stripes
        view = memoryview(encoded)
        footer_start = info.offset + info.index_length + info.data_length
        footer = Message.decode(
            decompress_stream(tail.compression, view[footer_start:info.end], tail.block_size))
        streams = footer.messages(StripeFooter.STREAMS)
        kinds = [(s.uint(Stream.KIND), s.uint(Stream.COLUMN, 0)) for s in streams]
        n_index = sum(1 for k, _ in kinds if k in INDEX_KINDS)
        # Stripes are copied as [index area][data area]; only the root's row index is taken out.
        if any(k in INDEX_KINDS for k, _ in kinds[n_index:]):
            raise AssertionError("encoder wrote index streams after data streams")
        root_streams = [i for i, (_, c) in enumerate(kinds) if c == 0]
        if root_streams != [0] or kinds[0][0] != StreamKind.ROW_INDEX:
            raise AssertionError(f"expected the root's row index as the only root stream: {kinds}")
        return cls(view, info, streams, footer.messages(StripeFooter.COLUMNS),
                   tail.stripe_statistics[0],
                   footer, n_index, streams[0].uint(Stream.LENGTH) or 0,
                   tail.footer.uint(Footer.ROW_INDEX_STRIDE, 0) or 0)

    def index_area(self, *, with_root: bool) -> memoryview:
        start = self.info.offset + (0 if with_root else self.root_index_length)
        return self.view[start:self.info.offset + self.info.index_length]

    def data_area(self) -> memoryview:
        start = self.info.offset + self.info.index_length
        return self.view[start:start + self.info.data_length]


def insert_stripe(
    parts: Sequence[tuple[bytes | memoryview, FileTail]], *, write_id: int, bucket_property: int,
    first_row_id: int,
) -> AcidStripe:
    """One ACID stripe of insert events from the user's rows, encoded by pyarrow as one
    stripe per group of consecutive columns (groups can be encoded in parallel).

    Args:
        parts: (file, parsed tail) per column group, in column order; each file holds one
            stripe of the same rows.
        write_id: originalTransaction and currentTransaction of every event.
        bucket_property: the encoded bucket of every event.
        first_row_id: rowId of the first row; later rows count up by one.
    """
    kind, block = parts[0][1].compression, parts[0][1].block_size
    users = [_UserStripe.parse(data, tail) for data, tail in parts]
    rows = users[0].info.number_of_rows
    if any(u.info.number_of_rows != rows for u in users):
        raise AssertionError("column groups were encoded into stripes of different rows")
    events = _event_columns(users[0], rows, write_id=write_id, bucket_property=bucket_property,
                            first_row_id=first_row_id, stride=users[0].row_index_stride, kind=kind,
                            block=block)
    user = _user_columns(users)

    footer = Message([f for f in users[0].footer.fields
                      if f[0] not in (StripeFooter.STREAMS, StripeFooter.COLUMNS)])
    footer.set_messages(StripeFooter.STREAMS, [*events.index_streams, *user.index_streams,
                                     *events.data_streams, *user.data_streams])
    footer.set_messages(StripeFooter.COLUMNS, [*events.encodings, *user.encodings])
    footer_bytes = compress_stream(kind, footer.encode(), block)

    pieces = [*events.index, *user.index, *events.data, *user.data, footer_bytes]
    info = StripeInfo(0, sum(map(len, events.index)) + sum(map(len, user.index)),
                      sum(map(len, events.data)) + sum(map(len, user.data)), len(footer_bytes),
                      rows, list(users[0].info.extra))
    return AcidStripe(pieces, info, [*events.statistics, *user.statistics],
                      (write_id, bucket_property, first_row_id + rows - 1))


@dataclass
class _Columns:
    """Consecutive columns of a stripe: their index and data streams (bytes, and Stream
    entries for the stripe footer), column encodings and statistics."""

    index: list[bytes | memoryview] = field(default_factory=list)
    data: list[bytes | memoryview] = field(default_factory=list)
    index_streams: list[Message] = field(default_factory=list)
    data_streams: list[Message] = field(default_factory=list)
    encodings: list[Message] = field(default_factory=list)
    statistics: list[Message] = field(default_factory=list)


def _event_columns(first_user: _UserStripe, rows: int, *, write_id: int, bucket_property: int,
                   first_row_id: int, stride: int, kind: CompressionKind,
                   block: int) -> _Columns:
    """Columns 0-5: the root struct and the five event columns."""
    out = _Columns()
    # The user file's root row index (counts only, no positions) serves the new root too.
    root_index = first_user.index_area(with_root=True)[:first_user.root_index_length]
    out.index.append(root_index)
    out.index_streams.append(_stream(StreamKind.ROW_INDEX, 0, len(root_index)))
    out.encodings.append(_encoding(ColumnEncodingKind.DIRECT))
    out.statistics.append(first_user.statistics[0])
    values = [(INSERT, 0), (write_id, 0), (bucket_property, 0), (first_row_id, 1), (write_id, 0)]
    for column, (first, delta) in enumerate(values, start=1):
        encoded = event_column(first, delta, rows, stride=stride, kind=kind, block=block)
        out.index.append(encoded.index)
        out.index_streams.append(_stream(StreamKind.ROW_INDEX, column, len(encoded.index)))
        out.data.append(encoded.data)
        out.data_streams.append(_stream(StreamKind.DATA, column, len(encoded.data)))
        out.encodings.append(_encoding(ColumnEncodingKind.DIRECT_V2))
        out.statistics.append(encoded.statistics)
    return out


def _user_columns(users: list[_UserStripe]) -> _Columns:
    """Columns 6 on: the first group's root becomes `row`; a later group's root is dropped
    and its columns follow the previous group's."""
    out = _Columns()
    next_column = EVENT_COLUMNS
    for i, user in enumerate(users):
        keep_root = i == 0
        shift = next_column if keep_root else next_column - 1
        streams = user.streams if keep_root else user.streams[1:]  # [0]: the root's index
        index_count = user.index_count - (0 if keep_root else 1)
        out.index.append(user.index_area(with_root=keep_root))
        out.index_streams += [_shifted(s, shift) for s in streams[:index_count]]
        out.data.append(user.data_area())
        out.data_streams += [_shifted(s, shift) for s in streams[index_count:]]
        out.encodings += user.encodings if keep_root else user.encodings[1:]
        out.statistics += user.statistics if keep_root else user.statistics[1:]
        next_column = shift + len(user.encodings)
    return out


def _stream(kind: int, column: int, length: int) -> Message:
    return Message([(Stream.KIND, 0, kind), (Stream.COLUMN, 0, column), (Stream.LENGTH, 0, length)])


def _shifted(stream: Message, shift: int) -> Message:
    out = Message(list(stream.fields))
    out.set_uint(Stream.COLUMN, (stream.uint(Stream.COLUMN, 0) or 0) + shift)
    return out


def _encoding(kind: int) -> Message:
    return Message([(ColumnEncoding.KIND, VARINT, kind),
                    (ColumnEncoding.DICTIONARY_SIZE, VARINT, 0)])
