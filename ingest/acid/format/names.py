"""Every ACID directory, partition, bucket-file and marker-file name: formatting, parsing.

The only module that knows these strings. Mirrors Hive's `AcidUtils` (deltaSubdir, baseDir,
`ParsedDeltaLight.parse`, `ParsedBaseLight.parseBase`, BUCKET_PATTERN), `AcidUtils.OrcAcidVersion`,
`AcidUtils.MetaDataFile` / `AcidMetaDataFile`, `OrcAcidUtils.getSideFile`, `BucketCodec` and
`FileUtils.escapePathName` / `makePartName` for `col=value` partition directories.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

import fsspec

from ingest.errors import CorruptFileError, UnsupportedFormatError
from ingest.io import files as _files

BASE_PREFIX = "base_"
DELTA_PREFIX = "delta_"
DELETE_DELTA_PREFIX = "delete_delta_"
VISIBILITY_PREFIX = "_v"
BUCKET_PREFIX = "bucket_"
SIDE_FILE_SUFFIX = "_flush_length"
ACID_VERSION_FILE = "_orc_acid_version"
METADATA_FILE = "_metadata_acid"
# Hive's name for a null partition value (`ConfVars.DEFAULTPARTITIONNAME`).
DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"
# OrcAcidVersion.ORC_ACID_VERSION: "the version of Acid released in Hive 3.0".
ORC_ACID_VERSION = 2

MAX_STATEMENTS_PER_TXN = 10000
MAX_BUCKET_ID = 4095  # BucketCodec V1 keeps 12 bits for the bucket id
MAX_BUCKET_COUNT = MAX_BUCKET_ID + 1
MAX_STATEMENT_ID = 4095

DirectoryKind = Literal["base", "delta", "delete_delta"]

_NUM = r"(\d+)"
_VIS = r"(?:_v(\d+))?"
_DELTA_RE = re.compile(rf"(delete_delta|delta)_{_NUM}_{_NUM}(?:_{_NUM})?{_VIS}")
_BASE_RE = re.compile(rf"base_{_NUM}{_VIS}")
# AcidUtils.BUCKET_PATTERN = bucket_([0-9]+)(_[0-9]+)?$ ; the side file never matches (fullmatch).
_BUCKET_RE = re.compile(r"bucket_(\d+)(?:_(\d+))?")

# FileUtils.charToEscape: partition names and values escape these as %XX.
_ESCAPED = frozenset([chr(c) for c in range(0x01, 0x20)] + list('"#%\'*/:=?\\\x7f{[]^'))

_METADATA_VERSION = "0"
_COMPACTED = "compacted"
_TRUNCATED = "truncated"


@dataclass(frozen=True)
class ParsedDirectory:
    """A parsed base, delta or delete-delta directory name (ParsedDeltaLight / ParsedBaseLight).

    For a base, min_write_id == max_write_id == the base's write id and statement_id is None.
    statement_id None means the name has no statement id (Hive stores -1 for that).
    visibility_txn_id None means no `_v` suffix; `_v0` parses as 0, which Hive treats the same.
    """

    kind: DirectoryKind
    min_write_id: int
    max_write_id: int
    statement_id: int | None
    visibility_txn_id: int | None
    name: str

    @property
    def write_id(self) -> int:
        """The base's write id (max_write_id for a delta)."""
        return self.max_write_id

    @property
    def is_base(self) -> bool:
        return self.kind == "base"

    @property
    def is_delete_delta(self) -> bool:
        return self.kind == "delete_delta"

    @property
    def visibility(self) -> int:
        """The visibility txn id with 'no suffix' as 0, as Hive keeps it."""
        return self.visibility_txn_id or 0

    @property
    def may_contain_side_file(self) -> bool:
        """Hive 4 `mayContainSideFile`: an insert delta, min != max, not compactor output."""
        return (
            self.kind == "delta"
            and self.min_write_id != self.max_write_id
            and self.visibility <= 0
        )


def parse_directory(name: str) -> ParsedDirectory | None:
    """Parse a base/delta/delete_delta directory name.

    Args:
        name: the last path component, e.g. ``delta_0000005_0000010_0000`` or
            ``base_0000020_v0000123``. A trailing ``/`` is ignored.

    Returns:
        The parsed name, or None when the name is not an ACID directory name.
    """
    name = name.rstrip("/")
    m = _DELTA_RE.fullmatch(name)
    if m is not None:
        kind: DirectoryKind = "delete_delta" if m.group(1) == "delete_delta" else "delta"
        stmt, vis = m.group(4), m.group(5)
        return ParsedDirectory(
            kind=kind,
            min_write_id=int(m.group(2)),
            max_write_id=int(m.group(3)),
            statement_id=None if stmt is None else int(stmt),
            visibility_txn_id=None if vis is None else int(vis),
            name=name,
        )
    m = _BASE_RE.fullmatch(name)
    if m is not None:
        wid, vis = int(m.group(1)), m.group(2)
        return ParsedDirectory(
            kind="base",
            min_write_id=wid,
            max_write_id=wid,
            statement_id=None,
            visibility_txn_id=None if vis is None else int(vis),
            name=name,
        )
    return None


