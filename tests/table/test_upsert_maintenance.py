"""The initiator weighs delete events (docs/format.md §17, §24): an upserted table whose
delete events exceed `compactorthreshold.ingest.compactor.delete.pct.threshold` of its rows
gets a major compaction from `compact(kind="auto")`, which Hive's byte and count rules alone
would not ask for; the property is checked and can raise the bar."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import ingest
from ingest.errors import ConfigError
from ingest.table import Table, open_table
from ingest.table.maintain import compact
from ingest.table.write import create_table

PROPERTY = "compactorthreshold.ingest.compactor.delete.pct.threshold"


def _upserted(tmp_path: Path, properties: dict[str, str] | None = None) -> Table:
    """100 rows, then 20 of them updated: 20 delete events over 120 stored rows (16.7 %),
    three deltas and no base."""
    location = str(tmp_path / "wh" / "t")
    create_table(location, "id BIGINT, value STRING", buckets=2, bucketed_by=["id"],
                 properties=properties)
    t = ingest.open_table(location)
    t.load(pa.table({"id": pa.array(range(100), pa.int64()), "value": ["a"] * 100}))
    t.upsert(pa.table({"id": pa.array(range(20), pa.int64()), "value": ["b"] * 20}),
             key=["id"])
    return t


def test_delete_events_over_the_threshold_ask_for_a_major_compaction(tmp_path: Path) -> None:
    t = _upserted(tmp_path)
    report = compact(open_table(t.location), kind="auto")
    [p] = report.partitions
    assert p.backlog is not None
    assert (p.backlog.rows, p.backlog.delete_events) == (120, 20)
    assert p.kind == "major"
    assert p.reason == ("20 delete events, 16.7% of 120 rows > 10.0% "
                        "(else: no base, 3 deltas <= 10)")
    assert p.result is not None
    assert sorted(r["value"] for r in t.to_arrow().to_pylist()) == ["a"] * 80 + ["b"] * 20
    again = compact(open_table(t.location), kind="auto").partitions[0]
    assert again.kind is None  # the base applied the deletes
    assert again.backlog is not None
    assert (again.backlog.rows, again.backlog.delete_events) == (100, 0)


def test_the_table_property_raises_the_bar(tmp_path: Path) -> None:
    t = _upserted(tmp_path, {PROPERTY: "0.2"})
    [p] = compact(open_table(t.location), kind="auto", dry_run=True).partitions
    assert p.kind is None
    assert p.reason == "no base, 3 deltas <= 10"


def test_a_bad_threshold_is_refused_at_create(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=PROPERTY.replace(".", r"\.")):
        create_table(str(tmp_path / "t"), "id BIGINT", buckets=2, bucketed_by=["id"],
                     properties={PROPERTY: "lots"})
