"""Routing rules of a many-topic stream: which topics it reads and which table a record goes to.

Pure functions of their inputs (no I/O, no clients), so every Spark task routes a record
alike and the driver can check the rules before anything starts (docs/many-tables.md):
- the topic selection: `--topic a,b,c` or `--topic-pattern REGEX` (`TopicSelection`);
- the routing key: the record's topic, or with `--route-field a.b` the string at that path of
  its decoded value (`RoutingRules.key_of`);
- the key's table: an explicit `--route KEY=TABLE` (or a line of a routes file), else
  `--table-template`, whose placeholder is replaced by the key made a table name by the name
  rules (`table_name_for`);
- which key holds a table when keys meet: refused up front among keys known at start
  (`RoutingRules.check_keys`), decided per micro-batch on the driver for keys seen later
  (`claim_tables`).
A record that routes nowhere gets an `Unrouted` with the reason, for the dead-letter table.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ingest.errors import ConfigError

MAX_TABLE_NAME = 128
"""Longest table name the rules make: Hive 2's metastore column holds 128 characters."""
_HASH_DIGITS = 8
_NAME_CHARS = frozenset(string.ascii_lowercase + string.digits + "_")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
INTERNAL_TOPIC_PREFIX = "__"
"""Kafka's own topics (`__consumer_offsets`, `__transaction_state`): never selected by a
pattern, as Kafka's consumers exclude internal topics from pattern subscriptions."""


def table_name_for(key: str) -> str:
    """The table name a routing key gives under `--table-template`: lower case; `.`, `-` and
    every other character outside [a-z0-9_] become `_`; `t_` goes in front of a name that
    does not start with a letter; a name over `MAX_TABLE_NAME` characters is cut and ends
    with `_` and 8 hex digits of a hash of the key, so long keys stay distinct.

    e.g. "ORCL.SOE.ORDERS" -> "orcl_soe_orders", "2024-events" -> "t_2024_events".

    Raises:
        ConfigError: the key is empty.
    """
    if not key:
        raise ConfigError("Cannot make a table name of an empty routing key")
    name = "".join(c if c in _NAME_CHARS else "_" for c in key.lower())
    if name[0] not in string.ascii_lowercase:
        name = "t_" + name
    if len(name) > MAX_TABLE_NAME:
        digest = hashlib.sha256(key.encode()).hexdigest()[:_HASH_DIGITS]
        name = f"{name[:MAX_TABLE_NAME - _HASH_DIGITS - 1]}_{digest}"
    return name


def check_topic_name(topic: str, *, flag: str = "--topic") -> str:
    """A Kafka topic name as given, checked.

    Raises:
        ConfigError: not 1-249 of Kafka's topic characters, or "." or "..".
    """
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise ConfigError(
            f"{flag} {topic!r} is not a Kafka topic name",
            hint="a topic name is 1-249 characters of letters, digits, '.', '_' and '-'")
    return topic


@dataclass(frozen=True)
class TopicSelection:
    """The topics a stream reads: a list, or a pattern matched against whole topic names.

    Attributes:
        topics: the named topics (empty with a pattern).
        pattern: the regular expression of `--topic-pattern`, or None.
    """

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    _compiled: re.Pattern[str] | None = field(default=None, init=False, repr=False,
                                              compare=False)

    def __post_init__(self) -> None:
        if self.pattern is not None:
            object.__setattr__(self, "_compiled", re.compile(self.pattern))

    @classmethod
    def of(cls, topic: str | None, pattern: str | None) -> TopicSelection:
        """From `--topic a,b,c` or `--topic-pattern REGEX` (exactly one of them).

        Raises:
            ConfigError: both or neither given, a name that is not a topic name or is given
                twice, or a pattern that does not compile or matches the empty name.
        """
        if (topic is None) == (pattern is None):
            raise ConfigError("Give one of --topic (names, comma-separated) and --topic-pattern "
                              f"(a regular expression), {'not both' if topic else 'got neither'}",
                              hint="e.g. --topic orders,payments or --topic-pattern 'shop\\..*'")
        if pattern is not None:
            try:
                compiled = re.compile(pattern)
            except re.error as e:
                raise ConfigError(f"--topic-pattern {pattern!r} is not a regular expression: "
                                  f"{e}") from None
            if compiled.fullmatch(""):
                raise ConfigError(f"--topic-pattern {pattern!r} matches the empty name, so it "
                                  "would select every topic", hint="e.g. 'shop\\..*'")
            return cls((), pattern)
        assert topic is not None
        names = [t.strip() for t in topic.split(",")]
        if not any(names):
            raise ConfigError("--topic needs at least one topic name, got an empty one")
        seen: set[str] = set()
        for name in names:
            check_topic_name(name)
            if name in seen:
                raise ConfigError(f"--topic names topic {name!r} twice")
            seen.add(name)
        return cls(tuple(names))

    def matches(self, topic: str) -> bool:
        """Whether the stream reads `topic` (a pattern never selects Kafka's internal topics)."""
        if self._compiled is None:
            return topic in self.topics
        return (not topic.startswith(INTERNAL_TOPIC_PREFIX)
                and self._compiled.fullmatch(topic) is not None)

    @property
    def described(self) -> str:
        """How an error names the selection."""
        if self.pattern is not None:
            return f"--topic-pattern {self.pattern!r}"
        return f"--topic {','.join(self.topics)}"


