"""Disk full while writing: the writer raises ENOSPC, the transaction aborts, committed data
stays readable, and recovery leaves a clean table."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem
from support import SIMPLE_SCHEMA, simple_table

from ingest.acid import BucketFileOptions, BucketWriter, read_events
from ingest.acid.format.names import format_delta
from ingest.table import open_table
from ingest.table.maintain import recover_table_with_metastore, verify_table
from ingest.txn import Metastore, TableDefinition, default_metastore_url


class _Full:
    """Wraps a file: writes fail with ENOSPC once the filesystem's budget is spent."""

    def __init__(self, f: Any, fs: FullFileSystem, path: str) -> None:
        self._f, self._fs, self._path = f, fs, path

    def write(self, data: bytes) -> int:
        if self._fs.budget < len(data):
            raise OSError(errno.ENOSPC, "No space left on device", self._path)
        self._fs.budget -= len(data)
        return int(self._f.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


class FullFileSystem(LocalFileSystem):
    """A local filesystem with `budget` bytes of free space for files opened for writing."""

    cachable = False

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.budget = budget

    def _open(self, path: str, mode: str = "rb", **kw: Any) -> Any:
        f = super()._open(path, mode, **kw)
        # "x": a new file is created exclusively (O_EXCL), as the writers do.
        return _Full(f, self, path) if any(c in mode for c in "wax") else f


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INGEST_METASTORE", raising=False)
    monkeypatch.setenv("INGEST_HOME", str(tmp_path / "ingest-home"))


@pytest.mark.parametrize("budget", [0, 50, 2000])
def test_disk_full_aborts_and_keeps_committed(tmp_path: Path, budget: int) -> None:
    root = tmp_path / "wh" / "events"
    with Metastore.open(default_metastore_url(str(root))) as store:
        table = store.create_table(TableDefinition("default.events", str(root), SIMPLE_SCHEMA))
        with store.transaction(table.name) as txn:
            path = root / format_delta(txn.write_id, txn.write_id, 0) / "bucket_00000"
            with BucketWriter.create(str(path), BucketFileOptions(write_id=txn.write_id,
                                                                  row_schema=SIMPLE_SCHEMA)) as w:
                w.write(simple_table(range(100)))
        full = FullFileSystem(budget)
        with pytest.raises(OSError) as info, store.transaction(table.name) as txn2:
            path2 = root / format_delta(txn2.write_id, txn2.write_id, 0) / "bucket_00000"
            w2 = None
            try:
                w2 = BucketWriter.create(str(path2),
                                         BucketFileOptions(write_id=txn2.write_id,
                                                           row_schema=SIMPLE_SCHEMA), fs=full)
                for i in range(20):
                    w2.write(simple_table(range(1000 + 100 * i, 1100 + 100 * i)))
                    w2.flush()
            finally:
                if w2 is not None:
                    w2.abandon()
        assert info.value.errno == errno.ENOSPC
        assert "No space left on device" in str(info.value) and str(path2) in str(info.value)
        assert store.write_id_states(table.name) == {1: "committed", 2: "aborted"}
        result = recover_table_with_metastore(open_table(str(root), metastore=store),
                                              txn_timeout_s=0)
        assert result.clean
        assert result.report.aborted_directories == (path2.parent.name,)
        assert verify_table(open_table(str(root), metastore=store)).ok
    ids = [r["id"] for b in read_events(str(path)) for r in b.column("row").to_pylist()]
    assert ids == list(range(100))
