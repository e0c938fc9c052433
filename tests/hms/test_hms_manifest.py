"""The committed-file manifest over a Hive Metastore (4.0.1 and 3.1.3): entries are rows of the
hidden `<table>__ingest_files` side table, written in the committing HMS transaction, so they
exist exactly for committed data (docs/format.md §20, docs/invariants.md 8.11); and the
damage the manifest exists for is named by `cat`, `verify` and `compact`, as on SQL
(tests/table/test_damage_every_reader.py)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from hms_server import Server
from support import ok_json, run_cli

from ingest.acid.format import CommittedFile
from ingest.errors import CommitConflictError, ConfigError
from ingest.txn import Metastore, TableDefinition, hms

pytestmark = pytest.mark.hms

Capsys = pytest.CaptureFixture[str]


def _entry(write_id: int, length: int = 100, directory: str = "") -> CommittedFile:
    name = directory or f"delta_{write_id:07d}_{write_id:07d}_0000"
    return CommittedFile(f"{name}/bucket_00000", write_id, length, f"{write_id:016x}", 3)


def test_entries_commit_with_the_data_and_never_without_it(
        store: Metastore, defn: TableDefinition, tmp_path: Path) -> None:
    store.create_table(defn)
    assert store.capabilities.committed_files
    assert store.committed_files(defn) == {}
    first = store.open_transaction(defn, agent="h:1:ingest-load")
    store.commit(first, files={defn.name: [_entry(first.write_id)]})
    dead = store.open_transaction(defn)
    with pytest.raises(ConfigError, match=r"the commit is of write id"):
        store.commit(dead, files={defn.name: [_entry(dead.write_id + 5)]})
    store.abort(dead)  # a refused commit leaves it open: its writer aborts it
    assert store.committed_files(defn) == {_entry(1).path: _entry(1)}

    # The manifest's delta is written inside the commit: a transaction that dies before
    # commit_txn (aborted here, as the server's time-out would) leaves it invisible.
    lost = store.open_transaction(defn)
    with Metastore.open(store.url) as other:
        before = other.committed_files(defn)
        store._manifest.write(store._conn, lost.txn_id, store._hive_table(defn.name),
                              record=[_entry(lost.write_id)], write_id=lost.write_id)
        assert other.committed_files(defn) == before  # open: not committed yet
        store.abort(lost)
        assert other.committed_files(defn) == before

    # Outside a commit (a compaction's outputs), then forgotten (a cleaner's): each in a
    # transaction of its own; forgetting what is not listed opens none.
    base = _entry(2, 900, "base_0000002")
    store.record_committed_files(defn, [base])
    assert set(store.committed_files(defn)) == {_entry(1).path, base.path}
    with pytest.raises(CommitConflictError, match=r"never lowers a committed length"):
        store.record_committed_files(defn, [_entry(2, 800, "base_0000002")])
    manifest_table = f"{defn.name}__ingest_files"
    states = store.write_id_states(manifest_table)
    assert store.forget_committed_files(defn, ["nope/bucket_00000"]) == 0
    assert store.write_id_states(manifest_table) == states
    assert store.forget_committed_files(defn, [_entry(1).path, "nope/bucket_00000"]) == 1
    assert store.committed_files(defn) == {base.path: base}
    # A path recorded again after it was forgotten is listed again (order is commit order).
    again = _entry(1, 120)
    store.record_committed_files(defn, [again])
    assert store.committed_files(defn) == {again.path: again, base.path: base}

    # A fresh connection reads the same from the files (nothing cached).
    with Metastore.open(store.url) as fresh:
        assert fresh.committed_files(defn) == store.committed_files(defn)
    # Hidden inside the table's directory, a Hive table of its own, not listed as ours.
    hidden = tmp_path / "wh" / "events" / "_ingest_files"
    assert all(p.name.startswith("delta_") for p in hidden.iterdir())
    assert manifest_table not in [t.name for t in store.list_tables()]
    assert store.get_table(manifest_table).properties["ingest.files_of"] == defn.name
    assert store.transactions(None, states=("committed",)) == [
        t for t in store.transactions(None, states=("committed",))
        if not t.table.endswith("__ingest_files")]
    store.drop_table(defn)
    assert store.find_table(manifest_table) is None


# -- damage through the readers, as tests/table/test_damage_every_reader.py on SQL ------------


def _table(tmp_path: Path, uri: str, capsys: Capsys) -> Path:
    """Three loads of 50 rows (write ids 1..3) in one partition each of dt=d0/d1/d0."""
    table = tmp_path / "wh" / "events"
    ok_json(["create", str(table), "--name", f"d_{uuid.uuid4().hex[:10]}.events",
             "--schema", "id BIGINT, v STRING, dt STRING", "--partitioned-by", "dt",
             "--metastore", uri], capsys)
    for k in range(3):
        src = tmp_path / f"in{k}.jsonl"
        src.write_text("".join(json.dumps({"id": i, "v": f"v{i}", "dt": f"d{k % 2}"}) + "\n"
                               for i in range(k * 50, (k + 1) * 50)))
        ok_json(["load", str(table), "--input", str(src), "--metastore", uri], capsys)
    return table


def _damaged_file(table: Path) -> Path:
    (found,) = (table / "dt=d0").glob("delta_0000003_0000003_*")
    return found / "bucket_00000"


def _emptied(table: Path) -> Path:
    path = _damaged_file(table)
    os.truncate(path, 0)
    return path


def _removed(table: Path) -> Path:
    path = _damaged_file(table)
    path.unlink()
    return path


DAMAGE: dict[str, Callable[[Path], Path]] = {"emptied": _emptied, "file-removed": _removed}


def _files(table: Path) -> dict[str, int]:
    return {str(p.relative_to(table)): p.stat().st_size
            for p in sorted(table.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_committed_file_is_named_by_cat_verify_and_compact(
        metastore: Server, tmp_path: Path, capsys: Capsys, damage: str) -> None:
    table = _table(tmp_path, metastore.uri, capsys)
    on = ["--metastore", metastore.uri]
    assert ok_json(["verify", str(table), *on], capsys)  # intact: exit 0
    damaged = DAMAGE[damage](table)
    before = _files(table)
    for args, expected_code in ((["cat", str(table)], 3), (["verify", str(table)], 1),
                                (["compact", str(table), "--major"], 3)):
        code, out, err = run_cli([*args, *on], capsys)
        assert code == expected_code, (args, out, err)
        assert str(damaged) in out + err, (args, out, err)
        assert _files(table) == before, f"{args[0]} changed the table"
    # Nothing was compacted: no compaction is waiting to be cleaned.
    with hms.connect(metastore.uri), Metastore.open(metastore.uri) as store:
        name = store.get_table(f"file://{table}").name
        assert [c.state for c in store.compactions(name)
                if c.state == "ready for cleaning"] == []
