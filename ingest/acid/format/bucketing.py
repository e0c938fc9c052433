"""Hive bucketing version 2: which bucket a row of a bucketed table belongs to.

Mirrors `ObjectInspectorUtils.getBucketNumber` / `getBucketHashCode` / `hashCodeMurmur` (Hive 3+)
and `org.apache.hive.common.util.Murmur3.hash32` (seed 104729), including Hive's quirks: tail
bytes are sign-extended, and FLOAT/DOUBLE hash `(float) floatToIntBits(x)` /
`(double) doubleToLongBits(x)` because ByteBuffer.putFloat/putDouble take a float/double.
Hashing is vectorised with pyarrow.compute (numpy is not a dependency); strings are hashed
once per distinct value, grouped by byte length.
"""

from __future__ import annotations

import datetime
import math
import struct
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ingest.acid.format.names import MAX_BUCKET_COUNT
from ingest.acid.format.schema import HIVE_TYPE_KEY
from ingest.errors import ConfigError, SchemaMismatchError, UnsupportedFormatError

DEFAULT_SEED = 104729

_M32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_N = 0xE6546B64
_F1 = 0x85EBCA6B
_F2 = 0xC2B2AE35
_FLOAT_NAN_BITS = 0x7FC00000
_DOUBLE_NAN_BITS = 0x7FF8000000000000


# ---------------------------------------------------------------- scalar reference

def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _fmix32(length: int, h: int) -> int:
    h ^= length
    h ^= h >> 16
    h = (h * _F1) & _M32
    h ^= h >> 13
    h = (h * _F2) & _M32
    h ^= h >> 16
    return h


def _to_int32(x: int) -> int:
    x &= _M32
    return x - (1 << 32) if x & 0x80000000 else x


def murmur3_hash32(data: bytes, seed: int = DEFAULT_SEED) -> int:
    """Hive's `Murmur3.hash32(byte[], int length, int seed)`, as a signed 32-bit int.

    Equal to standard Murmur3 x86_32 except that tail bytes are sign-extended before mixing,
    as Hive's `k1 ^= data[i] << 16` does (it differs for tails holding bytes >= 0x80).
    """
    h = seed & _M32
    n = len(data)
    nblocks = n >> 2
    for k in struct.unpack_from(f"<{nblocks}I", data):
        k = (k * _C1) & _M32
        k = _rotl32(k, 15)
        k = (k * _C2) & _M32
        h ^= k
        h = (_rotl32(h, 13) * 5 + _N) & _M32
    rem = n & 3
    if rem:
        tail = data[nblocks << 2 :]
        k1 = 0
        # Java bytes are signed: data[i] << 8 sign-extends.
        if rem == 3:
            k1 ^= _signed_byte(tail[2]) << 16
        if rem >= 2:
            k1 ^= _signed_byte(tail[1]) << 8
        k1 ^= _signed_byte(tail[0])
        k1 = (k1 * _C1) & _M32
        k1 = _rotl32(k1, 15)
        k1 = (k1 * _C2) & _M32
        h ^= k1
    return _to_int32(_fmix32(n, h))


def _signed_byte(b: int) -> int:
    return b - 256 if b >= 128 else b


def _java_int_to_float_bits(i: int) -> int:
    """Bits of `(float) i` for a Java int (round to nearest even, as Java's i2f)."""
    return int(struct.unpack(">I", struct.pack(">f", float(i)))[0])


def _java_long_to_double_bits(v: int) -> int:
    """Bits of `(double) v` for a Java long (round to nearest even, as Java's l2d)."""
    return int(struct.unpack(">Q", struct.pack(">d", float(v)))[0])


