"""Undoing what a sink wrote but never committed, shared by the single-table and the
many-table sinks.

- `abort_left_open`: the restart repair (docs/invariants.md 8.1): abort the transactions an
  earlier run of the sink left open and remove their write ids' files in every table each
  wrote. The caller finds them (by its agent tag); this is the part both sinks share.
- `remove_written`: after a failed micro-batch's abort, the files its tasks reported and the
  delta directories left holding nothing else (never committed data, never another's file);
  `remove_table_written` does it for one table's delta (and a keyed write's delete delta).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import fsspec

from ingest.acid import side_file_path
from ingest.acid.format import ACID_VERSION_FILE, format_delta
from ingest.errors import CommitConflictError
from ingest.spark.sink._batch import remove_quietly
from ingest.spark.sink._results import FileWritten
from ingest.table.core import remove_aborted_writes
from ingest.txn import Metastore, TableDefinition, Transaction, TransactionInfo

log = logging.getLogger(__name__)


def abort_left_open(store: Metastore, left: Mapping[int, Sequence[TransactionInfo]], *,
                    sink_id: str, table_of: Callable[[str], TableDefinition],
                    storage_options: Mapping[str, object]) -> dict[str, list[int]]:
    """Abort each transaction of `left` (its id -> its rows, one per table it wrote, listed
    before any abort) and remove the files of its write ids; return the aborted write ids by
    table name. A transaction that committed meanwhile keeps its files."""
    dead: dict[str, list[int]] = {}
    for txn_id, infos in sorted(left.items()):
        first = infos[0]
        try:
            store.abort(Transaction(txn_id, first.table, first.write_id, first.opened_at,
                                    first.agent),
                        reason="its stream was restarted before it committed")
        except CommitConflictError as e:  # committed after all: its files are the table's
            log.warning("Transaction %d of sink %r committed meanwhile; its files stay: %s",
                        txn_id, sink_id, e)
            continue
        for info in infos:
            dead.setdefault(info.table, []).append(info.write_id)
    for name, write_ids in sorted(dead.items()):
        removal = remove_aborted_writes(store, table_of(name), write_ids,
                                        storage_options=dict(storage_options))
        log.warning("Aborted write ids %s of %s left open by an earlier run of sink %r; "
                    "removed %d of their files and %d delta directories%s", write_ids,
                    name, sink_id, len(removal.removed), len(removal.directories),
                    f"; kept {list(removal.kept)}" if removal.kept else "")
    return dead


def remove_written(fs: fsspec.AbstractFileSystem, root: str, depth: int, name: str,
                   files: Sequence[FileWritten]) -> None:
    """After an abort: delete the files the tasks reported (published or still staged) and
    their side files, then each directory `name` left holding nothing but the version marker
    and hidden staging files (a task attempt that died before reporting). A directory still
    holding anything else was not only ours and stays (docs/invariants.md, 7)."""
    for f in files:
        for path in (f.path, f.staging):
            if path is not None:
                remove_quietly(fs, path)
                remove_quietly(fs, side_file_path(path))
    for directory in _delta_dirs(fs, root, depth, name):
        names = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(directory, detail=False)]
        if all(n == ACID_VERSION_FILE or n.startswith("_tmp.bucket_") for n in names):
            fs.rm(directory, recursive=True)


def remove_table_written(fs: fsspec.AbstractFileSystem, root: str, depth: int, *,
                         delta_dir: str, write_id: int, files: Sequence[FileWritten],
                         keyed: bool) -> None:
    """`remove_written` of one table's files of an aborted write in `delta_dir`; a keyed
    write (--mode upsert|cdc) also leaves the delete delta of its write id, which goes too."""
    remove_written(fs, root, depth, delta_dir, files)
    if keyed:  # the files are among `files`; its directories are not named by `delta_dir`
        remove_written(fs, root, depth, format_delta(write_id, write_id, 0, delete=True), [])


def _delta_dirs(fs: fsspec.AbstractFileSystem, root: str, depth: int, name: str) -> list[str]:
    """Directory `name` in every partition of the table that has one."""
    pattern = "/".join([root.rstrip("/"), *["*"] * depth, name])
    return fs.glob(pattern) if depth else ([f"{root.rstrip('/')}/{name}"]
                                           if fs.exists(f"{root.rstrip('/')}/{name}") else [])
