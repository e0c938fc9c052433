"""Keyed upserts and Debezium changes (`Table.upsert`, `Table.apply_changes`): split-update
events under one write id, last-wins ordering, the stale-event guard, no-op updates, the
rules refused up front, and a lookup that reads only the buckets and partitions of the keys."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import ingest
from ingest.acid.format import bucket_ids, decode_bucket_property
from ingest.errors import BadRecordError, ConfigError, CorruptFileError, SchemaMismatchError
from ingest.table import Table
from ingest.table.write import create_table

DDL = "id BIGINT, value STRING, v BIGINT"


def _table(tmp_path: Path, *, buckets: int = 4, bucketed_by: tuple[str, ...] = ("id",),
           partitioned_by: tuple[str, ...] = (), ddl: str = DDL) -> Table:
    location = str(tmp_path / "wh" / "t")
    create_table(location, ddl, buckets=buckets, bucketed_by=list(bucketed_by),
                 partitioned_by=list(partitioned_by))
    return ingest.open_table(location)


def _rows(t: Table) -> dict[object, dict]:
    """The table's rows by key, read by our reader; a key twice fails."""
    rows = t.to_arrow().to_pylist()
    by_key = {r["id"] if "dt" not in r else (r["dt"], r["id"]): r for r in rows}
    assert len(by_key) == len(rows), rows
    return by_key


def _acid_dirs(t: Table) -> list[str]:
    root = Path(t.location.removeprefix("file://"))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*delta_*") if p.is_dir())


def _seed(t: Table, n: int = 20) -> None:
    t.load(pa.table({"id": pa.array(range(n), pa.int64()),
                     "value": [f"v{i}" for i in range(n)], "v": pa.array([1] * n, pa.int64())}))


def test_updates_inserts_and_deletes_are_one_write_id_of_split_update_events(
        tmp_path: Path) -> None:
    t = _table(tmp_path)
    _seed(t)
    result = t.upsert([{"id": 1, "value": "one", "v": 2}, {"id": 2, "value": "two", "v": 2},
                       {"id": 100, "value": "new", "v": 1}], key=["id"])
    assert result.write_id == 2
    c = result.counts
    assert (c.events, c.keys, c.inserted, c.updated, c.deleted, c.unchanged) == (3, 3, 1, 2, 0, 0)
    rows = _rows(t)
    assert len(rows) == 21
    assert rows[1] == {"id": 1, "value": "one", "v": 2}
    assert rows[2]["value"] == "two" and rows[100]["value"] == "new" and rows[3]["value"] == "v3"
    # One write id: a delete_delta and a delta of the same W and statement, committed together.
    assert _acid_dirs(t) == ["delete_delta_0000002_0000002_0000", "delta_0000001_0000001_0000",
                             "delta_0000002_0000002_0000"]
    assert [(h.write_id, h.state) for h in t.history()] == [(1, "committed"), (2, "committed")]
    # The new rows got write id 2 in their key's bucket; the replaced ROW__IDs are gone.
    by_id = {r["id"]: r["row__id"] for r in t.to_arrow(with_row_id=True).to_pylist()}
    expected = bucket_ids(pa.table({"id": pa.array([1, 2, 100], pa.int64())}), ["id"], 4)
    for key, bucket in zip([1, 2, 100], expected.to_pylist(), strict=True):
        assert by_id[key]["writeid"] == 2
        assert decode_bucket_property(by_id[key]["bucketid"])[1] == bucket
    deleted = t.delete("id = 3")
    assert deleted.rows_deleted == 1  # an upserted table stays an ordinary ACID table


