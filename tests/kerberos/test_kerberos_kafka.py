"""Kerberos to Kafka (issue 33, item 4): a stream from a Kerberized Apache Kafka (GSSAPI,
scripts/kafka.sh --kerberos) through Spark's Kafka source into a table on a Kerberized Hive 4
metastore, killed once mid-stream and restarted: every record exactly once. The first run
gives a keytab and principal as Kafka settings, the restart a `sasl.jaas.config` in a
`--kafka-config` file; the metastore's client keytab comes from KRB5_CLIENT_KTNAME. Records
are produced through the broker's PLAINTEXT listener (the Python client has no Kerberos).

Also, without servers: how the settings become the Java client's, and that the Python
clients and the Python source refuse GSSAPI naming `--kafka-source jvm`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from external import spark_kafka_jars
from hms_server import Server
from kdc_server import Kdc, KerberizedKafka

from ingest.acid import read_table
from ingest.errors import ConfigError
from ingest.kafka import KafkaConnection
from ingest.kafka.produce import produce_events, sample_events
from ingest.txn import Metastore

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "kafka_to_acid.py"
SCHEMA = "id BIGINT, value STRING"
RECORDS = 400
NOTICE = "Kafka uses Kerberos (GSSAPI)"
KEYTAB_SETTINGS = ("security.protocol=SASL_PLAINTEXT", "sasl.mechanism=GSSAPI",
                   "sasl.kerberos.service.name=kafka")


def _keytab_options(kdc: Kdc) -> list[str]:
    return [f"--kafka-option={item}" for item in (
        *KEYTAB_SETTINGS, f"sasl.kerberos.keytab={kdc.client_keytab}",
        f"sasl.kerberos.principal={kdc.client_principal}",
        # The session realm's tickets last 20 s: the Java client logs in again in time.
        "sasl.kerberos.min.time.before.relogin=1000")]


def _jaas_file(kdc: Kdc, directory: Path) -> Path:
    """A Java client's client.properties with the keytab in a Krb5LoginModule JAAS line."""
    path = directory / "kafka-kerberos.properties"
    path.write_text("\n".join([
        *KEYTAB_SETTINGS, "sasl.kerberos.min.time.before.relogin=1000",
        "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required \\",
        f'    useKeyTab=true storeKey=true keyTab="{kdc.client_keytab}" \\',
        f'    principal="{kdc.client_principal}";', ""]))
    return path


def _env(kdc: Kdc) -> dict[str, str]:
    """The job's environment: the metastore's keytab as MIT names it, and Spark's JVM (the
    driver and, in local mode, the executors) pointed at the realm's krb5.conf."""
    krb5 = f"-Djava.security.krb5.conf={kdc.krb5_config}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_CRASH")}
    env.update(PYTHONPATH=str(ROOT), KRB5_CONFIG=str(kdc.krb5_config),
               KRB5_CLIENT_KTNAME=str(kdc.client_keytab),
               PYSPARK_SUBMIT_ARGS=(f"--jars {','.join(spark_kafka_jars())} "
                                    f"--conf spark.driver.extraJavaOptions={krb5} "
                                    f"--conf spark.executor.extraJavaOptions={krb5} "
                                    "pyspark-shell"))
    return env


def _job_args(kafka: KerberizedKafka, topic: str, warehouse: Path, uri: str,
              *extra: str) -> list[str]:
    return [sys.executable, str(JOB), "--bootstrap-servers", kafka.gssapi, "--topic", topic,
            "--table", str(warehouse / "events"), "--schema", SCHEMA,
            "--checkpoint", str(warehouse / "checkpoint"), "--metastore", uri,
            "--kafka-source", "jvm", "--compact", "off", "--clean", "off",
            "--on-new-field", "ignore", *extra]


