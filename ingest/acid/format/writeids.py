"""Snapshots as Hive's valid write-id lists (storage-api `ValidReaderWriteIdList`).

A plain value: the acid layer's readers take one, the txn layer produces one. The string form
is Hive's `<db.table>:<hwm>:<minOpenWriteId>:<open csv>:<aborted csv>` so users can compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ingest.errors import ConfigError

# Hive writes Long.MAX_VALUE as minOpenWriteId when nothing is open.
NO_OPEN_WRITE_ID = 9223372036854775807

RangeValidity = Literal["ALL", "SOME", "NONE"]


@dataclass(frozen=True)
class ValidWriteIdList:
    """Which write ids of one table a reader may see.

    A write id is valid iff it is <= high_watermark and neither open nor aborted.
    """

    table: str
    high_watermark: int
    open_write_ids: tuple[int, ...] = ()
    aborted_write_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "open_write_ids", tuple(sorted(set(self.open_write_ids))))
        object.__setattr__(self, "aborted_write_ids", tuple(sorted(set(self.aborted_write_ids))))

    @classmethod
    def all_committed(cls, table: str, high_watermark: int) -> ValidWriteIdList:
        """Every write id up to high_watermark is committed."""
        return cls(table, high_watermark)

    @property
    def min_open_write_id(self) -> int | None:
        return self.open_write_ids[0] if self.open_write_ids else None

    def is_valid(self, write_id: int) -> bool:
        """True iff rows written by write_id are visible in this snapshot."""
        if write_id > self.high_watermark:
            return False
        return write_id not in self._exceptions

    @property
    def _exceptions(self) -> frozenset[int]:
        return frozenset(self.open_write_ids) | frozenset(self.aborted_write_ids)

    def is_aborted(self, write_id: int) -> bool:
        return write_id in self.aborted_write_ids

    def range_validity(self, min_write_id: int, max_write_id: int) -> RangeValidity:
        """Hive's `isWriteIdRangeValid`: ALL, SOME or NONE of [min, max] are valid.

        Ids above the high-water mark count as invalid.
        """
        total = max_write_id - min_write_id + 1
        valid = self._count_valid(min_write_id, max_write_id)
        if valid == total:
            return "ALL"
        return "SOME" if valid else "NONE"

    def _count_valid(self, lo: int, hi: int) -> int:
        top = min(hi, self.high_watermark)
        if top < lo:
            return 0
        return (top - lo + 1) - sum(1 for w in self._exceptions if lo <= w <= top)

    def range_aborted(self, min_write_id: int, max_write_id: int) -> RangeValidity:
        """Hive's `isWriteIdRangeAborted`: ALL, SOME or NONE of [min, max] aborted."""
        aborted = sum(1 for w in self.aborted_write_ids if min_write_id <= w <= max_write_id)
        if aborted == max_write_id - min_write_id + 1:
            return "ALL"
        return "SOME" if aborted else "NONE"

    def is_valid_base(self, write_id: int) -> bool:
        """Hive's `isValidBase`: below every open write id and at or below the HWM."""
        low = self.min_open_write_id
        return (low is None or write_id < low) and write_id <= self.high_watermark

    def to_hive_string(self) -> str:
        """`db.table:hwm:minOpen:open,ids:aborted,ids`, as Hive prints it."""
        low = self.min_open_write_id
        return ":".join([
            self.table,
            str(self.high_watermark),
            str(NO_OPEN_WRITE_ID if low is None else low),
            ",".join(map(str, self.open_write_ids)),
            ",".join(map(str, self.aborted_write_ids)),
        ])

    @classmethod
    def from_hive_string(cls, text: str) -> ValidWriteIdList:
        """Parse Hive's string form, refusing any field that is not what Hive writes.

        `minOpenWriteId` may be left empty (it follows from the open ids); otherwise it must
        be the smallest open id, or above the high-water mark when none is open (Hive writes
        Long.MAX_VALUE there).

        Raises:
            ConfigError: the string is not `table:hwm:minOpen:open:aborted`, naming the field
                that is wrong: not a non-negative integer, an id above the high-water mark,
                an id both open and aborted, or a minOpenWriteId that disagrees.
        """
        parts = text.strip().split(":")
        if not 3 <= len(parts) <= 5:
            raise ConfigError(
                f"Cannot parse write-id list {text!r}: expected 5 fields "
                "'<db.table>:<highWatermark>:<minOpenWriteId>:<open ids>:<aborted ids>', found "
                f"{len(parts)}", hint=_EXAMPLE)
        parts += [""] * (5 - len(parts))
        if not parts[0].strip():
            raise _field_error(text, "table", parts[0], "is empty")
        hwm = _number(text, "highWatermark", parts[1])
        open_ids = _numbers(text, "open write ids", parts[3], hwm)
        aborted = _numbers(text, "aborted write ids", parts[4], hwm)
        both = sorted(set(open_ids) & set(aborted))
        if both:
            raise _field_error(text, "aborted write ids", parts[4],
                               f"also lists open write ids {both}")
        if parts[2].strip():
            low = _number(text, "minOpenWriteId", parts[2])
            if open_ids and low != min(open_ids):
                raise _field_error(text, "minOpenWriteId", parts[2],
                                   f"is not the smallest open write id {min(open_ids)}")
            if not open_ids and low <= hwm:
                raise _field_error(text, "minOpenWriteId", parts[2],
                                   f"names an open write id but none is listed (with none "
                                   f"open Hive writes {NO_OPEN_WRITE_ID}, or leave it empty)")
        return cls(parts[0].strip(), hwm, open_ids, aborted)

    def __str__(self) -> str:
        return self.to_hive_string()


_EXAMPLE = "for example 'default.events:20:15:15,18:16'"


def _field_error(text: str, field: str, value: str, problem: str) -> ConfigError:
    return ConfigError(f"Cannot parse write-id list {text!r}: field {field} {value!r} {problem}",
                       hint=f"fields are <db.table>:<highWatermark>:<minOpenWriteId>:<open ids>:"
                       f"<aborted ids>; {_EXAMPLE}")


def _number(text: str, field: str, value: str) -> int:
    digits = value.strip()
    if not digits.isascii() or not digits.isdigit():
        raise _field_error(text, field, value, "is not a non-negative integer")
    return int(digits)


def _numbers(text: str, field: str, value: str, hwm: int) -> tuple[int, ...]:
    if not value.strip():
        return ()
    out = []
    for item in value.split(","):
        if not item.strip().isascii() or not item.strip().isdigit():
            raise _field_error(text, field, value,
                               f"holds {item!r}, not a comma-separated list of non-negative "
                               "integers")
        out.append(int(item))
    above = [w for w in out if w > hwm]
    if above:
        raise _field_error(text, field, value, f"holds {above} above the highWatermark {hwm}")
    return tuple(out)
