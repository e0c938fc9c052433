"""Stripe checksums: an xxh3_64 of each stripe's bytes in the footer's user metadata
(`ingest.stripe.checksums`, docs/format.md §16), written at every flush and checked by our
readers and `verify`. ORC itself has none; other readers ignore the key, and files without it
(Hive's, pyarrow's) read as before.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import fsspec
import xxhash

from ingest.acid.format.footer import CHECKSUMS_ALGORITHM as ALGORITHM
from ingest.acid.format.footer import CHECKSUMS_KEY, KEY_INDEX, parse_key_index
from ingest.errors import CorruptFileError
from ingest.orc import ColumnStatistics, FileTail, IntegerStatistics, StripeInfo

CHECK_ENV = "INGEST_CHECK_CHECKSUMS"  # "0" turns the reader's check off (verify always checks)
_CURRENT_COLUMN = 5  # column id of currentTransaction: 0 is the event struct, 1 operation, ...


def stripe_checksum(data: bytes | memoryview) -> int:
    """The checksum of one stripe's bytes (index, data and footer streams)."""
    return xxhash.xxh3_64_intdigest(data)


class StripeHasher:
    """The checksum of a stripe written in pieces."""

    def __init__(self) -> None:
        self._h = xxhash.xxh3_64()

    def update(self, piece: bytes | memoryview) -> None:
        self._h.update(piece)

    def value(self) -> int:
        return self._h.intdigest()


def pack_checksum(value: int) -> bytes:
    """One stripe's entry: 8 bytes, big-endian."""
    return value.to_bytes(8, "big")


def parse_checksums(raw: bytes | None, path: str) -> list[int] | None:
    """The per-stripe checksums of a `ingest.stripe.checksums` value; None when the key is
    missing or names an algorithm this version does not know (nothing to check).

    Raises:
        CorruptFileError: the value is not a name, a 0 byte, whole 8-byte entries and the
            hash of all that, or fails that hash (the footer is damaged, not a stripe).
    """
    if raw is None:
        return None
    name, sep, rest = raw.partition(b"\x00")
    body, trailer = raw[:-8], raw[-8:]
    # The trailer is an xxh3_64 whatever the algorithm, so damage to the name shows too.
    if (not sep or len(rest) < 8 or len(rest) % 8
            or stripe_checksum(body) != int.from_bytes(trailer, "big")):
        raise CorruptFileError(
            f"Cannot read the stripe checksums of {path}: the {len(raw)}-byte value of "
            f"{CHECKSUMS_KEY} fails its own check, so the footer that holds it is damaged",
            path=path, hint="restore the file from a backup")
    if name != ALGORITHM.encode():
        return None
    packed = body[len(name) + 1:]
    return [int.from_bytes(packed[i:i + 8], "big") for i in range(0, len(packed), 8)]


def checks_enabled() -> bool:
    """Whether our readers check stripe checksums (on unless INGEST_CHECK_CHECKSUMS=0)."""
    return os.environ.get(CHECK_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True)
class StripeMismatch:
    """A stripe whose bytes do not hash to the checksum its footer records."""

    path: str
    stripe: int  # 0-based
    offset: int
    end: int  # exclusive
    expected: int
    found: int
    write_ids: tuple[int, int] | None  # currentTransaction min..max, when known

    @property
    def message(self) -> str:
        held = ("" if self.write_ids is None else
                f", holding write ids {self.write_ids[0]}..{self.write_ids[1]}")
        return (f"Checksum mismatch in bucket file {self.path}: stripe {self.stripe} (bytes "
                f"{self.offset:,}..{self.end:,}{held}) hashes to {self.found:016x} but its "
                f"footer records {ALGORITHM} {self.expected:016x}; its bytes changed after "
                "they were written")


def stripe_write_ids(tail: FileTail, stripe: int) -> tuple[int, int] | None:
    """currentTransaction min..max of one stripe of an ACID file, from its stripe statistics,
    else from its key index entry (the write id of its last event); None when neither says."""
    stats = tail.stripe_statistics
    if stripe < len(stats) and len(stats[stripe]) > _CURRENT_COLUMN:
        ints = stats[stripe][_CURRENT_COLUMN].messages(ColumnStatistics.INT_STATISTICS)
        if ints:
            lo, hi = (ints[0].sint(IntegerStatistics.MINIMUM),
                      ints[0].sint(IntegerStatistics.MAXIMUM))
            if lo is not None and hi is not None:
                return lo, hi
    raw = tail.user_metadata.get(KEY_INDEX)
    if raw is not None:
        try:
            keys = parse_key_index(raw, "")
        except CorruptFileError:
            return None
        if stripe < len(keys):
            return keys[stripe][0], keys[stripe][0]
    return None