def _ids(uri: str, location: str) -> list[int]:
    with Metastore.open(uri) as store:
        snapshot = store.snapshot(location)
    return sorted(read_table(location, snapshot).column("id").to_pylist())


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_a_stream_from_kerberized_kafka_into_a_kerberized_hms_is_exactly_once_across_a_kill(
        kerberized_kafka: KerberizedKafka, hms4_kerberos: Server, krb5_env: Kdc,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kdc, kafka, uri = krb5_env, kerberized_kafka, hms4_kerberos.uri
    monkeypatch.setenv("KRB5_CLIENT_KTNAME", str(kdc.client_keytab))
    env = _env(kdc)
    warehouse = tmp_path / "warehouse"
    location = str(warehouse / "events")
    name = f"k_{uuid.uuid4().hex[:10]}.events"
    sink = f"{name}@{(warehouse / 'checkpoint').as_uri()}"
    created = subprocess.run([sys.executable, "-m", "ingest", "create", location, "--name", name,
                              "--schema", SCHEMA, "--metastore", uri, "--json"], env=env,
                             capture_output=True, text=True, timeout=240, check=False)
    assert created.returncode == 0, created.stderr[-3000:]
    topic = f"kerberos-{uuid.uuid4().hex[:8]}"
    produce_events(kafka.plaintext, topic, events=sample_events(RECORDS), partitions=2,
                   key_fn=lambda e: str(e["id"]))  # type: ignore[index]

    # A running stream over GSSAPI (keytab and principal as Kafka settings), SIGKILLed with
    # its Spark JVM (its process group) once it committed two micro-batches.
    job = subprocess.Popen(
        _job_args(kafka, topic, warehouse, uri, *_keytab_options(kdc), "--trigger", "1",
                  "--max-offsets-per-trigger", "20"),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        with Metastore.open(uri) as store:
            while (store.last_committed_batch(sink) or -1) < 1:
                assert job.poll() is None, job.communicate()[1][-5000:]
                assert time.monotonic() < deadline, "no micro-batch committed in 300 s"
                time.sleep(0.5)
        os.killpg(job.pid, signal.SIGKILL)
        _, first_err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.communicate()
    assert job.returncode == -signal.SIGKILL
    assert first_err.count(NOTICE) == 1, first_err[-3000:]
    partial = _ids(uri, location)
    assert 0 < len(partial) < RECORDS and len(set(partial)) == len(partial)

    # The restart: the same stream, the keytab in a Java client's JAAS line this time.
    again = subprocess.run(
        _job_args(kafka, topic, warehouse, uri, "--kafka-config",
                  str(_jaas_file(kdc, tmp_path)), "--available-now"),
        env=env, capture_output=True, text=True, timeout=400, check=False)
    assert again.returncode == 0, again.stderr[-5000:]
    assert _ids(uri, location) == list(range(RECORDS)), "every record exactly once"
    with Metastore.open(uri) as store:
        ranges = store.offset_ranges(name)
    assert sum(r.until_offset - r.from_offset for _, r in ranges) == RECORDS, \
        "each offset committed once"
    for output in (first_err, again.stdout, again.stderr):
        assert "Krb5LoginModule" not in output  # the JAAS text is never shown


def test_keytab_settings_become_the_java_clients_jaas_line_and_python_clients_refuse(
        tmp_path: Path) -> None:
    keytab = tmp_path / "client.keytab"
    keytab.write_bytes(b"\x05\x02")  # only its existence is checked here
    connection = KafkaConnection.of("broker:9092", options=[
        *KEYTAB_SETTINGS, f"sasl.kerberos.keytab={keytab}",
        "sasl.kerberos.principal=ingest@EXAMPLE.COM"])
    assert connection.kerberos
    java = connection.jvm_properties()
    assert java["sasl.mechanism"] == "GSSAPI" and java["sasl.kerberos.service.name"] == "kafka"
    assert java["sasl.jaas.config"] == (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        f'keyTab="{keytab}" principal="ingest@EXAMPLE.COM";')
    with pytest.raises(ConfigError, match="GSSAPI") as refused:
        connection.client_config()
    assert "--kafka-source jvm" in (refused.value.hint or "")

    jaas = ('com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true '
            'principal="ingest@EXAMPLE.COM";')
    given = KafkaConnection.of("broker:9092", options=[*KEYTAB_SETTINGS,
                                                       f"sasl.jaas.config={jaas}"])
    assert given.jvm_properties()["sasl.jaas.config"] == jaas
    assert "Krb5LoginModule" not in repr(given) and "Krb5LoginModule" not in str(
        given.redacted())
    cache = KafkaConnection.of("broker:9092", options=KEYTAB_SETTINGS)
    assert "useTicketCache=true" in cache.jvm_properties()["sasl.jaas.config"]

    with pytest.raises(ConfigError, match="needs sasl.kerberos.principal"):
        KafkaConnection.of("b:9092", options=[*KEYTAB_SETTINGS,
                                              f"sasl.kerberos.keytab={keytab}"])
    with pytest.raises(ConfigError, match="no such file"):
        KafkaConnection.of("b:9092", options=[*KEYTAB_SETTINGS,
                                              f"sasl.kerberos.keytab={tmp_path}/none",
                                              "sasl.kerberos.principal=ingest"])
    with pytest.raises(ConfigError, match="sasl.mechanism is not GSSAPI"):
        KafkaConnection.of("b:9092", options=["security.protocol=SASL_PLAINTEXT",
                                              "sasl.mechanism=PLAIN",
                                              f"sasl.jaas.config={jaas}"])


@pytest.mark.parametrize(("extra", "words"), [
    (("--kafka-source", "python"), "--kafka-source jvm"),
    (("--kafka-source", "jvm", "--commit-offsets-to-group", "g"), "--commit-offsets-to-group"),
])
def test_the_stream_refuses_what_kerberos_cannot_do_before_starting_spark(
        extra: tuple[str, ...], words: str, tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ingest", "stream", "--bootstrap-servers", "localhost:9",
         "--topic", "t", "--table", str(tmp_path / "t"), "--schema", SCHEMA,
         "--checkpoint", str(tmp_path / "cp"), *(f"--kafka-option={s}" for s in KEYTAB_SETTINGS),
         *extra], env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=120, check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "GSSAPI" in done.stderr and words in done.stderr, done.stderr[-3000:]
    assert time.monotonic() - started < 30 and not (tmp_path / "t").exists()
