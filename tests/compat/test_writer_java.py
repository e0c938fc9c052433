"""Apache ORC Java (orc-core 2.3) reads the bucket files BucketWriter writes.

For every codec: the file opens at every length recorded in its side file with exactly the
rows written up to that flush, `OrcAcidUtils.getLastFlushLength` picks the last entry, and the
closed file reads whole. File and stripe statistics equal the ones computed here from the rows.
A torn stripe is cut by `open_append`, after which ORC Java, pyarrow and pyorc agree.
Reads are batched: one JVM per file state (see javatools.py).
"""

from __future__ import annotations

import datetime as dt
import io
import math
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.orc as po
import pyorc
import pytest
from compat import javatools as jt
from conftest import require
from support import ALL_TYPES_SCHEMA, SIMPLE_SCHEMA, all_types_table, simple_table

from ingest.acid import BucketFileOptions, BucketWriter, WriterOptions
from ingest.acid.format.events import acid_event_schema
from ingest.orc.compression import CODECS

pytestmark = [pytest.mark.java, pytest.mark.usefixtures("split_stripes_into_column_groups")]
BUCKET_0 = 536870912  # BucketCodec V1, bucket 0, statement 0
# Small stripes so that every flush covers several stripes and write() puts stripes on disk
# before the next flush (bytes past the last flush length that readers must not see).
SMALL_STRIPES = WriterOptions(stripe_size_bytes=24 * 1024, compression_block_size=64 * 1024,
                              row_index_stride=100)
EPOCH = dt.datetime(1970, 1, 1)
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

ORC_CATEGORY = {
    "bool": "boolean", "int8": "tinyint", "int16": "smallint", "int32": "int",
    "int64": "bigint", "float": "float", "double": "double", "string": "string",
    "binary": "binary", "date32[day]": "date",
}


@pytest.fixture(scope="module")
def java_tools() -> None:
    ok, what = jt.available()
    require(ok, what)
    jt.build()


def bucket_path(tmp_path: Path, name: str = "delta_0000003_0000003_0000") -> str:
    return str(tmp_path / name / "bucket_00000")


# ---------------------------------------------------------------------------------------------
# values: ORC Java's JSON form and pyarrow's Python form, both to one comparable form


def _ns_from_text(text: str) -> int:
    """"YYYY-MM-DDTHH:MM:SS.fffffffff" (orc_read's form, UTC) -> nanoseconds since the epoch."""
    whole, _, frac = text.partition(".")
    seconds = (dt.datetime.fromisoformat(whole) - EPOCH) // dt.timedelta(seconds=1)
    return seconds * 10**9 + int(frac.ljust(9, "0") if frac else 0)


def _text_from_ns(ns: int) -> str:
    seconds, nanos = divmod(ns, 10**9)
    return (EPOCH + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.") + f"{nanos:09d}"


def _ns_from_arrow(v: Any) -> int:
    if hasattr(v, "value"):  # pandas.Timestamp (pyarrow's as_py for timestamp("ns"))
        return int(v.value)
    return (v - EPOCH) // dt.timedelta(microseconds=1) * 1000


def from_java(t: pa.DataType, v: Any) -> Any:
    if v is None:
        return None
    if pa.types.is_struct(t):
        assert set(v) == {f.name for f in t}, (v, t)
        return {f.name: from_java(f.type, v[f.name]) for f in t}
    if pa.types.is_map(t):
        return [(from_java(t.key_type, k), from_java(t.item_type, x)) for k, x in v]
    if pa.types.is_list(t):
        return [from_java(t.value_type, x) for x in v]
    if pa.types.is_timestamp(t):
        return _ns_from_text(v)
    if pa.types.is_date(t):
        return dt.date.fromisoformat(v)
    if pa.types.is_decimal(t):
        value = Decimal(v)
        assert value.as_tuple().exponent == -t.scale, f"{v!r} is not printed with scale {t.scale}"
        return value
    if pa.types.is_binary(t):
        return jt.decode_binary(v)
    if pa.types.is_floating(t):
        return float(v)
    return v


def from_arrow(t: pa.DataType, v: Any) -> Any:
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: from_arrow(f.type, v[f.name]) for f in t}
    if pa.types.is_map(t):
        return [(from_arrow(t.key_type, k), from_arrow(t.item_type, x)) for k, x in v]
    if pa.types.is_list(t):
        return [from_arrow(t.value_type, x) for x in v]
    if pa.types.is_timestamp(t):
        return _ns_from_arrow(v)
    return v  # float32 as_py is already the exact double of the float32