@dataclass(frozen=True)
class TableTemplate:
    """`--table-template`: a table location with one placeholder in its last path name,
    `{topic}` (routing by topic) or `{field}` (routing by `--route-field`)."""

    text: str
    placeholder: str

    @classmethod
    def parse(cls, text: str, *, placeholder: str) -> TableTemplate:
        """Check a template for routing keys named by `placeholder` ("topic" or "field").

        Raises:
            ConfigError: no placeholder, another or a second one, an unbalanced brace, or the
                placeholder outside the last path name (every table would then have the
                same directory name, so the same table name).
        """
        flag = f"--table-template {text!r}"
        found = _PLACEHOLDER.findall(text)
        other = sorted({p for p in found if p != placeholder})
        if other:
            raise ConfigError(f"{flag} has placeholder {{{other[0]}}}; it takes "
                              f"{{{placeholder}}} only",
                              hint=f"e.g. --table-template 'wh/{{{placeholder}}}'")
        if len(found) != 1:
            raise ConfigError(f"{flag} must hold {{{placeholder}}} exactly once, got it "
                              f"{len(found)} times", hint=f"e.g. --table-template "
                                                          f"'wh/{{{placeholder}}}'")
        if _PLACEHOLDER.sub("", text).count("{") or _PLACEHOLDER.sub("", text).count("}"):
            raise ConfigError(f"{flag} has an unpaired brace")
        last = text.rstrip("/").rsplit("/", 1)[-1]
        if "{" not in last:
            raise ConfigError(f"{flag}: {{{placeholder}}} must be in the last path name, "
                              "which names the table",
                              hint=f"e.g. --table-template 'wh/{{{placeholder}}}'")
        return cls(text, placeholder)

    def location(self, key: str) -> str:
        """The location of the table of routing key `key` (`table_name_for` in place)."""
        return self.text.replace("{" + self.placeholder + "}", table_name_for(key))


@dataclass(frozen=True)
class Routed:
    """A record's table: its routing key and the table's location."""

    key: str
    location: str


@dataclass(frozen=True)
class Unrouted:
    """A record that goes to no table, with the reason its dead letter carries."""

    reason: str


