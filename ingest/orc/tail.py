"""The ORC file tail: metadata section, footer and postscript, read and written.

Layout at the end of an ORC file: [metadata][footer][postscript][1 byte: postscript length].
Metadata and footer are compressed with the file's codec; the postscript never is. Stripe
offsets in the footer are absolute, so stripes can be moved by rewriting only the footer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ingest.errors import TailError, WireError
from ingest.orc._protobuf import VARINT, Message
from ingest.orc.compression import (
    CODE_BY_KIND,
    KIND_BY_CODE,
    CompressionKind,
    compress_stream,
    decompress_stream,
)
from ingest.orc.proto_fields import (
    Footer,
    Metadata,
    PostScript,
    StripeInformation,
    StripeStatistics,
    UserMetadataItem,
)

MAGIC = b"ORC"
_DEFAULT_BLOCK_SIZE = 256 * 1024


@dataclass
class StripeInfo:
    """One StripeInformation entry; `extra` keeps fields we do not interpret."""

    offset: int
    index_length: int
    data_length: int
    footer_length: int
    number_of_rows: int
    extra: list[tuple[int, int, int | bytes]] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.index_length + self.data_length + self.footer_length

    @property
    def end(self) -> int:
        return self.offset + self.length

    @classmethod
    def from_message(cls, m: Message) -> StripeInfo:
        return cls(m.uint(StripeInformation.OFFSET, 0) or 0,
                   m.uint(StripeInformation.INDEX_LENGTH, 0) or 0,
                   m.uint(StripeInformation.DATA_LENGTH, 0) or 0,
                   m.uint(StripeInformation.FOOTER_LENGTH, 0) or 0,
                   m.uint(StripeInformation.NUMBER_OF_ROWS, 0) or 0,
                   [f for f in m.fields if f[0] > StripeInformation.NUMBER_OF_ROWS])

    def to_message(self) -> Message:
        m = Message([(StripeInformation.OFFSET, VARINT, self.offset),
                     (StripeInformation.INDEX_LENGTH, VARINT, self.index_length),
                     (StripeInformation.DATA_LENGTH, VARINT, self.data_length),
                     (StripeInformation.FOOTER_LENGTH, VARINT, self.footer_length),
                     (StripeInformation.NUMBER_OF_ROWS, VARINT, self.number_of_rows)])
        m.fields.extend(self.extra)
        return m

    def moved_to(self, offset: int) -> StripeInfo:
        return StripeInfo(offset, self.index_length, self.data_length, self.footer_length,
                          self.number_of_rows, list(self.extra))


@dataclass
class FileTail:
    """A parsed tail. `length` is the file length it ends at; `start` where the metadata begins."""

    postscript: Message
    footer: Message
    metadata: Message
    length: int
    start: int
    # Values other modules derive from the tail alone (e.g. its wide TIMESTAMP columns),
    # computed once: a tail is never changed in place.
    memo: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    @property
    def compression(self) -> CompressionKind:
        return KIND_BY_CODE.get(self.postscript.uint(PostScript.COMPRESSION, 0) or 0, "none")

    @property
    def block_size(self) -> int:
        return (self.postscript.uint(PostScript.COMPRESSION_BLOCK_SIZE, _DEFAULT_BLOCK_SIZE)
                or _DEFAULT_BLOCK_SIZE)

    # What follows is decoded from the messages once and kept: a tail is never changed in
    # place (writers copy its messages before changing them), and readers ask for its
    # stripes and user metadata several times a file. Callers get copies of the containers.

    @cached_property
    def _stripes(self) -> tuple[StripeInfo, ...]:
        return tuple(StripeInfo.from_message(m) for m in self.footer.messages(Footer.STRIPES))

    @property
    def stripes(self) -> list[StripeInfo]:
        return list(self._stripes)

    @property
    def number_of_rows(self) -> int:
        return self.footer.uint(Footer.NUMBER_OF_ROWS, 0) or 0

    @cached_property
    def _types(self) -> tuple[Message, ...]:
        return tuple(self.footer.messages(Footer.TYPES))

    @property
    def types(self) -> list[Message]:
        return list(self._types)

    @cached_property
    def _statistics(self) -> tuple[Message, ...]:
        return tuple(self.footer.messages(Footer.STATISTICS))

    @property
    def statistics(self) -> list[Message]:
        return list(self._statistics)

    @cached_property
    def _stripe_statistics(self) -> tuple[tuple[Message, ...], ...]:
        return tuple(tuple(s.messages(StripeStatistics.COL_STATS))
                     for s in self.metadata.messages(Metadata.STRIPE_STATS))

    @property
    def stripe_statistics(self) -> list[list[Message]]:
        return [list(s) for s in self._stripe_statistics]

    @cached_property
    def _user_metadata(self) -> dict[str, bytes]:
        items = self.footer.messages(Footer.METADATA)
        return {(m.string(UserMetadataItem.NAME) or ""): (m.bytes_(UserMetadataItem.VALUE) or b"")
                for m in items}

    @property
    def user_metadata(self) -> dict[str, bytes]:
        return dict(self._user_metadata)


def parse_tail(data: bytes | memoryview, length: int, *, check: bool = True) -> FileTail:
    """Parse the tail of an ORC file from its last bytes.

    Args:
        data: the last len(data) bytes of the first `length` bytes of the file (at least the
            whole tail; `tail_bytes_needed` says how many).
        length: the file length the tail ends at.
        check: decode every nested message and check the stripe bounds now (readers must;
            a writer parsing the encoder's own output need not, and `check_extends` checks
            a later tail of a file against an earlier one for less).

    Raises:
        TailError: not ORC, or the tail is cut or malformed (with the offending offset).
    """
    if length < len(MAGIC) + 1 or len(data) < 1:
        raise TailError(f"{length} bytes is too short to be an ORC file", 0)
    ps_len = data[-1]
    base = length - len(data)  # file offset of data[0]
    if ps_len == 0 or ps_len + 1 > len(data):
        raise TailError(f"no ORC postscript ends at offset {length}: its length byte "
                        f"{ps_len} is not possible (not ORC, or cut)", length - 1)
    ps_start = len(data) - 1 - ps_len
    try:
        ps = Message.decode(data[ps_start:-1])
    except WireError as e:
        raise TailError(f"no ORC postscript ends at offset {length}: the bytes from "
                        f"{base + ps_start} are not one ({e}; not ORC, or cut)",
                        base + ps_start) from e
    try:
        magic = ps.bytes_(PostScript.MAGIC)
        footer_len = ps.uint(PostScript.FOOTER_LENGTH, 0) or 0
        metadata_len = ps.uint(PostScript.METADATA_LENGTH, 0) or 0
        compression_code = ps.uint(PostScript.COMPRESSION, 0) or 0
        block = (ps.uint(PostScript.COMPRESSION_BLOCK_SIZE, _DEFAULT_BLOCK_SIZE)
                 or _DEFAULT_BLOCK_SIZE)
    except WireError as e:
        raise TailError(f"no ORC postscript ends at offset {length}: {e} (not ORC, or cut)",
                        base + ps_start) from e
    if magic != MAGIC:
        raise TailError(f"no ORC postscript ends at offset {length}: magic 'ORC' missing "
                        "(not ORC, or cut)",
                        base + ps_start)
    footer_start = ps_start - footer_len
    metadata_start = footer_start - metadata_len
    if metadata_start < 0:
        raise TailError(
            f"tail needs {metadata_len + footer_len + ps_len + 1} bytes but only {len(data)} "
            "were given", base + ps_start)
    if base + metadata_start < len(MAGIC):
        raise TailError(f"footer of {footer_len} bytes does not fit in a {length}-byte file",
                        base + ps_start)
    kind = KIND_BY_CODE.get(compression_code)
    if kind is None:
        raise TailError(f"unknown compression code {compression_code}", base + ps_start)
    try:
        footer = Message.decode(decompress_stream(kind, data[footer_start:ps_start], block))
        metadata = Message.decode(
            decompress_stream(kind, data[metadata_start:footer_start], block))
    except Exception as e:  # noqa: BLE001 - any codec or wire failure means a corrupt tail
        raise TailError(f"footer or metadata ending at {base + ps_start} cannot be decoded: {e}",
                        base + metadata_start) from e
    tail = FileTail(ps, footer, metadata, length, base + metadata_start)
    if not check:
        return tail
    try:
        # Decode every nested message now, so damage shows here and not in a reader later.
        tail._types, tail._user_metadata, tail._statistics, tail._stripe_statistics  # noqa: B018
        _check_stripes(tail)
    except (WireError, UnicodeDecodeError) as e:
        raise TailError(f"footer ending at {base + ps_start} is malformed: {e}",
                        base + metadata_start) from e
    return tail


def tail_bytes_needed(last_bytes: bytes) -> int | None:
    """From the last bytes of a file, how many bytes the whole tail takes (None if unknown)."""
    if not last_bytes:
        return None
    ps_len = last_bytes[-1]
    if ps_len + 1 > len(last_bytes):
        return None
    try:
        ps = Message.decode(last_bytes[-1 - ps_len:-1])
        return ((ps.uint(PostScript.FOOTER_LENGTH, 0) or 0)
                + (ps.uint(PostScript.METADATA_LENGTH, 0) or 0) + ps_len + 1)
    except WireError:
        return None  # parse_tail reports what is wrong


def check_extends(tail: FileTail, earlier: FileTail) -> None:
    """Check `tail`, a later intermediate footer than `earlier` in the same file, decoding only
    what the flushes since `earlier` added.

    A writer that flushes again (Hive's OrcRecordUpdater, the ACID bucket writer) writes its
    new stripes and tail after the previous tail, repeating that tail's stripe entries and
    stripe statistics byte for byte. Entries of `tail` that equal `earlier`'s are as the writer
    wrote them (damage does not make two copies written at different times agree), so only
    the entries after them are decoded and bounds-checked. On a `tail` parsed with
    `check=False`, passing here means passing `parse_tail`'s full check, at the cost of
    comparing bytes where that check decodes every stripe's statistics.

    Raises:
        TailError: `tail` does not extend `earlier` (other types, stripes or stripe
            statistics changed or missing, rows that do not add up), or what it added is
            malformed or out of bounds. A damaged `earlier` fails here too: the caller can
            still check `tail` in full.
    """
    if earlier.length > tail.start:
        raise TailError(f"the tail ending at {earlier.length} does not come before the tail "
                        f"starting at {tail.start}", tail.start)
    try:
        if tail.footer.encoded_messages(Footer.TYPES) != earlier.footer.encoded_messages(
                Footer.TYPES):
            raise TailError(f"the types of the tail ending at {tail.length} differ from those "
                            f"of the tail ending at {earlier.length}", tail.start)
        old = earlier.footer.encoded_messages(Footer.STRIPES)
        new = tail.footer.encoded_messages(Footer.STRIPES)
        old_stats = earlier.metadata.encoded_messages(Metadata.STRIPE_STATS)
        new_stats = tail.metadata.encoded_messages(Metadata.STRIPE_STATS)
        if new[:len(old)] != old or new_stats[:len(old_stats)] != old_stats:
            raise TailError(f"the tail ending at {tail.length} does not repeat the stripes of "
                            f"the tail ending at {earlier.length}", tail.start)
        added = [StripeInfo.from_message(Message.decode(m)) for m in new[len(old):]]
        rows = earlier.number_of_rows
        for i, stripe in enumerate(added, start=len(old)):
            _check_bounds(i, stripe, tail)
            rows += stripe.number_of_rows
        if rows != tail.number_of_rows:
            raise TailError(f"stripes hold {rows} rows but the footer says "
                            f"{tail.number_of_rows}", tail.start)
        for m in new_stats[len(old_stats):]:
            Message.decode(m).messages(StripeStatistics.COL_STATS)
        # The rest grows with the columns, not the stripes: decode it as the full check does.
        tail._types, tail._user_metadata, tail._statistics  # noqa: B018
    except (WireError, UnicodeDecodeError) as e:
        raise TailError(f"footer ending at {tail.length} is malformed: {e}", tail.start) from e


def _check_stripes(tail: FileTail) -> None:
    rows = 0
    for i, s in enumerate(tail.stripes):
        _check_bounds(i, s, tail)
        rows += s.number_of_rows
    if rows != tail.number_of_rows:
        raise TailError(f"stripes hold {rows} rows but the footer says {tail.number_of_rows}",
                        tail.start)


def _check_bounds(i: int, stripe: StripeInfo, tail: FileTail) -> None:
    if stripe.offset < len(MAGIC) or stripe.end > tail.start:
        raise TailError(
            f"stripe {i} spans bytes {stripe.offset}..{stripe.end} but the stripe area ends at "
            f"{tail.start}", stripe.offset)


def serialize_tail(
    *, postscript: Message, footer: Message | bytes, metadata: Message | bytes,
    compression: CompressionKind, block_size: int,
) -> bytes:
    """Bytes of [metadata][footer][postscript][ps length]; lengths in the postscript are set.
    Footer and metadata may come encoded already (a writer that keeps their parts)."""
    if isinstance(metadata, Message):
        metadata = metadata.encode()
    if isinstance(footer, Message):
        footer = footer.encode()
    metadata_bytes = compress_stream(compression, metadata, block_size)
    footer_bytes = compress_stream(compression, footer, block_size)
    ps = Message(list(postscript.fields))
    ps.set_uint(PostScript.FOOTER_LENGTH, len(footer_bytes))
    ps.set_uint(PostScript.COMPRESSION, CODE_BY_KIND[compression])
    ps.set_uint(PostScript.COMPRESSION_BLOCK_SIZE, block_size)
    ps.set_uint(PostScript.METADATA_LENGTH, len(metadata_bytes))
    ps.set_bytes(PostScript.MAGIC, MAGIC)
    ps_bytes = ps.encode()
    if len(ps_bytes) > 255:
        raise ValueError(f"postscript of {len(ps_bytes)} bytes does not fit ORC's 1-byte length")
    return metadata_bytes + footer_bytes + ps_bytes + bytes([len(ps_bytes)])