def event_type(row_schema: pa.Schema) -> pa.StructType:
    return pa.struct(list(acid_event_schema(row_schema)))


def expected_events(row_schema: pa.Schema, chunks: list[tuple[int, pa.Table]]) -> list[dict]:
    """Insert events for (write_id, rows) chunks, in file order; row ids restart per write id."""
    row_type = pa.struct(list(row_schema))
    out: list[dict] = []
    next_row_id: dict[int, int] = {}
    for write_id, table in chunks:
        for row in table.to_pylist():
            row_id = next_row_id.get(write_id, 0)
            next_row_id[write_id] = row_id + 1
            out.append({"operation": 0, "originalTransaction": write_id, "bucket": BUCKET_0,
                        "rowId": row_id, "currentTransaction": write_id,
                        "row": from_arrow(row_type, row)})
    return out


def java_events(read: dict, row_schema: pa.Schema) -> list[dict]:
    t = event_type(row_schema)
    return [from_java(t, r) for r in read["rows"]]


# ---------------------------------------------------------------------------------------------
# statistics computed from rows


def flatten(t: pa.DataType, values: list[Any]) -> list[tuple[pa.DataType, list[Any]]]:
    """ORC columns in id order (pre-order) with the values each holds: a struct child is null
    where its struct is null; list and map children hold the entries of the non-null ones."""
    out = [(t, values)]
    if pa.types.is_struct(t):
        for f in t:
            out += flatten(f.type, [None if v is None else v[f.name] for v in values])
    elif pa.types.is_map(t):
        entries = [e for v in values if v is not None for e in v]
        out += flatten(t.key_type, [k for k, _ in entries])
        out += flatten(t.item_type, [x for _, x in entries])
    elif pa.types.is_list(t):
        out += flatten(t.value_type, [x for v in values if v is not None for x in v])
    return out


def orc_category(t: pa.DataType) -> str:
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_map(t):
        return "map"
    if pa.types.is_list(t):
        return "array"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_decimal(t):
        return "decimal"
    return ORC_CATEGORY[str(t)]


def column_stats(t: pa.DataType, values: list[Any]) -> dict[str, Any]:
    """The orc_read statistics entry (minus column_id/bytes_on_disk) that `values` must give."""
    present = [v for v in values if v is not None]
    n = len(present)
    out: dict[str, Any] = {"type": orc_category(t), "count": n,
                           "has_null": n < len(values)}
    if pa.types.is_boolean(t):
        out["true_count"] = sum(present)
        out["false_count"] = n - sum(present)
    elif pa.types.is_integer(t):
        if n:
            out["min"], out["max"] = min(present), max(present)
        total = sum(present)
        out["sum"] = total if INT64_MIN <= total <= INT64_MAX else None
    elif pa.types.is_floating(t):
        if n:
            out["min"], out["max"] = min(present), max(present)
        out["sum"] = math.fsum(present)
    elif pa.types.is_string(t):
        lo = min(present) if n else None
        hi = max(present) if n else None
        out.update(min=lo, max=hi, lower_bound=lo, upper_bound=hi,
                   sum_length=sum(len(s.encode()) for s in present))
    elif pa.types.is_binary(t):
        out["sum_length"] = sum(len(b) for b in present)
    elif pa.types.is_date(t):
        if n:
            out["min"], out["max"] = min(present).isoformat(), max(present).isoformat()
    elif pa.types.is_decimal(t):
        out["min"] = min(present) if n else None
        out["max"] = max(present) if n else None
        with localcontext(prec=100):  # exact: decimal(38, s) sums need more than 28 digits
            out["sum"] = sum(present, Decimal(0))
    elif pa.types.is_timestamp(t):
        if n:
            out["min"] = out["min_utc"] = _text_from_ns(min(present))
            out["max"] = out["max_utc"] = _text_from_ns(max(present))
    return out