def find_mismatches(fs: fsspec.AbstractFileSystem, path: str, tail: FileTail, *,
                    data: bytes | memoryview | None = None,
                    first_mismatch_only: bool = False,
                    damaged_value: Literal["raise", "ignore"] = "raise",
                    ) -> list[StripeMismatch]:
    """Hash every stripe the tail describes and compare with its recorded checksum.

    Args:
        fs, path: the file.
        tail: its tail at the length being read.
        data: the file's first `tail.length` bytes, when already in memory (else each stripe
            is read from fs).
        first_mismatch_only: stop at the first stripe that differs.
        damaged_value: "ignore" treats a value that fails its own check as missing.

    Returns:
        The stripes that differ; empty when all match or the file records no checksums.

    Raises:
        CorruptFileError: the checksum value fails its own check (unless ignored), or its
            entry count differs from the stripe count.
    """
    try:
        recorded = parse_checksums(tail.user_metadata.get(CHECKSUMS_KEY), path)
    except CorruptFileError:
        if damaged_value == "raise":
            raise
        recorded = None
    if recorded is None:
        return []
    stripes = tail.stripes
    if len(recorded) != len(stripes):
        raise CorruptFileError(
            f"Cannot check bucket file {path}: {CHECKSUMS_KEY} has {len(recorded)} entries "
            f"for {len(stripes)} stripes", path=path, offset=tail.start,
            hint="the footer is damaged; restore the file from a backup")
    view = None if data is None else memoryview(data)
    out = []
    for i, (stripe, expected) in enumerate(zip(stripes, recorded, strict=True)):
        found = stripe_checksum(_stripe_bytes(fs, path, stripe, view))
        if found != expected:
            out.append(StripeMismatch(path, i, stripe.offset, stripe.end, expected, found,
                                      stripe_write_ids(tail, i)))
            if first_mismatch_only:
                break
    return out


def check_stripes(fs: fsspec.AbstractFileSystem, path: str, tail: FileTail, *,
                  data: bytes | memoryview | None = None,
                  damaged_value: Literal["raise", "ignore"] = "ignore") -> None:
    """Raise on the first stripe whose bytes differ from its recorded checksum (the readers'
    check). A value that fails its own check says the footer is damaged, not a stripe: the
    readers read the stripes unchecked, as in a file without checksums, and `verify` reports
    it; with `damaged_value="raise"` (a compaction's output, a cleaner's cover) it is an
    error too.

    Raises:
        CorruptFileError: a stripe's checksum differs (offset: where that stripe starts), or
            the recorded checksums do not count the stripes (or, with "raise", fail their
            own check).
    """
    for m in find_mismatches(fs, path, tail, data=data, first_mismatch_only=True,
                             damaged_value=damaged_value):
        raise CorruptFileError(
            m.message, path=path, offset=m.offset,
            hint=stripe_damage_hint(path))


def stripe_damage_hint(path: str) -> str:
    """What to do about damaged stripe data under a sound footer: nothing recovery can do."""
    return (f"the file is damaged inside its stripes (its footer is sound), which `ingest "
            f"recover` cannot repair: restore {path} from a backup")


def file_checksums(fs: fsspec.AbstractFileSystem, path: str,
                   stripes: Sequence[StripeInfo]) -> list[int]:
    """Checksums of the given stripes as they are in the file now (for files written without
    them, e.g. by Hive, that a writer continues)."""
    return [stripe_checksum(_stripe_bytes(fs, path, s, None)) for s in stripes]


def _stripe_bytes(fs: fsspec.AbstractFileSystem, path: str, stripe: StripeInfo,
                  view: memoryview | None) -> bytes | memoryview:
    if view is not None and stripe.end <= len(view):
        return view[stripe.offset:stripe.end]
    return fs.cat_file(path, start=stripe.offset, end=stripe.end)
