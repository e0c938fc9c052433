"""Kafka, without Spark: the connection every client is made from, the clients and what their
errors mean, the "ingest-kafka" source's options and reads, end offsets and lag, the consumer
group commit and the producer of `ingest produce` (the schema registry client is
`ingest.records`').

Knows Kafka; not ORC, ACID or Spark (the Spark source is
`ingest.spark.kafka`).
"""

from ingest.kafka.connection import KafkaConnection, is_secret, redact_settings
from ingest.kafka.group import GroupCommitter, group_offsets
from ingest.kafka.lag import LagProbe, PartitionLag, kafka_lag
from ingest.kafka.options import (
    DEFAULT_STARTING_OFFSETS,
    DEFAULT_TIMEOUT_MS,
    KafkaSourceOptions,
    Offsets,
    check_not_behind,
    describe,
    jvm_pattern,
    offsets_from_json,
    offsets_to_json,
)
from ingest.kafka.produce import encode_event, ensure_topic, produce_events, sample_events
from ingest.kafka.ranges import ARROW_SCHEMA, read_range, read_ranges
from ingest.kafka.read import KafkaClient, Watermarks, rate_limit

__all__ = [
    "ARROW_SCHEMA",
    "DEFAULT_STARTING_OFFSETS",
    "DEFAULT_TIMEOUT_MS",
    "GroupCommitter",
    "KafkaClient",
    "KafkaConnection",
    "KafkaSourceOptions",
    "LagProbe",
    "Offsets",
    "PartitionLag",
    "Watermarks",
    "check_not_behind",
    "describe",
    "jvm_pattern",
    "encode_event",
    "ensure_topic",
    "group_offsets",
    "is_secret",
    "kafka_lag",
    "offsets_from_json",
    "offsets_to_json",
    "produce_events",
    "rate_limit",
    "read_range",
    "read_ranges",
    "redact_settings",
    "sample_events",
]
