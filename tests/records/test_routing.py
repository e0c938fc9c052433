"""The routing rules of a many-topic stream (ingest/records/routing.py): topic selection, the
table name rules, templates, explicit routes and routes files, routing by a record field,
collisions refused up front and claimed per micro-batch, and every bad input's error."""

from __future__ import annotations

import pytest

from ingest.errors import ConfigError
from ingest.records.routing import (
    MAX_TABLE_NAME,
    Routed,
    RoutingRules,
    TableTemplate,
    TopicSelection,
    Unrouted,
    claim_tables,
    merge_routes,
    parse_field_path,
    parse_routes,
    parse_routes_file,
    table_name_for,
)


def _rules(topic: str | None = "a", pattern: str | None = None, *, routes: dict | None = None,
           template: str | None = None, field: str | None = None) -> RoutingRules:
    path = parse_field_path(field) if field else None
    return RoutingRules(
        TopicSelection.of(topic, pattern), routes or {},
        TableTemplate.parse(template, placeholder="field" if field else "topic")
        if template else None, path)


# -- the name rules ------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "name"), [
    ("orders", "orders"),
    ("ORCL.SOE.ORDERS", "orcl_soe_orders"),        # kafka-connect-hdfs#155's case
    ("dbserver1.inventory.customers", "dbserver1_inventory_customers"),
    ("click-stream", "click_stream"),
    ("2024-events", "t_2024_events"),              # a digit first: SQL would need quotes
    ("_schemas", "t__schemas"),                    # `_` first: a hidden directory otherwise
    ("Grüße café", "gr__e_caf_"),                  # a field value: anything else to `_`
    ("a_b", "a_b"),
])
def test_name_rules(key: str, name: str) -> None:
    assert table_name_for(key) == name


def test_a_long_key_is_cut_and_keeps_a_hash_so_long_keys_stay_distinct() -> None:
    a, b = "x" * 200 + "a", "x" * 200 + "b"
    name_a, name_b = table_name_for(a), table_name_for(b)
    assert len(name_a) == len(name_b) == MAX_TABLE_NAME
    assert name_a != name_b and name_a.startswith("x" * 100)
    assert table_name_for(a) == name_a  # the same key, the same name, on every executor


def test_an_empty_key_has_no_name() -> None:
    with pytest.raises(ConfigError, match="empty routing key"):
        table_name_for("")


# -- topic selection -----------------------------------------------------------------------

def test_topic_list_and_pattern() -> None:
    listed = TopicSelection.of("orders, payments", None)
    assert listed.topics == ("orders", "payments")
    assert listed.matches("orders") and not listed.matches("refunds")
    pattern = TopicSelection.of(None, r"shop\..*")
    assert pattern.matches("shop.orders") and not pattern.matches("xshop.orders")
    assert not pattern.matches("shop")                 # the whole name must match
    anything = TopicSelection.of(None, ".+")
    assert not anything.matches("__consumer_offsets")  # Kafka's own topics never match
    assert TopicSelection(pattern="a.*").matches("ab")  # built directly, too


@pytest.mark.parametrize(("topic", "pattern", "error"), [
    ("a", "a.*", "not both"),
    (None, None, "got neither"),
    ("a,,b", None, "'' is not a Kafka topic name"),
    (" , ", None, "at least one topic"),
    ("a,b,a", None, "names topic 'a' twice"),
    ("orders/eu", None, "'orders/eu' is not a Kafka topic name"),
    ("..", None, "'..' is not a Kafka topic name"),
    ("x" * 250, None, "is not a Kafka topic name"),
    (None, "shop.(", "is not a regular expression"),
    (None, ".*", "matches the empty name"),
])
def test_bad_selections(topic: str | None, pattern: str | None, error: str) -> None:
    with pytest.raises(ConfigError, match=error.replace("(", r"\(").replace(".", r"\.")
                       .replace("*", r"\*")):
        TopicSelection.of(topic, pattern)


# -- templates -----------------------------------------------------------------------------

def test_template_places_the_table_name() -> None:
    t = TableTemplate.parse("s3://bucket/wh/raw_{topic}", placeholder="topic")
    assert t.location("ORCL.SOE.ORDERS") == "s3://bucket/wh/raw_orcl_soe_orders"


@pytest.mark.parametrize(("text", "error"), [
    ("wh/orders", "exactly once, got it 0 times"),
    ("wh/{topic}_{topic}", "exactly once, got it 2 times"),
    ("wh/{table}", "has placeholder {table}; it takes {topic} only"),
    ("wh/{topic}/data", "must be in the last path name"),
    ("wh/{topic}}", "unpaired brace"),
])
def test_bad_templates(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error.replace("{", r"\{").replace("}", r"\}")):
        TableTemplate.parse(text, placeholder="topic")


