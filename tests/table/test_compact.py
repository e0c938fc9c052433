"""ingest.table.maintain.compact: the metastore's snapshot decides, open transactions are never
consumed."""

from __future__ import annotations

import importlib
from pathlib import Path

import pyarrow as pa
import pytest
from support import SIMPLE_SCHEMA

from ingest.acid import BucketFileOptions, BucketWriter
from ingest.acid.format.names import format_delta
from ingest.acid.read.reader import read_table
from ingest.errors import ConfigError, TableNotFoundError
from ingest.table import open_table
from ingest.table.maintain import compact
from ingest.table.write import create_table, delete, load
from ingest.txn import Metastore, default_metastore_url

DDL = "id BIGINT, value STRING, dt STRING"
# The module, which `ingest.table.maintain.compact` (the function) hides.
compact_module = importlib.import_module("ingest.table.maintain.compact")


def rows(ids: range, dt: str = "2026-01-01") -> pa.Table:
    return pa.table({"id": list(ids), "value": [f"v{i}" for i in ids], "dt": [dt] * len(ids)})


def keyed(location: str, store: Metastore) -> list[tuple[object, ...]]:
    t = read_table(location, store.snapshot(location), with_row_id=True)
    return sorted((r["row__id"]["writeid"], r["row__id"]["bucketid"], r["row__id"]["rowid"],
                   r["id"], r["dt"]) for r in t.to_pylist())


def test_compaction_waits_for_an_open_batch(tmp_path: Path) -> None:
    location = str(tmp_path / "wh" / "events")
    create_table(location, DDL, partitioned_by=["dt"], buckets=2, bucketed_by=["id"])
    load(open_table(location), rows(range(0, 100)))                       # 1
    load(open_table(location), rows(range(100, 200), "2026-01-02"))       # 2
    delete(open_table(location), "id < 20 OR id = 150")                   # 3
    with Metastore.open(default_metastore_url(location)) as store:
        batch = store.allocate_write_ids(location, 3)         # 4, 5, 6
        directory = f"{location}/dt=2026-01-01/{format_delta(4, 6, None)}"
        writer = BucketWriter.create(f"{directory}/bucket_00000", BucketFileOptions(
            write_id=4, row_schema=SIMPLE_SCHEMA))
        writer.write(pa.table({"id": [500, 501], "value": ["a", "b"]}))
        writer.flush()
        store.commit(batch[0])
        load(open_table(location), rows(range(200, 250)))                 # 7
        before = keyed(location, store)

        report = compact(open_table(location, metastore=store), kind="major")
        assert report.snapshot == "default.events:4:9223372036854775807::"
        first, second = report.partitions
        assert first.result is not None and second.result is not None
        # Write id 5 is open: the compactor stops at 4, then at 3, below the batch delta_4_6.
        assert first.result.plan.outputs == ("base_0000003",)
        assert first.result.rows == 80
        assert keyed(location, store) == before

        writer.abandon()
        store.commit(batch[1])
        store.abort(batch[2])
        report = compact(open_table(location, metastore=store), kind="major")
        first, second = report.partitions
        assert first.result is not None and first.result.plan.outputs == ("base_0000007",)
        assert first.result.plan.inputs == ("base_0000003", format_delta(4, 6, None),
                                            format_delta(7, 7, 0))
        assert second.result is None
        assert keyed(location, store) == before


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        compact(open_table(str(tmp_path / "nothing")))
    location = str(tmp_path / "wh" / "events")
    create_table(location, DDL, partitioned_by=["dt"])
    assert compact(open_table(location)).partitions == ()
    load(open_table(location), rows(range(10)))
    with pytest.raises(ConfigError, match="no partition 'dt=2030-01-01'"):
        compact(open_table(location), partitions=["dt=2030-01-01"])
    assert compact(open_table(location),
                   partitions=["dt=2026-01-01"]).partitions[0].result is not None
    assert compact(open_table(location), partitions=["dt=2026-01-01"]).partitions[0].result is None


def test_compaction_holds_a_lease_while_it_reads(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The compactor reads as a registered reader: a cleaner running meanwhile keeps what
    its snapshot may read (docs/invariants.md, 7); the lease ends with the run."""
    location = str(tmp_path / "wh" / "events")
    create_table(location, DDL, partitioned_by=["dt"])
    load(open_table(location), rows(range(0, 10)))
    load(open_table(location), rows(range(10, 20)))
    seen: list[list[str]] = []
    real = compact_module.compact_partition

    def watching(*args: object, **kwargs: object) -> object:
        with Metastore.open(default_metastore_url(location)) as store:
            seen.append([r.agent for r in store.live_readers(location, timeout_s=300)])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compact_module, "compact_partition", watching)
    report = compact(open_table(location), kind="major", agent="test:compactor")
    assert report.partitions[0].result is not None
    assert seen == [["test:compactor"]]
    with Metastore.open(default_metastore_url(location)) as store:
        assert store.live_readers(location, timeout_s=300) == []
