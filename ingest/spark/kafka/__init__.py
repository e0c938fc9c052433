"""Kafka for Spark: the "ingest-kafka" source (Python Data Source API, confluent-kafka below it)
and a producer for tests, demos and `ingest produce`.
"""

from ingest.spark.kafka._options import DEFAULT_STARTING_OFFSETS, DEFAULT_TIMEOUT_MS
from ingest.spark.kafka.group import GroupCommitter, group_offsets
from ingest.spark.kafka.lag import LagProbe, PartitionLag, kafka_lag
from ingest.spark.kafka.produce import encode_event, ensure_topic, produce_events, sample_events
from ingest.spark.kafka.registry import (
    RegistryRetry,
    SchemaRegistry,
    confluent_frame,
    registry,
    split_frame,
)
from ingest.spark.kafka.source import (
    KafkaInputPartition,
    check_jvm_kafka,
    check_topic,
    jvm_kafka_available,
    kafka_dataframe,
    register_kafka_source,
)

__all__ = [
    "DEFAULT_STARTING_OFFSETS",
    "DEFAULT_TIMEOUT_MS",
    "GroupCommitter",
    "KafkaInputPartition",
    "LagProbe",
    "PartitionLag",
    "RegistryRetry",
    "SchemaRegistry",
    "check_jvm_kafka",
    "check_topic",
    "confluent_frame",
    "encode_event",
    "ensure_topic",
    "group_offsets",
    "jvm_kafka_available",
    "kafka_lag",
    "kafka_dataframe",
    "produce_events",
    "register_kafka_source",
    "registry",
    "sample_events",
    "split_frame",
]