def parse_routes(items: Iterable[str], *, source: str = "--route") -> dict[str, str]:
    """`KEY=TABLE` items as {key: table location}.

    Args:
        source: how errors name where the items came from ("--route", "routes file F line").

    Raises:
        ConfigError: an item is not KEY=TABLE (both non-empty), a TABLE holds a placeholder,
            or a key is routed twice.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, table = item.partition("=")
        key, table = key.strip(), table.strip()
        if not sep or not key or not table:
            raise ConfigError(f"{source} {item!r} is not KEY=TABLE",
                              hint="e.g. --route orders=wh/orders")
        if "{" in table or "}" in table:
            raise ConfigError(f"{source} {item!r}: a route's TABLE is one location, not a "
                              "template", hint="use --table-template for a table per key")
        if key in out:
            raise ConfigError(f"{source} routes {key!r} twice: to {out[key]!r} and {table!r}")
        out[key] = table
    return out


def parse_routes_file(text: str, *, path: str) -> dict[str, str]:
    """A routes file: one `KEY=TABLE` per line; blank lines and lines starting with `#` are
    skipped.

    Raises:
        ConfigError: a line is not KEY=TABLE (its number named), or a key is routed twice.
    """
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        route = parse_routes([line], source=f"routes file {path} line {number}:")
        key, table = next(iter(route.items()))
        if key in out:
            raise ConfigError(f"routes file {path} line {number}: routes {key!r} twice: to "
                              f"{out[key]!r} and {table!r}")
        out[key] = table
    return out


def merge_routes(flags: Mapping[str, str], from_file: Mapping[str, str], *, path: str
                 ) -> dict[str, str]:
    """`--route` items and a routes file's together.

    Raises:
        ConfigError: a key routed by both (both tables named).
    """
    both = sorted(set(flags) & set(from_file))
    if both:
        key = both[0]
        raise ConfigError(f"--route routes {key!r} to {flags[key]!r} and routes file {path} to "
                          f"{from_file[key]!r}", hint="keep one route per key")
    return {**from_file, **flags}


def parse_field_path(text: str) -> tuple[str, ...]:
    """`--route-field source.table` as its names.

    Raises:
        ConfigError: empty, or an empty name between dots.
    """
    names = tuple(text.split("."))
    if not text.strip() or any(not n.strip() or n != n.strip() for n in names):
        raise ConfigError(f"--route-field {text!r} is not a field path",
                          hint="names separated by dots, e.g. --route-field source.table")
    return names


@dataclass(frozen=True)
class RoutingRules:
    """How a stream routes records to tables (see the module docstring).

    Attributes:
        selection: the topics read.
        routes: explicit routes, {key: table location}.
        template: `--table-template`, or None.
        field_path: `--route-field` split at dots, or None (the key is the topic).
    """

    selection: TopicSelection
    routes: Mapping[str, str] = field(default_factory=dict)
    template: TableTemplate | None = None
    field_path: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        """Raises: ConfigError: no way to route; a template of the other placeholder; a
        route of a topic the selection does not read; a selected topic that routes nowhere;
        template names that meet (`check_keys`)."""
        if not self.routes and self.template is None:
            raise ConfigError("A stream of several tables needs --table-template or --route "
                              "(or --routes FILE): nothing says which table a record goes to",
                              hint="e.g. --table-template 'wh/{topic}'")
        if self.template is not None and self.template.placeholder != self._placeholder:
            raise ConfigError(f"--table-template {self.template.text!r} takes "
                              f"{{{self._placeholder}}} "
                              + ("with --route-field" if self.field_path else
                                 "without --route-field"))
        if self.field_path is None:
            for topic in self.routes:
                check_topic_name(topic, flag="--route")
                if not self.selection.matches(topic):
                    raise ConfigError(f"--route {topic}={self.routes[topic]}: topic {topic!r} "
                                      f"is not selected by {self.selection.described}",
                                      hint="select it, or remove the route")
            if self.template is None:
                missing = [t for t in self.selection.topics if t not in self.routes]
                if missing:
                    raise ConfigError(f"Topics {missing} have no --route and there is no "
                                      "--table-template", hint="route every topic, or add "
                                                               "--table-template 'wh/{topic}'")
            self.check_keys(self.selection.topics)

    @property
    def _placeholder(self) -> str:
        return "topic" if self.field_path is None else "field"

    def key_of(self, topic: str, value: Any = None) -> str | Unrouted:
        """A record's routing key: its topic, or the string at `field_path` of its decoded
        value (a JSON object as a dict)."""
        if self.field_path is None:
            return topic
        path = ".".join(self.field_path)
        node = value
        for i, name in enumerate(self.field_path):
            if not isinstance(node, Mapping):
                where = "the value" if i == 0 else ".".join(self.field_path[:i])
                return Unrouted(f"--route-field {path}: {where} is not a JSON object")
            if name not in node:
                return Unrouted(f"--route-field {path}: the value has no field "
                                f"{'.'.join(self.field_path[:i + 1])}")
            node = node[name]
        if node is None:
            return Unrouted(f"--route-field {path} is null")
        if not isinstance(node, str):
            return Unrouted(f"--route-field {path} is a JSON {_json_kind(node)}, not a string")
        if not node:
            return Unrouted(f"--route-field {path} is an empty string")
        return node

    def table_of(self, key: str) -> Routed | Unrouted:
        """The table of a routing key by the rules alone (a route, else the template)."""
        if key in self.routes:
            return Routed(key, self.routes[key])
        if self.field_path is None and not self.selection.matches(key):
            return Unrouted(f"topic {key!r} is not selected by {self.selection.described}")
        if self.template is None:
            what = "topic" if self.field_path is None else "--route-field value"
            return Unrouted(f"{what} {key!r} has no --route and there is no --table-template")
        return Routed(key, self.template.location(key))

    def route(self, topic: str, value: Any = None) -> Routed | Unrouted:
        """A record's table by the rules alone (`key_of`, then `table_of`)."""
        key = self.key_of(topic, value)
        return key if isinstance(key, Unrouted) else self.table_of(key)

    def check_keys(self, keys: Iterable[str]) -> None:
        """Refuse keys known before the stream starts whose tables meet: template names
        that collide ("a.b" and "a_b"), or a template location another key's route names.
        Routes naming one table for several keys are the user's choice and kept.

        Raises:
            ConfigError: naming both keys and the table.
        """
        held: dict[str, str] = {}  # template location -> key
        routed = {_same(loc): key for key, loc in self.routes.items()}
        for key in keys:
            found = self.table_of(key)
            if not isinstance(found, Routed) or key in self.routes:
                continue
            where = _same(found.location)
            other = held.get(where) or routed.get(where)
            if other is not None and other != key:
                raise ConfigError(
                    f"{_name(self, other)} and {_name(self, key)} both route to table "
                    f"{found.location!r} (--table-template makes the same name of both)",
                    hint=f"give one of them its own --route {key}=TABLE")
            held[where] = key