def expected_stats(row_schema: pa.Schema, events: list[dict]) -> list[dict[str, Any]]:
    return [column_stats(t, vs) for t, vs in flatten(event_type(row_schema), events)]


def stats_mismatches(java: list[dict], expected: list[dict], where: str) -> list[str]:
    """Every (column id, key) where ORC Java's statistics differ from the expected ones."""
    if len(java) != len(expected):
        return [f"{where}: {len(java)} statistics entries, expected {len(expected)}"]
    bad = []
    for column_id, (got, want) in enumerate(zip(java, expected, strict=True)):
        assert got["column_id"] == column_id
        for key, value in want.items():
            actual = got.get(key, "<absent>")
            if want["type"] == "decimal" and key in ("min", "max", "sum") and actual is not None:
                actual = Decimal(actual)
            if want["type"] in ("float", "double") and key == "sum":
                ok = actual == pytest.approx(value, rel=1e-9, abs=1e-6)
            else:
                ok = actual == value
            if not ok:
                bad.append(f"{where} column {column_id} ({want['type']}) {key}: "
                           f"ORC Java {actual!r}, rows give {value!r}")
        # keys the rows do not determine must not appear with a value when there are none
        if want["count"] == 0 and want["type"] not in ("boolean",):
            for key in ("min", "max"):
                if got.get(key) is not None and key not in want:
                    bad.append(f"{where} column {column_id}: {key} {got[key]!r} with no values")
    return bad


def check_read(read: dict, row_schema: pa.Schema, events: list[dict], where: str) -> None:
    """Rows, row count, stripe row counts, key index, file and stripe statistics of one read."""
    assert read["num_rows"] == len(events), where
    assert java_events(read, row_schema) == events, where
    stripes = read["stripes"]
    assert sum(s["rows"] for s in stripes) == len(events), where
    bounds = []
    end = 0
    for s in stripes:
        end += s["rows"]
        bounds.append(end)
    keys = read["user_metadata"]["hive.acid.key.index"]
    assert keys == "".join(
        f"{events[b - 1]['originalTransaction']},{BUCKET_0},{events[b - 1]['rowId']};"
        for b in bounds), where
    assert read["user_metadata"]["hive.acid.stats"] == f"{len(events)},0,0", where
    assert read["user_metadata"]["hive.acid.version"] == "2", where

    bad = stats_mismatches(read["file_statistics"], expected_stats(row_schema, events),
                           f"{where} file")
    start = 0
    assert read.get("stripe_statistics") is not None, read.get("stripe_statistics_error")
    assert len(read["stripe_statistics"]) == len(stripes), where
    for i, (s, java) in enumerate(zip(stripes, read["stripe_statistics"], strict=True)):
        bad += stats_mismatches(java, expected_stats(row_schema, events[start:start + s["rows"]]),
                                f"{where} stripe {i}")
        start += s["rows"]
    assert not bad, "\n".join(bad[:40])


# ---------------------------------------------------------------------------------------------
# every codec, every flush length


