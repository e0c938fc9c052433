"""The Java compat tools themselves: orc-core reads pyarrow files; Hive 2.3 writes a reference
ACID table that orc-core, pyarrow and Hive's getAcidState agree on.

The asserted byte values are what Hive 2.3.10's OrcRecordUpdater writes when run on orc-core
2.3.0 (pyspark 4.3.0's jars); see the module docstring of javatools.py for the API.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from compat import javatools as jt
from conftest import require

pytestmark = pytest.mark.java

LONG_MAX = jt.LONG_MAX
ACID_COLUMNS = ["operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row"]
EVENT_SCHEMA = (
    "struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
    "currentTransaction:bigint,row:struct<id:bigint,value:string>>"
)


@pytest.fixture(scope="module")
def java_tools() -> None:
    ok, what = jt.available()
    require(ok, what)
    jt.build()


# ---------------------------------------------------------------------------------------------
# pure Python helpers


@pytest.mark.parametrize(
    ("write_ids", "valid_txns"),
    [
        ("default.t:20:15:15,18:16", "20:15:15:16:18"),
        ("default.t:6:9223372036854775807::", "6:9223372036854775807"),
        ("default.t:6:9223372036854775807::3", "6:9223372036854775807:3"),
        ("db.t:4:3:3:", "4:3:3"),
        ("db.t:5", "5:9223372036854775807"),
    ],
)
def test_write_id_list_to_valid_txns(write_ids: str, valid_txns: str) -> None:
    assert jt.write_id_list_to_valid_txns(write_ids) == valid_txns
    assert jt.to_valid_txns(write_ids) == valid_txns
    assert jt.to_valid_txns(valid_txns) == valid_txns  # Hive 2 form passes through


def test_parse_timestamp() -> None:
    assert jt.parse_timestamp("2024-01-02T03:04:05.123456789") == dt.datetime(
        2024, 1, 2, 3, 4, 5, 123456
    )
    assert jt.parse_timestamp("1970-01-01T00:00:00.000000000Z") == dt.datetime(
        1970, 1, 1, tzinfo=dt.UTC
    )


# ---------------------------------------------------------------------------------------------
# orc_read on a pyarrow-written file


def _types_table() -> Any:
    import pyarrow as pa

    return pa.table(
        {
            "b": pa.array([True, False, None, True], pa.bool_()),
            "i8": pa.array([1, -2, None, 127], pa.int8()),
            "i16": pa.array([300, -300, None, 0], pa.int16()),
            "i32": pa.array([70000, None, -5, 0], pa.int32()),
            "i64": pa.array([2**40, -(2**40), 7, None], pa.int64()),
            "f32": pa.array([1.5, None, -0.25, 0.1], pa.float32()),
            "f64": pa.array([2.5, 1e300, None, -3.0], pa.float64()),
            "s": pa.array(["a", "héllo", None, ""], pa.string()),
            "bin": pa.array([b"\x00\x01", None, b"", b"xyz"], pa.binary()),
            "d": pa.array(
                [dt.date(2024, 1, 2), dt.date(1970, 1, 1), None, dt.date(1969, 12, 31)], pa.date32()
            ),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 2, 3, 4, 5, 123456),
                    None,
                    dt.datetime(1970, 1, 1),
                    dt.datetime(1969, 12, 31, 23, 59, 59, 500000),
                ],
                pa.timestamp("us"),
            ),
            "dec": pa.array(
                [
                    decimal.Decimal("1.50"),
                    decimal.Decimal("-12345678.99"),
                    None,
                    decimal.Decimal("0.01"),
                ],
                pa.decimal128(10, 2),
            ),
            "st": pa.array(
                [{"x": 1, "y": "p"}, None, {"x": None, "y": "q"}, {"x": 3, "y": None}],
                pa.struct([("x", pa.int32()), ("y", pa.string())]),
            ),
            "l": pa.array([[1, 2], [], None, [None, 5]], pa.list_(pa.int64())),
            "m": pa.array(
                [[("k1", 1), ("k2", 2)], None, [], [("z", None)]], pa.map_(pa.string(), pa.int32())
            ),
        }
    )


def _to_json_form(v: Any) -> Any:
    """pyarrow to_pylist() value -> the orc_read JSON encoding."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond:06d}000"
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return {k: _to_json_form(x) for k, x in v.items()}
    if isinstance(v, list):
        return [
            list(map(_to_json_form, x)) if isinstance(x, tuple) else _to_json_form(x) for x in v
        ]
    raise TypeError(type(v))


