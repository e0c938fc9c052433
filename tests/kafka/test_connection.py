"""One Kafka connection from --kafka-config and --kafka-option (ingest/kafka/connection.py):
Kafka's client.properties read as Java clients write it, Java's SASL/TLS names turned into
librdkafka's and back into Java's for Spark's source, what only Java understands refused with
the setting to use, and no secret in any text a person reads. No broker needed; the same
settings against a real broker are tests/kafka/test_secured_kafka.py.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from ingest.errors import ConfigError
from ingest.kafka import KafkaConnection
from ingest.records import redact_userinfo, registry_settings
from ingest.records.schema_registry import SchemaRegistry
from ingest.spark import SinkOptions, StreamOptions

SECRET = "s3cr3t-Pa55"


def _java_style(tmp_path: Path) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(
        "# as Confluent Cloud's console writes it\n"
        "bootstrap.servers=broker:9094\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        f"    username='KEY1' password='{SECRET}';\n"
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/etc/kafka/ca.pem\n"
        "key.serializer=org.apache.kafka.common.serialization.StringSerializer\n"
        "client.dns.lookup=use_all_dns_ips\n")
    return path


def test_a_java_client_properties_file_becomes_librdkafka_settings(tmp_path: Path) -> None:
    connection = KafkaConnection.of("", config_files=[_java_style(tmp_path)])
    assert connection.client_config() == {
        "bootstrap.servers": "broker:9094", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN", "sasl.username": "KEY1", "sasl.password": SECRET,
        "ssl.ca.location": "/etc/kafka/ca.pem"}
    # Later options win over the file; --bootstrap-servers over the file's.
    later = KafkaConnection.of("other:1", config_files=[_java_style(tmp_path)],
                               options=["sasl.username=KEY2", "client.id=x"])
    assert later.bootstrap_servers == "other:1"
    assert dict(later.settings)["sasl.username"] == "KEY2"
    assert dict(later.settings)["client.id"] == "x"


def test_the_jvm_source_gets_the_same_settings_in_java_names(tmp_path: Path) -> None:
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_text("-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n")
    scram = KafkaConnection.of("b:1", options=[
        "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=alice",
        f'sasl.password={SECRET}"x', "ssl.ca.location=/ca.pem"]).jvm_properties()
    assert scram["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        f'password="{SECRET}\\"x";')
    assert scram["ssl.truststore.type"] == "PEM"
    assert scram["ssl.truststore.location"] == "/ca.pem"
    assert scram["security.protocol"] == "SASL_SSL" and scram["bootstrap.servers"] == "b:1"
    mtls = KafkaConnection.of("b:1", options=[
        "security.protocol=SSL", f"ssl.certificate.location={cert}",
        f"ssl.key.location={key}", "ssl.endpoint.identification.algorithm=none"]
    ).jvm_properties()
    assert mtls["ssl.keystore.type"] == "PEM"
    assert "BBB" in mtls["ssl.keystore.key"] and "AAA" in mtls["ssl.keystore.certificate.chain"]
    assert mtls["ssl.endpoint.identification.algorithm"] == ""  # Java's "off"
    plain = KafkaConnection.of("b:1", options=[
        "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.username=u",
        "sasl.password=p"]).jvm_properties()
    assert plain["sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required")


@pytest.mark.parametrize(("options", "message", "hint"), [
    (["ssl.truststore.location=/t.jks", "ssl.truststore.password=x"],
     "names a JKS truststore, which only Java clients can read", "ssl.ca.location"),
    (["ssl.keystore.type=JKS", "ssl.keystore.location=/k.jks"],
     "'ssl.keystore.type' is known only to Java clients", "ssl.certificate.location"),
    (["security.protocol=SASL_SSL", "sasl.jaas.config=com.sun.security.auth.module."
      "Krb5LoginModule required useKeyTab=true;"], "names a login module", "--kafka-source jvm"),
    (["sasl.mechanism=PLAIN"], "needs security.protocol SASL_SSL or SASL_PLAINTEXT",
     "security.protocol=SASL_SSL"),
    (["security.protocol=TLS"], "is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", None),
    (["sasl.login.callback.handler.class=x.Y"], "known only to Java clients", "oauth_cb"),
    ([f"sasl.password{SECRET}"], "A --kafka-option is not KEY=VALUE", "--kafka-option"),
])
def test_what_only_java_knows_is_refused_naming_what_to_give(
        options: list[str], message: str, hint: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        KafkaConnection.of("b:1", options=options)
    assert message in str(info.value)
    if hint is not None:
        assert hint in (info.value.hint or "")
    assert SECRET not in str(info.value) and SECRET not in (info.value.hint or "")


def test_an_unreadable_or_malformed_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Cannot read --kafka-config .*missing.properties"):
        KafkaConnection.of("b:1", config_files=[tmp_path / "missing.properties"])
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SSL\n=oops\n")
    with pytest.raises(ConfigError, match=r"bad.properties, line 2: not a key=value setting"):
        KafkaConnection.of("b:1", config_files=[bad])


def test_secrets_never_show_in_repr_redaction_or_the_stream_options(tmp_path: Path) -> None:
    connection = KafkaConnection.of("", config_files=[_java_style(tmp_path)],
                                    options=["ssl.key.password=k3y-pa55",
                                             "sasl.oauthbearer.client.secret=t0ken"])
    shown = [repr(connection), str(connection.redacted())]
    for text in shown:
        assert SECRET not in text and "k3y-pa55" not in text and "t0ken" not in text
        assert "KEY1" in text  # the user name is not a secret: it says who connects
    assert pickle.loads(pickle.dumps(connection)) == connection  # crosses to executors
    options = StreamOptions(
        bootstrap_servers="b:1", topic="t", table="/wh/t", schema_ddl="id INT",
        checkpoint="/ck", kafka_options=(f"sasl.password={SECRET}", "sasl.username=u",
                                         "security.protocol=SASL_SSL", "sasl.mechanism=PLAIN"))
    assert SECRET not in repr(options)
    assert dict(options.connection.settings)["sasl.password"] == SECRET


def test_the_schema_registry_client_takes_its_own_settings_and_hides_them() -> None:
    settings = registry_settings((f"basic.auth.user.info=u:{SECRET}",
                                  "ssl.ca.location=/etc/ssl/certs/ca-certificates.crt"))
    assert SchemaRegistry("https://registry:8081", settings=settings).url == \
        "https://registry:8081"
    # Credentials in the URL instead: never shown in a message.
    assert SchemaRegistry(f"https://u:{SECRET}@registry:8081").url == \
        "https://u:*****@registry:8081"
    assert redact_userinfo("http://registry:8081") == "http://registry:8081"
    with pytest.raises(ConfigError, match="bogus.setting: not a setting") as info:
        SchemaRegistry("https://registry:8081", settings=(("bogus.setting", SECRET),))
    assert SECRET not in str(info.value)
    with pytest.raises(ConfigError, match="--schema-registry-option secret: not KEY=VALUE"):
        registry_settings(("secret",))
    with pytest.raises(ConfigError, match="--schema-registry-option needs --schema-registry"):
        StreamOptions(bootstrap_servers="b:1", topic="t", table="/wh/t", checkpoint="/ck",
                      schema_ddl="id INT",
                      sink=SinkOptions(value_format="avro", avro_schema="/e.avsc",
                                       schema_registry_options=("basic.auth.user.info=u:p",)))
