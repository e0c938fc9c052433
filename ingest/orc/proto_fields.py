"""Field numbers and enum values of the ORC protobuf messages, named once (orc_proto.proto).

One IntEnum per message of Apache ORC's `orc_proto.proto` (format version 1, as written by
ORC Java 1.6+ and C++): `Footer.STRIPES` is field 3 of `Footer`. Only the messages this
project reads or writes are listed; `Message` keeps every other field byte for byte.
"""

from __future__ import annotations

from enum import IntEnum


class PostScript(IntEnum):
    """`PostScript`: never compressed, at most 255 bytes, `MAGIC` written last."""

    FOOTER_LENGTH = 1
    COMPRESSION = 2
    COMPRESSION_BLOCK_SIZE = 3
    VERSION = 4
    METADATA_LENGTH = 5
    WRITER_VERSION = 6
    STRIPE_STATISTICS_LENGTH = 7
    MAGIC = 8000


class CompressionCode(IntEnum):
    """orc_proto's `CompressionKind` enum, the value of `PostScript.COMPRESSION` (renamed here:
    `ingest.orc.compression.CompressionKind` is the codec's name as users write it)."""

    NONE = 0
    ZLIB = 1
    SNAPPY = 2
    LZO = 3
    LZ4 = 4
    ZSTD = 5


class Footer(IntEnum):
    """`Footer`: the file footer (compressed with the file's codec)."""

    HEADER_LENGTH = 1
    CONTENT_LENGTH = 2
    STRIPES = 3
    TYPES = 4
    METADATA = 5
    NUMBER_OF_ROWS = 6
    STATISTICS = 7
    ROW_INDEX_STRIDE = 8
    WRITER = 9
    ENCRYPTION = 10
    CALENDAR = 11
    SOFTWARE_VERSION = 12


class StripeInformation(IntEnum):
    """`StripeInformation`: one entry of `Footer.STRIPES`."""

    OFFSET = 1
    INDEX_LENGTH = 2
    DATA_LENGTH = 3
    FOOTER_LENGTH = 4
    NUMBER_OF_ROWS = 5
    ENCRYPT_STRIPE_ID = 6
    ENCRYPTED_LOCAL_KEYS = 7


class Type(IntEnum):
    """`Type`: one entry of `Footer.TYPES` (the schema, flattened in pre-order)."""

    KIND = 1
    SUBTYPES = 2
    FIELD_NAMES = 3
    MAXIMUM_LENGTH = 4
    PRECISION = 5
    SCALE = 6
    ATTRIBUTES = 7


class TypeKind(IntEnum):
    """The `Type.Kind` enum (only the kinds this project names)."""

    LONG = 4
    TIMESTAMP = 9
    LIST = 10
    MAP = 11
    STRUCT = 12
    UNION = 13


class UserMetadataItem(IntEnum):
    """`UserMetadataItem`: one entry of `Footer.METADATA` (e.g. `hive.acid.key.index`)."""

    NAME = 1
    VALUE = 2


class Metadata(IntEnum):
    """`Metadata`: the section before the footer, one `StripeStatistics` per stripe."""

    STRIPE_STATS = 1


class StripeStatistics(IntEnum):
    """`StripeStatistics`: one `ColumnStatistics` per column of one stripe."""

    COL_STATS = 1


class ColumnStatistics(IntEnum):
    """`ColumnStatistics`: the count, one kind-specific message, null and size facts."""

    NUMBER_OF_VALUES = 1
    INT_STATISTICS = 2
    DOUBLE_STATISTICS = 3
    STRING_STATISTICS = 4
    BUCKET_STATISTICS = 5
    DECIMAL_STATISTICS = 6
    DATE_STATISTICS = 7
    BINARY_STATISTICS = 8
    TIMESTAMP_STATISTICS = 9
    HAS_NULL = 10
    BYTES_ON_DISK = 11
    COLLECTION_STATISTICS = 12


class IntegerStatistics(IntEnum):
    """`IntegerStatistics` (sint64 fields)."""

    MINIMUM = 1
    MAXIMUM = 2
    SUM = 3


