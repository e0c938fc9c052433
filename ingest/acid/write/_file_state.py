"""The state of a bucket file a writer continues: what its next tail must describe, new or
restored from the file's last complete tail (`BucketWriter.open_append`), and the checks that
the file can be continued with the options given. Knows nothing of encoding stripes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pyarrow as pa

from ingest.acid.format import (
    ACID_STATS,
    CHECKSUMS_KEY,
    KEY_INDEX,
    WRITTEN_KEYS,
    decode_bucket_property,
    parse_acid_stats,
    parse_checksums,
    parse_key_index,
)
from ingest.acid.read import as_read_back
from ingest.acid.write._stripe_encoder import PYARROW_BLOCK_UNIT
from ingest.acid.write.options import BucketFileOptions
from ingest.errors import CorruptFileError, SchemaMismatchError, UnsupportedFormatError
from ingest.orc import FileTail, Footer, Message, Metadata, StripeInfo, UserMetadataItem


@dataclass
class FileState:
    """Where a bucket file stands: what its next tail must describe. A new file starts empty;
    `open_append` restores it from the file's last complete tail."""

    template: FileTail  # a tail of this schema and writer: types and postscript are reused
    position: int  # bytes written (or kept) so far
    stripes: list[StripeInfo] = field(default_factory=list)
    stripe_messages: list[bytes] = field(default_factory=list)  # encoded StripeInformation
    stripe_stats: list[bytes] = field(default_factory=list)  # encoded StripeStatistics
    keys: list[tuple[int, int, int]] = field(default_factory=list)  # last key of each stripe
    # Stripe checksums (ingest.acid.format.checksums); None: the file has none, hash its stripes.
    checksums: list[int] | None = field(default_factory=list)
    counts: tuple[int, int, int] = (0, 0, 0)  # inserts, updates, deletes (hive.acid.stats)
    other_metadata: list[Message] = field(default_factory=list)
    flushed_stripe_count: int = -1  # no tail written yet
    last_flush_length: int = 0
    next_row_id: int = 0
    last_key: tuple[int, ...] | None = None
    appending: bool = False
    bucket_property: int | None = None  # as the file has it (a Hive 2 file's is version 0)


def writable_row_schema(row_schema: pa.Schema) -> pa.Schema:
    """The row schema as written: every column nullable, as ORC readers report them.

    Raises:
        SchemaMismatchError: no columns.
    """
    if len(row_schema) == 0:
        raise SchemaMismatchError("Cannot write an ACID bucket file of rows without columns")
    return pa.schema([f.with_nullable(True) for f in row_schema])


def restore(path: str, tail: FileTail, file_row_schema: pa.Schema,
             options: BucketFileOptions) -> tuple[BucketFileOptions, FileState]:
    """The options (completed from the file) and state of a file to append to.

    Raises:
        CorruptFileError: the key index or the stripe checksums do not match the stripes.
        SchemaMismatchError: rows of another schema, or an older write id.
        UnsupportedFormatError: a codec or block size the encoder cannot write.
        ValueError: the options' bucket, statement, kind or codec differ from the file's.
    """
    compression = tail.compression
    if compression == "lzo":
        raise UnsupportedFormatError(f"Cannot append to {path}: LZO is not supported")
    if compression != "none" and tail.block_size % PYARROW_BLOCK_UNIT:
        raise UnsupportedFormatError(
            f"Cannot append to {path}: it was written with a compression block size "
            f"of {tail.block_size:,} bytes, and the ORC encoder writes only multiples of "
            f"{PYARROW_BLOCK_UNIT:,}", hint="write the new rows to a new delta instead")
    keys = parse_key_index(tail.user_metadata.get(KEY_INDEX, b""), path)
    if len(keys) != len(tail.stripes):
        raise CorruptFileError(
            f"Cannot append to {path}: {KEY_INDEX} has {len(keys)} entries for "
            f"{len(tail.stripes)} stripes", path=path)
    last_write_id, last_row_id = (keys[-1][0], keys[-1][2]) if keys else (-1, -1)
    write_id = options.write_id
    if write_id < last_write_id:
        raise SchemaMismatchError(
            f"Cannot append write id {write_id} to {path}: it already holds write id "
            f"{last_write_id} and events must stay sorted by write id")
    raw_stats = tail.user_metadata.get(ACID_STATS, b"0,0,0")
    counts = parse_acid_stats(raw_stats)
    if counts is None:
        raise CorruptFileError(f"Cannot append to {path}: {ACID_STATS} is {raw_stats!r}, not "
                               "three integers", path=path)
    inserts, updates, deletes = counts
    # Earlier stripes keep the checksums recorded when they were written: recomputing them
    # here would bless bytes damaged since.
    checksums = parse_checksums(tail.user_metadata.get(CHECKSUMS_KEY), path)
    if checksums is not None and len(checksums) != len(tail.stripes):
        raise CorruptFileError(
            f"Cannot append to {path}: {CHECKSUMS_KEY} has {len(checksums)} entries for "
            f"{len(tail.stripes)} stripes", path=path)
    if keys:
        _, bucket_id, statement_id = decode_bucket_property(keys[-1][1])
    else:  # no stripe yet: nothing fixes the bucket
        bucket_id, statement_id = options.bucket_id or 0, options.statement_id or 0
    # A delete-delta file (only delete events) continues as one, still sorted by key.
    kind = "delete" if deletes > 0 and inserts == 0 else "insert"
    row_schema = writable_row_schema(file_row_schema)
    if options.row_schema is not None:
        given = writable_row_schema(options.row_schema)
        if ([(f.name, as_read_back(f.type)) for f in given]
                != [(f.name, as_read_back(f.type)) for f in row_schema]):
            raise SchemaMismatchError(
                f"Cannot append to {path}: its rows are {row_schema}, the options' {given}")
        row_schema = given
    for name, found in (("bucket_id", bucket_id), ("statement_id", statement_id),
                        ("kind", kind), ("compression", compression)):
        wanted = getattr(options, name)
        if wanted is not None and wanted != found:
            raise ValueError(f"Cannot append to {path}: the options' {name} is {wanted!r} "
                             f"but the file's is {found!r}")
    # New stripes must use the file's block size and row-index stride: the footer kept
    # states them for every stripe (a file without row index keeps the options' stride).
    tuning = dataclasses.replace(
        options.tuning, compression_block_size=tail.block_size,
        row_index_stride=tail.footer.uint(Footer.ROW_INDEX_STRIDE, 0)
        or options.tuning.row_index_stride)
    options = dataclasses.replace(
        options, row_schema=row_schema, bucket_id=bucket_id, statement_id=statement_id,
        kind=kind, compression=compression, tuning=tuning)  # type: ignore[arg-type]
    state = FileState(
        template=tail, position=tail.length, stripes=tail.stripes,
        stripe_messages=[s.to_message().encode() for s in tail.stripes],
        stripe_stats=[bytes(b) for b in tail.metadata.raw(Metadata.STRIPE_STATS)],
        keys=keys, checksums=checksums,
        counts=(inserts, updates, deletes),
        other_metadata=[m for m in tail.footer.messages(Footer.METADATA)
                        if m.string(UserMetadataItem.NAME) not in WRITTEN_KEYS],
        flushed_stripe_count=len(tail.stripes), last_flush_length=tail.length,
        next_row_id=last_row_id + 1 if write_id == last_write_id else 0,
        last_key=keys[-1] if keys else None, appending=True,
        bucket_property=keys[-1][1] if keys else None)
    return options, state


__all__ = ["FileState", "restore", "writable_row_schema"]