def is_acid_directory_prefix(name: str) -> bool:
    """True iff the name starts like an ACID directory (Hive routes it to processBase/DeltaDir)."""
    return name.startswith((BASE_PREFIX, DELTA_PREFIX, DELETE_DELTA_PREFIX))


def _check_non_negative(what: str, value: int) -> None:
    if value < 0:
        raise ValueError(f"Cannot format an ACID name: {what} must be >= 0, got {value}")


def _visibility_suffix(visibility_txn_id: int | None) -> str:
    # AcidUtils.addVisibilitySuffix: visibility txn 0 means "no suffix".
    if not visibility_txn_id:
        return ""
    _check_non_negative("visibility_txn_id", visibility_txn_id)
    return f"{VISIBILITY_PREFIX}{visibility_txn_id:07d}"


def format_delta(
    min_write_id: int,
    max_write_id: int,
    statement_id: int | None = 0,
    *,
    delete: bool = False,
    visibility_txn_id: int | None = None,
) -> str:
    """Name of a delta or delete-delta directory (`AcidUtils.deltaSubdir` + `addVisibilitySuffix`).

    Args:
        min_write_id: first write id covered.
        max_write_id: last write id covered (>= min_write_id).
        statement_id: the statement id, or None for the pre-1.3 / minor-compacted form.
        delete: format ``delete_delta_...`` instead of ``delta_...``.
        visibility_txn_id: compactor txn id for the Hive 4 ``_vN`` suffix; None or 0 adds none.

    Returns:
        e.g. ``delta_0000005_0000010_0000``.

    Raises:
        ValueError: a negative id, min > max, or statement_id >= MAX_STATEMENTS_PER_TXN.
    """
    _check_non_negative("min_write_id", min_write_id)
    _check_non_negative("max_write_id", max_write_id)
    if min_write_id > max_write_id:
        raise ValueError(
            f"Cannot format a delta name: min_write_id {min_write_id} > max_write_id {max_write_id}"
        )
    prefix = DELETE_DELTA_PREFIX if delete else DELTA_PREFIX
    name = f"{prefix}{min_write_id:07d}_{max_write_id:07d}"
    if statement_id is not None:
        _check_non_negative("statement_id", statement_id)
        if statement_id >= MAX_STATEMENTS_PER_TXN:
            raise ValueError(
                f"Cannot format a delta name: statement_id {statement_id} is not below "
                f"{MAX_STATEMENTS_PER_TXN}"
            )
        name += f"_{statement_id:04d}"
    return name + _visibility_suffix(visibility_txn_id)


def format_base(write_id: int, visibility_txn_id: int | None = None) -> str:
    """Name of a base directory (`AcidUtils.baseDir` + `addVisibilitySuffix`).

    Args:
        write_id: the highest write id the base covers.
        visibility_txn_id: compactor txn id for the Hive 4 ``_vN`` suffix; None or 0 adds none.

    Returns:
        e.g. ``base_0000020`` or ``base_0000020_v0000123``.

    Raises:
        ValueError: a negative id.
    """
    _check_non_negative("write_id", write_id)
    return f"{BASE_PREFIX}{write_id:07d}" + _visibility_suffix(visibility_txn_id)


def format_directory(parsed: ParsedDirectory) -> str:
    """The canonical name of a parsed directory (zero padding restored).

    Raises:
        ValueError: negative ids in `parsed`.
    """
    if parsed.kind == "base":
        return format_base(parsed.max_write_id, parsed.visibility_txn_id)
    return format_delta(
        parsed.min_write_id,
        parsed.max_write_id,
        parsed.statement_id,
        delete=parsed.kind == "delete_delta",
        visibility_txn_id=parsed.visibility_txn_id,
    )


def bucket_file_name(bucket_id: int, attempt: int | None = None) -> str:
    """``bucket_%05d`` with the optional Hive 4 ``_<attempt>`` suffix.

    Raises:
        ValueError: bucket_id outside 0..MAX_BUCKET_ID or a negative attempt.
    """
    _check_bucket_id(bucket_id)
    name = f"{BUCKET_PREFIX}{bucket_id:05d}"
    if attempt is not None:
        _check_non_negative("attempt", attempt)
        name += f"_{attempt}"
    return name


