"""The Apache Kafka broker of tests/kafka_server.py (scripts/kafka.sh) itself: every listener
takes a transaction's records and gives them back to a read_committed consumer, a wrong SASL
password is an authentication error, a DENY ACL for alice holds on her SASL listener, and a
restart (after a clean stop, and after SIGKILL) keeps the ports and the records."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kafka_server import LISTENERS, ApacheKafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RECORDS = [b"one", b"two", b"three"]
WAIT_S = 60


def fresh_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def produce_in_transaction(config: dict[str, str], topic: str) -> None:
    producer = Producer({**config, "transactional.id": fresh_topic("tx")})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for value in RECORDS:
        producer.produce(topic, value=value)
    producer.commit_transaction(WAIT_S)


def read_committed(config: dict[str, str], topic: str, count: int) -> list[bytes]:
    errors: list[KafkaError] = []
    consumer = Consumer({**config, "group.id": fresh_topic("g"), "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "error_cb": errors.append})
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    # Sorted: records of several partitions come in no particular order.
    assert sorted(values) == sorted(RECORDS * (count // len(RECORDS))), f"client errors: {errors}"
    return values


@pytest.mark.parametrize("listener", LISTENERS)
def test_listener_round_trip(
        apache_kafka: ApacheKafka, listener: str) -> None:
    topic = fresh_topic(f"listener-{listener.lower()}")
    apache_kafka.create_topic(topic)
    config = apache_kafka.client_config(listener)
    produce_in_transaction(config, topic)
    read_committed(config, topic, len(RECORDS))


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_wrong_sasl_password_is_an_authentication_error(
        apache_kafka: ApacheKafka, listener: str) -> None:
    wrong = f"not-{apache_kafka.password}"
    errors: list[KafkaError] = []
    consumer = Consumer({**apache_kafka.client_config(listener), "sasl.password": wrong,
                         "group.id": fresh_topic("g"), "error_cb": errors.append})
    try:
        deadline = time.monotonic() + WAIT_S
        while not errors and time.monotonic() < deadline:
            consumer.poll(0.2)
    finally:
        consumer.close()
    assert errors, "no error reported for a wrong password"
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert apache_kafka.password not in apache_kafka.log.read_text(errors="replace")


def test_deny_acl_holds_for_alice(
        apache_kafka: ApacheKafka) -> None:
    topic = fresh_topic("denied")
    apache_kafka.create_topic(topic)
    deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                      f"User:{apache_kafka.user}", "*", AclOperation.ALL,
                      AclPermissionType.DENY)
    admin = apache_kafka.admin()
    for future in admin.create_acls([deny]).values():
        future.result(timeout=WAIT_S)
    outcomes: list[Any] = []
    producer = Producer({**apache_kafka.client_config("SASL_PLAINTEXT"),
                         "message.timeout.ms": 20000})
    producer.produce(topic, value=b"x", on_delivery=lambda err, _msg: outcomes.append(err))
    producer.flush(WAIT_S)
    assert len(outcomes) == 1 and outcomes[0] is not None
    assert outcomes[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, outcomes
    # The super user (PLAINTEXT: User:ANONYMOUS) is not denied.
    produce_in_transaction(apache_kafka.client_config("PLAINTEXT"), topic)
    read_committed(apache_kafka.client_config("PLAINTEXT"), topic, len(RECORDS))


def test_restart_keeps_ports_and_records(
        own_apache_kafka: ApacheKafka) -> None:
    kafka = own_apache_kafka
    before = dict(kafka.values)
    topic = fresh_topic("restart")
    kafka.create_topic(topic, partitions=2)
    produce_in_transaction(kafka.client_config("SASL_SSL"), topic)

    kafka.restart()
    assert kafka.values == before
    read_committed(kafka.client_config("PLAINTEXT"), topic, len(RECORDS))

    kafka.kill()
    kafka.restart()
    assert kafka.values == before
    produce_in_transaction(kafka.client_config("MTLS"), topic)
    read_committed(kafka.client_config("SASL_PLAINTEXT"), topic, 2 * len(RECORDS))
