"""Model-based test of keyed writes (docs/format.md §24): random streams of Debezium c/r/u/d
events, tombstones and plain upsert rows, with duplicate keys in a batch and out-of-order
versions, with `order_by` and without, applied batch by batch through `Table.apply_changes`
and `Table.upsert`, with minor and major compactions in between. After every step the table
equals a Python dict of key -> row, the model of §24's rules, as read by our reader
(`Table.to_arrow`), by `ingest cat`, and by Hive 2.3's OrcRawRecordMerger and its query path
(OrcInputFormat's splits) over a copy of the table taken at that step."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from upsert_model import Copy, Event, Model, by_key, hive_check, key_of, scenarios

import ingest
from ingest.cli import main as cli_main
from ingest.table import Table
from ingest.table.write import create_table

DDL = "id BIGINT, value STRING, v BIGINT"
# No shrinking: a failure prints its whole scenario, and shrinking one costs minutes.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate)


def cat_rows(location: str) -> list[dict[str, Any]]:
    """`ingest cat LOCATION` through the CLI's real entry point, in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as info:
        cli_main.main(["cat", location])
    assert info.value.code in (0, None)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def run_scenario(workdir: Path, partitioned: bool, order_by: str | None,
                 steps: list[tuple[str, Any]]) -> list[Copy]:
    """Apply `steps` to a new table under `workdir`, checking our reader after each; returns
    a copy of the table per step for Hive's readers."""
    location = str(workdir / "wh" / "t")
    create_table(location, DDL, buckets=2, bucketed_by=["id"],
                 partitioned_by=["dt"] if partitioned else [])
    t: Table = ingest.open_table(location)
    key = ["id", "dt"] if partitioned else ["id"]
    model = Model(order_by, partitioned)
    copies: list[Copy] = []
    for n, (kind, payload) in enumerate(steps):
        if kind == "changes":
            records, events = zip(*payload, strict=True)
            t.apply_changes(list(records), key=key, order_by=order_by)
            model.apply(list(events))
        elif kind == "rows":
            t.upsert(list(payload), key=key, order_by=order_by)
            model.apply([Event(key_of(r, partitioned), r, r["v"], 0) for r in payload])
        else:
            t.compact(kind)
        step = f"step {n + 1} ({kind}) of {(partitioned, order_by, steps)!r}"
        assert by_key(t.to_arrow().to_pylist(), partitioned) == model.rows, step
        copy = workdir / f"copy{n}"
        shutil.copytree(location, copy)
        copies.append(Copy(copy, partitioned, t.snapshot().to_hive_string(),
                           dict(model.rows), step))
    assert by_key(cat_rows(location), partitioned) == model.rows
    return copies


@pytest.mark.java
@pytest.mark.slow
def test_keyed_writes_match_a_dict_model(tmp_path: Path) -> None:
    """Hypothesis drives our reader's checks example by example; Hive's readers then read
    every example's copies in one JVM each (a JVM per example would cost most of the run)."""
    copies: list[Copy] = []
    examples = iter(range(1_000_000))

    # Found by this test: the deletes' columns were the first delete's, so a later `before`'s
    # order-by value was dropped when the first delete had none (and likewise an image's
    # column the first image lacked), and the delete of id 2 became stale.
    found = [({"op": "d", "before": {"id": 0}, "after": None}, Event((0,), None, None, 3)),
             ({"op": "u", "before": None, "after": {"id": 2, "value": "y", "v": 0}},
              Event((2,), {"id": 2, "value": "y", "v": 0}, 0, 2)),
             ({"op": "d", "before": {"id": 2, "v": 2}, "after": None},
              Event((2,), None, 2, 3))]

    @example((False, "v", [("rows", [{"id": 2, "value": "z", "v": 2}]), ("changes", found)]))
    @settings(max_examples=20, deadline=None, derandomize=True, database=None, phases=PHASES,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(scenarios())
    def check(scenario: tuple[bool, str | None, list[tuple[str, Any]]]) -> None:
        workdir = tmp_path / f"example{next(examples)}"
        copies.extend(run_scenario(workdir, *scenario))

    check()
    hive_check(copies)