def parse_bucket_file(name: str) -> int | None:
    """The bucket id of a bucket file name, or None (side files and other names included).

    Args:
        name: a file name or path; only the last component is looked at.
    """
    m = _BUCKET_RE.fullmatch(name.rsplit("/", 1)[-1])
    return None if m is None else int(m.group(1))


def side_file_path(path: str) -> str:
    """`OrcAcidUtils.getSideFile`: ``<bucket file path>_flush_length``."""
    return path + SIDE_FILE_SUFFIX


def is_side_file(name: str) -> bool:
    """True iff the (file) name is a flush-length side file."""
    return name.endswith(SIDE_FILE_SUFFIX)


def is_hidden(name: str) -> bool:
    """Hive's HIDDEN_FILES_PATH_FILTER: names starting with ``_`` or ``.`` are hidden."""
    return name.startswith(("_", "."))


# Compaction output is written under this prefix + its final name, hidden from every reader,
# until it is renamed into place (docs/format.md §17).
COMPACTION_TEMP_PREFIX = ".compacting-"


def half_renamed_minor(names: Iterable[str]) -> set[str]:
    """Names of `delta_A_B` directories (no statement id) whose minor compaction renamed them
    into place but not yet their `delete_delta_A_B` twin, still hidden under
    `COMPACTION_TEMP_PREFIX` (both were complete before the first rename).

    A reader must not use such a delta: it shadows the delete deltas of its range.
    """
    present = set(names)
    out = set()
    for name in present:
        if not name.startswith(COMPACTION_TEMP_PREFIX):
            continue
        final = name[len(COMPACTION_TEMP_PREFIX):]
        parsed = parse_directory(final)
        if parsed is None or not parsed.is_delete_delta or parsed.statement_id is not None:
            continue
        partner = format_delta(parsed.min_write_id, parsed.max_write_id, None)
        if partner in present and final not in present:
            out.add(partner)
    return out


def format_partition(column: str, value: str | None) -> str:
    """One ``col=value`` partition directory name (`FileUtils.makePartName` for one column).

    Column and value are escaped as `FileUtils.escapePathName` does (``/`` -> ``%2F``,
    ``=`` -> ``%3D``, ``%`` -> ``%25``); a null or empty value is `DEFAULT_PARTITION_NAME`.

    Returns:
        e.g. ``dt=2026-01-01`` or ``country=__HIVE_DEFAULT_PARTITION__``.
    """
    return f"{_escape(column)}={_escape(value) if value else DEFAULT_PARTITION_NAME}"


def parse_partition(name: str) -> tuple[str, str | None] | None:
    """The (column, value) of a ``col=value`` partition directory name, unescaped.

    Args:
        name: one path component. `DEFAULT_PARTITION_NAME` as the value parses as None.

    Returns:
        (column, value), or None when the name has no ``=``, an empty column, or is hidden.
    """
    if "=" not in name or is_hidden(name):
        return None
    key, _, value = name.partition("=")
    if not key:
        return None
    # unquote also decodes UTF-8 %XX runs (%C3%A9 -> é), where Hive's unescapePathName makes
    # one char per %XX; format_partition only writes %XX for ASCII, so both agree on ours.
    value = unquote(value)
    return unquote(key), (None if value == DEFAULT_PARTITION_NAME else value)