def test_orc_read_pyarrow_types(java_tools: None, tmp_path: Path) -> None:
    import numpy as np
    import pyarrow.orc as po

    table = _types_table()
    path = tmp_path / "types.orc"
    po.write_table(table, path)
    small = tmp_path / "small.orc"
    po.write_table(table.slice(0, 1), small)

    # one JVM: full read, metadata-only read, and a read at an invalid explicit length
    full, meta_only, bad = jt.orc_read_many(
        [path, {"path": small, "rows": False}, {"path": path, "max_length": 10}],
        raise_on_error=False,
    )

    assert full["schema"] == (
        "struct<b:boolean,i8:tinyint,i16:smallint,i32:int,i64:bigint,f32:float,f64:double,"
        "s:string,bin:binary,d:date,ts:timestamp,dec:decimal(10,2),st:struct<x:int,y:string>,"
        "l:array<bigint>,m:map<string,int>>"
    )
    assert full["num_rows"] == 4
    assert full["length_source"] == "file" and full["max_length"] == path.stat().st_size
    assert full["side_file_exists"] is False and full["last_flush_length"] is None
    assert sum(s["rows"] for s in full["stripes"]) == 4

    expected = [{k: _to_json_form(v) for k, v in row.items()} for row in table.to_pylist()]
    # float32 comes back as the exact double value of the float32
    for row in expected:
        if row["f32"] is not None:
            row["f32"] = float(np.float32(row["f32"]))
    assert full["rows"] == expected
    # pre-1970 fractional timestamp written by ORC C++ reads correctly (see formatTimestamp)
    assert full["rows"][3]["ts"] == "1969-12-31T23:59:59.500000000"

    stats = {s["column_id"]: s for s in full["file_statistics"]}
    names = [
        "root",
        "b",
        "i8",
        "i16",
        "i32",
        "i64",
        "f32",
        "f64",
        "s",
        "bin",
        "d",
        "ts",
        "dec",
        "st",
        "st.x",
        "st.y",
        "l",
        "l.item",
        "m",
        "m.key",
        "m.value",
    ]
    by_name = {n: stats[i] for i, n in enumerate(names)}
    assert by_name["root"]["count"] == 4 and by_name["root"]["has_null"] is False
    assert (by_name["b"]["count"], by_name["b"]["has_null"], by_name["b"]["true_count"]) == (
        3,
        True,
        2,
    )
    assert (by_name["i8"]["min"], by_name["i8"]["max"], by_name["i8"]["sum"]) == (-2, 127, 126)
    assert (by_name["i32"]["min"], by_name["i32"]["max"], by_name["i32"]["sum"]) == (
        -5,
        70000,
        69995,
    )
    assert (by_name["i64"]["min"], by_name["i64"]["max"], by_name["i64"]["sum"]) == (
        -(2**40),
        2**40,
        7,
    )
    assert (by_name["f64"]["min"], by_name["f64"]["max"]) == (-3.0, 1e300)
    assert (by_name["f32"]["min"], by_name["f32"]["max"]) == (-0.25, 1.5)
    assert (by_name["s"]["min"], by_name["s"]["max"], by_name["s"]["sum_length"]) == (
        "",
        "héllo",
        7,
    )
    assert by_name["bin"]["sum_length"] == 5
    assert (by_name["d"]["min"], by_name["d"]["max"]) == ("1969-12-31", "2024-01-02")
    assert by_name["ts"]["min"] == "1969-12-31T23:59:59.500000000"
    assert by_name["ts"]["max"] == "2024-01-02T03:04:05.123456000"
    assert [decimal.Decimal(by_name["dec"][k]) for k in ("min", "max", "sum")] == [
        decimal.Decimal("-12345678.99"),
        decimal.Decimal("1.50"),
        decimal.Decimal("-12345677.48"),
    ]
    assert (by_name["st.x"]["count"], by_name["st.x"]["sum"]) == (2, 4)
    assert (by_name["l.item"]["count"], by_name["l.item"]["sum"]) == (3, 8)
    assert (by_name["m.key"]["min"], by_name["m.key"]["max"]) == ("k1", "z")
    for col in ("i8", "i16", "i32", "i64", "f32", "f64", "s", "bin", "d", "ts", "dec"):
        assert by_name[col]["count"] == 3 and by_name[col]["has_null"] is True, col

    assert "rows" not in meta_only and meta_only["num_rows"] == 1
    assert "error" in bad and "rows" not in bad

    with pytest.raises(jt.JavaToolError):
        jt.orc_read_many([{"path": path, "max_length": 10}])


