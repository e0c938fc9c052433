"""The ACID directories under a table root, found by walking it: what create and verify see;
and the partition directories a compaction or cleaning run was asked for.

Knows directory names (`ingest.acid.format.names`) and fsspec, not the metastore. Like Hive's
`AcidUtils.getAcidState`, names starting with `_` or `.` are skipped; a name that starts like
an ACID directory but does not parse is reported as stray.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import fsspec

from ingest.acid.format import (
    ParsedDirectory,
    is_acid_directory_prefix,
    parse_directory,
    parse_partition,
)
from ingest.acid.read import list_partitions
from ingest.errors import ConfigError
from ingest.txn import TableDefinition


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


def partition_dirs(defn: TableDefinition, fs: fsspec.AbstractFileSystem, root: str,
                   specs: Sequence[str] | None, *, action: str) -> list[str]:
    """The table's partition directories named by `specs` (``dt=1``, ``a=1/b=2``), or all.

    Only directories at the table's partition depth count (an empty partitioned table's
    root is not one).

    Args:
        action: the verb for messages ("compact", "clean").

    Raises:
        ConfigError: a spec is malformed or names no existing partition.
    """
    existing: list[str] = []
    if fs.exists(root):
        depth = tuple(defn.partition_columns)
        existing = [p.path.rstrip("/") for p in list_partitions(root, fs=fs)
                    if tuple(k for k, _ in p.values) == depth]
    if not specs:
        return existing
    chosen = []
    for spec in specs:
        parts = [p for p in spec.replace(",", "/").split("/") if p]
        if not parts or any(parse_partition(p) is None for p in parts):
            raise ConfigError(f"Cannot {action} {defn.name}: partition {spec!r} is not of the "
                              "form col=value (a=1/b=2 for several levels)")
        directory = "/".join([root, *parts])
        if directory not in existing:
            shown = ", ".join(p[len(root):].strip("/") or "(root)" for p in existing[:5])
            raise ConfigError(f"Cannot {action} {defn.name}: it has no partition {spec!r}",
                              hint=f"its partitions: {shown or 'none'}"
                                   + (", ..." if len(existing) > 5 else ""))
        chosen.append(directory)
    return chosen
