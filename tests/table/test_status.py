"""`table_status` (what `ingest status` shows) and the initiator judge a compactor's `_vT` output
by the metastore's compactor visibility: the output of a transaction T that is open or
aborted is no base or delta for them, as for every reader (docs/invariants.md, 3)."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest
from support import ok_json, three_loads_and_a_delete

import ingest
from ingest.acid import compact_partition
from ingest.table import open_table
from ingest.table.core._definition import VISIBILITY_PROPERTY
from ingest.table.maintain import compact
from ingest.table.status import table_status
from ingest.txn import Metastore, default_metastore_url

# More than 2 current deltas ask for a compaction (Hive's ">"); the table has 4.
DELTA_NUM = "compactorthreshold.hive.compactor.delta.num.threshold=2"
INPUTS = ["delete_delta_0000004_0000004_0000", "delta_0000001_0000001_0000",
          "delta_0000002_0000002_0000", "delta_0000003_0000003_0000"]


def rows(location: str) -> list[tuple[int, str]]:
    """The rows through the Python API (snapshot and compactor visibility from the metastore)."""
    return sorted((r["id"], r["value"]) for r in ingest.open_table(location).to_arrow().to_pylist())


def table_with_uncommitted_base(tmp_path: Path, capsys: pytest.CaptureFixture[str], *,
                                abort: bool) -> tuple[str, str]:
    """Three deltas and a delete delta, and the renamed `base_4_vT` of a major compaction
    whose transaction T is still open (a compactor that died after its rename) or, with
    `abort`, aborted. Returns (location, the base's name)."""
    location = three_loads_and_a_delete(tmp_path, capsys, "--property",
                                        f"{VISIBILITY_PROPERTY}=true", "--property", DELTA_NUM)
    with Metastore.open(default_metastore_url(location)) as store:
        defn = store.get_table(location)
        cid, txn = store.begin_compaction(defn, "", "major", agent="test-compactor",
                                          stale_after_s=300)
        result = compact_partition(location, store.snapshot(defn), row_schema=defn.row_schema,
                                   kind="major", fs=fsspec.filesystem("file"),
                                   visibility_txn_id=txn.txn_id,
                                   visible_txn=store.compactor_visibility(defn))
        assert result is not None
        if abort:
            store.fail_compaction(cid, txn, "the compactor died")
    (base,) = result.plan.outputs
    assert base == f"base_0000004_v{txn.txn_id:07d}" and (Path(location) / base).is_dir()
    return location, base


@pytest.mark.parametrize("abort", [False, True], ids=["open", "aborted"])
def test_status_shows_an_uncommitted_compactor_output_as_not_visible(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], abort: bool) -> None:
    location, base = table_with_uncommitted_base(tmp_path, capsys, abort=abort)

    status = table_status(open_table(location))
    (partition,) = status.layout.partitions
    shown = {d.name: d.status for d in partition.directories}
    assert shown == {base: "not_visible", **dict.fromkeys(INPUTS, "chosen")}
    backlog = status.backlogs[partition.path].backlog
    assert (backlog.base, backlog.deltas, backlog.delete_deltas) == (None, 3, 1)
    decision = status.backlogs[partition.path].decision
    assert (decision.kind, decision.reason) == ("major", "no base and 4 deltas > 2")
    assert status.totals.chosen_rows == 30

    # The command renders the same value.
    (shown_json,) = ok_json(["status", location], capsys)["partitions"]
    assert {d["name"]: d["status"] for d in shown_json["directories"]} == shown
    assert shown_json["compaction"]["base"] is None


def test_the_initiator_does_not_take_an_aborted_compactors_base_for_a_base(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    location, dead = table_with_uncommitted_base(tmp_path, capsys, abort=True)
    before = rows(location)

    report = compact(open_table(location), kind="auto")
    (entry,) = report.partitions
    assert (entry.kind, entry.reason) == ("major", "no base and 4 deltas > 2")
    assert entry.result is not None
    (output,) = entry.result.plan.outputs
    assert output.startswith("base_0000004_v") and output != dead
    after = table_status(open_table(location))
    (partition,) = after.layout.partitions
    shown = {d.name: d.status for d in partition.directories}
    # The retry removed the aborted compactor's base before writing its own (a reader that
    # ignores `_vT`, as Trino does, would otherwise take it too).
    assert shown[output] == "chosen" and dead not in shown
    assert after.totals.chosen_rows == 26
    assert rows(location) == before and len(before) == 26
