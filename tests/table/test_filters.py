"""Filtered reads: partitions pruned by value, stripes skipped by ORC statistics, rows filtered
exactly. The oracle is the unfiltered snapshot read filtered afterwards by pyarrow."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import ALL_TYPES_SCHEMA, all_types_table, write_deletes

import ingest
from ingest.acid import BucketFileOptions, BucketWriter, ValidWriteIdList
from ingest.acid.format.names import (
    bucket_file_name,
    encode_bucket_property,
    format_base,
    format_delta,
)
from ingest.acid.predicate.conditions import value_key
from ingest.acid.predicate.where import parse_predicate
from ingest.acid.read.merge import READ_AHEAD_ENV
from ingest.acid.read.reader import read_table
from ingest.acid.read.scan import scan
from ingest.acid.read.stripe_stats import row_columns, stripe_domains
from ingest.orc import read_tail
from ingest.table.write import create_table

STRIPE_ROWS = 100
BASE_STRIPES, DELTA_STRIPES = 6, 3
SNAPSHOT = ValidWriteIdList("default.t", 3, (), ())
# Rows deleted by write id 3: (write id, row id); some in stripes a filter skips.
DELETED = [(1, r) for r in range(0, 600, 13)] + [(2, r) for r in range(5, 300, 17)]


def _write(path: str, write_id: int, stripes: list[pa.Table]) -> None:
    with BucketWriter.create(path, BucketFileOptions(write_id=write_id,
                                                     row_schema=ALL_TYPES_SCHEMA)) as w:
        for rows in stripes:
            w.write(rows)
            w.flush()  # one stripe per slice, so each has its own statistics


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[pa.Table]]:
    """An unpartitioned table: a base and a delta whose stripes hold ascending i64 ranges,
    and a delete delta; returns (root, the rows of every stripe in read order)."""
    root = tmp_path_factory.mktemp("filters") / "t"
    stripes = [all_types_table(STRIPE_ROWS, seed=1, start=i * STRIPE_ROWS)
               for i in range(BASE_STRIPES + DELTA_STRIPES)]
    # One stripe holds only nulls in i64 and s: statistics say "no values".
    nulls = stripes[2]
    stripes[2] = nulls.set_column(4, "i64", pa.nulls(STRIPE_ROWS, pa.int64())).set_column(
        7, "s", pa.nulls(STRIPE_ROWS, pa.string()))
    _write(f"{root}/{format_base(1)}/{bucket_file_name(0)}", 1, stripes[:BASE_STRIPES])
    _write(f"{root}/{format_delta(2, 2)}/{bucket_file_name(0)}", 2, stripes[BASE_STRIPES:])
    keys = pa.table({
        "originalTransaction": pa.array([w for w, _ in DELETED], pa.int64()),
        "bucket": pa.array([encode_bucket_property(0, 0)] * len(DELETED), pa.int32()),
        "rowId": pa.array([r for _, r in DELETED], pa.int64()),
    })
    write_deletes(f"{root}/{format_delta(3, 3, delete=True)}/{bucket_file_name(0)}", keys,
                  write_id=3, row_schema=ALL_TYPES_SCHEMA)
    return str(root), stripes


def _oracle(root: str, where: str, columns: list[str] | None = None) -> pa.Table:
    full = read_table(root, SNAPSHOT)
    matched = full.filter(parse_predicate(where, full.schema).expression)
    return matched.select(columns) if columns is not None else matched


PREDICATES = [
    "i64 < 0", "i64 >= 3000", "i64 = 1100", "i64 <> 1100", "NOT i64 < 2000",
    "i64 BETWEEN 500 AND 900", "i64 NOT BETWEEN 500 AND 5000", "i64 IN (-1000, 7, 2003)",
    "i64 NOT IN (1, 2, 3)", "i64 IS NULL", "i64 IS NOT NULL", "i8 = 5", "i16 > 30000",
    "i32 <= -2000000000", "f32 > 999.5", "f64 < -999000", "f64 >= 0 AND i64 < 300",
    "s = 's0500000-é'", "s < 's01'", "s > 's099'", "s IS NULL", "NOT s >= 's05'",
    "s IN ('x', 's0000042-é')", "d < DATE '2001-01-01'", "d = '2030-06-15'",
    "d >= DATE '2054-01-01'", "ts < TIMESTAMP '2023-01-01 00:00:00'",
    "ts >= TIMESTAMP '2029-02-01 12:00:00.5'", "ts = TIMESTAMP '2026-01-01 00:00:00'",
    "dec > 99999999.999", "dec BETWEEN -1000.5 AND 1000.5", "dec < 0 AND dec IS NOT NULL",
    "b", "NOT b", "b = FALSE", "b IS NULL AND i64 > 4000", "bin IS NULL", "lst IS NOT NULL",
    "i64 > 4000 OR s IS NULL", "NOT (i64 < 100 OR i64 > 200)",
]


@pytest.mark.parametrize("where", PREDICATES)
def test_filtered_read_equals_read_then_filter(table_dir: tuple[str, list[pa.Table]],
                                               where: str) -> None:
    root, _ = table_dir
    got = scan(root, SNAPSHOT, where=where).to_table()
    assert got.to_pylist() == _oracle(root, where).to_pylist()


BOUNDED = ["b", "i8", "i16", "i32", "i64", "f32", "f64", "s", "d", "ts", "dec"]


def test_stripe_bounds_enclose_every_value(table_dir: tuple[str, list[pa.Table]]) -> None:
    """The bounds decoded from each stripe's statistics hold its values: exactly for all but
    timestamps, which are widened by a day for time zones."""
    root, stripes = table_dir
    fs = fsspec.filesystem("file")
    path = f"{root}/{format_base(1)}/{bucket_file_name(0)}"
    tail = read_tail(fs, path, fs.size(path))
    ids = row_columns(tail, acid=True)
    assert sorted(ids) == sorted(ALL_TYPES_SCHEMA.names)
    wanted = {n: (ids[n], ALL_TYPES_SCHEMA.field(n).type) for n in BOUNDED}
    for i, rows in enumerate(stripes[:BASE_STRIPES]):
        domains = stripe_domains(tail, i, wanted)
        assert domains is not None
        for name in BOUNDED:
            column = rows.column(name)
            keys = [value_key(v) for v in column.drop_null()]
            d = domains[name]
            assert d.has_null == (column.null_count > 0), (i, name)
            assert d.has_values == bool(keys), (i, name)
            if not keys:
                continue
            lo, hi = min(keys), max(keys)
            if name == "ts":
                day = 86_400 * 10**9
                assert lo - day - 10**6 <= d.low <= lo and hi <= d.high <= hi + day + 10**6
            elif name == "f32":  # the statistics are doubles of float32 values
                assert (d.low, d.high) == pytest.approx((lo, hi))
            else:
                assert (d.low, d.high) == (lo, hi), (i, name)


def test_projection_keeps_only_the_asked_columns(table_dir: tuple[str, list[pa.Table]]) -> None:
    root, _ = table_dir
    s = scan(root, SNAPSHOT, columns=["s", "i8"], where="i64 > 2500 AND d IS NOT NULL")
    got = s.to_table()
    assert got.column_names == ["s", "i8"] == s.schema.names
    assert got.to_pylist() == _oracle(root, "i64 > 2500 AND d IS NOT NULL", ["s", "i8"]).to_pylist()
    assert got.num_rows > 0


def _stats_exclude(rows: pa.Table, column: str, test: object) -> bool:
    values = rows.column(column).drop_null()
    return len(values) == 0 or not test(pc.min(values).as_py(), pc.max(values).as_py())


def test_stripes_are_skipped_and_counted(table_dir: tuple[str, list[pa.Table]]) -> None:
    root, stripes = table_dir
    s = scan(root, SNAPSHOT, where="i64 < 1500")
    rows = s.to_table()
    # A stripe can be skipped iff its values (bounds) cannot be below 1500, or are all null.
    expected = sum(_stats_exclude(t, "i64", lambda lo, hi: lo < 1500) for t in stripes)
    assert expected >= 5
    assert (s.stats.files, s.stats.stripes) == (2, BASE_STRIPES + DELTA_STRIPES)
    assert s.stats.stripes_skipped == expected
    assert s.stats.rows == rows.num_rows == _oracle(root, "i64 < 1500").num_rows > 0


def test_nothing_skipped_without_a_filter_or_when_bounds_overlap(
        table_dir: tuple[str, list[pa.Table]]) -> None:
    root, _ = table_dir
    for where in (None, "i8 = 5", "i64 IS NULL OR i64 > 0"):
        s = scan(root, SNAPSHOT, where=where)
        s.to_table()
        assert s.stats.stripes_skipped == 0, where


def test_a_stripe_of_nulls_is_skipped_for_comparisons_not_for_is_null(
        table_dir: tuple[str, list[pa.Table]]) -> None:
    root, _ = table_dir
    compare = scan(root, SNAPSHOT, where="s = 's0500000-é' OR s < 's'")
    compare.to_table()
    is_null = scan(root, SNAPSHOT, where="s IS NULL")
    got = is_null.to_table()
    assert compare.stats.stripes_skipped >= 1  # the all-null stripe
    assert is_null.stats.stripes_skipped == 0
    assert got.num_rows >= STRIPE_ROWS - sum(1 for w, r in DELETED if w == 1 and 200 <= r < 300)


def test_deletes_apply_to_rows_of_stripes_that_are_read(
        table_dir: tuple[str, list[pa.Table]]) -> None:
    """Delete events are never skipped: a filter matching deleted rows still hides them."""
    root, stripes = table_dir
    deleted_i64 = [stripes[r // STRIPE_ROWS].column("i64")[r % STRIPE_ROWS].as_py()
                   for w, r in DELETED if w == 1]
    deleted_i64 = [v for v in deleted_i64 if v is not None]
    where = "i64 IN (" + ", ".join(str(v) for v in deleted_i64[:20]) + ")"
    got = scan(root, SNAPSHOT, where=where, with_row_id=True).to_table()
    assert got.to_pylist() == read_table(root, SNAPSHOT, with_row_id=True).filter(
        parse_predicate(where, ALL_TYPES_SCHEMA).expression).to_pylist()
    keys = {(k["writeid"], k["rowid"]) for k in got.column("row__id").to_pylist()}
    assert keys.isdisjoint(DELETED)
    # Without the delete delta the same filter returns the deleted rows.
    before = scan(root, ValidWriteIdList("default.t", 2, (), ()), where=where,
                  with_row_id=True).to_table()
    assert before.num_rows >= got.num_rows + len(deleted_i64[:20])


# -- random conditions ---------------------------------------------------------------------

def _literal(column: str, value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, decimal.Decimal):
        return str(value)
    return str(value)


@st.composite
def conditions(draw: st.DrawFn, stripes: list[pa.Table], depth: int = 0) -> str:
    kind = draw(st.sampled_from(["cmp", "cmp", "in", "null"] + (["and", "or", "not"]
                                                                if depth < 2 else [])))
    if kind in ("and", "or"):
        left = draw(conditions(stripes, depth + 1))
        right = draw(conditions(stripes, depth + 1))
        return f"({left}) {kind.upper()} ({right})"
    if kind == "not":
        return f"NOT ({draw(conditions(stripes, depth + 1))})"
    column = draw(st.sampled_from(["i64", "i16", "f64", "s", "d", "ts", "dec", "b"]))
    if kind == "null":
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    stripe = stripes[draw(st.integers(0, len(stripes) - 1))]
    values = [v for v in stripe.column(column).to_pylist() if v is not None]
    if not values:  # the stripe of nulls
        return f"{column} IS NULL"
    value = draw(st.sampled_from(values))
    if kind == "in":
        more = draw(st.lists(st.sampled_from(values), max_size=3))
        return f"{column} IN ({', '.join(_literal(column, v) for v in [value, *more])})"
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
    return f"{column} {op} {_literal(column, value)}"


@pytest.fixture(scope="module")
def unfiltered(table_dir: tuple[str, list[pa.Table]]) -> pa.Table:
    return read_table(table_dir[0], SNAPSHOT)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_conditions_read_what_filtering_afterwards_reads(
        table_dir: tuple[str, list[pa.Table]], unfiltered: pa.Table, data: st.DataObject) -> None:
    root, stripes = table_dir
    where = data.draw(conditions(stripes))
    expected = unfiltered.filter(parse_predicate(where, unfiltered.schema).expression)
    got = scan(root, SNAPSHOT, where=where).to_table()
    assert got.to_pylist() == expected.to_pylist(), where


# -- partitions, through the Table API ------------------------------------------------------

def test_partitions_are_pruned_by_value_and_counted(warehouse: Path) -> None:
    location = str(warehouse / "events")
    create_table(location, "id BIGINT, amount DECIMAL(10,2)", partitioned_by=["dt"])
    table = ingest.open_table(location)
    dts = ["2026-01-01", "2026-01-02", "2026-01-03", None]
    table.load(pa.table({"id": pa.array(range(40), pa.int64()),
                         "amount": pa.array([decimal.Decimal(i) / 4 for i in range(40)],
                                            pa.decimal128(10, 2)),
                         "dt": [dts[i % 4] for i in range(40)]}))
    table.delete("id = 5")  # in dt=2026-01-02
    everything = table.to_arrow()
    cases = {
        "dt = '2026-01-02'": 3,
        "dt IS NULL": 3,
        "dt > '2026-01-01' AND id > 3": 2,  # the null partition never matches a comparison
        "NOT dt = '2026-01-01'": 2,
        "dt IN ('2026-01-01', '2026-01-03') OR id = 5": 0,
        "amount > 100": 0,  # a row column: nothing pruned, stripes skipped instead
    }
    for where, pruned in cases.items():
        s = table.scan(where=where)
        plan = s.plan()
        got = s.to_arrow()
        assert (plan.partitions_pruned, s.stats.partitions_pruned) == (pruned, pruned), where
        assert len(plan.partitions) == 4 - pruned
        expected = everything.filter(parse_predicate(where, everything.schema).expression)
        assert got.to_pylist() == expected.to_pylist(), where
    s = table.scan(where="amount > 100")
    assert s.to_arrow().num_rows == 0
    assert s.stats.stripes_skipped == s.stats.stripes > 0


def test_filtering_a_scan_with_fsspec_memory(tmp_path: Path) -> None:
    """The scan works through fsspec for any filesystem, not only local files."""
    fs = fsspec.filesystem("memory")
    root = f"/filters-{tmp_path.name}/t"
    rows = all_types_table(50, seed=3)
    with BucketWriter.create(f"{root}/{format_delta(1, 1)}/{bucket_file_name(0)}",
                             BucketFileOptions(write_id=1, row_schema=ALL_TYPES_SCHEMA),
                             fs=fs) as w:
        w.write(rows)
    try:
        snap = ValidWriteIdList("default.t", 1, (), ())
        got = scan(root, snap, where="i64 > -700", fs=fs).to_table()
        assert got.to_pylist() == rows.filter(pc.field("i64") > -700).to_pylist()
    finally:
        fs.rm(f"/filters-{tmp_path.name}", recursive=True)


def test_in_list_of_decimals_of_different_precision(table_dir: tuple[str, list[pa.Table]]) -> None:
    """Each decimal literal has its own precision; the IN list must hold them all."""
    root, stripes = table_dir
    values = [v for v in stripes[0].column("dec").to_pylist() if v is not None][:3]
    where = f"dec IN (1.5, {', '.join(str(v) for v in values)})"
    got = scan(root, SNAPSHOT, where=where).to_table()
    assert got.to_pylist() == _oracle(root, where).to_pylist()
    assert got.num_rows >= 1


def test_a_decoding_thread_reads_the_same_rows(table_dir: tuple[str, list[pa.Table]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The decoding thread (the default; delete events and stripes decoded on a worker
    thread) changes nothing but where the work runs: INGEST_READ_AHEAD=0 reads the same."""
    root, _ = table_dir
    monkeypatch.setenv(READ_AHEAD_ENV, "0")
    one = scan(root, SNAPSHOT, where="i64 < 1500 OR s IS NULL", with_row_id=True)
    expected = one.to_table()
    monkeypatch.setenv(READ_AHEAD_ENV, "1")
    two = scan(root, SNAPSHOT, where="i64 < 1500 OR s IS NULL", with_row_id=True)
    assert two.to_table().to_pylist() == expected.to_pylist()
    assert two.stats == one.stats
    limited = scan(root, SNAPSHOT, limit=7)
    assert limited.to_table().num_rows == 7
