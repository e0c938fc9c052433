"""Protocol-buffers wire format, just enough for ORC's tail messages.

A message is decoded into an ordered list of (field number, wire type, value) so fields we do
not interpret are written back byte for byte ("keep fields you don't interpret intact").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ingest.errors import WireError

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    if pos < len(buf) and buf[pos] < 0x80:  # one byte: most tags, lengths and counts
        return buf[pos], pos + 1
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise WireError("varint longer than 10 bytes")


def encode_varint(value: int) -> bytes:
    if 0 <= value < 0x80:  # most lengths, tags and counts: skip the loop
        return _ONE_BYTE[value]
    if value < 0:
        value &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def varint_field(number: int, value: int) -> bytes:
    """One encoded varint field: for building small messages without a Message."""
    return encode_varint(number << 3) + encode_varint(value)


def length_field(number: int, payload: bytes) -> bytes:
    """One encoded length-delimited field (bytes, string or nested message)."""
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def zigzag_decode(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def zigzag_encode(n: int) -> int:
    return (n << 1) ^ (n >> 63) if n < 0 else n << 1


def to_signed64(n: int) -> int:
    return n - (1 << 64) if n >= 1 << 63 else n


@dataclass
class Message:
    """An ordered list of raw fields with typed accessors."""

    fields: list[tuple[int, int, int | bytes]] = field(default_factory=list)

    @classmethod
    def decode(cls, buf: bytes | memoryview) -> Message:
        # The hot loop of every tail parse: one-byte varints (most tags, lengths and small
        # values) are read inline; longer ones go through read_varint.
        fields: list[tuple[int, int, int | bytes]] = []
        append = fields.append
        pos, end = 0, len(buf)
        while pos < end:
            key = buf[pos]
            if key < 0x80:
                pos += 1
            else:
                key, pos = read_varint(buf, pos)
            number, wire = key >> 3, key & 7
            value: int | bytes
            if wire == VARINT:
                if pos < end and buf[pos] < 0x80:
                    value = buf[pos]
                    pos += 1
                else:
                    value, pos = read_varint(buf, pos)
            elif wire == LENGTH:
                if pos < end and buf[pos] < 0x80:
                    size = buf[pos]
                    pos += 1
                else:
                    size, pos = read_varint(buf, pos)
                if pos + size > end:
                    raise WireError(f"field {number} runs past the end of the message")
                value = bytes(buf[pos:pos + size])
                pos += size
            elif wire == FIXED64:
                value = bytes(buf[pos:pos + 8])
                pos += 8
            elif wire == FIXED32:
                value = bytes(buf[pos:pos + 4])
                pos += 4
            else:
                raise WireError(f"unsupported wire type {wire} for field {number}")
            if pos > end:
                raise WireError(f"field {number} runs past the end of the message")
            append((number, wire, value))
        return cls(fields)

    def encode(self) -> bytes:
        out = bytearray()
        for number, wire, value in self.fields:
            out += encode_varint(number << 3 | wire)
            if wire == VARINT:
                assert isinstance(value, int)
                out += encode_varint(value)
            elif wire == LENGTH:
                assert isinstance(value, bytes)
                out += encode_varint(len(value))
                out += value
            else:
                assert isinstance(value, bytes)
                out += value
        return bytes(out)

    # -- typed access ------------------------------------------------------------------
    def has(self, number: int) -> bool:
        return any(f[0] == number for f in self.fields)

    def raw(self, number: int) -> list[int | bytes]:
        return [v for n, _, v in self.fields if n == number]

    def _typed(self, number: int, kind: type) -> list:  # type: ignore[type-arg]
        """Values of a field, which must all have the wire type the schema gives it."""
        values = self.raw(number)
        for v in values:
            if not isinstance(v, kind):
                raise WireError(f"field {number} has the wrong wire type")
        return values

    def uint(self, number: int, default: int | None = None) -> int | None:
        values = self._typed(number, int)
        return int(values[-1]) if values else default

    def sint(self, number: int) -> int | None:
        value = self.uint(number)
        return None if value is None else zigzag_decode(value)

    def double(self, number: int) -> float | None:
        values = self._typed(number, bytes)
        if not values:
            return None
        if len(values[-1]) != 8:
            raise WireError(f"field {number} is not a double")
        return float(struct.unpack("<d", values[-1])[0])

    def bytes_(self, number: int) -> bytes | None:
        values = self._typed(number, bytes)
        return values[-1] if values else None

    def string(self, number: int) -> str | None:
        value = self.bytes_(number)
        return None if value is None else value.decode("utf-8")

    def messages(self, number: int) -> list[Message]:
        return [Message.decode(v) for v in self._typed(number, bytes)]

    def encoded_messages(self, number: int) -> list[bytes]:
        """The values of a repeated message field, undecoded: to compare them cheaply."""
        return self._typed(number, bytes)

    def packed_uints(self, number: int) -> list[int]:
        out: list[int] = []
        for n, wire, value in self.fields:
            if n != number:
                continue
            if wire == VARINT:
                out.append(value)  # type: ignore[arg-type]
            else:
                pos = 0
                assert isinstance(value, bytes)
                while pos < len(value):
                    v, pos = read_varint(value, pos)
                    out.append(v)
        return out

    # -- mutation ----------------------------------------------------------------------
    def remove(self, number: int) -> None:
        self.fields = [f for f in self.fields if f[0] != number]

    def set_uint(self, number: int, value: int) -> None:
        self._replace(number, [(number, VARINT, value)])

    def set_sint(self, number: int, value: int) -> None:
        self.set_uint(number, zigzag_encode(value))

    def set_double(self, number: int, value: float) -> None:
        self._replace(number, [(number, FIXED64, struct.pack("<d", value))])

    def set_bytes(self, number: int, value: bytes) -> None:
        self._replace(number, [(number, LENGTH, value)])

    def set_messages(self, number: int, values: list[Message] | list[bytes]) -> None:
        encoded = [v.encode() if isinstance(v, Message) else v for v in values]
        self._replace(number, [(number, LENGTH, v) for v in encoded])

    def set_packed_uints(self, number: int, values: list[int]) -> None:
        self._replace(number, [(number, LENGTH, b"".join(encode_varint(v) for v in values))])

    def _replace(self, number: int, new: list[tuple[int, int, int | bytes]]) -> None:
        """Replace every occurrence of a field, keeping its first position (stable output)."""
        positions = [i for i, f in enumerate(self.fields) if f[0] == number]
        if not positions:
            self.fields.extend(new)
            self.fields.sort(key=lambda f: f[0])
        elif len(positions) == 1 and len(new) == 1:
            self.fields[positions[0]] = new[0]
        else:
            i = positions[0]
            self.fields = [g for g in self.fields[:i] if g[0] != number] + new + [
                g for g in self.fields[i:] if g[0] != number]
