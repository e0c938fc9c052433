"""ORC's chunked stream compression: a 3-byte little-endian header per chunk, then the bytes.

header = chunk_length * 2 + is_original; "original" chunks are stored uncompressed. Codecs are
raw (no framing) deflate, snappy and LZ4 blocks, and zstd frames, as ORC C++ and Java write them.
"""

from __future__ import annotations

import zlib
from typing import Literal, get_args

import cramjam

from ingest.errors import ConfigError, UnsupportedFormatError

# PostScript.compression enum values.
CompressionKind = Literal["none", "zlib", "snappy", "lzo", "lz4", "zstd"]
KIND_BY_CODE: dict[int, CompressionKind] = {
    0: "none", 1: "zlib", 2: "snappy", 3: "lzo", 4: "lz4", 5: "zstd"}
CODE_BY_KIND: dict[str, int] = {v: k for k, v in KIND_BY_CODE.items()}
# The codecs files are written with (LZO is read only).
Codec = Literal["none", "zlib", "snappy", "lz4", "zstd"]
CODECS: tuple[Codec, ...] = get_args(Codec)


def parse_codec(value: str, *, where: str, hint: str | None = None) -> Codec:
    """A codec named in a table property, an option or a flag, in any case (`ZLIB`).

    Args:
        value: the name given.
        where: the start of the message, naming what gave it (e.g. "Cannot load into
            default.t: table property orc.compress=").
        hint: what to do about a wrong one.

    Raises:
        ConfigError: not one of CODECS.
    """
    codec = value.lower()
    if codec not in CODECS:
        raise ConfigError(f"{where}{codec!r} is not one of "
                          f"{', '.join(c.upper() for c in CODECS)}", hint=hint)
    return codec  # type: ignore[return-value]


def _compress_chunk(kind: CompressionKind, data: bytes) -> bytes:
    if kind == "zlib":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if kind == "snappy":
        return bytes(cramjam.snappy.compress_raw(data))
    if kind == "lz4":
        return bytes(cramjam.lz4.compress_block(data, store_size=False))
    if kind == "zstd":
        return bytes(cramjam.zstd.compress(data, level=3))
    raise UnsupportedFormatError(
        f"Cannot compress ORC streams with {kind!r}: supported are {', '.join(CODECS)}")


def _decompress_chunk(kind: CompressionKind, data: bytes, block_size: int) -> bytes:
    if kind == "zlib":
        return zlib.decompress(data, -15)
    if kind == "snappy":
        return bytes(cramjam.snappy.decompress_raw(data))
    if kind == "lz4":
        # Raw LZ4 blocks do not record their size; a chunk never exceeds the block size.
        out = bytearray(block_size)
        size = cramjam.lz4.decompress_block_into(data, out)
        return bytes(out[:size])
    if kind == "zstd":
        return bytes(cramjam.zstd.decompress(data))
    raise UnsupportedFormatError(
        f"Cannot read ORC streams compressed with {kind!r}: supported are {', '.join(CODECS)}")


def compress_stream(kind: CompressionKind, data: bytes, block_size: int) -> bytes:
    """Compress `data` as one ORC stream (chunks of at most block_size input bytes)."""
    if kind == "none":
        return data
    out = bytearray()
    for start in range(0, len(data), block_size):
        chunk = data[start:start + block_size]
        packed = _compress_chunk(kind, chunk)
        if len(packed) < len(chunk):
            header, body = len(packed) << 1, packed
        else:  # compression did not help: store the original bytes, as ORC writers do
            header, body = (len(chunk) << 1) | 1, chunk
        out += header.to_bytes(3, "little")
        out += body
    return bytes(out)


def decompress_stream(kind: CompressionKind, data: bytes | memoryview, block_size: int) -> bytes:
    """Inverse of compress_stream.

    Raises:
        ValueError: a chunk header runs past the end of the data.
    """
    if kind == "none":
        return bytes(data)
    out = bytearray()
    pos = 0
    while pos < len(data):
        if pos + 3 > len(data):
            raise ValueError("truncated compression chunk header")
        header = int.from_bytes(data[pos:pos + 3], "little")
        pos += 3
        length = header >> 1
        if pos + length > len(data):
            raise ValueError(f"compression chunk of {length} bytes runs past the end of the stream")
        chunk = bytes(data[pos:pos + length])
        pos += length
        out += chunk if header & 1 else _decompress_chunk(kind, chunk, block_size)
    return bytes(out)


def compress_stream_with_positions(
    kind: CompressionKind, data: bytes, block_size: int, offsets: list[int],
) -> tuple[bytes, list[list[int]]]:
    """Compress `data` as one stream and give the row-index position of each offset.

    A position is [byte offset] in an uncompressed stream, and [offset of the compressed
    chunk's header, offset inside the chunk's uncompressed bytes] otherwise, as readers seek.
    """
    if kind == "none":
        return data, [[offset] for offset in offsets]
    chunk_starts = []
    out = bytearray()
    for start in range(0, max(len(data), 1), block_size):
        chunk_starts.append(len(out))
        out += compress_stream(kind, data[start:start + block_size], block_size)  # one chunk
    return bytes(out), [[chunk_starts[o // block_size], o % block_size] for o in offsets]