# -- routes and routes files ---------------------------------------------------------------

def test_routes_from_flags_and_a_file() -> None:
    flags = parse_routes(["orders=wh/orders", " payments = wh/pay "])
    assert flags == {"orders": "wh/orders", "payments": "wh/pay"}
    text = "# routes of the shop\n\nrefunds=wh/refunds\n  returns = wh/refunds  \n"
    from_file = parse_routes_file(text, path="routes.txt")
    assert from_file == {"refunds": "wh/refunds", "returns": "wh/refunds"}
    assert merge_routes(flags, from_file, path="routes.txt") == {**flags, **from_file}


@pytest.mark.parametrize(("items", "error"), [
    (["orders"], "'orders' is not KEY=TABLE"),
    (["=wh/x"], "is not KEY=TABLE"),
    (["orders="], "is not KEY=TABLE"),
    (["orders=wh/{topic}"], "not a template"),
    (["a=wh/x", "a=wh/y"], "routes 'a' twice: to 'wh/x' and 'wh/y'"),
])
def test_bad_routes(items: list[str], error: str) -> None:
    with pytest.raises(ConfigError, match=error.replace("{", r"\{").replace("}", r"\}")):
        parse_routes(items)


def test_bad_routes_file_lines_are_named() -> None:
    with pytest.raises(ConfigError, match="routes file r.txt line 3: 'oops' is not KEY=TABLE"):
        parse_routes_file("a=wh/a\n# fine\noops\n", path="r.txt")
    with pytest.raises(ConfigError, match="r.txt line 2: routes 'a' twice"):
        parse_routes_file("a=wh/a\na=wh/b\n", path="r.txt")
    with pytest.raises(ConfigError, match="--route routes 'a' to 'wh/x' and routes file r.txt "
                                          "to 'wh/y'"):
        merge_routes({"a": "wh/x"}, {"a": "wh/y"}, path="r.txt")


# -- routing by topic ----------------------------------------------------------------------

def test_explicit_routes_win_over_the_template() -> None:
    rules = _rules("orders,ORCL.SOE.ORDERS", routes={"orders": "wh/all_orders"},
                   template="wh/{topic}")
    assert rules.route("orders") == Routed("orders", "wh/all_orders")
    assert rules.route("ORCL.SOE.ORDERS") == Routed("ORCL.SOE.ORDERS", "wh/orcl_soe_orders")


def test_several_topics_may_be_routed_to_one_table_explicitly() -> None:
    rules = _rules("orders-eu,orders-us", routes={"orders-eu": "wh/orders",
                                                  "orders-us": "wh/orders"})
    assert {rules.route(t).location for t in ("orders-eu", "orders-us")} == {"wh/orders"}


def test_a_record_of_a_topic_not_selected_routes_nowhere() -> None:
    rules = _rules(None, r"shop\..*", template="wh/{topic}")
    assert rules.route("shop.orders") == Routed("shop.orders", "wh/shop_orders")
    assert rules.route("other") == Unrouted("topic 'other' is not selected by --topic-pattern "
                                            "'shop\\\\..*'")


def test_a_new_pattern_topic_without_route_or_template_routes_nowhere() -> None:
    rules = _rules(None, r"shop\..*", routes={"shop.orders": "wh/orders"})
    assert isinstance(rules.route("shop.orders"), Routed)
    assert rules.route("shop.refunds") == Unrouted(
        "topic 'shop.refunds' has no --route and there is no --table-template")


@pytest.mark.parametrize(("kw", "error"), [
    ({"topic": "a,b"}, "needs --table-template or --route"),
    ({"topic": "a,b", "routes": {"a": "wh/a"}}, r"Topics \['b'\] have no --route"),
    ({"topic": "a", "routes": {"b": "wh/b"}}, "topic 'b' is not selected by --topic a"),
    ({"topic": None, "pattern": "shop.*", "routes": {"other": "wh/o"}},
     "'other' is not selected by --topic-pattern"),
    ({"topic": "a", "routes": {"bad/topic": "wh/b"}}, "--route 'bad/topic' is not a Kafka topic"),
    ({"topic": "a.b,a_b", "template": "wh/{topic}"},
     "topic 'a.b' and topic 'a_b' both route to table 'wh/a_b'"),
    ({"topic": "Orders,orders", "template": "wh/{topic}"},
     "topic 'Orders' and topic 'orders' both route to table 'wh/orders'"),
    ({"topic": "a_b,x", "routes": {"x": "wh/a_b/"}, "template": "wh/{topic}"},
     "topic 'x' and topic 'a_b' both route to table 'wh/a_b'"),
])
def test_bad_rules_are_refused_up_front(kw: dict, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        _rules(**kw)


def test_a_template_of_the_other_placeholder_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"takes \{field\} with --route-field"):
        RoutingRules(TopicSelection.of("a", None), {},
                     TableTemplate.parse("wh/{topic}", placeholder="topic"), ("source", "table"))
    with pytest.raises(ConfigError, match=r"takes \{topic\} without --route-field"):
        RoutingRules(TopicSelection.of("a", None), {},
                     TableTemplate.parse("wh/{field}", placeholder="field"))


