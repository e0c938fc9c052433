"""StreamOptions of a stream of several tables (docs/many-tables.md): the routing flags parsed
and checked before anything starts, the single-table stream unchanged, and the options a
many-table stream does not run yet refused up front."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import run_cli

from ingest.cli.stream import command
from ingest.errors import ConfigError
from ingest.records import Routed, Unrouted
from ingest.spark.options import SinkOptions, StreamOptions, add_arguments

BASE = dict(bootstrap_servers="h:1", schema_ddl="id BIGINT", checkpoint="/ck")
MANY = dict(BASE, unrouted_table="/wh/_unrouted")


def test_one_topic_into_one_table_is_as_before() -> None:
    options = StreamOptions(**BASE, topic="events", table="/wh/events")
    assert not options.many_tables and options.routing is None
    assert (options.topic_name, options.table_root) == ("events", "/wh/events")


@pytest.mark.parametrize(("kw", "error"), [
    ({"table": "/wh/t"}, r"--topic \(or --topic-pattern\) is required"),
    ({"topic": "t"}, "--table is required"),
    ({"topic": "no spaces", "table": "/wh/t"}, "'no spaces' is not a Kafka topic name"),
])
def test_a_single_table_stream_needs_its_topic_and_table(kw: dict, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        StreamOptions(**BASE, **kw)


def test_a_template_stream_of_a_topic_list(tmp_path: Path) -> None:
    options = StreamOptions(**MANY, topic="orders,ORCL.SOE.ORDERS",
                            table_template="/wh/{topic}")
    rules = options.routing
    assert options.many_tables and rules is not None
    assert rules.route("ORCL.SOE.ORDERS") == Routed("ORCL.SOE.ORDERS", "file:///wh/orcl_soe_orders")
    assert rules.route("orders") == Routed("orders", "file:///wh/orders")


def test_routes_from_flags_and_a_file_with_a_pattern(tmp_path: Path) -> None:
    routes = tmp_path / "routes.txt"
    routes.write_text("# the shop\nshop.refunds = /wh/refunds\n")
    options = StreamOptions(**MANY, topic_pattern=r"shop\..*", routes=["shop.orders=/wh/orders"],
                            routes_file=str(routes))
    rules = options.routing
    assert rules is not None and rules.routes == {"shop.refunds": "file:///wh/refunds",
                                                  "shop.orders": "file:///wh/orders"}
    assert rules.route("shop.new") == Unrouted(
        "topic 'shop.new' has no --route and there is no --table-template")


def test_route_field_of_debezium_envelopes() -> None:
    options = StreamOptions(**MANY, topic="dbserver1.all", route_field="source.table",
                            table_template="/wh/{field}")
    rules = options.routing
    assert rules is not None
    assert rules.route("dbserver1.all", {"source": {"table": "Customers"}}) == \
        Routed("Customers", "file:///wh/customers")


@pytest.mark.parametrize(("kw", "error"), [
    ({"topic": "a,b", "table_template": "/wh/{topic}", "unrouted_table": None},
     r"several tables \(--table-template is given\) needs --unrouted-table"),
    ({"topic": "a,b", "table": "/wh/t", "table_template": "/wh/{topic}"},
     r"--table applies to a stream of one topic; .* \(--table-template is given\)"),
    ({"topic": "a", "topic_pattern": "a.*", "table_template": "/wh/{topic}"}, "not both"),
    ({"topic_pattern": "a.*"}, "needs --table-template or --route"),
    ({"topic": "a.b,a-b", "table_template": "/wh/{topic}"},
     "topic 'a.b' and topic 'a-b' both route to table 'file:///wh/a_b'"),
    ({"topic": "a,b", "table_template": "/wh/{field}"}, r"has placeholder \{field\}"),
    ({"topic": "a", "route_field": "source..table", "table_template": "/wh/{field}"},
     "is not a field path"),
    ({"topic": "a", "routes": ["a"]}, "'a' is not TOPIC=TABLE|'a' is not KEY=TABLE"),
    ({"topic": "a", "routes": ["b=/wh/b"]}, "topic 'b' is not selected by --topic a"),
    ({"topic": "a", "routes_file": "/nonexistent/routes.txt"},
     "Cannot read --routes /nonexistent/routes.txt"),
    ({"topic": "a", "route_field": "source.table", "table_template": "/wh/{field}",
      "sink": SinkOptions(value_format="avro", avro_schema="x.avsc")},
     "--route-field reads JSON values, not --value-format avro"),
])
def test_bad_many_table_options_are_refused_before_anything_starts(kw: dict, error: str
                                                                   ) -> None:
    with pytest.raises(ConfigError, match=error):
        StreamOptions(**{**MANY, **kw})


@pytest.mark.parametrize(("kw", "given"), [
    ({"sink": SinkOptions(txns_per_delta=4)}, "--txns-per-delta 4"),
    ({"sink": SinkOptions(value_format="avro", avro_schema="x.avsc")},
     r"--value-format avro with --avro-schema \(give --schema-registry\)"),
])
def test_options_a_many_table_stream_does_not_run_yet_are_refused_up_front(kw: dict, given: str
                                                                           ) -> None:
    with pytest.raises(ConfigError, match=r"A stream of several tables \(--table-template is "
                                          rf"given\) cannot use {given} yet"):
        StreamOptions(**{**MANY, "topic": "a,b", "table_template": "/wh/{topic}", **kw})


def test_on_new_field_evolve_runs_for_several_tables() -> None:
    options = StreamOptions(**{**MANY, "topic": "a,b", "table_template": "/wh/{topic}",
                               "sink": SinkOptions(on_new_field="evolve",
                                                   evolve_types=("tags=ARRAY<STRING>",))})
    assert options.many_tables and options.sink.evolve_type_map == {"tags": "ARRAY<STRING>"}


def test_keyed_modes_take_a_key_per_route_or_a_default() -> None:
    options = StreamOptions(**{**MANY, "topic": "a,b,c", "table_template": "/wh/{topic}",
                               "routes": ["a=/wh/x"], "sink": SinkOptions(
                                   mode="cdc", key="id", route_keys=("a=k1, k2", "b=name"))})
    assert options.sink.key_of("a") == ("k1", "k2")
    assert options.sink.key_of("b") == ("name",)
    assert options.sink.key_of("c") == ("id",)  # --key: every other routed table's
    # No --key: a template table without --route-key routes nowhere at its first use, but an
    # explicit route without one is refused up front.
    StreamOptions(**{**MANY, "topic": "a,b", "table_template": "/wh/{topic}",
                     "sink": SinkOptions(mode="upsert", route_keys=("a=id",))})
    with pytest.raises(ConfigError, match=r"--mode cdc needs the key of every routed table, "
                                          r"but --route b has none"):
        StreamOptions(**{**MANY, "topic": "a,b", "routes": ["a=/wh/a", "b=/wh/b"],
                         "sink": SinkOptions(mode="cdc", route_keys=("a=id",))})


@pytest.mark.parametrize(("sink", "error"), [
    ({"route_keys": ("a=id",)}, "--route-key applies to --mode upsert or cdc"),
    ({"mode": "cdc", "route_keys": ("a",)}, "--route-key 'a' is not ROUTEKEY=COL"),
    ({"mode": "cdc", "route_keys": ("a=",)}, "--route-key 'a=' is not ROUTEKEY=COL"),
    ({"mode": "cdc", "route_keys": ("a=id", "a=x")}, "names routing key 'a' twice"),
    ({"mode": "cdc"}, "--mode cdc needs --key"),
])
def test_bad_route_keys_are_refused(sink: dict, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        StreamOptions(**{**MANY, "topic": "a,b", "table_template": "/wh/{topic}",
                         "sink": SinkOptions(**sink)})


def test_one_table_takes_key_not_route_key() -> None:
    with pytest.raises(ConfigError, match="--route-key applies to a stream of several tables"):
        StreamOptions(**{**BASE, "topic": "a", "table": "/wh/a",
                         "sink": SinkOptions(mode="cdc", route_keys=("a=id",))})


def test_metrics_group_commit_and_maintenance_are_accepted_for_several_tables() -> None:
    options = StreamOptions(**{**MANY, "topic": "a,b", "table_template": "/wh/{topic}",
                               "metrics_port": 9400, "commit_offsets_to_group": "g",
                               "compact": "auto", "clean": "auto"})
    assert options.many_tables and options.metrics_port == 9400
    assert options.commit_offsets_to_group == "g"


def test_the_cli_refuses_them_before_anything_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, [
        "--bootstrap-servers", "h:1", "--topic", "a,b", "--table-template",
        str(tmp_path / "wh/{topic}"), "--unrouted-table", str(tmp_path / "wh/_unrouted"),
        "--schema", "id BIGINT", "--checkpoint", str(tmp_path / "ck"), "--txns-per-delta", "3"])
    assert isinstance(result.exception, ConfigError)
    assert "cannot use --txns-per-delta 3 yet" in str(result.exception)
    assert not list(tmp_path.iterdir())


def test_a_many_table_stream_has_no_one_table_or_topic() -> None:
    options = StreamOptions(**MANY, topic="a,b", table_template="/wh/{topic}")
    with pytest.raises(ConfigError, match="it has no one --table or --topic"):
        options.table_root  # noqa: B018


def test_help_explains_the_routing_flags() -> None:
    text = " ".join(CliRunner().invoke(command, ["--help"]).output.split())
    for words in ["--topic-pattern REGEX", "--table-template PATH", "--route TOPIC=TABLE",
                  "--routes FILE", "--route-field FIELD", "--unrouted-table PATH",
                  "--max-new-tables-per-batch N", "Matched with Python's re module, while "
                  "Kafka's own clients use Java regex",
                  "'.', '-' and any other character outside a-z, 0-9 and _ become _",
                  "source.table of a Debezium envelope", "refused before the stream starts",
                  "--route-schema ROUTEKEY=DDL|@FILE", "a table found keeps its own columns"]:
        assert words in text, words


def test_argparse_takes_repeated_routes() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = vars(parser.parse_args([
        "--bootstrap-servers", "h:1", "--topic", "a,b", "--route", "a=/wh/a", "--route",
        "b=/wh/b", "--unrouted-table", "/wh/_unrouted", "--schema", "id BIGINT",
        "--checkpoint", "/ck"]))
    options = StreamOptions.from_flags(flags)
    assert options.routes == ("a=/wh/a", "b=/wh/b")
    assert options.routing is not None and options.routing.route("b") == Routed("b", "file:///wh/b")


def test_route_locations_are_normalised_so_two_spellings_are_one_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    options = StreamOptions(**MANY, topic="a,b,c", routes=[
        "a=wh/t", f"b={tmp_path}/wh/t/", "c=file://" + str(tmp_path) + "/wh//t"])
    rules = options.routing
    assert rules is not None and set(rules.routes.values()) == {f"file://{tmp_path}/wh/t"}
    assert options.routing is rules  # built once


@pytest.mark.parametrize(("kw", "error"), [
    ({"topic": "a", "routes": ["a=/wh/_unrouted/"]},
     "--route a=file:///wh/_unrouted: the table is the stream's --unrouted-table"),
    ({"topic": "a", "routes": ["a=/wh/b__dead_letter"]},
     "is the dead-letter table of the table at 'file:///wh/b'"),
    ({"topic": "x,x__dead_letter", "table_template": "/wh/{topic}"},
     "topic 'x__dead_letter' routes to table 'file:///wh/x__dead_letter' by --table-template, "
     "which is the dead-letter table"),
    ({"topic": "a", "routes": ["a=nosuchfs://b/t"]}, "unknown URL scheme nosuchfs://"),
    ({"topic": "a,b", "table_template": "nosuchfs://b/{topic}"},
     "unknown URL scheme nosuchfs://"),
    ({"topic": "a,b", "table_template": "s3:///{topic}"}, "the bucket is missing"),
    ({"topic_pattern": r"\p{Alpha}+", "table_template": "/wh/{topic}"},
     r"uses Java's \\p\{...\}"),
])
def test_reserved_tables_bad_urls_and_java_patterns_are_refused_up_front(kw: dict, error: str
                                                                         ) -> None:
    with pytest.raises(ConfigError, match=error):
        StreamOptions(**{**MANY, **kw})


def test_the_single_table_stream_has_no_unrouted_table_and_the_old_flag_is_gone(
        tmp_path: Path) -> None:
    options = StreamOptions(**BASE, topic="events", table="/wh/events")
    assert not options.many_tables and options.unrouted_table is None
    result = CliRunner().invoke(command, [
        "--bootstrap-servers", "h:1", "--topic", "a,b", "--table-template",
        str(tmp_path / "wh/{topic}"), "--dead-letter-table", str(tmp_path / "wh/_unrouted"),
        "--schema", "id BIGINT", "--checkpoint", str(tmp_path / "ck")])
    assert result.exit_code == 2 and "No such option '--dead-letter-table'" in result.output


def test_max_new_tables_per_batch_is_bounded() -> None:
    assert StreamOptions(**MANY, topic="a,b", table_template="/wh/{topic}"
                         ).max_new_tables_per_batch == 100
    with pytest.raises(ConfigError, match="max-new-tables-per-batch"):
        StreamOptions(**MANY, topic="a,b", table_template="/wh/{topic}",
                      max_new_tables_per_batch=0)


def test_two_routes_whose_tables_would_share_a_name_are_refused_at_start(tmp_path: Path
                                                                         ) -> None:
    """`/x/orders` and `/y/orders` would both be created as `orders` (the second create
    failing on every micro-batch): refused, naming both keys; tables that exist under names
    of their own, or one location shared by two routes, are kept."""
    from ingest.spark.many_job import check_route_names, ensure_anchor
    from ingest.table.write import create_table
    from ingest.txn import Metastore

    url = f"sqlite:///{tmp_path}/ms.sqlite"
    anchor = ensure_anchor(str(tmp_path / "_unrouted"), metastore_url=url, storage_options={})
    x, y = str(tmp_path / "x" / "orders"), str(tmp_path / "y" / "orders")
    clash = StreamOptions(**{**MANY, "unrouted_table": str(tmp_path / "_unrouted")},
                          topic="a,b,c", routes=[f"a={x}", f"b={y}", f"c={x}/"]).routing
    assert clash is not None
    with Metastore.open(url) as store:
        with pytest.raises(ConfigError, match=f"--route a=file://{x} and --route b=file://{y} "
                                              "name two tables of one name, default.orders"):
            check_route_names(store, anchor, clash)
        create_table(x, "id BIGINT", name="x.orders", metastore=store)
        create_table(y, "id BIGINT", name="y.orders", metastore=store)
        check_route_names(store, anchor, clash)  # found under their own names


def test_route_schemas_from_flags_and_files_and_schema_optional(tmp_path: Path) -> None:
    """--route-schema KEY=DDL or KEY=@FILE, spelled back in one form; with several tables
    --schema may be left out (found tables keep their columns)."""
    from ingest.spark.many_job import route_layouts

    ddl = tmp_path / "payments.ddl"
    ddl.write_text("id bigint,\n  amount DOUBLE\n")
    options = StreamOptions(**{**MANY, "schema_ddl": None}, topic="orders,payments",
                            table_template="/wh/{topic}",
                            route_schemas=["orders=id BIGINT, note STRING", f"payments=@{ddl}"])
    assert options.schema_ddl is None
    assert options.route_schema_map == {"orders": "id BIGINT, note STRING",
                                        "payments": "id BIGINT, amount DOUBLE"}
    layouts = route_layouts(options)
    assert sorted(layouts) == ["file:///wh/orders", "file:///wh/payments"]
    flag, layout = layouts["file:///wh/payments"]
    assert flag == "--route-schema payments"
    assert layout.row_schema.names == ["id", "amount"]


@pytest.mark.parametrize(("kw", "error"), [
    ({"route_schemas": ["orders"]}, r"--route-schema 'orders' is not ROUTEKEY=DDL"),
    ({"route_schemas": ["orders="]}, r"--route-schema 'orders=' is not ROUTEKEY=DDL"),
    ({"route_schemas": ["orders=id BIGNUM"]}, r"--route-schema orders: .*BIGNUM"),
    ({"route_schemas": ["orders=id BIGINT", "orders=id INT"]},
     "names routing key 'orders' twice"),
    ({"route_schemas": ["refunds=id BIGINT"]},
     r"--route-schema refunds: routing key 'refunds' routes to no table: topic 'refunds' is "
     "not selected"),
    ({"route_schemas": ["orders=@/no/such/file.ddl"]},
     "Cannot read --route-schema orders /no/such/file.ddl"),
    ({"route_schemas": ["orders=id BIGINT", "payments=id STRING"],
      "routes": ["orders=/wh/both", "payments=/wh/both"], "table_template": None},
     r"--route-schema orders and --route-schema payments give table 'file:///wh/both' "
     r"different columns \(id BIGINT\) and \(id STRING\)"),
])
def test_bad_route_schemas_are_refused_up_front(kw: dict, error: str) -> None:
    base = {**MANY, "topic": "orders,payments", "table_template": "/wh/{topic}"}
    with pytest.raises(ConfigError, match=error):
        StreamOptions(**{**base, **kw})


def test_a_route_schema_of_a_key_without_a_route_is_refused() -> None:
    with pytest.raises(ConfigError, match="routing key 'y' routes to no table: --route-field "
                                          "value 'y' has no --route and there is no "
                                          "--table-template"):
        StreamOptions(**MANY, topic="all", route_field="kind", routes=["x=/wh/x"],
                      route_schemas=["y=id BIGINT"])


def test_a_route_schema_clashing_with_partition_by_is_refused_naming_it() -> None:
    from ingest.spark.many_job import check_many_options

    options = StreamOptions(**MANY, topic="orders,payments", table_template="/wh/{topic}",
                            partition_by="to_date(ts)",
                            route_schemas=["orders=id BIGINT, dt STRING"])
    with pytest.raises(ConfigError, match=r"--route-schema orders: Cannot partition by "
                                          r"'to_date\(ts\)'"):
        check_many_options(options)


def test_an_evolve_type_is_checked_against_each_route_schema_up_front() -> None:
    """Without --schema too: a --route-schema's column that an --evolve-type contradicts is
    refused before anything starts, as --schema's is."""
    from ingest.spark.many_job import check_many_options

    options = StreamOptions(**{**MANY, "schema_ddl": None}, topic="orders,payments",
                            table_template="/wh/{topic}",
                            sink=SinkOptions(on_new_field="evolve", evolve_types=("x=STRING",)),
                            route_schemas=["orders=id BIGINT, x BIGINT"])
    with pytest.raises(ConfigError, match=r"--evolve-type x=STRING: --route-schema orders "
                                          r"already has column x"):
        check_many_options(options)


