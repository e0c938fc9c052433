"""Stripes of whole ACID events encoded as column groups in parallel, for compaction output.

`StripeEncoder.event_stripe` hands a stripe's events to pyarrow in one call (one core). Here
the five event columns form one group and the row's columns others, each encoded by pyarrow on
the encoder's thread pool, then stitched as `_acid_stripes.insert_stripe` stitches insert
stripes: the event group's root becomes the ACID root, the first row group's root `row`.
"""

from __future__ import annotations

import pyarrow as pa

from ingest.acid.format import KEY_COLUMNS, ROW
from ingest.acid.write._acid_stripes import AcidStripe, _Columns, _user_columns, _UserStripe
from ingest.acid.write._stripe_encoder import StripeEncoder, _column_groups, _pool
from ingest.orc import Message, StripeFooter, StripeInfo, compress_stream

# Below this many rows a stripe is encoded in one call: a thread hand-off costs more.
MIN_ROWS_TO_SPLIT = 8 * 1024


def event_stripe(encoder: StripeEncoder, events: pa.Table) -> AcidStripe:
    """One stripe of `events` (the ACID event schema; `row` never null), encoded in parallel.

    Falls back to one pyarrow call for small stripes, one thread, or null rows (delete
    events), where a group split gains nothing or `row` needs its own present stream.
    """
    row = events.column(ROW)
    if (encoder.threads < 2 or events.num_rows < MIN_ROWS_TO_SPLIT or row.null_count
            or row.type.num_fields == 0):
        return encoder.event_stripe(events)
    head = events.select(range(events.schema.get_field_index(ROW)))
    user = pa.Table.from_arrays(row.flatten(), schema=pa.schema(list(row.type)))
    groups = _column_groups(user, encoder.threads)
    tables = [head, *(user.select(range(a, b)) for a, b in groups)]
    parts = list(_pool(len(tables)).map(encoder.encode_file, tables))
    stripes = [_UserStripe.parse(data, tail) for data, tail in parts]
    first, users = stripes[0], stripes[1:]
    rows = first.info.number_of_rows
    if any(u.info.number_of_rows != rows for u in users):
        raise AssertionError("column groups were encoded into stripes of different rows")
    events_part = _Columns(
        index=[first.index_area(with_root=True)], data=[first.data_area()],
        index_streams=list(first.streams[:first.index_count]),
        data_streams=list(first.streams[first.index_count:]),
        encodings=list(first.encodings), statistics=list(first.statistics))
    user_part = _user_columns(users)
    kind, block = parts[0][1].compression, parts[0][1].block_size
    footer = Message([f for f in first.footer.fields
                      if f[0] not in (StripeFooter.STREAMS, StripeFooter.COLUMNS)])
    footer.set_messages(StripeFooter.STREAMS, [*events_part.index_streams, *user_part.index_streams,
                                     *events_part.data_streams, *user_part.data_streams])
    footer.set_messages(StripeFooter.COLUMNS, [*events_part.encodings, *user_part.encodings])
    footer_bytes = compress_stream(kind, footer.encode(), block)
    pieces = [*events_part.index, *user_part.index, *events_part.data, *user_part.data,
              footer_bytes]
    info = StripeInfo(0, sum(map(len, events_part.index)) + sum(map(len, user_part.index)),
                      sum(map(len, events_part.data)) + sum(map(len, user_part.data)),
                      len(footer_bytes), rows, list(first.info.extra))
    w, b, r = (events.column(n)[-1].as_py() for n in KEY_COLUMNS)
    return AcidStripe(pieces, info, [*events_part.statistics, *user_part.statistics], (w, b, r))


__all__ = ["MIN_ROWS_TO_SPLIT", "event_stripe"]