# -- routing by a record field -------------------------------------------------------------

def test_route_field_reads_a_debezium_envelope() -> None:
    rules = _rules("dbserver1.all", field="source.table", template="wh/inv_{field}",
                   routes={"customers": "wh/people"})
    envelope = {"op": "c", "after": {"id": 1}, "source": {"db": "inventory", "table": "orders"}}
    assert rules.route("dbserver1.all", envelope) == Routed("orders", "wh/inv_orders")
    envelope["source"]["table"] = "customers"  # type: ignore[index]
    assert rules.route("dbserver1.all", envelope) == Routed("customers", "wh/people")


@pytest.mark.parametrize(("value", "reason"), [
    ("not an object", "--route-field source.table: the value is not a JSON object"),
    ({"op": "c"}, "the value has no field source"),
    ({"source": {"db": "x"}}, "the value has no field source.table"),
    ({"source": "x"}, "--route-field source.table: source is not a JSON object"),
    ({"source": {"table": None}}, "--route-field source.table is null"),
    ({"source": {"table": 7}}, "is a JSON number, not a string"),
    ({"source": {"table": True}}, "is a JSON boolean, not a string"),
    ({"source": {"table": ["a"]}}, "is a JSON array, not a string"),
    ({"source": {"table": {}}}, "is a JSON object, not a string"),
    ({"source": {"table": ""}}, "is an empty string"),
])
def test_a_record_whose_route_field_is_unusable_routes_nowhere(value: object, reason: str
                                                               ) -> None:
    rules = _rules("t", field="source.table", template="wh/{field}")
    found = rules.route("t", value)
    assert isinstance(found, Unrouted) and reason in found.reason


def test_route_field_without_template_routes_only_known_values() -> None:
    rules = _rules("t", field="source.table", routes={"orders": "wh/orders"})
    assert rules.route("t", {"source": {"table": "orders"}}) == Routed("orders", "wh/orders")
    assert rules.route("t", {"source": {"table": "other"}}) == Unrouted(
        "--route-field value 'other' has no --route and there is no --table-template")


@pytest.mark.parametrize("text", ["", " ", "source.", ".table", "a..b", "a. b"])
def test_bad_field_paths(text: str) -> None:
    with pytest.raises(ConfigError, match="is not a field path"):
        parse_field_path(text)


# -- keys seen while the stream runs, claimed on the driver --------------------------------

def test_claims_keep_the_holder_and_refuse_newcomers_that_meet() -> None:
    rules = _rules(None, ".+", template="wh/{topic}", routes={"special": "wh/special"})
    routed, refused = claim_tables(rules, ["a.b", "a_b", "c", "special"],
                                   held={"wh/a_b": "a.b"})
    assert routed == {"a.b": "wh/a_b", "c": "wh/c", "special": "wh/special"}
    assert list(refused) == ["a_b"]
    assert "topic 'a_b' routes to table 'wh/a_b', which topic 'a.b' holds" in \
        refused["a_b"].reason


def test_two_new_keys_meeting_in_one_micro_batch_are_both_refused() -> None:
    rules = _rules(None, ".+", template="wh/{topic}")
    routed, refused = claim_tables(rules, ["x.y", "x-y", "z"], held={})
    assert routed == {"z": "wh/z"}
    assert sorted(refused) == ["x-y", "x.y"]
    assert "which topic 'x.y' routes to as well" in refused["x-y"].reason


def test_a_template_table_an_explicit_route_names_is_refused_for_a_new_key() -> None:
    rules = _rules(None, ".+", template="wh/{topic}", routes={"legacy": "wh/orders"})
    routed, refused = claim_tables(rules, ["orders", "legacy"], held={})
    assert routed == {"legacy": "wh/orders"}
    assert "which topic 'legacy' holds" in refused["orders"].reason


def test_claims_of_unroutable_keys_carry_their_reason() -> None:
    rules = _rules(None, ".+", routes={"a": "wh/a"})
    routed, refused = claim_tables(rules, ["a", "b"], held={})
    assert routed == {"a": "wh/a"}
    assert refused == {"b": Unrouted("topic 'b' has no --route and there is no "
                                     "--table-template")}


# -- reserved tables, names and lengths (a collision never fails a micro-batch for ever) ---

def _anchored(topic: str | None = "a", pattern: str | None = None, **kw: object
              ) -> RoutingRules:
    base = _rules(topic, pattern, **kw)  # type: ignore[arg-type]
    return RoutingRules(base.selection, base.routes, base.template, base.field_path,
                        anchor="/wh/_unrouted")