def claim_tables(rules: RoutingRules, keys: Iterable[str], held: Mapping[str, str]
                 ) -> tuple[dict[str, str], dict[str, Unrouted]]:
    """Decide, on the driver, the tables of one micro-batch's routing keys.

    Args:
        keys: the keys the micro-batch's records carry.
        held: {table location: key} of the template tables earlier micro-batches claimed.

    Returns:
        ({key: location} routed, {key: Unrouted} refused). A template table goes to the key
        that held it before; keys that meet on a table nobody held yet are all refused (no
        order among them is better than another), as is a key whose template table is an
        explicit route's of another key.
    """
    held_by = {_same(loc): key for loc, key in held.items()}
    routed_by = {_same(loc): key for key, loc in rules.routes.items()}
    wanted: dict[str, list[str]] = {}
    routed: dict[str, str] = {}
    refused: dict[str, Unrouted] = {}
    for key in sorted(set(keys)):
        found = rules.table_of(key)
        if isinstance(found, Unrouted):
            refused[key] = found
        elif key in rules.routes:
            routed[key] = found.location
        else:
            wanted.setdefault(_same(found.location), []).append(key)
    for where, claimants in wanted.items():
        location = rules.table_of(claimants[0])
        assert isinstance(location, Routed)
        owner = held_by.get(where) or routed_by.get(where)
        for key in claimants:
            if owner == key or (owner is None and len(claimants) == 1):
                routed[key] = location.location
                continue
            others = [owner] if owner is not None else [k for k in claimants if k != key]
            refused[key] = Unrouted(
                f"{_name(rules, key)} routes to table {location.location!r}, which "
                f"{' and '.join(_name(rules, o) for o in others)} "
                f"{'holds' if owner is not None else 'routes to as well'} "
                "(--table-template makes the same name of both)")
    return routed, refused


def _same(location: str) -> str:
    """A location as routes compare it (a trailing slash does not make another table)."""
    return location.rstrip("/") or location


def _name(rules: RoutingRules, key: str) -> str:
    return f"topic {key!r}" if rules.field_path is None else f"--route-field value {key!r}"


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"


__all__ = [
    "INTERNAL_TOPIC_PREFIX",
    "MAX_TABLE_NAME",
    "Routed",
    "RoutingRules",
    "TableTemplate",
    "TopicSelection",
    "Unrouted",
    "check_topic_name",
    "claim_tables",
    "merge_routes",
    "parse_field_path",
    "parse_routes",
    "parse_routes_file",
    "table_name_for",
]
