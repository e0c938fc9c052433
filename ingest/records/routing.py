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
A record that routes nowhere gets an `Unrouted` with the reason, for the stream's table of
records routed nowhere (its anchor, `--unrouted-table`). A table is known by its *name* (its
directory's, by `clean_table_name`) as well as its location: two locations of one name cannot
both be created, and a location that is the anchor or any table's dead-letter table is
reserved, so such keys are refused up front or route nowhere (never a micro-batch that fails
on every restart).
"""

from __future__ import annotations

import hashlib
import re
import string
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ingest.errors import ConfigError

MAX_TABLE_NAME = 128
"""Longest table name the rules make: Hive 2's metastore column holds 128 characters."""
DEAD_LETTER_SUFFIX = "__dead_letter"
"""A table's dead-letter table is at `<location>__dead_letter` (the sink's rule, by text)."""
_HASH_DIGITS = 8
_MIN_KEY_NAME = 16
"""Least characters a template must leave for the key's part of a table name."""
_LETTERS = frozenset(string.ascii_lowercase)
_NAME_CHARS = frozenset(string.ascii_lowercase + string.digits + "_")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
INTERNAL_TOPIC_PREFIX = "__"
"""Kafka's own topics (`__consumer_offsets`, `__transaction_state`): never selected by a
pattern, as Kafka's consumers exclude internal topics from pattern subscriptions."""


def clean_table_name(text: str) -> str:
    """`text` made a table name SQL engines read without quotes: lower case; every character
    outside [a-z0-9_] becomes `_`; `t_` goes in front unless it starts with a letter (the one
    rule of template names and of a table created without a name, `default_table_name`)."""
    name = "".join(c if c in _NAME_CHARS else "_" for c in text.lower())
    return name if name[:1] in _LETTERS else "t_" + name


def location_table_name(location: str) -> str:
    """The table name (without database) a table created at `location` gets: its last path
    name, by `clean_table_name`."""
    return clean_table_name(_same(location).rsplit("/", 1)[-1])


def table_name_for(key: str, *, limit: int = MAX_TABLE_NAME) -> str:
    """The table name a routing key gives under `--table-template`: `clean_table_name` of
    the key (`.`, `-` and the like become `_`); a name over `limit` characters is cut and
    ends with `_` and 8 hex digits of a hash of the key, so long keys stay distinct.

    e.g. "ORCL.SOE.ORDERS" -> "orcl_soe_orders", "2024-events" -> "t_2024_events".

    Raises:
        ConfigError: the key is empty.
    """
    if not key:
        raise ConfigError("Cannot make a table name of an empty routing key")
    name = clean_table_name(key)
    if len(name) > limit:
        digest = hashlib.sha256(key.encode()).hexdigest()[:_HASH_DIGITS]
        name = f"{name[:limit - _HASH_DIGITS - 1]}_{digest}"
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


_JAVA_ONLY_ESCAPES = {
    "p": "\\p{...} (a Unicode or POSIX class)", "P": "\\P{...} (a negated class)",
    "Q": "\\Q...\\E (quoting)", "E": "\\E (end of quoting)",
    "h": "\\h (horizontal space)", "H": "\\H", "R": "\\R (a line break)",
    "X": "\\X (a grapheme)", "G": "\\G (end of the previous match)", "e": "\\e (escape)",
    "c": "\\cX (a control character)", "z": "\\z (end of input)", "k": "\\k<name>",
}


def compile_topic_pattern(pattern: str) -> re.Pattern[str]:
    """`--topic-pattern` compiled with Python's `re`, refusing what Java's regex (Kafka's
    `subscribePattern`, and Spark's JVM source) reads otherwise: a Java-only escape, a
    nested character class (`[a[bc]]`: a union in Java, a `[` in Python), `&&` in a class (an
    intersection in Java), and anything `re` cannot compile. What both read alike (classes,
    groups, quantifiers, possessive quantifiers and atomic groups, `(?i)`) is kept.

    Raises:
        ConfigError: naming the construct and where it is.
    """
    flag = f"--topic-pattern {pattern!r}"
    hint = ("the pattern is matched with Python's re module; write the construct out, "
            "e.g. [A-Za-z] for \\p{Alpha}, or escape it")
    in_class, i = False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            what = _JAVA_ONLY_ESCAPES.get(pattern[i + 1])
            if what is not None:
                raise ConfigError(f"{flag} uses Java's {what} at position {i}, which Python's "
                                  "re reads otherwise or not at all", hint=hint)
            i += 2
            continue
        if in_class:
            if c == "[":
                raise ConfigError(f"{flag} has a '[' inside a character class at position {i}: "
                                  "Java reads a nested class (a union), Python a '['",
                                  hint="escape it as \\[, or write one class")
            if pattern.startswith("&&", i):
                raise ConfigError(f"{flag} has '&&' inside a character class at position {i}: "
                                  "Java reads an intersection, Python two '&'",
                                  hint="write the class's members out")
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1 + pattern.startswith("^", i + 1)
            i += pattern.startswith("]", i)  # a ']' first is one of the class's members
            continue
        i += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            return re.compile(pattern)
    except (re.error, FutureWarning) as e:
        raise ConfigError(f"{flag} is not a regular expression Python's re and Java's regex "
                          f"read alike: {e}", hint=hint) from None


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
            compiled = compile_topic_pattern(pattern)
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
        made = cls(text, placeholder)
        if made.key_budget < _MIN_KEY_NAME:
            raise ConfigError(f"{flag}: its fixed part leaves {made.key_budget} of a table "
                              f"name's {MAX_TABLE_NAME} characters to the key, fewer than "
                              f"{_MIN_KEY_NAME}", hint="shorten the last path name around "
                                                      f"{{{placeholder}}}")
        return made

    @property
    def key_budget(self) -> int:
        """Characters of a table name left to the key's part: the name (the last path name,
        `clean_table_name`) stays within `MAX_TABLE_NAME` whatever the key."""
        last = _same(self.text).rsplit("/", 1)[-1]
        fixed = len(clean_table_name(last.replace("{" + self.placeholder + "}", "a"))) - 1
        return MAX_TABLE_NAME - fixed

    def location(self, key: str) -> str:
        """The location of the table of routing key `key` (`table_name_for` in place, cut
        to the template's `key_budget`)."""
        return self.text.replace("{" + self.placeholder + "}",
                                 table_name_for(key, limit=self.key_budget))


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
        routes: explicit routes, {key: table location} (locations as the caller normalised
            them: two spellings of one table must be given alike).
        template: `--table-template`, or None.
        field_path: `--route-field` split at dots, or None (the key is the topic).
        anchor: the stream's table of records routed nowhere (`--unrouted-table`), whose
            location and name no route may take; None: not checked.
    """

    selection: TopicSelection
    routes: Mapping[str, str] = field(default_factory=dict)
    template: TableTemplate | None = None
    field_path: tuple[str, ...] | None = None
    anchor: str | None = None

    def __post_init__(self) -> None:
        """Raises: ConfigError: no way to route; a template of the other placeholder; a
        route of a topic the selection does not read; a selected topic that routes nowhere;
        a route or template to a reserved table (`reserved`); template names that meet
        (`check_keys`)."""
        if not self.routes and self.template is None:
            raise ConfigError("A stream of several tables needs --table-template or --route "
                              "(or --routes FILE): nothing says which table a record goes to",
                              hint="e.g. --table-template 'wh/{topic}'")
        if self.template is not None and self.template.placeholder != self._placeholder:
            raise ConfigError(f"--table-template {self.template.text!r} takes "
                              f"{{{self._placeholder}}} "
                              + ("with --route-field" if self.field_path else
                                 "without --route-field"))
        for key, location in self.routes.items():
            why = self.reserved(location)
            if why is not None:
                raise ConfigError(f"--route {key}={location}: the table {why}",
                                  hint="route it to a table of its own")
        if self.template is not None:
            sample = self.template.location("a")
            why = self.reserved(sample)
            if self.reserved(self.template.location("b")) is None:
                why = None  # the key's own name made it: checked per key
            if why is not None:
                raise ConfigError(f"--table-template {self.template.text!r}: its table "
                                  f"{sample!r} {why}", hint="e.g. --table-template 'wh/{"
                                                            f"{self._placeholder}}}'")
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

    def reserved(self, location: str) -> str | None:
        """Why no route may write the table at `location`, or None: it is the anchor, its
        dead-letter table would be the anchor, it is a table's dead-letter table (its name
        ends with `__dead_letter`), or it has the anchor's name."""
        where = _same(location)
        if where.endswith(DEAD_LETTER_SUFFIX):
            return (f"is the dead-letter table of the table at "
                    f"{where.removesuffix(DEAD_LETTER_SUFFIX)!r}")
        if self.anchor is None:
            return None
        anchor = _same(self.anchor)
        if where == anchor:
            return "is the stream's --unrouted-table"
        if where + DEAD_LETTER_SUFFIX == anchor:
            return "has the stream's --unrouted-table as its dead-letter table"
        if location_table_name(where) == location_table_name(anchor):
            return (f"would have the table name of the stream's --unrouted-table "
                    f"({location_table_name(anchor)})")
        return None

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
        """The table of a routing key by the rules alone (a route, else the template; a
        template table that is reserved routes nowhere)."""
        if key in self.routes:
            return Routed(key, self.routes[key])
        if self.field_path is None and not self.selection.matches(key):
            return Unrouted(f"topic {key!r} is not selected by {self.selection.described}")
        if self.template is None:
            what = "topic" if self.field_path is None else "--route-field value"
            return Unrouted(f"{what} {key!r} has no --route and there is no --table-template")
        location = self.template.location(key)
        why = self.reserved(location)
        if why is not None:
            return Unrouted(f"{_name(self, key)} routes to table {location!r} by "
                            f"--table-template, which {why}")
        return Routed(key, location)

    def route(self, topic: str, value: Any = None) -> Routed | Unrouted:
        """A record's table by the rules alone (`key_of`, then `table_of`)."""
        key = self.key_of(topic, value)
        return key if isinstance(key, Unrouted) else self.table_of(key)

    def check_keys(self, keys: Iterable[str]) -> None:
        """Refuse keys known before the stream starts whose tables meet: template names
        that collide ("a.b" and "a_b"), a template table with another key's route's table
        name, or a template table that is reserved (`reserved`). Routes naming one table
        location for several keys are the user's choice and kept.

        Raises:
            ConfigError: naming both keys and the table (or the key and why).
        """
        held: dict[str, str] = {}  # template table name -> key
        routed = _route_names(self)
        for key in keys:
            if key in self.routes:
                continue
            found = self.table_of(key)
            if isinstance(found, Unrouted):
                if self.template is not None and "by --table-template" in found.reason:
                    raise ConfigError(found.reason, hint=f"give {_name(self, key)} its own "
                                                         f"--route {key}=TABLE")
                continue
            name = location_table_name(found.location)
            other = held.get(name) or routed.get(name)
            if other is not None and other != key:
                raise ConfigError(
                    f"{_name(self, other)} and {_name(self, key)} both route to table "
                    f"{found.location!r} (or one of its name, {name}; --table-template makes "
                    "the same name of both)",
                    hint=f"give one of them its own --route {key}=TABLE")
            held[name] = key