def hash_code_murmur(value: object, hive_type: str) -> int:
    """`ObjectInspectorUtils.hashCodeMurmur` for one primitive value (reference implementation).

    Args:
        value: a Python value (None, bool, int, float, str, datetime.date).
        hive_type: boolean, tinyint, smallint, int, bigint, float, double, date, string,
            varchar or char (parameters such as ``(10)`` are ignored).

    Returns:
        The signed 32-bit field hash.

    Raises:
        UnsupportedFormatError: another type.
    """
    if value is None:
        return 0
    t = hive_type.lower().split("(", 1)[0].strip()
    if t == "boolean":
        return 1 if value else 0
    if t == "tinyint":
        return int(value)  # type: ignore[call-overload]
    if t == "smallint":
        return murmur3_hash32(struct.pack(">h", value))
    if t in ("int", "integer"):
        return murmur3_hash32(struct.pack(">i", value))
    if t == "bigint":
        return murmur3_hash32(struct.pack(">q", value))
    if t == "date":
        assert isinstance(value, datetime.date)
        days = (value - datetime.date(1970, 1, 1)).days
        return murmur3_hash32(struct.pack(">i", days))
    if t == "float":
        f = float(value)  # type: ignore[arg-type]
        bits = _FLOAT_NAN_BITS if math.isnan(f) else struct.unpack(">i", struct.pack(">f", f))[0]
        return murmur3_hash32(struct.pack(">I", _java_int_to_float_bits(bits)))
    if t == "double":
        d = float(value)  # type: ignore[arg-type]
        if math.isnan(d):
            bits = _DOUBLE_NAN_BITS
        else:
            bits = struct.unpack(">q", struct.pack(">d", d))[0]
        return murmur3_hash32(struct.pack(">Q", _java_long_to_double_bits(bits)))
    if t in ("string", "varchar", "char"):
        text = str(value)
        if t == "char":
            text = text.rstrip(" ")
        return murmur3_hash32(text.encode("utf-8"))
    raise UnsupportedFormatError(
        f"Cannot hash a {hive_type} value for bucketing: only boolean, tinyint, smallint, int, "
        "bigint, float, double, date, string, varchar and char are supported"
    )


def bucket_number(values: Sequence[object], hive_types: Sequence[str], bucket_count: int) -> int:
    """`ObjectInspectorUtils.getBucketNumber` for one row (reference implementation).

    Raises:
        UnsupportedFormatError: a type `hash_code_murmur` does not support.
    """
    h = 0
    for value, hive_type in zip(values, hive_types, strict=True):
        h = (31 * h + hash_code_murmur(value, hive_type)) & _M32
    return (h & 0x7FFFFFFF) % bucket_count


# ---------------------------------------------------------------- vectorised

_U32 = pa.uint32()


def _u(x: int) -> pa.Scalar:
    return pa.scalar(x, _U32)


def _rotl(x: pa.Array, r: int) -> pa.Array:
    return pc.bit_wise_or(pc.shift_left(x, _u(r)), pc.shift_right(x, _u(32 - r)))


def _mul(x: pa.Array, c: int) -> pa.Array:
    # pc.multiply (unchecked) wraps modulo 2**32 on uint32, like Java's int multiply.
    return pc.multiply(x, _u(c))


def _bswap32(x: pa.Array) -> pa.Array:
    b0 = pc.shift_left(pc.bit_wise_and(x, _u(0xFF)), _u(24))
    b1 = pc.shift_left(pc.bit_wise_and(x, _u(0xFF00)), _u(8))
    b2 = pc.bit_wise_and(pc.shift_right(x, _u(8)), _u(0xFF00))
    b3 = pc.shift_right(x, _u(24))
    return pc.bit_wise_or(pc.bit_wise_or(b0, b1), pc.bit_wise_or(b2, b3))


def _mix_k(k: pa.Array) -> pa.Array:
    return _mul(_rotl(_mul(k, _C1), 15), _C2)


def _mix_block(k: pa.Array, h: pa.Array | pa.Scalar) -> pa.Array:
    h = pc.bit_wise_xor(h, _mix_k(k))
    return pc.add(_mul(_rotl(h, 13), 5), _u(_N))


