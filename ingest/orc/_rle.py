"""Decode ORC's unsigned integer run-length encodings (versions 1 and 2) into numpy arrays.

Only what `ingest.orc.timestamps` needs: the SECONDARY stream of a TIMESTAMP column, which no
pyarrow reader returns for values outside the nanosecond range. The encodings are those of the
ORC specification ("Integer Run Length Encoding, version 1 / version 2").
"""

from __future__ import annotations

import numpy as np

from ingest.orc._protobuf import read_varint, zigzag_decode

# RLE v2's 5-bit width codes: 0..23 mean 1..24 bits, then 26, 28, 30, 32, 40, 48, 56, 64.
_WIDTHS = [*range(1, 25), 26, 28, 30, 32, 40, 48, 56, 64]


def _closest_fixed_bits(n: int) -> int:
    return next(w for w in _WIDTHS if w >= n)


def _unpack(data: bytes, pos: int, count: int, width: int) -> tuple[np.ndarray, int]:
    """`count` big-endian bit-packed values of `width` bits from byte `pos`; the next byte."""
    nbytes = (count * width + 7) // 8
    chunk = np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=pos)
    if len(chunk) < nbytes:
        raise ValueError("bit-packed run runs past the end of the stream")
    bits = np.unpackbits(chunk)[: count * width].reshape(count, width).astype(np.uint64)
    weights = np.left_shift(np.uint64(1), np.arange(width - 1, -1, -1, dtype=np.uint64))
    return (bits * weights).sum(axis=1, dtype=np.uint64), pos + nbytes


def decode_unsigned_v2(data: bytes, count: int) -> np.ndarray:
    """The first `count` values of an unsigned RLE v2 stream, as uint64.

    Raises:
        ValueError: the stream ends before `count` values.
    """
    runs: list[np.ndarray] = []
    got = 0
    pos = 0
    while got < count:
        if pos >= len(data):
            raise ValueError(f"RLE v2 stream ends after {got} of {count} values")
        first = data[pos]
        kind = first >> 6
        if kind == 0:  # SHORT_REPEAT
            width = ((first >> 3) & 7) + 1
            repeat = (first & 7) + 3
            value = int.from_bytes(data[pos + 1:pos + 1 + width], "big")
            run = np.full(repeat, value, dtype=np.uint64)
            pos += 1 + width
        else:
            length = (((first & 1) << 8) | data[pos + 1]) + 1
            code = (first >> 1) & 0x1F
            pos += 2
            if kind == 1:  # DIRECT
                run, pos = _unpack(data, pos, length, _WIDTHS[code])
            elif kind == 2:  # PATCHED_BASE
                run, pos = _patched(data, pos, length, _WIDTHS[code])
            else:  # DELTA
                run, pos = _delta(data, pos, length, _WIDTHS[code] if code else 0)
        runs.append(run)
        got += len(run)
    return np.concatenate(runs)[:count] if runs else np.zeros(0, dtype=np.uint64)


def _patched(data: bytes, pos: int, length: int, width: int) -> tuple[np.ndarray, int]:
    third, fourth = data[pos], data[pos + 1]
    base_width = ((third >> 5) & 7) + 1
    patch_width = _WIDTHS[third & 0x1F]
    gap_width = ((fourth >> 5) & 7) + 1
    patches = fourth & 0x1F
    pos += 2
    base = int.from_bytes(data[pos:pos + base_width], "big")
    sign = 1 << (base_width * 8 - 1)
    if base & sign:  # the base is sign and magnitude, not zigzag
        base = -(base & ~sign)
    pos += base_width
    values, pos = _unpack(data, pos, length, width)
    entries, pos = _unpack(data, pos, patches, _closest_fixed_bits(gap_width + patch_width))
    out = [int(v) for v in values]
    index = 0
    for entry in (int(e) for e in entries):
        index += entry >> patch_width
        patch = entry & ((1 << patch_width) - 1)
        if patch:
            out[index] |= patch << width
    return np.array([base + v for v in out], dtype=np.uint64), pos


def _delta(data: bytes, pos: int, length: int, width: int) -> tuple[np.ndarray, int]:
    base, pos = read_varint(data, pos)
    raw, pos = read_varint(data, pos)
    step = zigzag_decode(raw)
    if width == 0:  # a fixed step
        return np.array([base + step * i for i in range(length)], dtype=np.uint64), pos
    out = [base, base + step]
    deltas, pos = _unpack(data, pos, length - 2, width)
    sign = -1 if step < 0 else 1
    for d in deltas:
        out.append(out[-1] + sign * int(d))
    return np.array(out[:length], dtype=np.uint64), pos


def decode_unsigned_v1(data: bytes, count: int) -> np.ndarray:
    """The first `count` values of an unsigned RLE v1 stream, as uint64.

    Raises:
        ValueError: the stream ends before `count` values.
    """
    out: list[int] = []
    pos = 0
    while len(out) < count:
        if pos >= len(data):
            raise ValueError(f"RLE v1 stream ends after {len(out)} of {count} values")
        control = data[pos]
        if control < 0x80:  # a run: length control + 3, a signed byte step, a varint base
            step = data[pos + 1] - 256 if data[pos + 1] > 127 else data[pos + 1]
            base, pos = read_varint(data, pos + 2)
            out += [base + step * i for i in range(control + 3)]
        else:  # 256 - control literal varints
            pos += 1
            for _ in range(256 - control):
                value, pos = read_varint(data, pos)
                out.append(value)
    return np.array(out[:count], dtype=np.uint64)
