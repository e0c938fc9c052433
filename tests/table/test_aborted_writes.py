"""`remove_aborted_writes` (the streaming sink's restart repair): what a dead writer left in
its aborted write ids' directories goes, and nothing else: not a file a commit lists, not a
file no write makes, not another writer's open write, not a committed one."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pyarrow as pa

from ingest.table import open_table
from ingest.table.core import remove_aborted_writes
from ingest.table.core._written import Written, relative_path
from ingest.table.write import create_table, load
from ingest.txn import Metastore, default_metastore_url

ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "value": ["a", "b"]})


def files(root: Path) -> dict[str, bytes]:
    return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*"))
            if f.is_file()}


def write(store: Metastore, location: str, partitions: list[str]) -> tuple[object, Written]:
    """An open transaction with `delta_W_W_0000/bucket_00000` in each partition."""
    defn = store.get_table(location)
    txn = store.open_transaction(defn, agent="host:1:test-writer")
    written = Written(fsspec.filesystem("file"), location)
    for part in partitions:
        directory = f"{location}/{part}/delta_{txn.write_id:07d}_{txn.write_id:07d}_0000"
        written.make_directory(f"{location}/{part}", directory)
        written.write_bucket(directory, 0, ROWS, row_schema=defn.row_schema,
                             write_id=txn.write_id, compression="zlib")
    return txn, written


def test_only_the_aborted_writes_own_files_go(tmp_path: Path) -> None:
    location = str(tmp_path / "events")
    create_table(location, "id BIGINT, value STRING", partitioned_by=("dt",))
    load(open_table(location),
         ROWS.append_column("dt", pa.array(["a", "b"])))  # write id 1, committed
    with Metastore.open(default_metastore_url(location)) as store:
        defn = store.get_table(location)
        dead, dead_written = write(store, location, ["dt=a", "dt=b", "dt=c"])
        dead_dirs = {p: Path(location, p, "delta_0000002_0000002_0000")
                     for p in ("dt=a", "dt=b", "dt=c")}
        # What a dead sink task leaves: a staging file with its side file, beside the file.
        bucket = dead_dirs["dt=a"] / "bucket_00000"
        (dead_dirs["dt=a"] / "_tmp.bucket_00001.7").write_bytes(bucket.read_bytes())
        (dead_dirs["dt=a"] / "_tmp.bucket_00001.7_flush_length").write_bytes(b"\0" * 8)
        (dead_dirs["dt=a"] / "bucket_00000_flush_length").write_bytes(b"\0" * 8)
        # In dt=b a file no write makes; in dt=c a file the manifest lists (a commit vouched
        # for it, whatever its write id's state now says).
        (dead_dirs["dt=b"] / "notes.txt").write_text("someone else's")
        listed = next(c for c in dead_written.committed if c.path.startswith("dt=c/"))
        store.record_committed_files(defn, [listed])
        store.abort(dead, reason="its writer died")
        other, _ = write(store, location, ["dt=a"])  # another writer, still open
        before = files(Path(location))

        removal = remove_aborted_writes(store, defn, [dead.write_id, other.write_id])

        assert removal.not_aborted == (other.write_id,)
        gone = {relative_path(location, p) for p in removal.removed}
        assert gone == {"dt=a/delta_0000002_0000002_0000/" + n for n in (
            "_tmp.bucket_00001.7", "_tmp.bucket_00001.7_flush_length", "bucket_00000",
            "bucket_00000_flush_length")} | {"dt=b/delta_0000002_0000002_0000/bucket_00000"}
        assert removal.directories == (str(dead_dirs["dt=a"]),)
        assert {relative_path(location, p) for p in removal.kept} == {
            "dt=b/delta_0000002_0000002_0000/notes.txt", listed.path}
        after = files(Path(location))
        assert after == {k: v for k, v in before.items()
                         if not k.startswith("dt=a/delta_0000002") and k not in gone}
        assert not dead_dirs["dt=a"].exists()
        assert store.write_id_states(location)[other.write_id] == "open"

        # A second run finds nothing more to remove.
        again = remove_aborted_writes(store, defn, [dead.write_id])
        assert (again.removed, again.directories) == ((), ())
