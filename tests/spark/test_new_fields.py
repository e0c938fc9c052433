"""--on-new-field: a record's top-level field the table has no column for is dead-lettered,
stops the query, is dropped and counted, or becomes a column (evolve) before the micro-batch
is written; a value that conflicts with its column is dead-lettered with a specific reason.

Parsing and the tasks run without Spark; the stream runs through the real broker and Spark.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from ingest.acid import read_bucket_file
from ingest.acid.format import parse_schema
from ingest.acid.read.reader import read_table
from ingest.errors import ConfigError, SchemaMismatchError
from ingest.kafka.produce import produce_events
from ingest.records.fields import FieldSeen, column_type, new_columns, new_field_reason
from ingest.records.json_values import parse_json_values
from ingest.spark.job import StreamSummary, run_stream
from ingest.spark.options import SinkOptions, StreamOptions, check_evolve_types
from ingest.spark.sink._batch import BatchReport
from ingest.spark.sink._results import FileWritten, NewFields, from_arrow
from ingest.spark.sink._tasks import (
    META_FIELDS,
    DeltaTarget,
    TaskPlan,
    parse_task,
    write_task,
)
from ingest.txn import Metastore, default_metastore_url

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string())])


def values(*records: Any) -> pa.Array:
    return pa.array([r if isinstance(r, bytes) else json.dumps(r).encode() for r in records],
                    pa.binary())


# ---------------------------------------------------------------- parsing (no Spark)

def test_a_batch_without_new_fields_reports_none() -> None:
    parsed = parse_json_values(values({"id": 1, "value": "a"}, {"id": 2}), SCHEMA)
    assert parsed.new_fields == [] and parsed.bad == [] and parsed.rows.num_rows == 2


def test_new_top_level_fields_are_listed_with_their_kinds_and_left_out_of_the_rows() -> None:
    parsed = parse_json_values(values(
        {"id": 1, "value": "a"}, {"id": 2, "color": "red", "n": 3},
        {"id": 3, "meta": {"a": [1]}, "tags": ["x"], "f": 1.5, "ok": True, "gone": None},
        b'{"id": 4,\n "pretty": 1}', {"id": 5, "nothing": None}), SCHEMA)
    assert parsed.rows.to_pylist() == [{"id": 1, "value": "a"}, {"id": 2, "value": None},
                                       {"id": 3, "value": None}, {"id": 4, "value": None},
                                       {"id": 5, "value": None}]
    assert parsed.new_fields == [
        (1, {"color": "string", "n": "integer"}),
        (2, {"meta": "object", "tags": "array", "f": "number", "ok": "boolean"}),
        (3, {"pretty": "integer"})]  # a null value holds nothing new


def test_new_fields_whose_kinds_differ_between_records_are_listed_too() -> None:
    parsed = parse_json_values(values({"id": 1, "m": {"a": 1}, "k": 1},
                                      {"id": 2, "m": {"a": "x"}, "k": "one"}), SCHEMA)
    assert parsed.rows.column("id").to_pylist() == [1, 2]
    assert parsed.new_fields == [(0, {"m": "object", "k": "integer"}),
                                 (1, {"m": "object", "k": "string"})]


def test_a_string_column_takes_a_nested_value_as_its_json_text() -> None:
    parsed = parse_json_values(values(
        {"id": 1, "value": "plain"}, {"id": 2, "value": {"k": [1, "é"]}}, {"id": 3, "value": [1]},
        {"id": 4, "value": 5}, {"id": 5, "value": None, "x": 1}), SCHEMA)
    assert parsed.rows.column("value").to_pylist() == ["plain", '{"k":[1,"é"]}', "[1]", None]
    assert parsed.good.to_pylist() == [0, 1, 2, 4]
    assert parsed.bad == [(3, "field 'value': the JSON integer 5 does not fit column value "
                              "STRING (a type conflict)")]
    assert parsed.new_fields == [(4, {"x": "integer"})]


@pytest.mark.parametrize(("record", "reason"), [
    ({"id": "abc"}, "field 'id': the JSON string \"abc\" does not fit column id BIGINT"),
    ({"id": 1.5}, "field 'id': the JSON number 1.5 does not fit column id BIGINT"),
    ({"id": True}, "field 'id': the JSON boolean true does not fit column id BIGINT"),
    ({"id": 1, "value": False}, "field 'value': the JSON boolean false does not fit column "
                                "value STRING"),
])
def test_a_type_conflict_is_bad_with_a_reason_naming_field_value_and_column(
        record: dict[str, Any], reason: str) -> None:
    parsed = parse_json_values(values({"id": 7}, record, {"id": 8}), SCHEMA)
    assert parsed.good.to_pylist() == [0, 2]
    assert parsed.bad == [(1, reason + " (a type conflict)")]


# ---------------------------------------------------------------- the policy (no Spark)

def test_column_types_are_inferred_conservatively() -> None:
    assert column_type(["integer"]) == "BIGINT"
    assert column_type(["integer", "number", "null"]) == "DOUBLE"
    assert column_type(["boolean"]) == "BOOLEAN"
    assert column_type(["string"]) == column_type(["object"]) == column_type(["array"]) \
        == "STRING"
    assert column_type({"integer": 2, "string": 1}) == "BIGINT"  # the most values decide
    assert column_type({"integer": 1, "number": 1, "boolean": 3}) == "BOOLEAN"
    assert column_type({"integer": 1, "string": 1}) == "STRING"  # a tie: STRING
    assert column_type(["null"]) is None
    assert column_type(["object"], "STRUCT<a:BIGINT>") == "STRUCT<a:BIGINT>"


def test_new_columns_skip_known_unaddable_and_null_only_fields() -> None:
    def seen(kind: str, offset: int = 0) -> FieldSeen:
        return FieldSeen({kind: 1}, 1, "t", 0, offset)

    assert new_columns({"b": seen("integer"), "a": seen("object"), "Id": seen("integer"),
                        "n": seen("null"), "bad name": seen("string"), "t": seen("array"),
                        "C": seen("string", 5), "c": seen("boolean", 3)},
                       ["id", "value"], {"t": "ARRAY<STRING>"}) == [
        ("a", "STRING"), ("b", "BIGINT"), ("c", "BOOLEAN"), ("t", "ARRAY<STRING>")]


def test_the_policy_decides_which_records_are_dead_lettered() -> None:
    known = ["id", "value"]
    assert new_field_reason({"c": "string"}, known, "ignore") is None
    assert new_field_reason({"c": "string"}, known, "fail") is None
    assert new_field_reason({"c": "string"}, known, "evolve") is None
    assert new_field_reason({"c": "string", "b": "integer"}, known, "dead-letter") == (
        "new field 'b' (a JSON integer), 'c' (a JSON string) is not a column of the table "
        "(--on-new-field dead-letter; add it with `ingest alter --add-columns`, or stream "
        "with --on-new-field evolve)")
    assert "differs from column 'value' only in case" in str(
        new_field_reason({"Value": "string"}, known, "evolve"))
    assert "is not a Hive column name" in str(new_field_reason({"a-b": "string"}, known,
                                                               "evolve"))


def test_a_reserved_name_never_becomes_a_column() -> None:
    # issue 32: `ingest create` refuses ROW__ID; evolve must not add it either.
    known = ["id", "value"]
    assert new_field_reason({"ROW__ID": "integer"}, known, "evolve") == (
        "new field 'ROW__ID' cannot be added: column 'ROW__ID' is reserved by Hive: ROW__ID "
        "is the virtual column holding each row's (writeid, bucketid, rowid)")
    assert new_columns({"row__id": FieldSeen({"integer": 1}, 1, "t", 0, 0),
                        "n": FieldSeen({"integer": 1}, 1, "t", 0, 1)}, known, {}) == [
        ("n", "BIGINT")]


def test_an_evolve_type_naming_an_existing_column_must_agree_with_it() -> None:
    columns = parse_schema("id BIGINT, tags STRING COMMENT 'x', code VARCHAR(3)")
    # The same type: a column an earlier run added, the stream restarted with its options.
    check_evolve_types({"tags": "STRING", "new": "ARRAY<STRING>", "CODE": "VARCHAR(3)"},
                       columns, ("dt",), table="default.t")
    with pytest.raises(ConfigError, match=r"--evolve-type tags=ARRAY<STRING>: default.t "
                                          r"already has column tags STRING; --evolve-type "
                                          "types only the column of a new field"):
        check_evolve_types({"tags": "ARRAY<STRING>"}, columns, (), table="default.t")
    with pytest.raises(ConfigError, match="already has column code VARCHAR"):
        check_evolve_types({"code": "STRING"}, columns, (), table="default.t")
    with pytest.raises(ConfigError, match="dt is the partition column of default.t"):
        check_evolve_types({"dt": "INT"}, columns, ("dt",), table="default.t")


def test_evolve_types_are_checked_and_need_evolve() -> None:
    assert SinkOptions(on_new_field="evolve", evolve_types=("t=array<string>",
                                                            "p=decimal(10,2)")
                       ).evolve_type_map == {"t": "ARRAY<STRING>", "p": "DECIMAL(10,2)"}
    with pytest.raises(ConfigError, match="--evolve-type applies to --on-new-field evolve"):
        SinkOptions(evolve_types=("t=STRING",))
    with pytest.raises(ConfigError, match="'t=NOPE': 'NOPE' is not a Hive type"):
        SinkOptions(on_new_field="evolve", evolve_types=("t=NOPE",))
    with pytest.raises(ConfigError, match="is not FIELD=TYPE"):
        SinkOptions(on_new_field="evolve", evolve_types=("t",))


# ---------------------------------------------------------------- the tasks (no Spark)

def kafka_rows(records: list[Any]) -> pa.RecordBatch:
    n = len(records)
    return pa.record_batch({
        "key": pa.nulls(n, pa.binary()), "value": values(*records),
        "topic": pa.array(["t"] * n), "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(10, 10 + n), pa.int64())})


def run_task(tmp_path: Path, policy: str, records: list[Any], *, two_stage: bool
             ) -> list[Any]:
    plan = TaskPlan(
        target=DeltaTarget(str(tmp_path / "t"), 1, "delta_0000001_0000001_0000"),
        dead_letter=DeltaTarget(str(tmp_path / "dl"), 1, "delta_0000001_0000001_0000"),
        row_schema=SCHEMA, parse_schema=SCHEMA, partition_column=None, partition_from="none",
        bucket_columns=(), bucket_count=0, append=False, close_files=True,
        options=SinkOptions(on_new_field=policy))  # type: ignore[arg-type]
    batch = kafka_rows(records)
    if two_stage:
        parse_plan = replace(plan, parsed_arrow_schema=pa.schema([*META_FIELDS, *SCHEMA]))
        parsed = list(parse_task(parse_plan, iter([batch])))
        return from_arrow(list(write_task(replace(plan, input="parsed"), iter(parsed)))[0])
    return from_arrow(list(write_task(plan, iter([batch])))[0])


def written(results: list[Any], target: str) -> list[dict[str, Any]]:
    return [e["row"] for r in results if isinstance(r, FileWritten) and r.target == target
            for e in read_bucket_file(r.staging).to_pylist()]


RECORDS = [{"id": 1, "value": "a"}, {"id": 2, "value": "b", "color": "red"},
           {"id": 3, "color": "blue", "size": 4}, {"id": 4, "value": "d"}]


@pytest.mark.parametrize("two_stage", [False, True])
@pytest.mark.parametrize("policy", ["ignore", "fail", "evolve"])
def test_tasks_keep_the_records_and_report_the_new_fields(
        tmp_path: Path, policy: str, two_stage: bool) -> None:
    results = run_task(tmp_path, policy, RECORDS, two_stage=two_stage)
    assert [r["id"] for r in written(results, "table")] == [1, 2, 3, 4]
    assert written(results, "dead_letter") == []
    assert [r for r in results if isinstance(r, NewFields)] == [NewFields({
        "color": FieldSeen({"string": 2}, 2, "t", 0, 11),
        "size": FieldSeen({"integer": 1}, 1, "t", 0, 12)}, 2)]


@pytest.mark.parametrize("two_stage", [False, True])
def test_dead_letter_keeps_the_whole_record_with_the_field_named(
        tmp_path: Path, two_stage: bool) -> None:
    results = run_task(tmp_path, "dead-letter", RECORDS, two_stage=two_stage)
    assert [r["id"] for r in written(results, "table")] == [1, 4]
    dead = {r["offset"]: r for r in written(results, "dead_letter")}
    assert sorted(dead) == [11, 12]
    assert json.loads(dead[12]["value"]) == RECORDS[2]
    assert dead[12]["error"].startswith("new field 'color' (a JSON string), 'size' (a JSON "
                                        "integer) is not a column of the table")
    assert not [r for r in results if isinstance(r, NewFields)]


def test_the_batch_line_says_what_was_dropped_and_added() -> None:
    report = BatchReport(3, 7, rows=10, new_fields=("color", "size"), new_field_records=2)
    assert report.line().endswith("; 2 records held fields the table lacks (color, size), "
                                  "dropped (--on-new-field ignore)")
    assert "; added columns color STRING" in replace(
        report, new_field_records=0, added_columns=("color STRING",)).line()


# ---------------------------------------------------------------- the stream (broker, Spark)

def stream(spark: Any, servers: str, topic: str, warehouse: Path, **options: Any
           ) -> StreamSummary:
    summary = run_stream(spark, bootstrap_servers=servers, topic=topic,
                         table=str(warehouse / "events"), schema_ddl="id BIGINT, value STRING",
                         checkpoint=str(warehouse / "checkpoint"), available_now=True,
                         kafka_timeout_s=10, **options)
    assert isinstance(summary, StreamSummary)
    return summary


def table_of(location: str) -> tuple[pa.Schema, list[dict[str, Any]]]:
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(location)
        schema = store.get_table(location).row_schema
    rows = read_table(location, snapshot).to_pylist()
    return schema, sorted(rows, key=lambda r: r["id"])


def dead_letters(location: str) -> list[dict[str, Any]]:
    dl = location + "__dead_letter"
    with Metastore.open(default_metastore_url(location)) as store:
        snapshot = store.snapshot(dl)
    return sorted(read_table(dl, snapshot).to_pylist(), key=lambda r: r["offset"])


EVOLVING = [
    {"id": 0, "value": "old"},
    {"id": 1, "value": "a", "color": "red", "n": 5, "meta": {"k": [1, 2]}, "tags": ["x", "y"],
     "score": 1, "empty": None},
    {"id": 2, "color": "blue", "n": 6, "score": 2.5},
    {"id": 3, "n": "seven"},  # conflicts with the BIGINT column n is added as
    {"id": 4, "Color": "clash"},  # differs from color only in case
]


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_evolve_adds_nullable_columns_before_writing_and_restarts_with_the_old_schema(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    produce_events(kafka_broker, topic, events=EVOLVING, partitions=1)
    summary = stream(spark, kafka_broker, topic, warehouse, on_new_field="evolve",
                     evolve_types=("tags=ARRAY<STRING>",))
    location = str(warehouse / "events")
    schema, rows = table_of(location)
    assert [(f.name, str(f.type)) for f in schema] == [
        ("id", "int64"), ("value", "string"), ("color", "string"), ("meta", "string"),
        ("n", "int64"), ("score", "double"), ("tags", "list<item: string>")]
    assert rows == [
        {"id": 0, "value": "old", "color": None, "meta": None, "n": None, "score": None,
         "tags": None},
        {"id": 1, "value": "a", "color": "red", "meta": '{"k":[1,2]}', "n": 5, "score": 1.0,
         "tags": ["x", "y"]},
        {"id": 2, "value": None, "color": "blue", "meta": None, "n": 6, "score": 2.5,
         "tags": None}]
    assert summary.rows == 3 and summary.dead_letters == 2
    assert summary.reports[-1].added_columns == (
        "color STRING", "meta STRING", "n BIGINT", "score DOUBLE", "tags ARRAY<STRING>")
    dead = {r["offset"]: r["error"] for r in dead_letters(location)}
    assert dead == {
        3: "field 'n': the JSON string \"seven\" does not fit column n BIGINT (a type conflict)",
        4: "new field 'Color' differs from column 'color' only in case, and Hive column names "
           "are case-insensitive, so it cannot be added (rename the field in the producer)"}

    # A restart with the same --schema finds the added columns and writes new fields' values.
    produce_events(kafka_broker, topic, events=[{"id": 5, "color": "green", "n": 8}],
                   partitions=1)
    again = stream(spark, kafka_broker, topic, warehouse, on_new_field="evolve")
    assert again.rows == 1 and again.reports[-1].added_columns == ()
    assert table_of(location)[1][-1] == {"id": 5, "value": None, "color": "green", "meta": None,
                                         "n": 8, "score": None, "tags": None}


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_fail_stops_before_committing_and_names_field_and_offset(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    produce_events(kafka_broker, topic, events=[{"id": 0}, {"id": 1}, {"id": 2, "color": "red"}],
                   partitions=1)
    with pytest.raises(SchemaMismatchError) as info:
        stream(spark, kafka_broker, topic, warehouse, on_new_field="fail")
    message = str(info.value)
    assert (f"Kafka record {topic}-0 offset 2 has field 'color' (a JSON string, in 1 records), "
            "which the table has no column for") in message
    assert "nothing of the micro-batch was committed (--on-new-field fail)" in message
    assert '--add-columns "color STRING"' in message
    location = str(warehouse / "events")
    with Metastore.open(default_metastore_url(location)) as store:
        assert "committed" not in set(store.write_id_states(location).values())


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support:FutureWarning")
def test_dead_letter_is_the_default_and_ignore_counts(
        spark: Any, kafka_broker: str, topic: str, warehouse: Path) -> None:
    assert StreamOptions(bootstrap_servers="h:1", topic="t", table="/t", schema_ddl="id INT",
                         checkpoint="/c").sink.on_new_field == "dead-letter"
    produce_events(kafka_broker, topic, events=[{"id": 0}, {"id": 1, "color": "red"}],
                   partitions=1)
    summary = stream(spark, kafka_broker, topic, warehouse)
    assert (summary.rows, summary.dead_letters) == (1, 1)
    location = str(warehouse / "events")
    dead = dead_letters(location)
    assert [(r["offset"], json.loads(r["value"])) for r in dead] == [(1, {"id": 1,
                                                                          "color": "red"})]
    assert dead[0]["error"].startswith("new field 'color' (a JSON string) is not a column")

    produce_events(kafka_broker, topic, events=[{"id": 2, "size": 1}, {"id": 3}],
                   partitions=1)
    ignored = stream(spark, kafka_broker, topic, warehouse, on_new_field="ignore")
    assert ignored.rows == 2 and ignored.dead_letters == 0
    assert [(r.new_fields, r.new_field_records) for r in ignored.reports] == [(("size",), 1)]
    assert [r["id"] for r in table_of(location)[1]] == [0, 2, 3]
