"""ingest.table.maintain.compact with the initiator (kind "auto"), the compaction history it
records, and bad input that must change nothing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pytest

from ingest.acid.read.reader import read_table
from ingest.errors import CommitConflictError, ConfigError, CorruptFileError, TableNotFoundError
from ingest.table import open_table
from ingest.table.maintain import compact, compaction_history
from ingest.table.maintain.compact import agent_alive
from ingest.table.write import alter_table, create_table, delete, load
from ingest.txn import METASTORE_FILENAME, Metastore, MetastoreError, default_metastore_url

DDL = "id BIGINT, value STRING, dt STRING"
NUM = "compactorthreshold.hive.compactor.delta.num.threshold"
PCT = "compactorthreshold.hive.compactor.delta.pct.threshold"


def rows(ids: range, dt: str = "2026-01-01") -> pa.Table:
    return pa.table({"id": list(ids), "value": [f"v{i}" for i in ids], "dt": [dt] * len(ids)})


def keyed(location: str) -> list[tuple[object, ...]]:
    with Metastore.open(default_metastore_url(location), create=False) as store:
        t = read_table(location, store.snapshot(location), with_row_id=True)
    return sorted((r["row__id"]["writeid"], r["row__id"]["rowid"], r["id"], r["dt"])
                  for r in t.to_pylist())


def fingerprint(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def location(tmp_path: Path) -> str:
    location = str(tmp_path / "wh" / "events")
    create_table(location, DDL, partitioned_by=["dt"], properties={NUM: "3"})
    for k in range(4):
        load(open_table(location), rows(range(k * 10, k * 10 + 10)))
    load(open_table(location), rows(range(100, 110), "2026-01-02"))
    delete(open_table(location), "id < 5")
    return location


def test_auto_compacts_only_the_partitions_that_need_it(location: str) -> None:
    before = keyed(location)
    report = compact(open_table(location), kind="auto")
    first, second = report.partitions
    assert report.kind == "auto"
    # dt=2026-01-01: 4 deltas and 1 delete delta > 3, no base: major.
    assert (first.kind, first.reason) == ("major", "no base and 5 deltas > 3")
    assert first.result is not None and first.result.plan.outputs == ("base_0000006",)
    assert first.backlog is not None and first.backlog.deltas == 4
    assert first.backlog.delete_deltas == 1
    assert (second.kind, second.result, second.reason) == (None, None, "no base, 1 deltas <= 3")
    assert keyed(location) == before
    (record,) = compaction_history(open_table(location)).compactions
    assert (record.compaction_id, record.partition, record.kind, record.state) == (
        first.compaction_id, "dt=2026-01-01", "major", "ready for cleaning")
    assert record.outputs == ("base_0000006",) and record.highest_write_id == 6
    assert record.rows == 35 and len(record.inputs) == 5 and record.txn_state == "committed"

    # Two more loads: 2 deltas over a base. Bytes decide: small deltas over a small base are
    # more than 10 % of it, so major again; with a larger pct threshold, nothing.
    load(open_table(location), rows(range(200, 210)))
    load(open_table(location), rows(range(210, 220)))
    alter_table(open_table(location), properties={PCT: "5"})
    assert [p.kind for p in compact(open_table(location), kind="auto").partitions] == [None, None]
    alter_table(open_table(location), properties={NUM: "1"})
    report = compact(open_table(location), kind="auto")
    assert report.partitions[0].kind == "minor"
    assert report.partitions[0].reason.startswith("2 deltas > 1 (delta bytes ")
    assert report.partitions[1].kind is None
    history = compaction_history(open_table(location))
    assert [c.kind for c in history.compactions] == ["major", "minor"]
    assert len(keyed(location)) == len(before) + 20


def test_no_auto_compaction_and_dry_run_write_nothing(location: str, tmp_path: Path) -> None:
    root = tmp_path / "wh"
    alter_table(open_table(location), properties={"NO_AUTO_COMPACTION": "true"})
    was = fingerprint(root)
    report = compact(open_table(location), kind="auto")
    assert {p.reason for p in report.partitions} == {
        "automatic compaction is off (no_auto_compaction=true)"}
    alter_table(open_table(location), properties={"NO_AUTO_COMPACTION": "false"})
    was = fingerprint(root)
    dry = compact(open_table(location), kind="auto", dry_run=True)
    assert dry.partitions[0].kind == "major" and dry.partitions[0].result is not None
    assert dry.partitions[0].compaction_id is None
    assert fingerprint(root) == was
    assert compaction_history(open_table(location)).compactions == ()


def test_a_damaged_input_is_refused_before_anything_is_begun(location: str) -> None:
    """A torn tail fails the plan: no compaction is begun and nothing is written."""
    partition = Path(location, "dt=2026-01-01")
    victim = sorted(partition.glob("delta_0000002*/bucket_00000"))[0]
    victim.write_bytes(victim.read_bytes()[:-20])
    was = fingerprint(partition)
    with pytest.raises(CorruptFileError, match=f"nothing was written: .*{victim}"):
        compact(open_table(location), partitions=["dt=2026-01-01"])
    assert compaction_history(open_table(location)).compactions == ()
    assert fingerprint(partition) == was


def test_a_failed_compaction_is_recorded_and_changes_nothing(location: str) -> None:
    """A stripe whose bytes changed under a sound tail passes the plan and fails the read:
    recorded failed, transaction aborted, and the hidden output removed."""
    partition = Path(location, "dt=2026-01-01")
    victim = sorted(partition.glob("delta_0000002*/bucket_00000"))[0]
    data = bytearray(victim.read_bytes())
    data[10] ^= 0xFF  # inside the first stripe (it starts after the 3-byte "ORC")
    victim.write_bytes(bytes(data))
    was = fingerprint(partition)
    with pytest.raises(CorruptFileError, match=str(victim)):
        compact(open_table(location), partitions=["dt=2026-01-01"])
    (record,) = compaction_history(open_table(location)).compactions
    assert record.state == "failed" and record.txn_state == "aborted"
    assert (record.error or "").startswith("CorruptFileError: ")
    assert fingerprint(partition) == was


def test_threshold_properties_are_checked(tmp_path: Path, location: str) -> None:
    for key, value, match in [(NUM, "ten", "is not a whole number >= 0"),
                              (NUM, "-1", "is not a whole number >= 0"),
                              (PCT, "nan", "is not a number >= 0"),
                              ("no_auto_compaction", "maybe", "is not true or false")]:
        with pytest.raises(ConfigError, match=match):
            create_table(str(tmp_path / "other"), DDL, properties={key: value})
        with pytest.raises(ConfigError, match=match):
            alter_table(open_table(location), properties={key: value})
    assert not (tmp_path / "other").exists()
    defn = create_table(str(tmp_path / "ok"), DDL, properties={PCT: "0.5", NUM: "20"})
    assert defn.properties[PCT] == "0.5" and defn.properties[NUM] == "20"


def test_bad_input_changes_nothing(tmp_path: Path, location: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "wh"
    # Opened first: a read-only SQLite connection may leave its -wal/-shm files behind.
    table = open_table(location)
    was = fingerprint(root)
    (tmp_path / "plain").mkdir()
    with pytest.raises(TableNotFoundError, match="no metastore lists one"):
        compact(open_table(str(tmp_path / "plain")), kind="auto")
    with pytest.raises(ConfigError, match="kind 'full' is not major, minor or auto"):
        compact(table, kind="full")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="has no partition 'dt=2030-01-01'"):
        compact(table, kind="auto", partitions=["dt=2030-01-01"])
    with pytest.raises(ConfigError, match="inside table default.events"):
        compact(open_table(f"{location}/dt=2026-01-01"))
    # Unreachable metastores: missing, not a file, not a database.
    with pytest.raises(MetastoreError, match="file does not exist"):
        compact(open_table(location, metastore=f"sqlite://{tmp_path}/gone/{METASTORE_FILENAME}"))
    with pytest.raises(MetastoreError, match="a directory, not a file"):
        compact(open_table(location, metastore=f"sqlite://{tmp_path}/plain"))
    assert fingerprint(root) == was
    metastore = root / METASTORE_FILENAME
    saved = metastore.read_bytes()
    for suffix in ("-wal", "-shm"):
        Path(f"{metastore}{suffix}").unlink(missing_ok=True)
    metastore.write_bytes(b"this is not a database" * 100)
    damaged = fingerprint(root)
    with pytest.raises(MetastoreError, match="Cannot open metastore"):
        compact(table, kind="auto")
    assert fingerprint(root) == damaged
    metastore.write_bytes(saved)
    assert all(p.kind is None or p.result is not None
               for p in compact(table, kind="auto").partitions)


def test_agent_alive_knows_only_this_hosts_processes() -> None:
    import socket

    host = socket.gethostname()
    assert agent_alive(f"{host}:{os.getpid()}:ingest-compact")
    assert not agent_alive(f"{host}:999999999:ingest-compact")
    assert agent_alive("elsewhere:999999999:ingest-compact")
    assert agent_alive("no pid here")


def test_a_live_compaction_holds_its_partition(location: str, tmp_path: Path) -> None:
    import socket

    with Metastore.open(default_metastore_url(location), create=False) as store:
        cid, _ = store.begin_compaction(location, "dt=2026-01-01", "major",
                                        agent=f"{socket.gethostname()}:{os.getpid()}:test",
                                        stale_after_s=300)
    was = fingerprint(tmp_path / "wh" / "events")
    with pytest.raises(CommitConflictError, match=f"compaction {cid} .* is still working"):
        compact(open_table(location), partitions=["dt=2026-01-01"])
    assert fingerprint(tmp_path / "wh" / "events") == was
    # Another partition is free.
    (done,) = compact(open_table(location), partitions=["dt=2026-01-02"]).partitions
    assert done.result is not None


def test_the_next_compaction_finishes_a_half_renamed_one(location: str) -> None:
    before = keyed(location)
    (first, _) = compact(open_table(location), kind="minor").partitions
    assert first.result is not None
    delta, delete = first.result.plan.outputs
    partition = Path(location, "dt=2026-01-01")
    # What a kill between the two renames leaves: the delete half hidden, and no manifest
    # entry of either half (they are recorded after the renames).
    (partition / delete).rename(partition / f".compacting-{delete}")
    with Metastore.open(default_metastore_url(location), create=False) as store:
        store.forget_committed_files(location, [f"dt=2026-01-01/{name}/bucket_00000"
                                                for name in (delta, delete)])
    assert keyed(location) == before
    (again, _) = compact(open_table(location), kind="minor").partitions
    # The same plan again: it only renames the delete half, and records nothing new.
    assert again.result is None and again.compaction_id is None
    assert (partition / delete).is_dir() and (partition / delta).is_dir()
    assert keyed(location) == before
    assert [c.compaction_id for c in compaction_history(open_table(location)).compactions] == [
        first.compaction_id]