def _fmix(length: int, h: pa.Array) -> pa.Array:
    h = pc.bit_wise_xor(h, _u(length))
    h = pc.bit_wise_xor(h, pc.shift_right(h, _u(16)))
    h = _mul(h, _F1)
    h = pc.bit_wise_xor(h, pc.shift_right(h, _u(13)))
    h = _mul(h, _F2)
    return pc.bit_wise_xor(h, pc.shift_right(h, _u(16)))


def _as_u32(arr: pa.Array) -> pa.Array:
    """Reinterpret 32-bit values as uint32 (nulls become 0 first)."""
    arr = pc.fill_null(arr, pa.scalar(0, arr.type))
    return pc.cast(arr, _U32, safe=False)


def _hash_int32_bits(u: pa.Array) -> pa.Array:
    """Murmur3 of the 4 big-endian bytes of each uint32: one block k = bswap32(value)."""
    return _fmix(4, _mix_block(_bswap32(u), _u(DEFAULT_SEED)))


def _hash_int64_bits(v: pa.Array) -> pa.Array:
    """Murmur3 of the 8 big-endian bytes of each int64/uint64 value."""
    u64 = pc.cast(pc.fill_null(v, pa.scalar(0, v.type)), pa.uint64(), safe=False)
    hi = pc.cast(pc.shift_right(u64, pa.scalar(32, pa.uint64())), _U32)
    lo = pc.cast(pc.bit_wise_and(u64, pa.scalar(_M32, pa.uint64())), _U32)
    h = _mix_block(_bswap32(hi), _u(DEFAULT_SEED))
    h = _mix_block(_bswap32(lo), h)
    return _fmix(8, h)


def _hash_int16(v: pa.Array) -> pa.Array:
    """Murmur3 of 2 big-endian bytes: a 2-byte tail, with Java's sign extension."""
    v32 = pc.cast(pc.fill_null(v, pa.scalar(0, v.type)), pa.int32())
    high = pc.shift_right(v32, pa.scalar(8, pa.int32()))  # arithmetic: the signed high byte
    low = pc.bit_wise_and(v32, pa.scalar(0xFF, pa.int32()))
    x80 = pa.scalar(0x80, pa.int32())
    low = pc.subtract(pc.bit_wise_xor(low, x80), x80)  # sign-extend the low byte
    k1 = pc.bit_wise_xor(pc.shift_left(low, pa.scalar(8, pa.int32())), high)
    h = pc.bit_wise_xor(_u(DEFAULT_SEED), _mix_k(pc.cast(k1, _U32, safe=False)))
    return _fmix(2, h)


def _hash_float32(v: pa.Array) -> pa.Array:
    bits = pc.cast(pc.fill_null(v, pa.scalar(0.0, pa.float32())), pa.float32()).view(pa.int32())
    bits = pc.if_else(pc.is_nan(v), pa.scalar(_FLOAT_NAN_BITS, pa.int32()), bits)
    as_float = pc.cast(bits, pa.float32(), safe=False)  # Java's (float) int
    return _hash_int32_bits(as_float.view(_U32))


def _hash_float64(v: pa.Array) -> pa.Array:
    bits = pc.cast(pc.fill_null(v, pa.scalar(0.0, pa.float64())), pa.float64()).view(pa.int64())
    bits = pc.if_else(
        pc.is_nan(v), pa.scalar(_DOUBLE_NAN_BITS, pa.int64()), bits
    )
    as_double = pc.cast(bits, pa.float64(), safe=False)  # Java's (double) long
    return _hash_int64_bits(as_double.view(pa.int64()))


def _hash_strings(v: pa.Array, strip_trailing_spaces: bool) -> pa.Array:
    """Murmur3 of each value's UTF-8 bytes, computed once per distinct value."""
    if pa.types.is_string_view(v.type):
        v = pc.cast(v, pa.large_string())
    if strip_trailing_spaces:
        v = pc.utf8_rtrim(v, characters=" ")  # HiveChar.getStrippedValue
    encoded = pc.dictionary_encode(v)
    assert isinstance(encoded, pa.DictionaryArray)
    out = pc.take(_hash_distinct_strings(encoded.dictionary), encoded.indices)
    return pc.fill_null(out, _u(0))