def test_deletes_no_op_updates_and_deletes_of_absent_keys(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _seed(t, 5)
    same = t.upsert([{"id": 1, "value": "v1", "v": 1}, {"id": 2, "value": "v2", "v": 1}],
                    key=["id"])
    assert same.write_id is None and same.files == ()
    assert (same.counts.unchanged, same.counts.updated) == (2, 0)
    assert _acid_dirs(t) == ["delta_0000001_0000001_0000"]
    assert [h.state for h in t.history()] == ["committed", "aborted"]
    # A null compared with a null is no change; with a value it is one.
    t.upsert([{"id": 7, "value": None, "v": 1}], key=["id"])
    assert t.upsert([{"id": 7, "value": None, "v": 1}], key=["id"]).counts.unchanged == 1
    assert t.upsert([{"id": 7, "value": "x", "v": 1}], key=["id"]).counts.updated == 1
    result = t.apply_changes([{"op": "d", "before": {"id": 3, "value": "v3", "v": 1}},
                              {"op": "d", "before": {"id": 50}}], key=["id"])
    assert (result.counts.deleted, result.counts.absent) == (1, 1)
    assert sorted(_rows(t)) == [0, 1, 2, 4, 7]
    assert result.files and all("delete_delta_" in f for f in result.files)


def test_the_last_event_per_key_wins_in_input_order(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _seed(t, 3)
    result = t.upsert([{"id": 1, "value": "a", "v": 9}, {"id": 5, "value": "b", "v": 1},
                       {"id": 1, "value": "c", "v": 2}, {"id": 5, "value": "d", "v": 0}],
                      key=["id"])
    assert (result.counts.events, result.counts.keys) == (4, 2)
    rows = _rows(t)
    assert (rows[1]["value"], rows[5]["value"]) == ("c", "d")
    # Delete then re-create in one call: the re-creation wins; the other order deletes.
    t.apply_changes([{"op": "d", "before": {"id": 0}}, {"op": "c", "after": {
        "id": 0, "value": "again", "v": 1}}, {"op": "c", "after": {"id": 2, "value": "x", "v": 1}},
                     {"key": {"id": 2}, "value": None}], key=["id"])
    rows = _rows(t)
    assert rows[0]["value"] == "again" and 2 not in rows


def test_order_by_picks_the_newest_event_and_breaks_ties_c_r_u_d(tmp_path: Path) -> None:
    t = _table(tmp_path)
    events = [
        {"op": "u", "after": {"id": 1, "value": "newest", "v": 5}},
        {"op": "u", "after": {"id": 1, "value": "older", "v": 3}},  # later line, older value
        {"op": "d", "before": {"id": 2, "value": "x", "v": 4}},
        {"op": "c", "after": {"id": 2, "value": "created", "v": 4}},  # same v: d wins over c
        {"op": "u", "after": {"id": 3, "value": "updated", "v": 4}},
        {"op": "r", "after": {"id": 3, "value": "snapshot", "v": 4}},  # same v: u wins over r
    ]
    t.apply_changes(events, key=["id"], order_by="v")
    assert _rows(t) == {1: {"id": 1, "value": "newest", "v": 5},
                        3: {"id": 3, "value": "updated", "v": 4}}


def test_an_event_older_than_the_stored_row_is_skipped(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert([{"id": 1, "value": "a", "v": 10}, {"id": 2, "value": "b", "v": 10}], key=["id"])
    result = t.apply_changes([
        {"op": "u", "after": {"id": 1, "value": "stale", "v": 9}},
        {"op": "d", "before": {"id": 2, "value": "b", "v": 3}},  # a stale delete
        {"op": "u", "after": {"id": 2, "value": "same-version", "v": 10}},
    ], key=["id"], order_by="v")
    # The key's last event by order (v=10) is not older than the stored v=10: applied.
    assert (result.counts.stale, result.counts.updated) == (1, 1)
    assert _rows(t) == {1: {"id": 1, "value": "a", "v": 10},
                        2: {"id": 2, "value": "same-version", "v": 10}}
    stale_delete = t.apply_changes([{"op": "d", "before": {"id": 1, "v": 2}}], key=["id"],
                                   order_by="v")
    assert stale_delete.write_id is None and stale_delete.counts.stale == 1
    assert 1 in _rows(t)


def test_a_tombstone_takes_the_order_of_the_delete_before_it(tmp_path: Path) -> None:
    """Debezium writes d, then a tombstone; with --order-by the tombstone has no value of
    its own and must neither be refused nor outrank a later re-creation."""
    t = _table(tmp_path)
    t.upsert([{"id": 1, "value": "a", "v": 1}, {"id": 2, "value": "b", "v": 1}], key=["id"])
    t.apply_changes([
        {"op": "d", "before": {"id": 1, "value": "a", "v": 2}},
        {"key": {"id": 1}, "value": None},
        {"op": "c", "after": {"id": 1, "value": "re-created", "v": 3}},
        {"key": {"id": 2}, "value": None},  # no earlier event of key 2: newest of its key
    ], key=["id"], order_by="v")
    assert _rows(t) == {1: {"id": 1, "value": "re-created", "v": 3}}


def test_debezium_envelope_forms(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.apply_changes([
        {"schema": {"type": "struct"}, "payload": {"op": "c", "before": None,
                                                    "after": {"id": 1, "value": "a", "v": 1},
                                                    "ts_ms": 1, "source": {}}},
        {"key": {"id": 2}, "value": {"op": "r", "after": {"id": 2, "value": "b", "v": 1}}},
        {"key": {"schema": {}, "payload": {"id": 3}}, "value": {"op": "c", "after": {
            "id": 3, "value": "c", "v": 1}}},
        {"key": {"id": 3}, "value": {"op": "d", "before": None}},  # the record key names it
    ], key=["id"])
    assert sorted(_rows(t)) == [1, 2]


@pytest.mark.parametrize(("envelope", "message"), [
    ({"after": {"id": 1}}, "event 2: the Debezium envelope has no 'op'"),
    ({"op": "x", "after": {"id": 1}}, "event 2: op 'x' is not a Debezium op"),
    ({"op": "t"}, "event 2: op 't' is a truncate, which upsert does not apply"),
    ({"op": "u", "after": None}, "event 2: op 'u' needs the new row in 'after'"),
    ({"op": "d", "before": None}, "event 2: a delete .op 'd'. needs 'before' or a record key"),
    (None, "event 2: a bare null is a tombstone without its key"),
    ({"key": None, "value": None}, "event 2: a tombstone .null value. without a record key"),
    ({"op": "c", "after": {"id": None, "value": "x"}}, "event 2: key column 'id' is null"),
    ([1, 2], "event 2: expected a JSON object, found list"),
])
def test_bad_change_events_are_refused_naming_the_event(
        tmp_path: Path, envelope: object, message: str) -> None:
    t = _table(tmp_path)
    good = {"op": "c", "after": {"id": 7, "value": "ok", "v": 1}}
    with pytest.raises(BadRecordError, match=message):
        t.apply_changes([good, envelope], key=["id"])
    assert t.to_arrow().num_rows == 0 and _acid_dirs(t) == []


def test_rows_that_do_not_name_their_key_are_refused(tmp_path: Path) -> None:
    t = _table(tmp_path, partitioned_by=("dt",))
    rows = [{"id": 1, "value": "a", "v": 1, "dt": "d1"}, {"id": None, "value": "b", "v": 1,
                                                          "dt": "d1"}]
    with pytest.raises(BadRecordError, match="row 2: key column 'id' is null"):
        t.upsert(rows, key=["id", "dt"])
    with pytest.raises(BadRecordError, match="row 1: key column 'dt' is empty"):
        t.upsert([{"id": 1, "value": "a", "v": 1, "dt": ""}], key=["id", "dt"])
    with pytest.raises(BadRecordError, match="row 1: its new row has no value for the order-by"):
        t.upsert([{"id": 1, "value": "a", "v": None, "dt": "d"}], key=["id", "dt"],
                 order_by="v")
    with pytest.raises(SchemaMismatchError, match="column 'nope' is not in the table"):
        t.upsert([{"id": 1, "value": "a", "v": 1, "dt": "d", "nope": 1}], key=["id", "dt"])
    assert t.to_arrow().num_rows == 0 and [h.state for h in t.history()] == []


@pytest.mark.parametrize(("table_args", "key", "order_by", "message"), [
    ({"buckets": 0, "bucketed_by": ()}, ["id"], None,
     "the table is not bucketed.*Hint: create the table with --buckets N --bucketed-by id"),
    ({"bucketed_by": ("value",)}, ["id"], None,
     r"bucketed by \['value'\], and \['value'\] are not in the key \['id'\]"),
    ({"partitioned_by": ("dt",)}, ["id"], None,
     r"partition columns \['dt'\] are not in the key.*--key id,dt"),
    ({}, ["nope"], None, "key column 'nope' is not a column of the table"),
    ({}, "id", None, "key='id' is not a list of column names"),
    ({}, [], None, r"key=\[\] is not a list"),
    ({}, ["id", "ID"], None, "names a column twice"),
    ({}, ["id"], "id", "order-by column 'id' is part of the key"),
    ({}, ["id"], "nope", "order-by column 'nope' is not a column of the table"),
])
def test_tables_and_keys_that_keep_keys_unfindable_are_refused_up_front(
        tmp_path: Path, table_args: dict, key: object, order_by: str | None,
        message: str) -> None:
    t = _table(tmp_path, **table_args)
    with pytest.raises(ConfigError, match=message):
        t.upsert([{"id": 1, "value": "a", "v": 1, "dt": "x"}], key=key,  # type: ignore[arg-type]
                 order_by=order_by)
    assert [h.state for h in t.history()] == []


def test_keys_are_matched_case_insensitively_and_bucketed_by_part_of_the_key(
        tmp_path: Path) -> None:
    t = _table(tmp_path, ddl="id BIGINT, region STRING, value STRING, v BIGINT",
               partitioned_by=("dt",))
    key = ["ID", "region", "dt"]
    t.upsert([{"id": 1, "region": "eu", "value": "a", "v": 1, "dt": "d1"},
              {"id": 1, "region": "us", "value": "b", "v": 1, "dt": "d1"},
              {"id": 1, "region": "eu", "value": "c", "v": 1, "dt": "d2"}], key=key)
    result = t.upsert([{"id": 1, "region": "us", "value": "B", "v": 2, "dt": "d1"}], key=key)
    assert (result.counts.updated, result.counts.buckets_read) == (1, 1)
    rows = sorted((r["dt"], r["region"], r["value"]) for r in t.to_arrow().to_pylist())
    assert rows == [("d1", "eu", "a"), ("d1", "us", "B"), ("d2", "eu", "c")]


def test_the_lookup_reads_only_the_buckets_and_partitions_of_the_keys(tmp_path: Path) -> None:
    t = _table(tmp_path, buckets=8, partitioned_by=("dt",))
    n = 400
    for dt in ("a", "b", "c"):
        t.load(pa.table({"id": pa.array(range(n), pa.int64()), "value": ["x"] * n,
                         "v": pa.array([1] * n, pa.int64()), "dt": [dt] * n}))
    one_key = t.upsert([{"id": 5, "value": "y", "v": 2, "dt": "b"}], key=["id", "dt"])
    assert one_key.counts.buckets_read == 1
    buckets = bucket_ids(pa.table({"id": pa.array(range(n), pa.int64())}), ["id"], 8)
    in_bucket = buckets.to_pylist().count(buckets[5].as_py())
    assert one_key.counts.rows_scanned == in_bucket  # one bucket of one partition, not 1,200
    assert one_key.partitions == ("dt=b",)
    # A damaged file in a bucket no key touches is not read; in one it touches, it fails the
    # upsert before anything is written.
    root = Path(t.location.removeprefix("file://"))
    other = next(b for b in range(8) if b != buckets[5].as_py())
    (root / "dt=c" / "delta_0000003_0000003_0000" / f"bucket_{other:05d}").unlink()
    assert t.upsert([{"id": 5, "value": "z", "v": 3, "dt": "b"}],
                    key=["id", "dt"]).counts.updated == 1
    mine = root / "dt=b" / "delta_0000004_0000004_0000" / f"bucket_{buckets[5].as_py():05d}"
    mine.write_bytes(mine.read_bytes()[:-10])
    before = sorted(p.name for p in (root / "dt=b").iterdir())
    with pytest.raises(CorruptFileError):
        t.upsert([{"id": 5, "value": "w", "v": 4, "dt": "b"}], key=["id", "dt"])
    assert sorted(p.name for p in (root / "dt=b").iterdir()) == before


def test_a_key_loaded_twice_is_repaired_to_one_row(tmp_path: Path) -> None:
    t = _table(tmp_path)
    _seed(t, 3)
    _seed(t, 3)
    result = t.upsert([{"id": 1, "value": "v1", "v": 1}], key=["id"])
    # Two live rows are never "unchanged": both are deleted, one is inserted.
    assert result.counts.updated == 1
    rows = t.to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == [0, 0, 1, 2, 2]


HIVE_COLUMNS = {"columns": "id,value,v", "columns_types": "bigint:string:bigint"}


@pytest.mark.java
@pytest.mark.slow
def test_hives_reader_sees_the_upserted_rows(tmp_path: Path) -> None:
    """Hive 2.3's own readers, through pyspark's jars (getAcidState + OrcRawRecordMerger, and
    its query path OrcInputFormat.getSplits/getReader) read an upserted table exactly as we do:
    same rows, same ROW__IDs, in every partition."""
    from compat import javatools
    from conftest import require

    ok, why = javatools.available()
    require(ok, f"Java and pyspark's jars for the Hive tools ({why})")
    t = _table(tmp_path, buckets=4, partitioned_by=("dt",))
    key = ["id", "dt"]
    for dt in ("a", "b"):
        t.load(pa.table({"id": pa.array(range(30), pa.int64()), "value": ["x"] * 30,
                         "v": pa.array([1] * 30, pa.int64()), "dt": [dt] * 30}))
    t.upsert([*({"id": i, "value": f"u{i}", "v": 2, "dt": "a"} for i in range(0, 30, 3)),
              *({"id": i, "value": "new", "v": 1, "dt": "b"} for i in range(30, 35))], key=key)
    t.apply_changes([
        *({"op": "d", "before": {"id": i, "dt": "b", "v": 1}} for i in range(0, 30, 4)),
        {"op": "u", "after": {"id": 3, "value": "again", "v": 3, "dt": "a"}},
        {"op": "u", "after": {"id": 6, "value": "stale", "v": 0, "dt": "a"}},
        {"op": "u", "after": {"id": 1, "value": "x", "v": 1, "dt": "a"}},  # no change
        {"key": {"id": 31, "dt": "b"}, "value": None},
    ], key=key, order_by="v")
    ours = {}
    for r in t.to_arrow(with_row_id=True).to_pylist():
        rid = r["row__id"]
        ours.setdefault(r["dt"], []).append(
            (rid["writeid"], rid["bucketid"], rid["rowid"], r["id"], r["value"], r["v"]))
    assert len(ours["a"]) == 30 and len(ours["b"]) == 35 - 8 - 1
    root = Path(t.location.removeprefix("file://"))
    snapshot = t.snapshot().to_hive_string()
    queries = [(str(root / f"dt={dt}"), snapshot) for dt in ("a", "b")]
    for reader in ("raw_merger", "input_format"):
        results = javatools.hive_merged_read_many(queries, **HIVE_COLUMNS, reader=reader)
        for dt, result in zip(("a", "b"), results, strict=True):
            hive = sorted((r["originalTransaction"], r["bucket"], r["rowId"], r["row"]["id"],
                           r["row"]["value"], r["row"]["v"]) for r in result["rows"])
            assert hive == sorted(ours[dt]), (reader, dt)
    rows_a = {r[3]: r for r in ours["a"]}
    assert rows_a[3][4:] == ("again", 3) and rows_a[6][4:] == ("u6", 2)
    assert rows_a[1][0] == 1  # the unchanged update kept its ROW__ID


def test_a_column_the_first_event_leaves_out_is_kept_for_the_others(tmp_path: Path) -> None:
    """Found by tests/table/test_upsert_model.py: the events' columns were the first image's
    (and the first delete's) only, so a later image lost its `value` and a later `before` its
    order-by value (the delete of id 2 then counted as older than the row, and was skipped)."""
    t = _table(tmp_path)
    t.upsert([{"id": 2, "value": "old", "v": 2}], key=["id"])
    t.apply_changes([{"op": "c", "after": {"id": 1, "v": 1}},
                     {"op": "c", "after": {"id": 3, "value": "kept", "v": 1}},
                     {"op": "d", "before": {"id": 0}},
                     {"op": "u", "after": {"id": 2, "value": "y", "v": 0}},
                     {"op": "d", "before": {"id": 2, "v": 2}}], key=["id"], order_by="v")
    assert _rows(t) == {1: {"id": 1, "value": None, "v": 1},
                        3: {"id": 3, "value": "kept", "v": 1}}


def test_rows_as_dicts_keep_a_column_the_first_row_leaves_out(tmp_path: Path) -> None:
    """The same bug in `Table.upsert`/`Table.load` given a list of dicts: the columns were
    the first row's, so with missing_columns="null" a later row's value was lost."""
    t = _table(tmp_path)
    t.load([{"id": 1, "v": 1}, {"id": 2, "value": "two", "v": 1}], missing_columns="null")
    t.upsert([{"id": 3, "v": 1}, {"id": 4, "value": "four", "v": 1}], key=["id"],
             missing_columns="null")
    assert {k: r["value"] for k, r in _rows(t).items()} == {1: None, 2: "two", 3: None,
                                                           4: "four"}


_ROW = pa.struct([("id", pa.int64()), ("value", pa.string()), ("v", pa.int64())])


def _arrow_envelopes(events: list[dict]) -> pa.Table:
    """The events as a stream holds them after parsing: op, and after/before as structs."""
    return pa.table({"op": pa.array([e.get("op") for e in events], pa.string()),
                     "after": pa.array([e.get("after") for e in events], _ROW),
                     "before": pa.array([e.get("before") for e in events], _ROW)})


def test_arrow_envelopes_apply_as_the_same_events_as_dicts(tmp_path: Path) -> None:
    events = [
        {"op": "u", "after": {"id": 1, "value": "newest", "v": 5}},
        {"op": "u", "after": {"id": 1, "value": "older", "v": 3}},
        {"op": "d", "before": {"id": 2, "value": "x", "v": 4}},
        {"op": "c", "after": {"id": 2, "value": "created", "v": 4}},  # same v: d wins
        {"op": "r", "after": {"id": 3, "value": "snapshot", "v": 4}},
        {"op": "d", "before": {"id": 4, "value": None, "v": 9}},
        {"op": "u", "after": {"id": 5, "value": None, "v": 1}},
    ]
    results = []
    for name, batch in (("dicts", events), ("arrow", _arrow_envelopes(events)),
                        ("batch", _arrow_envelopes(events).to_batches()[0])):
        t = _table(tmp_path / name)
        _seed(t, 6)
        r = t.apply_changes(batch, key=["id"], order_by="v")
        results.append((_rows(t), r.counts.events, r.counts.keys, r.counts.inserted,
                        r.counts.updated, r.counts.deleted, r.counts.stale))
    assert results[0] == results[1] == results[2]
    rows = results[0][0]
    assert rows[1]["value"] == "newest" and 2 not in rows and 4 not in rows
    assert rows[3]["value"] == "snapshot" and rows[5]["value"] is None


@pytest.mark.parametrize(("envelopes", "message"), [
    (pa.table({"after": pa.array([{"id": 1}])}), "has no 'op' column"),
    (pa.table({"op": pa.array([1])}), "column 'op' is int64"),
    (pa.table({"op": ["c", "x"], "after": pa.array([{"id": 1}, {"id": 2}])}),
     "event 2: op 'x' is not a Debezium op"),
    (pa.table({"op": ["c", None], "after": pa.array([{"id": 1}, {"id": 2}])}),
     "event 2: the Debezium envelope has no 'op'"),
    (pa.table({"op": ["c", "u"], "after": pa.array([{"id": 1}, None])}),
     "event 2: op 'u' needs the new row in 'after', found null"),
    (pa.table({"op": ["c", "d"], "after": pa.array([{"id": 1}, None])}),
     "event 2: a delete .op 'd'. needs 'before'.*no 'before' column"),
    (pa.table({"op": ["c", "d"], "after": pa.array([{"id": 1}, None]),
               "before": pa.array([None, None], pa.struct([("id", pa.int64())]))}),
     "event 2: a delete .op 'd'. needs 'before' to name the deleted row, found null"),
    (pa.table({"op": ["c"], "after": pa.array(["x"])}), "column 'after' is string"),
])
def test_bad_arrow_envelopes_are_refused_naming_the_event(
        tmp_path: Path, envelopes: pa.Table, message: str) -> None:
    t = _table(tmp_path)
    with pytest.raises(BadRecordError, match=message):
        t.apply_changes(envelopes, key=["id"])
    assert t.to_arrow().num_rows == 0 and _acid_dirs(t) == []


@pytest.mark.parametrize("indexed", [True, False])
def test_a_row_id_repeated_in_another_partition_is_not_the_row_compared(
        tmp_path: Path, indexed: bool) -> None:
    """A ROW__ID is unique within its partition only: one load writes rowid 0 of bucket 0 in
    both partitions. A batch updating both rows, the one in `a` to the values the one in `b`
    holds, must compare each with its own row (without the key index, which is of another
    key here, the no-op check reads the rows by ROW__ID), or the update of `a` is lost."""
    t = _table(tmp_path, buckets=1, partitioned_by=("dt",))
    if not indexed:
        import fsspec

        from ingest.acid.keys.key_index import declare_key_columns
        declare_key_columns(fsspec.filesystem("file"), t.location.removeprefix("file://"),
                            ["v"])
    t.load(pa.table({"id": pa.array([1, 1], pa.int64()), "value": ["y", "x"],
                     "v": pa.array([1, 1], pa.int64()), "dt": ["a", "b"]}))
    ids = {(r["dt"], r["row__id"]["writeid"], r["row__id"]["rowid"])
           for r in t.to_arrow(with_row_id=True).to_pylist()}
    assert ids == {("a", 1, 0), ("b", 1, 0)}
    r = t.upsert([{"id": 1, "value": "x", "v": 1, "dt": "a"},
                  {"id": 1, "value": "q", "v": 1, "dt": "b"}], key=["id", "dt"])
    assert (r.counts.updated, r.counts.unchanged) == (2, 0)
    assert r.counts.buckets_indexed == (2 if indexed else 0)
    assert _rows(t) == {("a", 1): {"id": 1, "value": "x", "v": 1, "dt": "a"},
                        ("b", 1): {"id": 1, "value": "q", "v": 1, "dt": "b"}}


def _ts_schema(unit: str) -> dict:
    """The JSON converter's schema of an envelope whose `ts` is Debezium's `unit` type."""
    row = {"type": "struct", "optional": True, "fields": [
        {"field": "id", "type": "int64"},
        {"field": "ts", "type": "string" if unit == "ZonedTimestamp" else "int64",
         "optional": True, "name": f"io.debezium.time.{unit}"}]}
    return {"type": "struct", "fields": [{**row, "field": "before"}, {**row, "field": "after"},
                                         {"field": "op", "type": "string"}]}


def test_debezium_epoch_timestamps_are_read_by_the_unit_their_schema_names(
        tmp_path: Path) -> None:
    # issue 32: docs/format.md §24 says epoch timestamps are accepted; the schema says the unit.
    location = str(tmp_path / "wh" / "ts")
    create_table(location, "id BIGINT, ts TIMESTAMP", buckets=1, bucketed_by=["id"])
    t = ingest.open_table(location)
    t.apply_changes([
        {"schema": _ts_schema("Timestamp"),
         "payload": {"op": "c", "after": {"id": 1, "ts": 1700000000123}}},
        {"schema": _ts_schema("MicroTimestamp"),
         "payload": {"op": "c", "after": {"id": 2, "ts": 1700000000123456}}},
        {"schema": _ts_schema("NanoTimestamp"),
         "payload": {"op": "c", "after": {"id": 3, "ts": -1}}},
        {"schema": _ts_schema("ZonedTimestamp"),
         "payload": {"op": "c", "after": {"id": 4, "ts": "2023-11-14T22:13:20.5Z"}}},
    ], key=["id"])
    got = {r["id"]: str(r["ts"]) for r in t.to_arrow().to_pylist()}
    assert got == {1: "2023-11-14 22:13:20.123000", 2: "2023-11-14 22:13:20.123456",
                   3: "1969-12-31 23:59:59.999999999", 4: "2023-11-14 22:13:20.500000"}
    # Without the schema a number does not say its unit: still refused, not guessed.
    with pytest.raises(SchemaMismatchError, match="'ts' is int64 and cannot be converted"):
        t.apply_changes([{"op": "u", "after": {"id": 1, "ts": 1700000000123}}], key=["id"])