@pytest.mark.slow
@pytest.mark.parametrize("codec", CODECS)
def test_orc_java_opens_every_flush_length_with_exactly_its_rows(
        java_tools: None, tmp_path: Path, codec: str) -> None:
    path = bucket_path(tmp_path)
    w = BucketWriter.create(path, BucketFileOptions(write_id=3, row_schema=ALL_TYPES_SCHEMA,
                                                    compression=codec, tuning=SMALL_STRIPES))
    chunks: list[tuple[int, pa.Table]] = []
    flushed_rows, flush_lengths = [], []
    for i, sizes in enumerate([(40,), (250, 3, 120), (1,), (600, 200)]):
        for j, n in enumerate(sizes):
            table = all_types_table(n, seed=i * 10 + j, start=i * 10_000 + j * 1000)
            w.write(table)
            chunks.append((3, table))
        flush_lengths.append(w.flush())
        flushed_rows.append(sum(t.num_rows for _, t in chunks))
    # More rows, not flushed: with small stripes some already lie on disk past the last flush.
    unflushed = all_types_table(900, seed=77, start=90_000)
    w.write(unflushed)
    assert Path(path).stat().st_size > flush_lengths[-1], "expected stripes past the flush"

    lengths = jt.read_flush_lengths(path)
    assert lengths == [0, *flush_lengths]
    assert lengths == sorted(lengths) and len(set(lengths)) == len(lengths)
    events = expected_events(ALL_TYPES_SCHEMA, chunks)
    reads = jt.orc_read_many([{"path": path, "max_length": n} for n in lengths]
                             + [{"path": path, "use_flush_length": True}])

    assert reads[0]["num_rows"] == 0 and reads[0]["max_length"] == 0
    for read, length, n in zip(reads[1:-1], lengths[1:], flushed_rows, strict=True):
        assert read["length_source"] == "explicit" and read["max_length"] == length
        assert read["compression"].lower() == codec
        assert read["compression_size"] == SMALL_STRIPES.compression_block_size
        assert read["row_index_stride"] == SMALL_STRIPES.row_index_stride
        assert len(read["stripes"]) >= 1
        check_read(read, ALL_TYPES_SCHEMA, events[:n], f"{codec} @ {length}")
    assert len(reads[-2]["stripes"]) > 4, "small stripes: several per flush"

    by_side_file = reads[-1]
    assert by_side_file["length_source"] == "side_file"
    assert by_side_file["side_file_exists"] is True
    assert by_side_file["last_flush_length"] == lengths[-1] == by_side_file["max_length"]
    assert java_events(by_side_file, ALL_TYPES_SCHEMA) == events
    assert by_side_file["file_length"] > lengths[-1]

    w.close()
    assert not Path(path + "_flush_length").exists()
    final = jt.orc_read(path)
    assert final["length_source"] == "file" and final["side_file_exists"] is False
    assert final["max_length"] == Path(path).stat().st_size
    assert final["compression"].lower() == codec
    check_read(final, ALL_TYPES_SCHEMA,
               expected_events(ALL_TYPES_SCHEMA, [*chunks, (3, unflushed)]), f"{codec} closed")


# ---------------------------------------------------------------------------------------------
# statistics on edge values, across flushes and appended transactions

EDGE_SCHEMA = pa.schema([
    ("b", pa.bool_()),
    ("i8", pa.int8()),
    ("i16", pa.int16()),
    ("i32", pa.int32()),
    ("i64", pa.int64()),
    ("f32", pa.float32()),
    ("f64", pa.float64()),
    ("s", pa.string()),
    ("bin", pa.binary()),
    ("d", pa.date32()),
    ("ts", pa.timestamp("ns")),
    ("dec", pa.decimal128(12, 3)),
    ("big", pa.decimal128(38, 6)),
    ("lst", pa.list_(pa.int32())),
    ("mp", pa.map_(pa.string(), pa.int64())),
    ("st", pa.struct([("x", pa.int32()), ("y", pa.string()),
                      ("z", pa.struct([("q", pa.float64())]))])),
])


def _edge_table(rows: list[dict]) -> pa.Table:
    cols = {f.name: [r.get(f.name) for r in rows] for f in EDGE_SCHEMA}
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in EDGE_SCHEMA},
                    schema=EDGE_SCHEMA)


def _ts(text: str) -> Any:
    return pa.scalar(_ns_from_text(text), pa.int64()).cast(pa.timestamp("ns")).as_py()


EDGE_CHUNKS: list[list[dict]] = [
    # 1: extremes; i64 sum exactly INT64_MAX
    [{"b": True, "i8": -128, "i16": -32768, "i32": -2**31, "i64": 2**62, "f32": -1.5,
      "f64": 1e300, "s": "", "bin": b"", "d": dt.date(1969, 12, 31),
      "ts": _ts("1969-12-31T23:59:59.500000000"), "dec": Decimal("-99999999.999"),
      "big": Decimal("123456789012345678.345678"),
      "lst": [None, 1], "mp": [("a", None)], "st": {"x": None, "y": "p", "z": None}},
     {"b": True, "i8": 127, "i16": 32767, "i32": 2**31 - 1, "i64": 2**62 - 1, "f32": 3.25,
      "f64": -1e-300, "s": "\U0001d11e clef", "bin": b"\x00\xff",
      "d": dt.date(1900, 1, 1), "ts": _ts("1900-01-01T00:00:00.001000000"),
      "dec": Decimal("99999999.999"), "big": Decimal("-99999999999999999.999999"),
      "lst": [], "mp": [], "st": None}],
    # 2: every column null: this stripe's min/max are absent; i64's file sum overflows
    [{}, {}],
    # 3: ordinary values, i64 = 1 (file sum now overflows INT64_MAX: no sum)
    [{"b": False, "i8": 0, "i16": 1, "i32": 2, "i64": 1, "f32": 0.25, "f64": 0.0,
      "s": "zzz", "bin": b"abc", "d": dt.date(2262, 4, 11),
      "ts": _ts("2262-04-11T23:47:16.854775807"), "dec": Decimal("0.001"),
      "big": Decimal("-0.000001"), "lst": [7, None], "mp": [("b", 5), ("c", None)],
      "st": {"x": 3, "y": None, "z": {"q": None}}},
     {"b": None, "i8": None, "s": "é", "ts": _ts("1970-01-01T00:00:00.000000001"),
      "st": {"x": 4, "y": "q", "z": {"q": -2.5}}}],
]