def test_a_bad_partition_by_is_refused_up_front_without_any_columns() -> None:
    from ingest.spark.many_job import check_many_options

    options = StreamOptions(**{**MANY, "schema_ddl": None}, topic="orders,payments",
                            table_template="/wh/{topic}", partition_by="to_date(ts")
    with pytest.raises(ConfigError, match="to_date"):
        check_many_options(options)


def test_one_table_takes_schema_not_route_schema() -> None:
    with pytest.raises(ConfigError, match="--route-schema applies to a stream of several"):
        StreamOptions(**BASE, topic="a", table="/wh/a", route_schemas=["a=id BIGINT"])
    with pytest.raises(ConfigError, match="--schema is required"):
        StreamOptions(**{**BASE, "schema_ddl": None}, topic="a", table="/wh/a")


def test_the_cli_exits_2_naming_a_bad_route_schema(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli([
        "stream", "--bootstrap-servers", "h:1", "--topic", "a,b", "--table-template",
        str(tmp_path / "wh/{topic}"), "--unrouted-table", str(tmp_path / "wh/_unrouted"),
        "--route-schema", "a=id BIGNUM", "--checkpoint", str(tmp_path / "ck")], capsys)
    assert code == 2, err
    assert "--route-schema a:" in err
    assert not list(tmp_path.iterdir())