def claim_tables(rules: RoutingRules, keys: Iterable[str], held: Mapping[str, str]
                 ) -> tuple[dict[str, str], dict[str, Unrouted]]:
    """Decide, on the driver, the tables of one micro-batch's routing keys.

    Tables are compared by name (`location_table_name`), as they are created by name: a
    template table meeting another key's table of the same name at another location is
    the same conflict as meeting it at the same location.

    Args:
        keys: the keys the micro-batch's records carry.
        held: {table location: key} of the template tables earlier micro-batches (or
            earlier runs, recorded durably) claimed.

    Returns:
        ({key: location} routed, {key: Unrouted} refused). A template table goes to the key
        that held it before; keys that meet on a table nobody held yet are all refused (no
        order among them is better than another), as is a key whose template table is (or
        has the name of) an explicit route's of another key.
    """
    held_by = {location_table_name(loc): key for loc, key in held.items()}
    routed_by = _route_names(rules)
    wanted: dict[str, list[tuple[str, str]]] = {}
    routed: dict[str, str] = {}
    refused: dict[str, Unrouted] = {}
    for key in sorted(set(keys)):
        found = rules.table_of(key)
        if isinstance(found, Unrouted):
            refused[key] = found
        elif key in rules.routes:
            routed[key] = found.location
        else:
            wanted.setdefault(location_table_name(found.location), []).append(
                (key, found.location))
    for name, claimants in wanted.items():
        owner = held_by.get(name) or routed_by.get(name)
        for key, location in claimants:
            if owner == key or (owner is None and len(claimants) == 1):
                routed[key] = location
                continue
            others = ([owner] if owner is not None
                      else [k for k, _ in claimants if k != key])
            refused[key] = Unrouted(
                f"{_name(rules, key)} routes to table {location!r}, which "
                f"{' and '.join(_name(rules, o) for o in others)} "
                f"{'holds' if owner is not None else 'routes to as well'} "
                f"(table name {name}; --table-template makes the same name of both)")
    return routed, refused


def _route_names(rules: RoutingRules) -> dict[str, str]:
    """{table name: a key} of the explicit routes' tables."""
    out: dict[str, str] = {}
    for key, location in sorted(rules.routes.items()):
        out.setdefault(location_table_name(location), key)
    return out


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
    "DEAD_LETTER_SUFFIX",
    "INTERNAL_TOPIC_PREFIX",
    "MAX_TABLE_NAME",
    "Routed",
    "RoutingRules",
    "TableTemplate",
    "TopicSelection",
    "Unrouted",
    "check_topic_name",
    "claim_tables",
    "clean_table_name",
    "compile_topic_pattern",
    "location_table_name",
    "merge_routes",
    "parse_field_path",
    "parse_routes",
    "parse_routes_file",
    "table_name_for",
]