# Byte lengths shared by fewer values than this are hashed in Python: the vectorised path costs
# a few kernel calls per 4-byte block, however few values share the length.
_VECTOR_MIN_VALUES = 64


def _hash_distinct_strings(values: pa.Array) -> pa.Array:
    """uint32 Murmur3 of every (non-null) string, vectorised per byte length."""
    n = len(values)
    if n == 0:
        return pa.array([], _U32)
    offsets_type = pa.int64() if pa.types.is_large_string(values.type) else pa.int32()
    _, offsets_buf, data_buf = values.buffers()
    offsets = pa.Array.from_buffers(offsets_type, n + 1, [None, offsets_buf], offset=values.offset)
    starts = pc.cast(offsets.slice(0, n), pa.int64())
    data_size = 0 if data_buf is None else data_buf.size
    udata = pa.Array.from_buffers(pa.uint8(), data_size, [None, data_buf])
    sdata = pa.Array.from_buffers(pa.int8(), data_size, [None, data_buf])
    lengths = pc.cast(pc.binary_length(values), pa.int64())

    parts_idx: list[pa.Array] = []
    parts_hash: list[pa.Array] = []
    slow: list[int] = []
    counts = pc.value_counts(lengths)
    for item in counts.to_pylist():
        length, count = int(item["values"]), int(item["counts"])
        idx = pc.indices_nonzero(pc.equal(lengths, pa.scalar(length, pa.int64())))
        if count < _VECTOR_MIN_VALUES and length > 16:
            slow.extend(idx.to_pylist())
            continue
        parts_idx.append(idx)
        parts_hash.append(_hash_fixed_length(pc.take(starts, idx), length, udata, sdata))
    if slow:
        py = values.take(pa.array(slow, pa.int64())).to_pylist()
        parts_idx.append(pa.array(slow, pa.uint64()))
        parts_hash.append(pa.array([murmur3_hash32(s.encode("utf-8")) & _M32 for s in py], _U32))
    all_idx = pa.concat_arrays([pc.cast(i, pa.int64()) for i in parts_idx])
    all_hash = pa.concat_arrays(parts_hash)
    return pc.take(all_hash, pc.sort_indices(all_idx))


def _hash_fixed_length(
    starts: pa.Array, length: int, udata: pa.Array, sdata: pa.Array
) -> pa.Array:
    """Murmur3 of `length` bytes at each start offset of the data buffer."""
    h: pa.Array | pa.Scalar = pa.repeat(_u(DEFAULT_SEED), len(starts))
    one = pa.scalar(1, pa.int64())
    for block in range(length >> 2):
        pos = pc.add(starts, pa.scalar(block * 4, pa.int64()))
        k = pc.cast(pc.take(udata, pos), _U32)
        for shift in (8, 16, 24):
            pos = pc.add(pos, one)
            k = pc.bit_wise_or(k, pc.shift_left(pc.cast(pc.take(udata, pos), _U32), _u(shift)))
        h = _mix_block(k, h)
    rem = length & 3
    if rem:
        # Tail bytes are signed in Java and sign-extend before the xor.
        pos = pc.add(starts, pa.scalar(length - rem, pa.int64()))
        k1 = pc.cast(pc.take(sdata, pos), pa.int32())
        for shift in range(8, 8 * rem, 8):
            pos = pc.add(pos, one)
            byte = pc.cast(pc.take(sdata, pos), pa.int32())
            k1 = pc.bit_wise_xor(k1, pc.shift_left(byte, pa.scalar(shift, pa.int32())))
        h = pc.bit_wise_xor(h, _mix_k(pc.cast(k1, _U32, safe=False)))
    return _fmix(length, h)


