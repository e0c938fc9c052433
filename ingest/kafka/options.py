"""The "ingest-kafka" source's options and offsets, shared by its Spark side
(ingest.spark.kafka) and its Kafka side (ingest.kafka.read, ingest.kafka.ranges).

Offsets are {(topic, partition): next offset}; in Spark's checkpoint they are JSON
{"topic": {"0": 23}}, as Spark's own kafka source writes them. Knows neither Spark nor
confluent-kafka.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ingest.errors import ConfigError, IngestError
from ingest.kafka.connection import KafkaConnection, normalize
from ingest.records import INTERNAL_TOPIC_PREFIX, TopicSelection
from ingest.txn import TopicPartitionKey

DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_STARTING_OFFSETS: Literal["earliest"] = "earliest"

Offsets = dict[TopicPartitionKey, int]
StartingOffsets = Literal["earliest", "latest"] | Offsets

def pattern_matches(pattern: str, topic: str) -> bool:
    """Whether `subscribePattern` `pattern` selects `topic`: the whole name matches (as
    Java's `Pattern.matcher(topic).matches()` in Kafka's consumer) and it is not internal
    (the one rule, `TopicSelection.matches`, which the many-table streams route by)."""
    return TopicSelection(pattern=pattern).matches(topic)


def jvm_pattern(pattern: str) -> str:
    """`pattern` for Spark's JVM source's `subscribePattern`, selecting what
    `pattern_matches` does: anchored, as Spark's source looks for the pattern anywhere in a
    name (a find, not a whole-name match), and a lookahead keeps `__` topics out (Java's
    regex syntax has both)."""
    return f"^(?!{INTERNAL_TOPIC_PREFIX})(?:{pattern})$"


def describe(tp: TopicPartitionKey) -> str:
    """"topic-partition", as Kafka's tools print a partition."""
    return f"{tp[0]}-{tp[1]}"


@dataclass(frozen=True)
class KafkaSourceOptions:
    """The parsed options of one "ingest-kafka" source.

    Attributes:
        connection: `kafka.bootstrap.servers` and every other `kafka.*` option (librdkafka's
            names, or the Java client's SASL/TLS ones, translated), the prefix removed.
        topics: `subscribe`, split on commas (empty with `pattern`).
        starting_offsets: `startingOffsets`: "earliest", "latest" or explicit offsets
            (-2 = earliest, -1 = latest for one partition).
        max_offsets_per_trigger: `maxOffsetsPerTrigger`, or None for no limit.
        fail_on_data_loss: `failOnDataLoss`.
        timeout_s: `kafka.timeout.ms` / 1000: metadata calls and reads without progress.
        pattern: `subscribePattern`, or None: the topics are those whose whole name it
            matches (`pattern_matches`), listed again at each micro-batch's planning.
        pack_records: `packRecordsPerTask`: ranges of fewer records share a read task, up to
            this many records a task (a task's cost, not its records, dominates a small
            range: a stream of many small topics); 0, the default: a task per topic
            partition, as Spark's own source.
        pack_tasks: `packIntoTasks`: with `pack_records`, a micro-batch's small ranges are
            packed into about this many tasks when they hold more than `pack_records` a
            task (the cluster's cores: fewer tasks leave cores idle, more pay a task's cost
            for nothing); 0, the default: up to `pack_records` a task whatever the
            micro-batch's size.
    """

    connection: KafkaConnection
    topics: tuple[str, ...]
    starting_offsets: StartingOffsets
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    timeout_s: float
    pattern: str | None = None
    pack_records: int = 0
    pack_tasks: int = 0

    def selects(self, topic: str) -> bool:
        """Whether the source reads `topic`."""
        if self.pattern is None:
            return topic in self.topics
        return pattern_matches(self.pattern, topic)

    @property
    def bootstrap_servers(self) -> str:
        return self.connection.bootstrap_servers

    @classmethod
    def for_lookups(cls, connection: KafkaConnection, topics: Sequence[str], *,
                    timeout_s: float) -> KafkaSourceOptions:
        """Options for a driver's look-ups of `topics` (partitions, end offsets, lag): no
        reads planned from them."""
        return cls(connection, tuple(topics), DEFAULT_STARTING_OFFSETS, None, True, timeout_s)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> KafkaSourceOptions:
        """Parse Spark reader options (keys are case-insensitive).

        Raises:
            ConfigError: an option is missing or malformed.
        """
        opts = {k.lower(): str(v) for k, v in options.items()}
        servers = opts.get("kafka.bootstrap.servers", "").strip()
        if not servers:
            raise ConfigError("The ingest-kafka source needs option 'kafka.bootstrap.servers'.",
                              hint='add .option("kafka.bootstrap.servers", "host:9092")')
        if "assign" in opts:
            raise ConfigError("The ingest-kafka source does not support option 'assign'; "
                              "use 'subscribe' or 'subscribePattern'.")
        topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
        pattern = _parse_pattern(opts.get("subscribepattern"))
        if (not topics) == (pattern is None):
            raise ConfigError(
                "The ingest-kafka source needs option 'subscribe' (comma-separated topic "
                "names) or 'subscribePattern' (a regular expression matched against whole "
                "topic names)" + (", not both." if topics else "."))
        timeout_ms = _positive_int(opts, "kafka.timeout.ms", DEFAULT_TIMEOUT_MS)
        max_offsets = opts.get("maxoffsetspertrigger")
        fail = opts.get("failondataloss", "true").strip().lower()
        if fail not in ("true", "false"):
            raise ConfigError(f"Option 'failOnDataLoss' must be true or false, got {fail!r}.")
        pack = opts.get("packrecordspertask", "0").strip()
        if not pack.isdigit():
            raise ConfigError(f"Option 'packRecordsPerTask' must be a whole number of records "
                              f"(0: a task per topic partition), got {pack!r}.")
        pack_tasks = opts.get("packintotasks", "0").strip()
        if not pack_tasks.isdigit():
            raise ConfigError(f"Option 'packIntoTasks' must be a whole number of tasks (0: "
                              f"packs of up to packRecordsPerTask), got {pack_tasks!r}.")
        own = {"kafka.bootstrap.servers", "kafka.timeout.ms"}
        # Spark lower-cases option names; librdkafka's are lower case except `oauth_cb`'s.
        client = normalize({k[len("kafka."):]: v for k, v in options.items()
                            if k.lower().startswith("kafka.") and k.lower() not in own})
        connection = KafkaConnection(servers, tuple(client.items()))
        connection.check_python_client()  # GSSAPI: Spark's own source, not this one
        return cls(
            connection=connection, topics=topics, pattern=pattern,
            starting_offsets=_parse_starting(
                opts.get("startingoffsets", DEFAULT_STARTING_OFFSETS), topics, pattern),
            max_offsets_per_trigger=None if max_offsets is None
            else _positive_int(opts, "maxoffsetspertrigger", 0),
            fail_on_data_loss=fail == "true", timeout_s=timeout_ms / 1000.0,
            pack_records=int(pack), pack_tasks=int(pack_tasks),
        )