def test_statistics_equal_those_computed_from_the_rows(java_tools: None, tmp_path: Path) -> None:
    """File and stripe statistics of every column type (ids: 0 root, 1-5 ACID columns, 6 row,
    then the user columns in pre-order) after flushes and appended transactions."""
    path = bucket_path(tmp_path)
    chunks: list[tuple[int, pa.Table]] = []
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=EDGE_SCHEMA,
                                                    compression="zlib"))
    for rows in EDGE_CHUNKS[:2]:
        table = _edge_table(rows)
        w.write(table)
        chunks.append((1, table))
        w.flush()
    w.close()
    w = BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    table = _edge_table(EDGE_CHUNKS[2])
    w.write(table)
    chunks.append((2, table))
    w.flush()
    w.abandon()
    # plus the all-types data in a third transaction, several flushes
    w = BucketWriter.open_append(path, BucketFileOptions(write_id=4))
    for i in range(3):
        table = _to_edge(all_types_table(300, seed=5 + i, start=i * 300))
        w.write(table)
        chunks.append((4, table))
        w.flush()
    w.close()

    events = expected_events(EDGE_SCHEMA, chunks)
    read = jt.orc_read(path)
    check_read(read, EDGE_SCHEMA, events, "edge")
    stats = read["file_statistics"]
    # the layout the brief promises: root, ACID columns, row struct, user columns in pre-order
    assert [s["type"] for s in stats[:8]] == [
        "struct", "int", "bigint", "int", "bigint", "bigint", "struct", "boolean"]
    assert stats[5 + 6]["sum"] is None, "i64 sum overflowed: ORC leaves it undefined"


def _to_edge(table: pa.Table) -> pa.Table:
    """An all-types table in EDGE_SCHEMA (st gains z, big is derived from dec)."""
    n = table.num_rows
    st = table.column("st").combine_chunks()
    z = pa.array([None if v is None else {"q": float(v["x"]) / 4}
                  for v in st.to_pylist()], EDGE_SCHEMA.field("st").type.field("z").type)
    new_st = pa.StructArray.from_arrays(
        [st.field("x"), st.field("y"), z], fields=list(EDGE_SCHEMA.field("st").type),
        mask=st.is_null())
    cols = {}
    for f in EDGE_SCHEMA:
        if f.name == "st":
            cols[f.name] = new_st
        elif f.name == "big":
            cols[f.name] = table.column("dec").cast(f.type)
        else:
            cols[f.name] = table.column(f.name)
    assert n == len(new_st)
    return pa.table(cols, schema=EDGE_SCHEMA)


# ---------------------------------------------------------------------------------------------
# torn stripe