class DoubleStatistics(IntEnum):
    """`DoubleStatistics` (double fields)."""

    MINIMUM = 1
    MAXIMUM = 2
    SUM = 3


class StringStatistics(IntEnum):
    """`StringStatistics`; the bounds stand in for a minimum or maximum too long to keep."""

    MINIMUM = 1
    MAXIMUM = 2
    SUM = 3
    LOWER_BOUND = 4
    UPPER_BOUND = 5


class BucketStatistics(IntEnum):
    """`BucketStatistics` (booleans: packed counts of true values)."""

    COUNT = 1


class DecimalStatistics(IntEnum):
    """`DecimalStatistics` (decimal strings)."""

    MINIMUM = 1
    MAXIMUM = 2
    SUM = 3


class DateStatistics(IntEnum):
    """`DateStatistics` (sint32 days since the epoch)."""

    MINIMUM = 1
    MAXIMUM = 2


class TimestampStatistics(IntEnum):
    """`TimestampStatistics`: local and UTC milliseconds, nanos within the millisecond + 1."""

    MINIMUM = 1
    MAXIMUM = 2
    MINIMUM_UTC = 3
    MAXIMUM_UTC = 4
    MINIMUM_NANOS = 5
    MAXIMUM_NANOS = 6


class BinaryStatistics(IntEnum):
    """`BinaryStatistics`."""

    SUM = 1


class CollectionStatistics(IntEnum):
    """`CollectionStatistics` (lists and maps)."""

    MIN_CHILDREN = 1
    MAX_CHILDREN = 2
    TOTAL_CHILDREN = 3


class StripeFooter(IntEnum):
    """`StripeFooter`: the streams and column encodings at the end of each stripe."""

    STREAMS = 1
    COLUMNS = 2
    WRITER_TIMEZONE = 3
    ENCRYPTION = 4


class Stream(IntEnum):
    """`Stream`: one entry of `StripeFooter.STREAMS`."""

    KIND = 1
    COLUMN = 2
    LENGTH = 3


class StreamKind(IntEnum):
    """The `Stream.Kind` enum. Index kinds (row index, bloom filters) precede data kinds."""

    PRESENT = 0
    DATA = 1
    LENGTH = 2
    DICTIONARY_DATA = 3
    DICTIONARY_COUNT = 4
    SECONDARY = 5
    ROW_INDEX = 6
    BLOOM_FILTER = 7
    BLOOM_FILTER_UTF8 = 8
    ENCRYPTED_INDEX = 9
    ENCRYPTED_DATA = 10
    STRIPE_STATISTICS = 100
    FILE_STATISTICS = 101


class ColumnEncoding(IntEnum):
    """`ColumnEncoding`: one entry of `StripeFooter.COLUMNS`."""

    KIND = 1
    DICTIONARY_SIZE = 2
    BLOOM_ENCODING = 3


class ColumnEncodingKind(IntEnum):
    """The `ColumnEncoding.Kind` enum."""

    DIRECT = 0
    DICTIONARY = 1
    DIRECT_V2 = 2
    DICTIONARY_V2 = 3


class RowIndex(IntEnum):
    """`RowIndex`: the content of a `ROW_INDEX` stream."""

    ENTRY = 1


class RowIndexEntry(IntEnum):
    """`RowIndexEntry`: stream positions and statistics of one row group."""

    POSITIONS = 1
    STATISTICS = 2


__all__ = [
    "BinaryStatistics",
    "BucketStatistics",
    "CollectionStatistics",
    "ColumnEncoding",
    "ColumnEncodingKind",
    "ColumnStatistics",
    "CompressionCode",
    "DateStatistics",
    "DecimalStatistics",
    "DoubleStatistics",
    "Footer",
    "IntegerStatistics",
    "Metadata",
    "PostScript",
    "RowIndex",
    "RowIndexEntry",
    "Stream",
    "StreamKind",
    "StringStatistics",
    "StripeFooter",
    "StripeInformation",
    "StripeStatistics",
    "TimestampStatistics",
    "Type",
    "TypeKind",
    "UserMetadataItem",
]