def _positive_int(opts: Mapping[str, str], name: str, default: int) -> int:
    raw = opts.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"Option '{name}' must be a positive integer, got {raw!r}.")
    return value


def _parse_pattern(raw: str | None) -> str | None:
    if raw is None:
        return None
    try:
        compiled = re.compile(raw)
    except re.error as e:
        raise ConfigError(f"Option 'subscribePattern' {raw!r} is not a regular expression: "
                          f"{e}") from e
    if compiled.fullmatch(""):
        raise ConfigError(f"Option 'subscribePattern' {raw!r} matches the empty name, so it "
                          "would select every topic", hint="e.g. 'shop\\..*'")
    return raw


def _parse_starting(raw: str, topics: Sequence[str],
                    pattern: str | None = None) -> StartingOffsets:
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return "earliest" if text.lower() == "earliest" else "latest"
    try:
        parsed = offsets_from_json(json.loads(text))
    except (ValueError, TypeError, AttributeError) as e:
        raise ConfigError(
            f"Option 'startingOffsets' must be \"earliest\", \"latest\" or JSON like "
            f'{{"topic":{{"0":23}}}}, got {raw!r}: {e}') from e
    if pattern is not None:
        unknown = sorted({t for t, _ in parsed if not pattern_matches(pattern, t)})
        if unknown:
            raise ConfigError(f"Option 'startingOffsets' names topics {unknown} that "
                              f"'subscribePattern' {pattern!r} does not select.")
        return parsed
    unknown = sorted({t for t, _ in parsed} - set(topics))
    if unknown:
        raise ConfigError(f"Option 'startingOffsets' names topics {unknown} that are not in "
                          f"'subscribe' ({', '.join(topics)}).")
    return parsed


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Offsets in Spark's kafka JSON shape: {"topic": {"0": 23}}, sorted for stable checkpoints."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, Any]]) -> Offsets:
    """The inverse of offsets_to_json."""
    return {(str(topic), int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


def check_not_behind(offsets: Mapping[TopicPartitionKey, int],
                     known: Mapping[TopicPartitionKey, int], *, what: str, known_as: str,
                     servers: str | None = None) -> None:
    """Refuse an offset below one already read of the same partition: what a committed reader
    sees never goes back, so the topic is another of the same name, whose records would be
    read under offsets already read (or skipped, when a source plans nothing below its start).

    `what` and `known_as` complete the sentence: "partition t-0 on servers {what} offset 5,
    below offset 15 {known_as}".

    Raises:
        IngestError: naming the first such partition.
    """
    for tp, offset in sorted(offsets.items()):
        if tp in known and offset < known[tp]:
            raise IngestError(
                f"Kafka partition {describe(tp)}{f' on {servers}' if servers else ''} {what} "
                f"offset {offset}, below "
                f"offset {known[tp]} {known_as}: topic '{tp[0]}' was deleted and created "
                "again (or truncated)",
                hint="its records would be read under offsets already read; stream the new "
                     "topic with a new --checkpoint into a new table")


__all__ = [
    "DEFAULT_STARTING_OFFSETS",
    "DEFAULT_TIMEOUT_MS",
    "INTERNAL_TOPIC_PREFIX",
    "KafkaSourceOptions",
    "Offsets",
    "StartingOffsets",
    "check_not_behind",
    "describe",
    "jvm_pattern",
    "offsets_from_json",
    "offsets_to_json",
    "pattern_matches",
]