def _escape(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def _check_bucket_id(bucket_id: int) -> None:
    if not 0 <= bucket_id <= MAX_BUCKET_ID:
        raise ValueError(f"Bucket id {bucket_id} is out of range: must be 0..{MAX_BUCKET_ID}")


def encode_bucket_property(bucket_id: int, statement_id: int) -> int:
    """BucketCodec.V1 encoding: ``1<<29 | bucket_id<<16 | statement_id``.

    Args:
        bucket_id: bucket (or writer) id, 0..4095.
        statement_id: statement id, at most 4095; negative values encode as 0.

    Returns:
        The value of the ACID `bucket` column, e.g. 536870912 for bucket 0, statement 0.

    Raises:
        ValueError: bucket_id outside 0..4095 or statement_id above 4095.
    """
    _check_bucket_id(bucket_id)
    if statement_id > MAX_STATEMENT_ID:
        raise ValueError(
            f"Statement id {statement_id} is out of range: must be at most {MAX_STATEMENT_ID}"
        )
    return (1 << 29) | (bucket_id << 16) | max(statement_id, 0)


def decode_bucket_property(value: int) -> tuple[int, int, int]:
    """Decode the ACID `bucket` column (BucketCodec.determineVersion + decodeWriterId/StatementId).

    Args:
        value: the stored int32 (negative values are taken as their unsigned 32-bit pattern).

    Returns:
        (version, bucket_id, statement_id). Version 0 values are a plain bucket id with
        statement 0.

    Raises:
        UnsupportedFormatError: the top three bits name a codec version other than 0 or 1.
    """
    v = value & 0xFFFFFFFF
    version = (v & 0xE0000000) >> 29
    if version == 0:
        return 0, v, 0
    if version == 1:
        return 1, (v & 0x0FFF0000) >> 16, v & 0xFFF
    raise UnsupportedFormatError(
        f"Cannot decode bucket property {value} (0x{v:08x}): codec version {version} found, "
        "but only versions 0 and 1 are supported"
    )


def write_acid_version_file(fs: fsspec.AbstractFileSystem, directory: str) -> bool:
    """Write ``_orc_acid_version`` (content ``2``) into a base/delta dir unless it already exists.

    Mirrors `AcidUtils.OrcAcidVersion.writeVersionFile` (create with overwrite=false).

    Returns:
        True if this call created the file.

    Raises:
        OSError: the storage layer failed.
    """
    path = f"{directory.rstrip('/')}/{ACID_VERSION_FILE}"
    try:
        _create_exclusive(fs, path, str(ORC_ACID_VERSION).encode("utf-8"))
    except FileExistsError:
        return False
    return True


def _create_exclusive(fs: fsspec.AbstractFileSystem, path: str, data: bytes) -> None:
    """Create `path` with `data`; FileExistsError if it exists (Hive's create(overwrite=false)).
    On S3 the store refuses the upload instead of a request asking first (`create_new`)."""
    with _files.create_new(fs, path) as f:
        f.write(data)


def write_compacted_marker(fs: fsspec.AbstractFileSystem, directory: str) -> None:
    """Write ``_metadata_acid`` marking compactor output (`MetaDataFile.createCompactorMarker`).

    Raises:
        FileExistsError: the marker already exists (Hive creates it with overwrite=false).
        OSError: the storage layer failed.
    """
    path = f"{directory.rstrip('/')}/{METADATA_FILE}"
    body = json.dumps({"thisFileVersion": _METADATA_VERSION, "dataFormat": _COMPACTED})
    _create_exclusive(fs, path, body.encode("utf-8"))


def is_compacted_base(fs: fsspec.AbstractFileSystem, directory: str) -> bool:
    """Whether `directory`'s ``_metadata_acid`` says compacted (`MetaDataFile.isCompacted`).

    A missing file means False; Hive 4's ``truncated`` format also means False.

    Raises:
        CorruptFileError: the marker is not a JSON object.
        UnsupportedFormatError: thisFileVersion is not "0", or dataFormat is unknown.
        OSError: the storage layer failed.
    """
    path = f"{directory.rstrip('/')}/{METADATA_FILE}"
    try:
        with fs.open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return False
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptFileError(
            f"Cannot read ACID marker {path}: not a JSON object ({e})", path=path
        ) from e
    if not isinstance(meta, dict):
        raise CorruptFileError(f"Cannot read ACID marker {path}: not a JSON object", path=path)
    version = meta.get("thisFileVersion")
    if not isinstance(version, str) or version.lower() != _METADATA_VERSION:
        raise UnsupportedFormatError(
            f"Cannot read ACID marker {path}: thisFileVersion {version!r} found, "
            f"only {_METADATA_VERSION!r} is supported"
        )
    data_format = str(meta.get("dataFormat", "null")).lower()
    if data_format == _COMPACTED:
        return True
    if data_format == _TRUNCATED:
        return False
    raise UnsupportedFormatError(
        f"Cannot read ACID marker {path}: dataFormat {meta.get('dataFormat')!r} found, "
        f"expected {_COMPACTED!r} or {_TRUNCATED!r}"
    )


__all__ = [
    "ACID_VERSION_FILE",
    "BASE_PREFIX",
    "COMPACTION_TEMP_PREFIX",
    "DEFAULT_PARTITION_NAME",
    "DELETE_DELTA_PREFIX",
    "DELTA_PREFIX",
    "METADATA_FILE",
    "SIDE_FILE_SUFFIX",
    "DirectoryKind",
    "ParsedDirectory",
    "bucket_file_name",
    "decode_bucket_property",
    "encode_bucket_property",
    "format_base",
    "format_delta",
    "format_directory",
    "format_partition",
    "half_renamed_minor",
    "is_acid_directory_prefix",
    "is_compacted_base",
    "is_hidden",
    "is_side_file",
    "parse_bucket_file",
    "parse_directory",
    "parse_partition",
    "side_file_path",
    "write_acid_version_file",
]
