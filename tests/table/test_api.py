"""`ingest.open_table` and `Table`: the metastore's committed snapshot by default, files without
a metastore only when asked, history, load/delete round trips, streaming, clear errors."""

from __future__ import annotations

import decimal
import re
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import ingest
from ingest.acid import BucketFileOptions, BucketWriter, UnverifiedSnapshotWarning
from ingest.acid.format.names import bucket_file_name, format_delta
from ingest.acid.read.merge import READ_AHEAD_ENV
from ingest.errors import ConfigError, TableNotFoundError
from ingest.table.write import create_table
from ingest.txn import MEMORY_URL, Metastore, OffsetRange, default_metastore_url

DDL = "id BIGINT, value STRING"
README = Path(__file__).resolve().parents[2] / "README.md"


def _rows(ids: range, dt: str | None = "2026-01-01") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()),
                     "value": [f"v{i}" for i in ids], "dt": [dt] * len(ids)})


@pytest.fixture
def events(warehouse: Path) -> str:
    location = str(warehouse / "events")
    create_table(location, DDL, partitioned_by=["dt"], buckets=2, bucketed_by=["id"])
    return location


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_import_ingest_stays_light() -> None:
    code = ("import sys, ingest; assert 'ingest.table' not in sys.modules; "
            "assert callable(ingest.open_table); assert 'ingest.table.api' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reads_only_committed_rows_by_default(events: str) -> None:
    table = ingest.open_table(events)
    table.load(_rows(range(10)))
    # An open transaction's delta is on disk: the committed snapshot leaves it out.
    with Metastore.open(default_metastore_url(events), create=False) as store:
        txn = store.open_transaction(table.name, agent="test")
    delta = format_delta(txn.write_id, txn.write_id)
    path = f"{events}/dt=2026-01-01/{delta}/{bucket_file_name(0)}"
    schema = pa.schema([("id", pa.int64()), ("value", pa.string())])
    with BucketWriter.create(path, BucketFileOptions(write_id=txn.write_id,
                                                     row_schema=schema)) as w:
        w.write(pa.table({"id": pa.array([100], pa.int64()), "value": ["open"]}))
    assert _ids(table.to_arrow()) == list(range(10))
    assert table.snapshot().open_write_ids == (txn.write_id,)
    assert _ids(table.to_arrow(snapshot="all-on-disk")) == [*range(10), 100]
    assert table.schema == pa.schema([("id", pa.int64()), ("value", pa.string()),
                                      ("dt", pa.string())])
    assert [p.values for p in table.partitions()] == [(("dt", "2026-01-01"),)]


def test_metastore_given_as_url_or_open_object(warehouse: Path) -> None:
    location = str(warehouse / "t")
    with Metastore.open(MEMORY_URL) as store:
        create_table(location, DDL, metastore=store)
        table = ingest.open_table(location, metastore=store)
        table.load(pa.table({"id": pa.array([1, 2], pa.int64()), "value": ["a", "b"]}))
        assert table.to_arrow().to_pylist() == [{"id": 1, "value": "a"},
                                                 {"id": 2, "value": "b"}]
        assert [c.state for c in table.history()] == ["committed"]
    url = f"sqlite://{warehouse}/other.sqlite"
    location2 = str(warehouse / "t2")
    create_table(location2, DDL, metastore=url)
    table2 = ingest.open_table(location2, metastore=url)
    table2.load(pa.table({"id": pa.array([3], pa.int64()), "value": ["c"]}))
    assert table2.to_arrow().to_pylist() == [{"id": 3, "value": "c"}]
    with pytest.raises(TableNotFoundError, match=re.escape(url)):
        ingest.open_table(location, metastore=url)


def test_without_a_metastore_reading_files_is_an_explicit_choice(events: str,
                                                                 warehouse: Path) -> None:
    ingest.open_table(events).load(_rows(range(4)))
    (warehouse / "_ingest_metastore.sqlite").rename(warehouse / "moved.sqlite")
    with pytest.raises(TableNotFoundError) as info:
        ingest.open_table(events)
    assert "metastore=False" in str(info.value.hint)
    table = ingest.open_table(events, metastore=False)
    with pytest.warns(UnverifiedSnapshotWarning, match="without a snapshot"):
        assert _ids(table.to_arrow()) == [0, 1, 2, 3]
    assert _ids(table.to_arrow(snapshot="all-on-disk")) == [0, 1, 2, 3]  # no warning
    assert table.snapshot().high_watermark == 1
    assert table.schema.names == ["id", "value", "dt"]
    with pytest.raises(ConfigError, match="opened without a metastore") as err:
        table.history()
    assert "open_table" in str(err.value.hint)
    with pytest.raises(ConfigError, match="opened without a metastore"):
        table.load(_rows(range(1)))
    with pytest.raises(FileNotFoundError, match="directory does not exist"):
        ingest.open_table(str(warehouse / "nope"), metastore=False)


def test_history_lists_write_ids_states_and_kafka_offsets(events: str) -> None:
    table = ingest.open_table(events)
    table.load(_rows(range(3)))
    table.delete("id = 1")
    with Metastore.open(default_metastore_url(events), create=False) as store:
        aborted = store.open_transaction(table.name, agent="test-abort")
        store.abort(aborted, reason="test")
        streamed = store.open_transaction(table.name, agent="test-sink")
        store.commit(streamed, offsets=[OffsetRange("topic-a", 0, 0, 10),
                                        OffsetRange("topic-a", 1, 5, 7)])
        still_open = store.open_transaction(table.name, agent="test-open")
    history = table.history()
    assert [(c.write_id, c.state) for c in history] == [
        (1, "committed"), (2, "committed"), (3, "aborted"), (4, "committed"), (5, "open")]
    assert history[2].reason == "test"
    assert history[3].offsets == (OffsetRange("topic-a", 0, 0, 10),
                                  OffsetRange("topic-a", 1, 5, 7))
    assert history[4].finished_at is None and history[4].txn_id == still_open.txn_id
    assert all(c.offsets == () for c in history if c.write_id != 4)


def test_load_and_delete_round_trip_with_pandas(events: str) -> None:
    table = ingest.open_table(events)
    frame = pd.DataFrame({"id": range(20), "value": [f"v{i}" for i in range(20)],
                          "dt": ["2026-01-01", "2026-01-02"] * 10})
    loaded = table.load(frame)
    assert (loaded.write_id, loaded.rows) == (1, 20)
    deleted = table.delete("id >= 15 OR dt = '2026-01-02' AND id < 4")
    assert deleted.rows_deleted == 7  # 15..19 and 1, 3
    assert table.delete("id = 999", dry_run=True).rows_deleted == 0
    got = table.to_pandas().sort_values("id").reset_index(drop=True)
    expected = frame[(frame.id < 15) & ~frame.id.isin([1, 3])].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    assert table.to_arrow(columns=["dt", "id"], where="id < 3").to_pylist() == [
        {"dt": "2026-01-01", "id": 0}, {"dt": "2026-01-01", "id": 2}]
    assert table.to_arrow(limit=5).num_rows == 5
    with_ids = table.to_arrow(where="id = 0", with_row_id=True)
    assert with_ids.column_names == ["row__id", "id", "value", "dt"]
    assert with_ids.column("row__id")[0]["writeid"].as_py() == 1


@pytest.mark.parametrize("read_ahead", ["0", "1"])
def test_to_batches_streams_with_bounded_memory(events: str, read_ahead: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(READ_AHEAD_ENV, read_ahead)
    table = ingest.open_table(events)
    rows_per_load, loads = 3000, 10
    for k in range(loads):
        ids = range(k * rows_per_load, (k + 1) * rows_per_load)
        table.load(pa.table({"id": pa.array(list(ids), pa.int64()),
                             "value": ["x" * 200 + str(i) for i in ids],
                             "dt": ["2026-01-01"] * len(ids)}))
    scan = table.scan(columns=["id", "value"])
    batches = scan.to_batches()
    assert scan.stats is None  # nothing planned or read before iteration starts
    start = pa.total_allocated_bytes()
    peak, count, rows, largest = 0, 0, 0, 0
    for batch in batches:
        peak = max(peak, pa.total_allocated_bytes() - start)
        largest = max(largest, batch.nbytes)
        count += 1
        rows += batch.num_rows
        assert batch.num_rows <= rows_per_load
        del batch
    whole = table.to_arrow(columns=["id", "value"])
    assert rows == whole.num_rows == loads * rows_per_load
    assert count >= loads
    assert scan.stats is not None and scan.stats.rows == rows
    # A few stripes in flight (decoded ahead, being filtered), never the whole table.
    assert peak <= 8 * largest, (peak, largest)
    assert peak < whole.nbytes / 2, (peak, whole.nbytes)


def test_a_partition_directory_reads_only_itself(events: str) -> None:
    table = ingest.open_table(events)
    table.load(_rows(range(3), "2026-01-01"))
    table.load(_rows(range(3, 5), "2026-01-02"))
    part = ingest.open_table(f"{events}/dt=2026-01-02")
    assert part.name == table.name
    assert _ids(part.to_arrow()) == [3, 4]
    with pytest.raises(ConfigError, match="inside table default.events") as info:
        part.delete("id = 3")
    assert "open_table" in str(info.value.hint)


def test_errors_name_what_to_fix(events: str) -> None:
    table = ingest.open_table(events)
    table.load(_rows(range(3)))
    with pytest.raises(ConfigError, match="unknown column 'nope'") as info:
        table.scan(where="nope = 1")
    assert "id, value, dt" in str(info.value.hint)
    with pytest.raises(ConfigError, match="Cannot parse where 'id ='"):
        table.to_arrow(where="id =")
    with pytest.raises(ConfigError, match=r"Cannot read columns \['nope'\]"):
        table.to_arrow(columns=["nope"])
    with pytest.raises(ConfigError):
        table.to_arrow(snapshot="not a snapshot")
    with pytest.raises(ConfigError, match="metastore=3"):
        ingest.open_table(events, metastore=3)  # type: ignore[arg-type]


def test_duckdb_query_from_the_readme(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's "Reading from Python" example, run as it is written."""
    text = README.read_text()
    section = text.split("## Reading from Python", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(warehouse.parent)
    location = str(warehouse / "events")
    create_table(location, "id BIGINT, amount DECIMAL(10,2)", partitioned_by=["dt"])
    table = ingest.open_table(location)
    amounts = [decimal.Decimal(a) for a in ("5", "11.50", "20", "12", "30.25", "9.99")]
    table.load(pa.table({"id": pa.array(range(6), pa.int64()),
                         "amount": pa.array(amounts, pa.decimal128(10, 2)),
                         "dt": ["2026-11-01", "2026-11-02", "2026-11-02", "2026-11-03",
                                "2026-11-03", "2026-11-03"]}))
    table.delete("id = 4")
    module = types.ModuleType("readme_example")
    exec(compile(code, str(README), "exec"), module.__dict__)  # noqa: S102
    assert module.top == [("2026-11-02", 2, decimal.Decimal("31.50")),
                          ("2026-11-03", 1, decimal.Decimal("12.00"))]