def _field_hash(col: pa.Array, field: pa.Field) -> pa.Array:
    """uint32 field hashes (`hashCodeMurmur`) for one column; 0 where null."""
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.dictionary_decode()
        t = col.type
    hive_type = (field.metadata or {}).get(HIVE_TYPE_KEY, b"").decode().lower()
    hashed: pa.Array
    if pa.types.is_boolean(t):
        hashed = pc.cast(col, _U32)
    elif pa.types.is_int8(t):
        hashed = pc.cast(col, _U32, safe=False)
    elif pa.types.is_int16(t):
        hashed = _hash_int16(col)
    elif pa.types.is_int32(t):
        hashed = _hash_int32_bits(_as_u32(col))
    elif pa.types.is_date32(t):
        hashed = _hash_int32_bits(_as_u32(col.view(pa.int32())))
    elif pa.types.is_int64(t):
        hashed = _hash_int64_bits(col)
    elif pa.types.is_float32(t):
        hashed = _hash_float32(col)
    elif pa.types.is_float64(t):
        hashed = _hash_float64(col)
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        hashed = _hash_strings(col, strip_trailing_spaces=hive_type.startswith("char"))
    else:
        raise UnsupportedFormatError(
            f"Cannot compute bucket ids on column {field.name!r} of type {t}: bucketing supports "
            "boolean, tinyint, smallint, int, bigint, float, double, date, string, varchar and "
            "char columns"
        )
    # Null -> 0 (hashCodeMurmur returns 0 for null).
    return pc.if_else(pc.is_null(col), _u(0), pc.fill_null(hashed, _u(0)))


def _resolve(schema: pa.Schema, name: str) -> int:
    idx = schema.get_field_index(name)
    if idx >= 0:
        return idx
    lowered = [i for i, f in enumerate(schema) if f.name.lower() == name.lower()]
    if len(lowered) == 1:
        return lowered[0]
    raise SchemaMismatchError(
        f"Cannot compute bucket ids: bucket column {name!r} is not in the data "
        f"(columns: {', '.join(schema.names)})"
    )


def bucket_ids(
    table: pa.Table | pa.RecordBatch, columns: Sequence[str], bucket_count: int
) -> pa.Array:
    """Hive bucketing-v2 bucket id of every row (`ObjectInspectorUtils.getBucketNumber`).

    Args:
        table: the rows, with the bucket columns among its columns (names matched exactly,
            then case-insensitively). A string field whose metadata says ``hive.type=char(n)``
            is hashed with trailing spaces stripped, as Hive's CHAR is.
        columns: the table's bucket columns, in CLUSTERED BY order.
        bucket_count: the number of buckets, 1..4096.

    Returns:
        An int32 array, one bucket id per row.

    Raises:
        ConfigError: no bucket columns, or bucket_count out of range.
        SchemaMismatchError: a bucket column is missing from the data.
        UnsupportedFormatError: a bucket column's type cannot be hashed.
    """
    if not 1 <= bucket_count <= MAX_BUCKET_COUNT:
        raise ConfigError(
            f"Cannot compute bucket ids: bucket count {bucket_count} is out of range, "
            f"must be 1..{MAX_BUCKET_COUNT}"
        )
    if not columns:
        raise ConfigError("Cannot compute bucket ids: no bucket columns given")
    n = table.num_rows
    h: pa.Array = pa.repeat(_u(0), n)
    for name in columns:
        idx = _resolve(table.schema, name)
        col = table.column(idx)
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        h = pc.add(_mul(h, 31), _field_hash(arr, table.schema.field(idx)))
    masked = pc.bit_wise_and(h, _u(0x7FFFFFFF))
    return pc.cast(_mod(masked, bucket_count), pa.int32())


def _mod(x: pa.Array, n: int) -> pa.Array:
    """x % n for non-negative uint32 x (pyarrow has no integer modulo kernel)."""
    q = pc.divide(x, _u(n))  # integer division on unsigned ints truncates
    return pc.subtract(x, _mul(q, n))


__all__ = [
    "DEFAULT_SEED",
    "bucket_ids",
    "bucket_number",
    "hash_code_murmur",
    "murmur3_hash32",
]
