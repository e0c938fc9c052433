"""The ACID directories under a table root, found by walking it: what create and verify see.

Knows directory names (`ingest.acid.names`) and fsspec, not the metastore. Like Hive's
`AcidUtils.getAcidState`, names starting with `_` or `.` are skipped; a name that starts like
an ACID directory but does not parse is reported as stray.
"""

from __future__ import annotations

from dataclasses import dataclass

import fsspec

from ingest.acid.names import ParsedDirectory, is_acid_directory_prefix, parse_directory


@dataclass(frozen=True)
class AcidLayout:
    """What `scan_layout` found.

    Attributes:
        directories: (path, parsed name) of every base, delta and delete_delta directory.
        stray: paths of directories named like one (`delta_abc`) that do not parse.
    """

    directories: tuple[tuple[str, ParsedDirectory], ...]
    stray: tuple[str, ...]

    @property
    def max_write_id(self) -> int:
        """The highest write id any directory name holds (0 when there are none)."""
        return max((p.max_write_id for _, p in self.directories), default=0)


def scan_layout(fs: fsspec.AbstractFileSystem, root: str) -> AcidLayout:
    """Walk `root` (a table root or partition) for ACID directories; nothing below them.

    Returns:
        The directories found, in walk order; empty when `root` does not exist.

    Raises:
        OSError: the storage failed.
    """
    root = root.rstrip("/")
    if not fs.isdir(root):
        return AcidLayout((), ())
    found: list[tuple[str, ParsedDirectory]] = []
    stray: list[str] = []
    pending = [root]
    while pending:
        directory = pending.pop()
        for info in sorted(fs.ls(directory, detail=True), key=lambda i: str(i["name"])):
            if info.get("type") != "directory":
                continue
            path = str(info["name"]).rstrip("/")
            name = path.rsplit("/", 1)[-1]
            if name.startswith(("_", ".")):
                continue
            parsed = parse_directory(name)
            if parsed is not None:
                found.append((path, parsed))
            elif is_acid_directory_prefix(name):
                stray.append(path)
            else:
                pending.append(path)  # a partition directory
    return AcidLayout(tuple(found), tuple(stray))
