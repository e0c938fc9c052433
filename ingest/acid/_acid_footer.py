"""The ACID parts of an ORC footer: `hive.acid.key.index`, `hive.acid.stats`,
`hive.acid.version` (OrcRecordUpdater.KeyIndexBuilder; docs/format.md), their parsing and
formatting, and the whole tail the bucket writer appends at each flush."""

from __future__ import annotations

from collections.abc import Sequence

from ingest.errors import CorruptFileError
from ingest.orc import FileTail, Message, serialize_tail
from ingest.orc.compression import CompressionKind
from ingest.orc.tail import (
    FT_CONTENT_LENGTH,
    FT_HEADER_LENGTH,
    FT_METADATA,
    FT_NUMBER_OF_ROWS,
    FT_STATISTICS,
    FT_STRIPES,
    FT_TYPES,
    MAGIC,
    MD_STRIPE_STATS,
)

KEY_INDEX = "hive.acid.key.index"
ACID_STATS = "hive.acid.stats"
ACID_VERSION = "hive.acid.version"
ACID_KEYS = (KEY_INDEX, ACID_STATS, ACID_VERSION)
ACID_VERSION_VALUE = "2"  # Hive 3's ACID version (split-update)


def format_key(write_id: int, bucket_property: int, row_id: int) -> str:
    """One key index entry, without its `;`."""
    return f"{write_id},{bucket_property},{row_id}"


def format_acid_stats(inserts: int, updates: int, deletes: int) -> str:
    """The `hive.acid.stats` value: "inserts,updates,deletes"."""
    return f"{inserts},{updates},{deletes}"


def parse_acid_stats(raw: bytes | None) -> tuple[int, int, int] | None:
    """(inserts, updates, deletes) of a `hive.acid.stats` value; None when missing or not
    three integers."""
    if raw is None:
        return None
    try:
        inserts, updates, deletes = (int(x) for x in raw.decode("ascii").split(",")[:3])
    except (ValueError, UnicodeDecodeError):
        return None
    return inserts, updates, deletes


def metadata_item(name: str, value: str) -> Message:
    """One UserMetadataItem (name, UTF-8 value)."""
    return Message([(1, 2, name.encode()), (2, 2, value.encode())])


def parse_key_index(raw: bytes, path: str) -> list[tuple[int, int, int]]:
    """The (originalTransaction, bucket property, rowId) entries of a key index.

    Raises:
        CorruptFileError: an entry is not three integers.
    """
    keys = []
    for entry in raw.decode("utf-8", "replace").split(";"):
        if not entry:
            continue
        try:
            w, b, r = (int(x) for x in entry.split(","))
        except ValueError as e:
            raise CorruptFileError(f"Cannot parse {KEY_INDEX} entry {entry!r} in {path}",
                                   path=path) from e
        keys.append((w, b, r))
    return keys


def acid_tail(
    template: FileTail, *, content_end: int, stripe_messages: Sequence[bytes],
    number_of_rows: int, statistics: Sequence[Message], stripe_statistics: Sequence[bytes],
    key_index: Sequence[str], counts: tuple[int, int, int], other_metadata: Sequence[Message],
    compression: CompressionKind, block_size: int,
) -> bytes:
    """Bytes of a complete tail describing every stripe written so far.

    Args:
        template: a tail of the same schema and writer; its types and postscript are reused.
        content_end: file offset where this tail starts.
        stripe_messages: encoded StripeInformation of every stripe, in file order.
        number_of_rows: rows in all stripes.
        statistics: file-level column statistics.
        stripe_statistics: encoded StripeStatistics, one per stripe.
        key_index: "originalTransaction,bucket,rowId" of the last event of each stripe.
        counts: (inserts, updates, deletes) in the file, for `hive.acid.stats`.
        other_metadata: user metadata items to keep (not the three ACID keys).
        compression, block_size: the file's codec and compression block size.
    """
    footer = Message(list(template.footer.fields))
    footer.set_uint(FT_HEADER_LENGTH, len(MAGIC))
    footer.set_uint(FT_CONTENT_LENGTH, content_end - len(MAGIC))
    footer.set_messages(FT_STRIPES, list(stripe_messages))
    footer.set_messages(FT_METADATA, [*other_metadata,
        metadata_item(KEY_INDEX, "".join(k + ";" for k in key_index)),
        metadata_item(ACID_STATS, format_acid_stats(*counts)),
        metadata_item(ACID_VERSION, ACID_VERSION_VALUE),
    ])
    footer.set_uint(FT_NUMBER_OF_ROWS, number_of_rows)
    footer.set_messages(FT_STATISTICS, list(statistics))
    assert footer.messages(FT_TYPES), "template footer must carry the types"
    metadata = Message()
    metadata.set_messages(MD_STRIPE_STATS, list(stripe_statistics))
    return serialize_tail(postscript=template.postscript, footer=footer, metadata=metadata,
                          compression=compression, block_size=block_size)
