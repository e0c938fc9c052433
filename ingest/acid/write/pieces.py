"""Stripe pieces: a bucket file's rows encoded away from its writer.

A piece is a plain ORC file of one stripe holding only the user's columns, encoded with the
codec and tuning of the bucket file it is meant for (`encode_piece`). `BucketWriter.write_piece`
wraps it into an ACID stripe (the five event columns, its row ids) and appends it, as it does
with the stripes it encodes itself (`_acid_stripes`). So the costly encoding can run where
the rows are (a Spark map task) and only the compressed bytes travel to the file's writer.
"""

from __future__ import annotations

import pyarrow as pa

from ingest.acid.write import _event_batches, _nested_nulls
from ingest.acid.write._file_state import writable_row_schema
from ingest.acid.write._stripe_encoder import StripeEncoder
from ingest.acid.write.options import BucketFileOptions


def piece_encoder(options: BucketFileOptions) -> StripeEncoder:
    """The encoder of the bucket files `options` describe (codec and tuning).

    Raises:
        ConfigError: the ORC encoder refuses the tuning.
    """
    options = options.with_defaults()
    assert options.compression is not None
    tuning = options.tuning
    return StripeEncoder(
        options.compression, block_size=tuning.compression_block_size,
        row_index_stride=tuning.row_index_stride, stripe_size_bytes=tuning.stripe_size_bytes,
        threads=1)


def encode_piece(rows: pa.Table, options: BucketFileOptions, *,
                 encoder: StripeEncoder | None = None) -> pa.Buffer:
    """`rows` (the user's columns) as one piece for a bucket file of `options`.

    Every row goes into the one stripe: the caller keeps a piece about a stripe's size
    (`WriterOptions.stripe_size_bytes`, and rows per flush) or smaller.

    Args:
        rows: rows of `options.row_schema` (types ORC stores alike are cast).
        options: the bucket file's options; `row_schema` is required.
        encoder: `piece_encoder(options)`, made once by a caller encoding many pieces.

    Raises:
        SchemaMismatchError: the rows' columns are not the row schema's.
        ConfigError: the ORC encoder refuses the tuning.
        ValueError: no row schema.
    """
    if options.row_schema is None:
        raise ValueError("Cannot encode a stripe piece without BucketFileOptions.row_schema")
    schema = writable_row_schema(options.row_schema)
    table = _event_batches.conform_rows(rows, schema, path="a stripe piece")
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if _nested_nulls.needs_fix(pa.struct(list(schema))):
        table = pa.Table.from_batches(
            [_nested_nulls.prepare_batch(b) for b in table.to_batches()], schema=schema)
    data, _ = (encoder or piece_encoder(options)).encode_file(table)
    return pa.py_buffer(data)


__all__ = ["encode_piece", "piece_encoder"]