@pytest.mark.parametrize(("routes", "error"), [
    ({"a": "/wh/_unrouted"}, r"--route a=/wh/_unrouted: the table is the stream's "
                             r"--unrouted-table"),
    ({"a": "/wh/_unrouted/"}, "is the stream's --unrouted-table"),
    ({"a": "/wh/x__dead_letter"}, "is the dead-letter table of the table at '/wh/x'"),
    ({"a": "/other/_unrouted"}, "would have the table name of the stream's --unrouted-table"),
])
def test_a_route_to_a_reserved_table_is_refused_up_front(routes: dict, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        _anchored(routes=routes)


def test_a_route_whose_dead_letter_table_is_the_anchor_is_refused() -> None:
    rules = _rules("a", routes={"a": "/wh/t"})
    with pytest.raises(ConfigError, match="has the stream's --unrouted-table as its dead-letter"):
        RoutingRules(rules.selection, rules.routes, anchor="/wh/t__dead_letter")


def test_a_dead_letter_topic_under_a_template_is_refused_or_routes_nowhere() -> None:
    with pytest.raises(ConfigError, match="topic 'x__dead_letter' routes to table "
                                          "'/wh/x__dead_letter' by --table-template, which is "
                                          "the dead-letter table"):
        _anchored("x,x__dead_letter", template="/wh/{topic}")
    later = _anchored(None, ".+", template="/wh/{topic}")
    assert isinstance(later.route("x"), Routed)
    found = later.route("x__dead_letter")
    assert isinstance(found, Unrouted) and "dead-letter table of the table at '/wh/x'" in \
        found.reason
    routed, refused = claim_tables(later, ["x", "x__dead_letter", "_unrouted"], held={})
    assert routed == {"x": "/wh/x"}
    assert "name of the stream's --unrouted-table" in refused["_unrouted"].reason


def test_a_template_whose_every_table_is_reserved_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"--table-template '/wh/\{topic\}__dead_letter': "
                                          "its table '/wh/a__dead_letter' is the dead-letter"):
        _anchored(None, ".+", template="/wh/{topic}__dead_letter")


def test_a_template_table_meeting_a_route_by_name_elsewhere_is_refused_or_unrouted() -> None:
    # `/legacy/orders` and `/wh/orders` would both be created as table `orders`.
    with pytest.raises(ConfigError, match="topic 'legacy' and topic 'orders' both route to "
                                          "table '/wh/orders' \\(or one of its name, orders"):
        _rules("legacy,orders", routes={"legacy": "/legacy/orders"}, template="/wh/{topic}")
    rules = _rules(None, ".+", routes={"legacy": "/legacy/orders"}, template="/wh/{topic}")
    routed, refused = claim_tables(rules, ["legacy", "orders"], held={})
    assert routed == {"legacy": "/legacy/orders"}
    assert "which topic 'legacy' holds (table name orders" in refused["orders"].reason


def test_a_template_keeps_every_name_within_128_characters() -> None:
    template = TableTemplate.parse("/wh/raw_events_of_{topic}_v2", placeholder="topic")
    long_key = "k" * 300
    location = template.location(long_key)
    name = location.rsplit("/", 1)[-1]
    assert len(name) == MAX_TABLE_NAME and name.startswith("raw_events_of_kkk")
    assert name.endswith("_v2")
    assert template.location("orders") == "/wh/raw_events_of_orders_v2"
    with pytest.raises(ConfigError, match="its fixed part leaves 8 of a table name's 128 "
                                          "characters to the key"):
        TableTemplate.parse("/wh/" + "p" * 120 + "{topic}", placeholder="topic")


@pytest.mark.parametrize(("pattern", "error"), [
    (r"\p{Alpha}+", r"uses Java's \\p\{...\} \(a Unicode or POSIX class\) at position 0"),
    (r"shop\Q.\E.*", r"uses Java's \\Q...\\E \(quoting\) at position 4"),
    (r"[a-z&&[^e]]+", "has '&&' inside a character class at position 4: Java reads an "
                      "intersection"),
    (r"[a[bc]]+", "has a '\\[' inside a character class at position 2: Java reads a nested"),
    (r"(?<name>a).*", "is not a regular expression Python's re and Java's regex read alike"),
])
def test_patterns_java_reads_otherwise_are_refused(pattern: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        TopicSelection.of(None, pattern)


@pytest.mark.parametrize("pattern", [r"shop\..*", r"[^]a]x.*", r"a*+b.*", r"(?>ab).*",
                                     r"[\[a].*", r"(?i)Shop.*"])
def test_patterns_both_read_alike_are_kept(pattern: str) -> None:
    assert TopicSelection.of(None, pattern).pattern == pattern