def test_torn_stripe_then_open_append_reads_right_in_orc_java_pyarrow_and_pyorc(
        java_tools: None, tmp_path: Path) -> None:
    path = bucket_path(tmp_path, "delta_0000001_0000002")
    w = BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=SIMPLE_SCHEMA,
                                                    compression="zstd", tuning=SMALL_STRIPES))
    for i in range(3):
        w.write(simple_table(range(i * 1000, i * 1000 + 1000)))
        w.flush()
    w.abandon()
    committed = Path(path).stat().st_size
    assert jt.read_flush_lengths(path)[-1] == committed
    # a stripe that was being written when the writer died, never covered by a footer
    with open(path, "ab") as f:
        f.write(b"\x17torn stripe bytes that never got a footer" * 300)

    w = BucketWriter.open_append(path, BucketFileOptions(write_id=2))
    assert Path(path).stat().st_size == committed
    w.write(simple_table(range(100_000, 100_250)))
    w.close()

    expected_ids = list(range(3000)) + list(range(100_000, 100_250))
    expected_keys = [(1, r) for r in range(3000)] + [(2, r) for r in range(250)]
    final = jt.orc_read(path)
    assert final["length_source"] == "file" and final["side_file_exists"] is False
    assert final["num_rows"] == 3250
    assert [r["row"]["id"] for r in final["rows"]] == expected_ids
    assert [r["row"]["value"] for r in final["rows"]] == [f"v{i}" for i in expected_ids]
    assert [(r["originalTransaction"], r["rowId"]) for r in final["rows"]] == expected_keys
    assert {r["currentTransaction"] - r["originalTransaction"] for r in final["rows"]} == {0}
    assert final["user_metadata"]["hive.acid.stats"] == "3250,0,0"
    assert final["user_metadata"]["hive.acid.key.index"].endswith("2,536870912,249;")
    check_read(final, SIMPLE_SCHEMA, expected_events(SIMPLE_SCHEMA, [
        (1, simple_table(range(3000))), (2, simple_table(range(100_000, 100_250)))]), "torn")

    arrow_rows = po.ORCFile(path).read().to_pylist()
    assert [r["row"]["id"] for r in arrow_rows] == expected_ids
    assert [(r["originalTransaction"], r["rowId"]) for r in arrow_rows] == expected_keys
    with open(path, "rb") as f:
        orc_rows = list(pyorc.Reader(io.BytesIO(f.read())))
    # pyorc yields tuples in field order: (operation, originalTransaction, bucket, rowId,
    # currentTransaction, (id, value))
    assert [r[5][0] for r in orc_rows] == expected_ids
    assert [(r[1], r[3]) for r in orc_rows] == expected_keys


def test_wide_decimal_sum_is_exact_after_merging_flushes(java_tools: None, tmp_path: Path) -> None:
    """decimal(38, 6) values whose sum needs 35 digits: the merged file sum must stay exact."""
    schema = pa.schema([("big", pa.decimal128(38, 6))])
    values = [Decimal("12345678901234567890123456789.123456"),
              Decimal("9999999999999999999999999999.999999")]
    path = bucket_path(tmp_path)
    chunks = []
    with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=schema,
                                                     compression="none")) as w:
        for v in values:
            table = pa.table({"big": pa.array([v], schema.field("big").type)})
            w.write(table)
            chunks.append((1, table))
            w.flush()
    read = jt.orc_read(path)
    assert [s[7]["sum"] for s in read["stripe_statistics"]] == [str(v) for v in values]
    with localcontext(prec=100):
        exact = values[0] + values[1]
    assert Decimal(read["file_statistics"][7]["sum"]) == exact == Decimal(
        "22345678901234567890123456789.123455")
    check_read(read, schema, expected_events(schema, chunks), "wide decimal")


def test_pre_1970_sub_millisecond_timestamps_read_back_in_orc_java(
        java_tools: None, tmp_path: Path) -> None:
    schema = pa.schema([("ts", pa.timestamp("ns"))])
    texts = ["1969-12-31T23:59:59.999999999", "1969-12-31T23:59:59.000500000",
             "1900-01-01T00:00:00.000000001", "1969-12-31T23:59:58.999999000"]
    table = pa.table({"ts": pa.array([_ns_from_text(t) for t in texts], pa.int64())
                      .cast(pa.timestamp("ns"))})
    path = bucket_path(tmp_path)
    with BucketWriter.create(path, BucketFileOptions(write_id=1, row_schema=schema)) as w:
        w.write(table)
    assert po.ORCFile(path).read().column("row").combine_chunks().field("ts").cast(
        pa.int64()).to_pylist() == [_ns_from_text(t) for t in texts], "pyarrow reads them right"
    assert [r["row"]["ts"] for r in jt.orc_read(path)["rows"]] == texts
