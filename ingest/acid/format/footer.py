"""The ACID parts of an ORC footer: `hive.acid.key.index`, `hive.acid.stats`,
`hive.acid.version` (OrcRecordUpdater.KeyIndexBuilder; docs/format.md §8), their parsing and
formatting, and the whole tail the bucket writer appends at each flush, which also carries
our stripe checksums (`ingest.stripe.checksums`, docs/format.md §16)."""

from __future__ import annotations

from collections.abc import Sequence

import xxhash

from ingest.errors import CorruptFileError
from ingest.orc import (
    MAGIC,
    CompressionKind,
    FileTail,
    Footer,
    Message,
    Metadata,
    UserMetadataItem,
    length_field,
    serialize_tail,
    varint_field,
)

KEY_INDEX = "hive.acid.key.index"
ACID_STATS = "hive.acid.stats"
ACID_VERSION = "hive.acid.version"
ACID_KEYS = (KEY_INDEX, ACID_STATS, ACID_VERSION)
# Our stripe checksums (ingest.acid.format.checksums hashes and checks; this module encodes).
CHECKSUMS_KEY = "ingest.stripe.checksums"
CHECKSUMS_ALGORITHM = "xxh3_64"
WRITTEN_KEYS = (*ACID_KEYS, CHECKSUMS_KEY)  # the items every tail AcidTail encodes rewrites
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


class AcidTail:
    """The tail of an ACID bucket file, rewritten at every flush: the entries of earlier
    stripes (StripeInformation, stripe statistics, key index) are encoded once, when their
    stripe is added, so a flush encodes only the few fields that change; re-encoding every
    stripe's entries would make each flush cost more than the last."""

    def __init__(self, template: FileTail, *, other_metadata: Sequence[Message],
                 compression: CompressionKind, block_size: int) -> None:
        """Args:
            template: a tail of the same schema and writer; its types and postscript are
                reused.
            other_metadata: user metadata items to keep (none of `WRITTEN_KEYS`).
            compression, block_size: the file's codec and compression block size.
        """
        assert template.footer.has(Footer.TYPES), "template footer must carry the types"
        self._postscript = template.postscript
        self._compression: CompressionKind = compression
        self._block_size = block_size
        self._stripes = bytearray()  # encoded footer fields Footer.STRIPES, one per stripe
        self._stripe_statistics = bytearray()  # encoded metadata fields Metadata.STRIPE_STATS
        self._key_index = bytearray()  # the hive.acid.key.index value, "w,b,r;" per stripe
        self._checksums = bytearray()  # 8 bytes per stripe (ingest.acid.format.checksums)
        self._other_metadata = b"".join(length_field(Footer.METADATA, m.encode())
                                        for m in other_metadata)
        # The footer's fields in the order a Message rewrite of the template would give them
        # (each rewritten field where it first was); the rest of the template kept encoded.
        footer = Message(list(template.footer.fields))
        for number in _CHANGING:
            footer.set_uint(number, 0)
        self._order = list(dict.fromkeys(number for number, _, _ in footer.fields))
        self._kept = {number: Message([f for f in template.footer.fields if f[0] == number])
                      .encode() for number in self._order if number not in _CHANGING}

    def add_stripe(self, stripe: bytes, statistics: bytes, key: tuple[int, int, int],
                   checksum: bytes) -> None:
        """Describe one more stripe.

        Args:
            stripe: its encoded StripeInformation (offsets as placed in the file).
            statistics: its encoded StripeStatistics.
            key: (originalTransaction, bucket property, rowId) of its last event.
            checksum: its packed checksum (`ingest.acid.format.checksums.pack_checksum`).
        """
        assert len(checksum) == 8
        self._stripes += length_field(Footer.STRIPES, stripe)
        self._checksums += checksum
        self._stripe_statistics += length_field(Metadata.STRIPE_STATS, statistics)
        self._key_index += (format_key(*key) + ";").encode()

    def encode(self, *, content_end: int, number_of_rows: int,
               statistics: Sequence[Message], counts: tuple[int, int, int]) -> bytes:
        """Bytes of a complete tail describing every stripe added so far.

        Args:
            content_end: file offset where this tail starts.
            number_of_rows: rows in all stripes.
            statistics: file-level column statistics.
            counts: (inserts, updates, deletes) in the file, for `hive.acid.stats`.
        """
        changing: dict[int, bytes | bytearray] = {
            Footer.HEADER_LENGTH: varint_field(Footer.HEADER_LENGTH, len(MAGIC)),
            Footer.CONTENT_LENGTH: varint_field(Footer.CONTENT_LENGTH, content_end - len(MAGIC)),
            Footer.STRIPES: self._stripes,
            Footer.METADATA: b"".join([
                self._other_metadata,
                length_field(Footer.METADATA, _metadata_item(KEY_INDEX, bytes(self._key_index))),
                length_field(Footer.METADATA, _metadata_item(
                    ACID_STATS, format_acid_stats(*counts).encode())),
                length_field(Footer.METADATA, _ACID_VERSION_ITEM),
                # Every tail describes every stripe so far, so every tail holds all checksums.
                length_field(Footer.METADATA, _metadata_item(
                    CHECKSUMS_KEY, encode_checksums(self._checksums)))]),
            Footer.NUMBER_OF_ROWS: varint_field(Footer.NUMBER_OF_ROWS, number_of_rows),
            Footer.STATISTICS: b"".join(length_field(Footer.STATISTICS, m.encode())
                                        for m in statistics),
        }
        footer = b"".join(changing[n] if n in changing else self._kept[n] for n in self._order)
        return serialize_tail(postscript=self._postscript, footer=footer,
                              metadata=bytes(self._stripe_statistics),
                              compression=self._compression, block_size=self._block_size)


# The footer fields every flush rewrites.
_CHANGING = (Footer.HEADER_LENGTH, Footer.CONTENT_LENGTH, Footer.STRIPES, Footer.METADATA,
             Footer.NUMBER_OF_ROWS, Footer.STATISTICS)


def _metadata_item(name: str, value: bytes) -> bytes:
    """One encoded UserMetadataItem (name, value)."""
    return (length_field(UserMetadataItem.NAME, name.encode())
            + length_field(UserMetadataItem.VALUE, value))


def encode_checksums(packed: bytes | bytearray) -> bytes:
    """The `ingest.stripe.checksums` value (docs/format.md §16): the algorithm's name, a 0
    byte, the packed entry of every stripe (8 bytes big-endian each), then the same hash of
    everything before it, so that a damaged value is told from a damaged stripe."""
    body = CHECKSUMS_PREFIX + bytes(packed)
    return body + xxhash.xxh3_64_intdigest(body).to_bytes(8, "big")


CHECKSUMS_PREFIX = CHECKSUMS_ALGORITHM.encode() + b"\x00"
_ACID_VERSION_ITEM = _metadata_item(ACID_VERSION, ACID_VERSION_VALUE.encode())
