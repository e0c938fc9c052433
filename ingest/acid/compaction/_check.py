"""A compaction's output checked before it is renamed into place, and its manifest entries.

Each bucket file written under the hidden output names must end in a complete ORC tail that
counts the events the writer wrote, and every stripe must hash to the checksum its footer
records (`checksums`): storage that lost or changed a byte between the write and the rename
fails the compaction instead of hiding its inputs behind damaged output. The entries the
metastore records are made from the same tails (docs/format.md §20).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import fsspec

from ingest.acid.format import (
    COMPACTION_TEMP_PREFIX,
    CommittedFile,
    check_stripes,
    is_side_file,
    parse_bucket_file,
    tail_bytes_at,
    tail_hash,
)
from ingest.errors import CorruptFileError, TailError
from ingest.orc import parse_tail

_HINT = ("nothing was renamed into place and the inputs are unchanged; check the storage, "
         "then run `ingest compact` again")


def check_outputs(fs: fsspec.AbstractFileSystem, partition_dir: str, outputs: Sequence[str],
                  events: Mapping[str, int], *, root: str, write_id: int
                  ) -> tuple[CommittedFile, ...]:
    """Check every bucket file of the hidden `outputs` of one partition; their entries.

    Args:
        fs: the filesystem.
        partition_dir: the partition directory.
        outputs: the final names of the output directories (written under the hidden prefix).
        events: events the writer wrote, by hidden file path (files written and kept).
        root: the table root; entries name the files as they will be after the renames,
            relative to it.
        write_id: the entries' write id (the compactor's high watermark).

    Returns:
        One manifest entry per output file, in path order.

    Raises:
        CorruptFileError: a file written is missing, an extra one appeared, a tail does not
            end the file or counts other events, or a stripe differs from its checksum.
    """
    directory = partition_dir.rstrip("/")
    root = root.rstrip("/")
    found: list[CommittedFile] = []
    seen: set[str] = set()
    for name in outputs:
        temp = f"{directory}/{COMPACTION_TEMP_PREFIX}{name}"
        for file in sorted(str(p).rstrip("/").rsplit("/", 1)[-1]
                           for p in fs.ls(temp, detail=False)):
            if parse_bucket_file(file) is None or is_side_file(file):
                continue
            path = f"{temp}/{file}"
            final = f"{directory}/{name}/{file}"
            if path not in events:
                raise CorruptFileError(
                    f"Cannot compact {directory}: output file {final} appeared, but the "
                    "compaction did not write it", path=path, hint=_HINT)
            rel = final[len(root) + 1:] if final.startswith(root + "/") else final
            found.append(check_output(fs, path, rel, write_id=write_id, events=events[path],
                                      final=final))
            seen.add(path)
    for path in sorted(set(events) - seen):
        raise CorruptFileError(
            f"Cannot compact {directory}: output file {path} was written but is gone",
            path=path, hint=_HINT)
    return tuple(found)


def check_output(fs: fsspec.AbstractFileSystem, path: str, rel: str, *, write_id: int,
                 events: int, final: str) -> CommittedFile:
    """One output file checked: its tail, its event count and every stripe's checksum.

    Args:
        path: the file, under its hidden name.
        rel: the entry's path (the final name, relative to the table root).
        write_id: the entry's write id.
        events: events the writer wrote to it.
        final: the file's final path, for messages.

    Raises:
        CorruptFileError: see `check_outputs`.
    """
    where = f"Cannot compact: output file {final} failed its check after writing"
    length = int(fs.size(path))
    tail = tail_bytes_at(fs, path, length)
    try:
        parsed = parse_tail(tail, length)
    except TailError as e:
        raise CorruptFileError(f"{where}: no complete ORC tail ends the file at {length:,} "
                               f"bytes ({e})", path=path, offset=e.offset, hint=_HINT) from e
    if parsed.number_of_rows != events:
        raise CorruptFileError(f"{where}: its footer counts {parsed.number_of_rows:,} events, "
                               f"but {events:,} were written", path=path, offset=parsed.start,
                               hint=_HINT)
    try:
        check_stripes(fs, path, parsed, damaged_value="raise")
    except CorruptFileError as e:
        raise CorruptFileError(f"{where}: {e.message}", path=path, offset=e.offset,
                               hint=_HINT) from e
    return CommittedFile(rel, write_id, length, tail_hash(tail), parsed.number_of_rows)


__all__ = ["check_output", "check_outputs"]
