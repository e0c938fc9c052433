"""Kafka for Spark: the "ingest-kafka" source (Python Data Source API over `ingest.kafka`) and
the choice between it and Spark's own Kafka source."""

from ingest.spark.kafka.source import (
    KafkaInputPartition,
    PackedInputPartition,
    check_jvm_kafka,
    check_topics,
    jvm_kafka_available,
    kafka_dataframe,
    register_kafka_source,
)

__all__ = [
    "KafkaInputPartition",
    "PackedInputPartition",
    "check_jvm_kafka",
    "check_topics",
    "jvm_kafka_available",
    "kafka_dataframe",
    "register_kafka_source",
]
