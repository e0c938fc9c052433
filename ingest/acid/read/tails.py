"""Which tail of a bucket file recovery may keep: the checks behind `recover_table`.

A tail at a recorded flush length is first checked cheaply against the tail of the flush
before it (`check_extends`: what the flush added, not every stripe's statistics); a tail that
does not extend one, or has none before it, is checked in full. The file's own footers past
a side file cut short are found here too, for recovery and readers alike
(`committed_read_length`). ORC, the ACID struct and key index; nothing here changes a file.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import fsspec
import pyarrow.orc as po

from ingest.acid.format import (
    ACID_FIELD_NAMES,
    KEY_INDEX,
    parse_directory,
    parse_key_index,
    side_file_path,
)
from ingest.acid.read.bucket_file import read_events, readable_length
from ingest.errors import CorruptFileError
from ingest.orc import (
    MAGIC,
    BoundedFile,
    FileTail,
    Footer,
    Message,
    StripeInfo,
    check_extends,
    read_tail,
)

# The ACID columns but `row`: what the cheap check decodes of the stripes a flush added.
_EVENT_COLUMNS = [name for name in ACID_FIELD_NAMES if name != "row"]
# Stripes of the last flush looked through for the footer before them (files without a side
# file); a file whose last flush added more is checked in full.
_MAX_STRIPES_PER_FLUSH = 64
# Bytes read per step when scanning backwards for a postscript (files without a side file).
_SCAN_CHUNK = 4 * 1024 * 1024
# A postscript ends with its magic (field 8000, the highest, so written last) and one length byte.
_PS_TAIL = len(MAGIC) + 1


def full_check(fs: fsspec.AbstractFileSystem, path: str, length: int,
               like: FileTail | None = None, *, decode: bool = False) -> FileTail | None:
    """The tail ending at `length`, checked in full, or None when no complete, consistent one
    ends there.

    Beyond what `read_tail` checks (postscript, footer, metadata, every stripe below the
    tail), given `like` (the tail at the previous flush) the types must be the same and its
    stripes a prefix of these, and `_acid_readable` must pass with `decode` from the stripes
    added since `like`. A footer damaged in place must not pass for one (ORC has no
    checksums), at the cost of reading one flush's stripes, not the file.
    """
    if length <= len(MAGIC):
        return None
    try:
        tail = read_tail(fs, path, length)
        stripes = tail.stripes
        if like is not None:
            if [t.encode() for t in like.types] != [t.encode() for t in tail.types]:
                return None
            old = [s.to_message().encode() for s in like.stripes]
            if old != [s.to_message().encode() for s in stripes[: len(old)]]:
                return None
    except Exception:  # noqa: BLE001 - any failure to decode means no usable tail here
        return None
    first_new = (0 if like is None else len(like.stripes)) if decode else None
    return tail if _acid_readable(fs, path, tail, first_new) else None


def _extended_tail(fs: fsspec.AbstractFileSystem, path: str, length: int,
                   earlier: FileTail) -> FileTail | None:
    """The tail ending at `length` when it extends `earlier` (`check_extends`) and the stripes
    added since `earlier` decode; None otherwise (the caller then checks it in full).

    Costs a comparison of the two footers and decoding the event columns and statistics of
    the stripes one flush added, whatever the number of flushes before.
    """
    try:
        tail = read_tail(fs, path, length, check=False)
        check_extends(tail, earlier)
    except Exception:  # noqa: BLE001 - the full check decides what is wrong
        return None
    first_new = len(earlier.footer.encoded_messages(Footer.STRIPES))
    # The event columns are enough to show a wrong stripe offset or length (the stripe footer
    # and their streams would be read from other bytes); decoding `row` too would make the
    # cost grow with the size of a flush, and no tail check can see damage inside its data.
    return tail if _acid_readable(fs, path, tail, first_new, columns=_EVENT_COLUMNS) else None


def _acid_readable(fs: fsspec.AbstractFileSystem, path: str, tail: FileTail,
                   first_new: int | None, *, columns: list[str] | None = None) -> bool:
    """pyarrow opens the file at the tail's length with the ACID struct as root, the ACID key
    index names every stripe and, unless `first_new` is None, stripes from `first_new` on
    decode (`columns` of them, all when None): a damaged stripe offset or length in the
    footer shows there."""
    try:
        stripes = len(tail.footer.encoded_messages(Footer.STRIPES))
        keys = tail.user_metadata.get(KEY_INDEX)
        if keys is not None and keys.count(b";") != stripes:
            return False
        bounded = BoundedFile(fs, path, tail.length)
        try:
            orc = po.ORCFile(bounded)
            names = orc.schema.names
            if first_new is not None:
                for i in range(first_new, stripes):
                    orc.read_stripe(i, columns=columns)
        finally:
            bounded.close()
    except Exception:  # noqa: BLE001 - any failure to decode means no usable tail here
        return False
    return names == list(ACID_FIELD_NAMES)


def parsed_at(fs: fsspec.AbstractFileSystem, path: str, length: int, *,
               check: bool = True) -> FileTail | None:
    """`read_tail`, or None when no complete tail ends at `length`."""
    try:
        return read_tail(fs, path, length, check=check)
    except CorruptFileError:
        return None


def _previous_tail(fs: fsspec.AbstractFileSystem, path: str, earlier: list[int],
                   size: int, *, check: bool = True) -> FileTail | None:
    """The tail at the last earlier flush length that reads, or None: a later tail must keep
    its types and stripes, and only the stripes after it need decoding."""
    for length in reversed(earlier):
        if length <= size:
            tail = parsed_at(fs, path, length, check=check)
            if tail is not None:
                return tail
    return None


def tail_at_flush(fs: fsspec.AbstractFileSystem, path: str, length: int, earlier: list[int],
                  size: int) -> FileTail | None:
    """The tail at recorded flush length `length` if it is complete and consistent.

    Cheap first: parsed without decoding nested messages and checked against the tail at the
    flush before (`_extended_tail`). Only when that fails (a damaged or foreign tail, or no
    earlier flush) is it checked in full against the last earlier tail that passes a full
    check, which is what makes a suspicious file slow, never a healthy one.
    """
    before = [x for x in earlier if x < length]
    previous = _previous_tail(fs, path, before, size, check=False)
    if previous is not None:
        tail = _extended_tail(fs, path, length, previous)
        if tail is not None:
            return tail
    return full_check(fs, path, length, _previous_tail(fs, path, earlier, size), decode=True)


def tail_at_end(fs: fsspec.AbstractFileSystem, path: str, size: int) -> FileTail | None:
    """The tail that ends the file, if complete and consistent.

    A file whose writer flushed before closing holds the footer of that flush in the gap
    before the stripes written after it: found from the last gap between stripes, it lets
    `_extended_tail` check the final tail cheaply. Without one (a file written in one go,
    padding between stripes, a damaged tail) the tail is checked in full.
    """
    earlier = _footer_before_last_flush(fs, path, size)
    extended = None if earlier is None else _extended_tail(fs, path, size, earlier)
    return extended or full_check(fs, path, size)


def _footer_before_last_flush(fs: fsspec.AbstractFileSystem, path: str,
                              size: int) -> FileTail | None:
    """The tail that ends where the stripes after the last gap between stripes begin."""
    try:
        entries = read_tail(fs, path, size, check=False).footer.encoded_messages(Footer.STRIPES)
        later = None
        for raw in reversed(entries[-_MAX_STRIPES_PER_FLUSH:]):
            stripe = StripeInfo.from_message(Message.decode(raw))
            if later is not None and stripe.end < later.offset:
                return read_tail(fs, path, later.offset, check=False)
            later = stripe
    except Exception:  # noqa: BLE001 - no usable earlier footer: the caller checks in full
        return None
    return None


def last_complete_footer(fs: fsspec.AbstractFileSystem, path: str,
                         size: int) -> FileTail | None:
    """The tail with the largest end e < size that is complete (FileDump's magic scan,
    backwards), checked in full: a file without a usable side file is suspicious.

    Candidates are the ends of every "ORC" followed by one byte: the postscript's magic is its
    last field, then comes the postscript length byte.
    """
    for end in _candidate_ends(fs, path, size):
        tail = full_check(fs, path, end)
        if tail is not None:
            return tail
    return None


def _candidate_ends(fs: fsspec.AbstractFileSystem, path: str, size: int) -> Iterator[int]:
    """Ends of every "ORC" + 1 byte below `size`, last first, reading chunks backwards."""
    hi = size
    while hi > 0:
        lo = max(0, hi - _SCAN_CHUNK)
        # Overlap by the magic length so a magic across two chunks is not missed.
        data = fs.cat_file(path, start=lo, end=min(size, hi + len(MAGIC)))
        bound = len(data)
        while (pos := data.rfind(MAGIC, 0, bound)) >= 0:
            bound = pos + len(MAGIC) - 1
            start = lo + pos
            # Matches at or past `hi` were seen in the previous chunk; offset 0 is the header.
            if 0 < start < hi and start + _PS_TAIL < size:
                yield start + _PS_TAIL
        hi = lo


def max_write_id(tail: FileTail) -> int | None:
    """The highest originalTransaction in the tail's ACID key index (the last key of every
    stripe), or None without a usable one."""
    ids = _key_write_ids(tail)
    return max(ids) if ids else None


def _key_write_ids(tail: FileTail) -> list[int]:
    raw = tail.user_metadata.get(KEY_INDEX)
    if raw is None:
        return []
    try:
        return [w for w, _, _ in parse_key_index(raw, "")]
    except CorruptFileError:
        return []


def committed_footer_past(fs: fsspec.AbstractFileSystem, path: str, tail: FileTail | None,
                          size: int, settled: Callable[[int], bool] | None
                          ) -> FileTail | None:
    """The last complete footer past `tail` (the side file's last readable length) that
    extends it and whose added stripes hold no row of an open write id (`settled`: committed
    or aborted), checked in full: the file's own record of flushes a side file cut short
    lost. None when there is none. `tail` None: the side file records no flush; any complete
    footer may serve."""
    if settled is None:
        return None
    start = 0 if tail is None else tail.length
    # Candidates come last first: stop scanning at `tail`, not at the start of the file.
    ends = [size, *itertools.takewhile(lambda e: e > start, _candidate_ends(fs, path, size))]
    for end in ends:
        found = full_check(fs, path, end, tail, decode=True)
        if found is None:
            continue
        ids = _key_write_ids(found)[0 if tail is None else len(tail.stripes):]
        if ids and all(settled(w) for w in ids):
            return found
    return None


def data_problem(fs: fsspec.AbstractFileSystem, path: str, length: int) -> str | None:
    """Why the stripes of the file up to `length` do not decode, or None when they do."""
    try:
        for _ in read_events(path, fs=fs, length=length):
            pass
    except (CorruptFileError, OSError, ValueError) as e:
        return f"its stripes up to {length:,} bytes do not decode ({e})"
    return None


class SideFileWarning(UserWarning):
    """A side file stops below rows of committed write ids that the file's own footers hold:
    the reader read up to those footers instead (run `ingest recover` to rebuild it)."""


def committed_read_length(fs: fsspec.AbstractFileSystem, path: str,
                          committed: Callable[[int], bool],
                          settled: Callable[[int], bool] | None = None, *,
                          listed_size: int | None = None) -> tuple[int, str | None]:
    """(length to read, warning or None) for a bucket file under a snapshot.

    The side file's last entry, unless the file is longer, its directory holds a committed
    write id, and a complete footer past that length extends the tail there with stripes
    of no open write id (`settled`, committed or aborted; `committed` when None): a side
    file cut short must not hide committed rows (docs/recovery.md, 9). Costs nothing more
    when the file ends at its last entry; otherwise a scan of the bytes past it.
    `listed_size`: the file's size in a listing of its directory that showed no side file
    beside it; the file is then read whole, as without a side file (no side file is asked
    for: the listing is the read's one view of the directory).

    Raises:
        FileNotFoundError: no such file.
        CorruptFileError: the side file points past the end of the file.
    """
    if listed_size is not None:
        return listed_size, None
    parsed = parse_directory(path.rstrip("/").rsplit("/", 2)[-2])
    if (parsed is not None and parsed.is_base and committed(parsed.max_write_id)
            and fs.exists(side_file_path(path))):
        # A base never keeps a side file (Hive's mayContainSideFile; our writer closes it
        # before it is committed): it is stray, and Hive ignores it; so do we.
        size = int(fs.size(path))
        return size, (f"{path}: ignored its side file, which a base never has; read all "
                      f"{size:,} bytes. Hint: run `ingest recover` to remove it.")
    length, size, lengths = readable_length(fs, path)
    if lengths is None or length >= size:
        return length, None
    if parsed is None or parsed.is_base:
        return length, None
    top = next((w for w in range(parsed.max_write_id, parsed.min_write_id - 1, -1)
                if committed(w)), None)
    if top is None:
        return length, None
    tail = parsed_at(fs, path, length, check=False) if length > 0 else None
    if length > 0 and tail is None:
        return length, None  # the reader reports the damaged tail itself
    later = committed_footer_past(fs, path, tail, size, settled or committed)
    if later is None:
        return length, None
    return later.length, (
        f"{path}: its side file stops at {length:,} bytes, but the file's own footers go on "
        f"to {later.length:,} bytes (write ids up to {max_write_id(later)}, none open); "
        f"read up to there. Hint: run `ingest recover` to rebuild the side file.")