# ---------------------------------------------------------------------------------------------
# Hive 2.3 reference table


@pytest.fixture(scope="module")
def reference(java_tools: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both scenarios written by Hive, then every bucket file read by orc-core in one JVM."""
    root = tmp_path_factory.mktemp("hive-ref")
    out: dict[str, Any] = {}
    specs: list[dict[str, Any]] = []
    for scenario in ("basic", "streaming_open"):
        table = root / scenario
        manifest = jt.hive_write_reference_table(table, scenario)
        bucket_files = sorted(
            p for p in table.glob("*/bucket_*") if not p.name.endswith("_flush_length")
        )
        out[scenario] = {"table": table, "manifest": manifest, "files": bucket_files}
        specs += [{"path": p} for p in bucket_files]
    open_file = root / "streaming_open" / "delta_0000002_0000004" / "bucket_00000"
    lengths = jt.read_flush_lengths(open_file)
    assert lengths is not None
    specs += [{"path": open_file, "max_length": n} for n in lengths]
    specs.append({"path": open_file, "use_flush_length": False})
    results = jt.orc_read_many(specs)
    k = 0
    for scenario in ("basic", "streaming_open"):
        n = len(out[scenario]["files"])
        out[scenario]["reads"] = {
            str(Path(r["path"]).relative_to(out[scenario]["table"])): r for r in results[k : k + n]
        }
        k += n
    out["flush_lengths"] = lengths
    out["flush_reads"] = results[k : k + len(lengths)]
    out["open_file_whole"] = results[-1]
    return out


EXPECTED_DIRS = [
    "delete_delta_0000005_0000005_0000",
    "delete_delta_0000006_0000006_0000",
    "delta_0000001_0000001_0000",
    "delta_0000002_0000004",
    "delta_0000005_0000005_0000",
]


def test_reference_layout(reference: dict[str, Any]) -> None:
    for scenario in ("basic", "streaming_open"):
        table: Path = reference[scenario]["table"]
        assert sorted(p.name for p in table.iterdir() if p.is_dir()) == EXPECTED_DIRS
        # Hive 2.3: _orc_acid_version sits in the table/partition dir (the path handed to
        # getRecordUpdater), not in each delta, and holds DataOutputStream.writeInt(0).
        assert (table / "_orc_acid_version").read_bytes() == b"\x00\x00\x00\x00"
        assert not list(table.glob("*/_orc_acid_version"))
        assert not list(table.rglob("*.crc"))
        for d in EXPECTED_DIRS:
            assert sorted(p.name for p in (table / d).iterdir()) == (
                ["bucket_00000", "bucket_00000_flush_length"]
                if scenario == "streaming_open" and d == "delta_0000002_0000004"
                else ["bucket_00000"]
            ), (scenario, d)

    stream = reference["basic"]["manifest"]["updaters"][1]
    # Hive 2.3 creates the side file empty at construction (no initial 0 long) ...
    assert stream["after_construction"]["side_file_exists"] is True
    assert stream["after_construction"]["side_file_hex"] == ""
    assert stream["after_construction"]["data_file_exists"] is False
    # ... appends one big-endian long per flush = data file length after the intermediate footer
    hexes = [f["side_file_hex"] for f in stream["flushes"]]
    lengths = [f["data_file_length"] for f in stream["flushes"]]
    for i, h in enumerate(hexes):
        assert bytes.fromhex(h) == struct.pack(f">{i + 1}q", *lengths[: i + 1])
        assert stream["flushes"][i]["last_flush_length"] == lengths[i]
    # ... and close(false) deletes it
    assert stream["after_close"]["side_file_exists"] is False
    assert stream["after_close"]["data_file_length"] > lengths[-1]

    open_table: Path = reference["streaming_open"]["table"]
    side = open_table / "delta_0000002_0000004" / "bucket_00000_flush_length"
    assert side.read_bytes() == struct.pack(">3q", *lengths)
    assert reference["flush_lengths"] == lengths
    # the abandoned writer's data file ends exactly at the last footer
    assert (open_table / "delta_0000002_0000004" / "bucket_00000").stat().st_size == lengths[-1]


def _events(read: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            r["operation"],
            r["originalTransaction"],
            r["bucket"],
            r["rowId"],
            r["currentTransaction"],
            None if r["row"] is None else (r["row"]["id"], r["row"]["value"]),
        )
        for r in read["rows"]
    ]


def test_reference_events(reference: dict[str, Any]) -> None:
    import pyarrow.orc as po

    for scenario in ("basic", "streaming_open"):
        reads = reference[scenario]["reads"]
        manifest = reference[scenario]["manifest"]
        for name, read in reads.items():
            assert read["schema"] == EVENT_SCHEMA, name
            assert read["compression"] == "ZSTD"  # orc-core 2.x default, not Hive's old ZLIB
            # pyarrow (ORC C++) reads the same events
            table = po.ORCFile(str(reference[scenario]["table"] / name)).read()
            assert table.column_names == ACID_COLUMNS
            assert [
                (
                    r["operation"],
                    r["originalTransaction"],
                    r["bucket"],
                    r["rowId"],
                    r["currentTransaction"],
                    None if r["row"] is None else (r["row"]["id"], r["row"]["value"]),
                )
                for r in table.to_pylist()
            ] == _events(read), name

        # inserts carry the ROW__IDs the manifest predicts; bucket property = plain bucket id 0
        # (Hive 2.3 has no BucketCodec: not 536870912)
        inserted = {
            (i["row_id"]["originalTransaction"], i["row_id"]["bucket"], i["row_id"]["rowId"]): (
                i["row"]["id"],
                i["row"]["value"],
            )
            for t in manifest["txns"]
            for i in t["inserted"]
        }
        found = {
            (e[1], e[2], e[3]): e[5]
            for name in (
                "delta_0000001_0000001_0000/bucket_00000",
                "delta_0000002_0000004/bucket_00000",
            )
            for e in _events(reads[name])
        }
        assert found == inserted

        assert _events(reads["delta_0000001_0000001_0000/bucket_00000"]) == [
            (0, 1, 0, 0, 1, (1, "a1")),
            (0, 1, 0, 1, 1, (2, "a2")),
            (0, 1, 0, 2, 1, (3, "a3")),
        ]
        assert _events(reads["delta_0000002_0000004/bucket_00000"]) == [
            (0, 2, 0, 0, 2, (4, "s2-4")),
            (0, 2, 0, 1, 2, (5, "s2-5")),
            (0, 3, 0, 0, 3, (6, "s3-6")),
            (0, 3, 0, 1, 3, (7, "s3-7")),
            (0, 4, 0, 0, 4, (8, "s4-8")),
        ]
        # split update (transactional_properties=default): delete event + insert event, op 1 unused
        assert _events(reads["delete_delta_0000005_0000005_0000/bucket_00000"]) == [
            (2, 1, 0, 1, 5, None)
        ]
        assert _events(reads["delta_0000005_0000005_0000/bucket_00000"]) == [
            (0, 5, 0, 0, 5, (2, "a2-updated"))
        ]
        assert _events(reads["delete_delta_0000006_0000006_0000/bucket_00000"]) == [
            (2, 2, 0, 0, 6, None)
        ]

        meta = {name: r["user_metadata"] for name, r in reads.items()}
        # key index: "<origTxn>,<bucket>,<rowId>;" per stripe. Hive 2.3 loses the entry of the
        # last stripe when close() writes it (its preFooterWrite runs before the final stripe
        # flush); a flush() before close keeps them. The delete half of a split update does get
        # its entry, a plain delete does not.
        assert (
            meta["delta_0000002_0000004/bucket_00000"]["hive.acid.key.index"]
            == "2,0,1;3,0,1;4,0,0;"
        )
        assert meta["delta_0000001_0000001_0000/bucket_00000"]["hive.acid.key.index"] == ""
        assert meta["delta_0000005_0000005_0000/bucket_00000"]["hive.acid.key.index"] == ""
        assert (
            meta["delete_delta_0000005_0000005_0000/bucket_00000"]["hive.acid.key.index"]
            == "1,0,1;"
        )
        assert meta["delete_delta_0000006_0000006_0000/bucket_00000"]["hive.acid.key.index"] == ""
        # hive.acid.stats "inserts,updates,deletes"; no hive.acid.version key in 2.3
        assert meta["delta_0000001_0000001_0000/bucket_00000"]["hive.acid.stats"] == "3,0,0"
        assert meta["delta_0000002_0000004/bucket_00000"]["hive.acid.stats"] == "5,0,0"
        assert meta["delete_delta_0000006_0000006_0000/bucket_00000"]["hive.acid.stats"] == "0,0,1"
        assert meta["delete_delta_0000005_0000005_0000/bucket_00000"]["hive.acid.stats"] == "0,0,1"
        # quirk: the insert half of a 2.3 split update is counted as a delete, not an insert
        assert meta["delta_0000005_0000005_0000/bucket_00000"]["hive.acid.stats"] == "0,0,1"
        assert all("hive.acid.version" not in m for m in meta.values())

    # the streaming file: three stripes, one per flush
    stripes = reference["basic"]["reads"]["delta_0000002_0000004/bucket_00000"]["stripes"]
    assert [s["rows"] for s in stripes] == [2, 2, 1]


def test_open_streaming_file_at_each_flush_length(reference: dict[str, Any]) -> None:
    reads = reference["flush_reads"]
    assert [r["num_rows"] for r in reads] == [2, 4, 5]
    assert [r["max_length"] for r in reads] == reference["flush_lengths"]
    assert [r["user_metadata"]["hive.acid.key.index"] for r in reads] == [
        "2,0,1;",
        "2,0,1;3,0,1;",
        "2,0,1;3,0,1;4,0,0;",
    ]
    assert [r["user_metadata"]["hive.acid.stats"] for r in reads] == ["2,0,0", "4,0,0", "5,0,0"]
    assert [len(r["rows"]) for r in reads] == [2, 4, 5]
    default = reference["streaming_open"]["reads"]["delta_0000002_0000004/bucket_00000"]
    assert default["length_source"] == "side_file"
    assert default["max_length"] == reference["flush_lengths"][-1]
    assert reference["open_file_whole"]["length_source"] == "file"
    assert reference["open_file_whole"]["num_rows"] == 5


def _visible_rows(
    table: Path, state: dict[str, Any], reads: dict[str, Any], valid: set[int]
) -> list[dict[str, Any]]:
    """Tiny split-update merge over the directories Hive selected (no base in these tables)."""
    deltas = [os.path.relpath(p, table) for p in state["deltas"]]
    deleted = set()
    live = {}
    for d in deltas:
        for e in _events(reads[f"{d}/bucket_00000"]):
            op, otxn, bucket, row_id, ctxn, row = e
            if ctxn not in valid:
                continue
            if op == 2:
                deleted.add((otxn, bucket, row_id))
            else:
                live[(otxn, bucket, row_id)] = row
    return [
        {"id": r[0], "value": r[1]}
        for key, r in sorted(live.items(), key=lambda kv: kv[1][0])
        if key not in deleted
    ]


def test_hive_acid_state_reference(reference: dict[str, Any]) -> None:
    table: Path = reference["basic"]["table"]
    manifest = reference["basic"]["manifest"]
    all_committed = manifest["valid_txns"]["all_committed"]
    txn3_aborted = manifest["valid_txns"]["txn3_aborted"]
    assert all_committed == f"6:{LONG_MAX}" and txn3_aborted == f"6:{LONG_MAX}:3"

    # a copy with extra directories to see obsolete / original files handling
    extra = table.parent / "basic-extra"
    shutil.copytree(table, extra)
    shutil.copy(table / "delta_0000001_0000001_0000" / "bucket_00000", extra / "000000_0")
    (extra / "delta_0000005_0000006").mkdir()
    shutil.copy(
        table / "delta_0000005_0000005_0000" / "bucket_00000",
        extra / "delta_0000005_0000006" / "bucket_00000",
    )
    based = table.parent / "basic-base"
    shutil.copytree(extra, based)
    (based / "base_0000004").mkdir()
    shutil.copy(
        table / "delta_0000001_0000001_0000" / "bucket_00000",
        based / "base_0000004" / "bucket_00000",
    )

    queries = [
        (table, all_committed),
        (table, txn3_aborted),
        (table, "default.t:6:9223372036854775807::3"),  # Hive 3 write-id list, converted
        (table, "4:3:3"),  # txn 3 open, 5 and 6 above the HWM
        (table, ""),  # empty = everything valid
        (extra, all_committed),
        (based, all_committed),
        (based, "6:3:3"),  # base_4 not valid with txn 3 open
    ]
    res = jt.hive_acid_state_many(queries, raise_on_error=False)
    rel = [
        jt.relative_state(r, q[0]) if "error" not in r else r
        for r, q in zip(res, queries, strict=True)
    ]

    full = {
        "base": None,
        "deltas": [
            "delta_0000001_0000001_0000",
            "delta_0000002_0000004",
            "delete_delta_0000005_0000005_0000",
            "delta_0000005_0000005_0000",
            "delete_delta_0000006_0000006_0000",
        ],
        "obsolete": [],
        "original_files": [],
    }
    # a partly aborted range (2..4 with 3 aborted) stays: filtering is per row
    assert rel[0] == full and rel[1] == full and rel[2] == full and rel[4] == full
    assert res[2]["valid_txns"] == txn3_aborted
    assert rel[3] == full | {"deltas": full["deltas"][:2]}
    # a wider delta with no statement id shadows the narrower ones it covers
    assert rel[5] == {
        "base": None,
        "deltas": ["delta_0000001_0000001_0000", "delta_0000002_0000004", "delta_0000005_0000006"],
        "obsolete": [
            "delete_delta_0000005_0000005_0000",
            "delta_0000005_0000005_0000",
            "delete_delta_0000006_0000006_0000",
        ],
        "original_files": ["000000_0"],
    }
    assert rel[6] == {
        "base": "base_0000004",
        "deltas": ["delta_0000005_0000006"],
        "obsolete": [
            "000000_0",
            "delta_0000001_0000001_0000",
            "delta_0000002_0000004",
            "delete_delta_0000005_0000005_0000",
            "delta_0000005_0000005_0000",
            "delete_delta_0000006_0000006_0000",
        ],
        "original_files": [],
    }
    assert "Not enough history" in res[7]["error"]
    assert res[0]["valid_txns_normalized"] in (f"6:{LONG_MAX}:", f"6:{LONG_MAX}")

    # Hive's selection + row-level txn filtering + delete events = the manifest's expectations
    reads = reference["basic"]["reads"]
    assert (
        _visible_rows(table, res[0], reads, {1, 2, 3, 4, 5, 6})
        == manifest["expected_rows"]["all_committed"]
    )
    assert (
        _visible_rows(table, res[1], reads, {1, 2, 4, 5, 6})
        == manifest["expected_rows"]["txn3_aborted"]
    )


def test_legacy_update_mode(java_tools: None, tmp_path: Path) -> None:
    """transactional_properties=legacy: no delete_delta dirs; update = operation 1 in place."""
    table = tmp_path / "legacy"
    manifest = jt.hive_write_reference_table(table, transactional_properties="legacy")
    assert manifest["transactional_properties"] == "legacy"
    assert sorted(p.name for p in table.iterdir() if p.is_dir()) == [
        "delta_0000001_0000001_0000",
        "delta_0000002_0000004",
        "delta_0000005_0000005_0000",
        "delta_0000006_0000006_0000",
    ]
    upd, dele = jt.orc_read_many(
        [
            table / "delta_0000005_0000005_0000" / "bucket_00000",
            table / "delta_0000006_0000006_0000" / "bucket_00000",
        ]
    )
    assert _events(upd) == [(1, 1, 0, 1, 5, (2, "a2-updated"))]
    assert upd["user_metadata"]["hive.acid.stats"] == "0,1,0"
    assert _events(dele) == [(2, 2, 0, 0, 6, None)]


def test_hive_merged_read_names_what_it_cannot_read(java_tools: None, tmp_path: Path) -> None:
    """Original (pre-ACID) files and an unknown reader are refused by name, not misread."""
    table = tmp_path / "ref"
    jt.hive_write_reference_table(table)
    (table / "000000_0").write_bytes((table / "delta_0000001_0000001_0000" /
                                      "bucket_00000").read_bytes())
    columns = {"columns": "id,value", "columns_types": "bigint:string"}
    with pytest.raises(jt.JavaToolError, match="original \\(pre-ACID\\) files"):
        jt.hive_merged_read(table, "6:9223372036854775807", **columns)
    with pytest.raises(jt.JavaToolError, match="unknown reader vectorized"):
        jt.hive_merged_read(table, "6:9223372036854775807", **columns, reader="vectorized")
