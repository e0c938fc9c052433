"""Secured Apache Kafka (tests/kafka_server.py): every secured listener is reached by every
Kafka client of the package, and every way of not reaching it is named within seconds.

On the SSL (server certificate), MTLS (client certificate), SASL_SSL (SCRAM-SHA-512) and
SASL_PLAINTEXT (PLAIN) listeners, each given as a `client.properties` file (Java's names for
MTLS and SASL_SSL, librdkafka's for the others, some settings as --kafka-option): `ingest
produce` writes the records; the streaming job reads them with both sources (ours over
confluent-kafka and Spark's JVM source) into tables that hold each record once, serves
`ingest_kafka_lag_records` that follows the broker, and commits the table's offsets to a
consumer group; `ingest status --bootstrap-servers` shows the lag. The SASL password (and
the client's private key) is then looked for in every byte the runs left: their stdout and
stderr, the metrics scrapes, the Spark event log, the checkpoints, the tables and the
metastore. It is nowhere.

Every error case (a wrong password, a mechanism the listener does not offer, an untrusted
CA, a host name the certificate does not hold, an expired or missing client certificate, a
topic the principal may not read, an unreachable broker, the wrong security protocol,
GSSAPI and a Java truststore given to the Python clients) ends `ingest stream` (or `ingest
produce`) within 15 s with exit 2 or 3 and a sentence naming the cause and the setting to
check, before anything is written: no table directory, no metastore file.

The JVM source's jars come from `scripts/fetch-servers.sh sparkkafka` (as in
tests/spark/test_kafka_source_jvm.py); without them, or without Kafka 4.1.1, the tests skip
(and fail under INGEST_REQUIRE_ALL=1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from external import free_port, spark_kafka_jars
from kafka_server import ApacheKafka
from prometheus_client.parser import text_string_to_metric_families

from ingest.acid.read.reader import read_table
from ingest.txn import METASTORE_FILENAME, Metastore, default_metastore_url

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SECURED = ("SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")
SOURCES = ("python", "jvm")
SCHEMA = "id BIGINT, value STRING, ts TIMESTAMP, dt STRING"
RECORDS, EXTRA, PARTITIONS = 20, 5, 2
# What a refused or unreachable Kafka may cost a command, from the moment it can ask Kafka.
FAIL_FAST_S = 15.0

# One Spark session (one JVM: the tests' budget) runs every stream of the first test, as
# jobs/kafka_to_acid.py runs one: flags parsed by its parser, its session (spark.redaction.regex
# included), run_stream; without waiting, so the metrics endpoint can be scraped after the
# query drained the topic (lag 0) and again after EXTRA more records (lag EXTRA).
DRIVER = r"""
import argparse, json, sys, time, urllib.request
from ingest.kafka import produce_events, sample_events
from ingest.spark import StreamOptions, add_arguments, job_session, run_stream

def options(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return StreamOptions.from_flags(vars(parser.parse_args(argv)))

def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as reply:
        return reply.read().decode()

plan = json.loads(open(sys.argv[1]).read())
spark = job_session("secured kafka", "local[2]")
results = []
for listener in plan["listeners"]:
    running = []
    for run in listener["runs"]:
        stream = run_stream(spark, options(run["argv"]), wait=False)
        if not stream.await_termination(timeout_s=300):
            raise SystemExit(f"{run['name']}: the stream did not finish in 300 s")
        running.append((run, stream, scrape(run["port"])))  # the driver still serves
    opts = options(listener["runs"][0]["argv"])
    produce_events(opts.connection, opts.topic, partitions=plan["partitions"],
                   events=sample_events(plan["extra"], start_id=plan["records"]),
                   key_fn=lambda event: str(event["id"]))
    for run, stream, drained in running:
        # The group commit runs on its own thread after the table's: wait for its outcome.
        deadline = time.monotonic() + 120
        while ("ingest_kafka_group_commits_total{" not in (behind := scrape(run["port"]))
               and time.monotonic() < deadline):
            time.sleep(0.2)
        summary = stream.stop()
        results.append({"name": run["name"], "rows": summary.rows, "batches": summary.batches,
                        "drained": drained, "behind": behind})
spark.stop()
print(json.dumps(results))
"""


@dataclass
class Ran:
    """A finished subprocess: its exit code, output and wall time."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass
class Runner:
    """Runs `python ARGS` with the repository on the path and keeps every output under
    `logs` (so the password check reads them with every other file)."""

    logs: Path
    count: int = 0

    def __call__(self, args: list[str], *, timeout: float = 120,
                 env: dict[str, str] | None = None) -> Ran:
        environment = {k: v for k, v in os.environ.items()
                       if not k.startswith("INGEST_CRASH") and k != "PYSPARK_SUBMIT_ARGS"}
        environment.update(PYTHONPATH=str(ROOT), **(env or {}))
        started = time.monotonic()
        done = subprocess.run([sys.executable, *args], env=environment, capture_output=True,
                              text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
        ran = Ran(args, done.returncode, done.stdout, done.stderr,
                  time.monotonic() - started)
        self.count += 1
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.logs / f"{self.count:02d}.out").write_text(done.stdout)
        (self.logs / f"{self.count:02d}.err").write_text(done.stderr)
        return ran


def client_settings(kafka: ApacheKafka, listener: str, directory: Path
                    ) -> tuple[str, list[str]]:
    """The flags a client of `listener` needs: a client.properties file (Java's names for MTLS
    and SASL_SSL, as a Java client's file would have them; librdkafka's for the others) and
    some settings as --kafka-option, merged with the file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{listener.lower()}.properties"
    options: list[str] = []
    if listener == "SSL":
        lines = ["security.protocol=SSL"]
        options = ["--kafka-option", f"ssl.ca.location={kafka.ca}"]
    elif listener == "MTLS":
        # Kafka's PEM key store (KIP-651): the private key and the certificate in one file.
        keystore = directory / "client-keystore.pem"
        keystore.write_text(Path(kafka.client_key).read_text()
                            + Path(kafka.client_cert).read_text())
        lines = ["security.protocol=SSL", "ssl.keystore.type=PEM",
                 f"ssl.keystore.location={keystore}", "ssl.truststore.type=PEM",
                 f"ssl.truststore.location={kafka.ca}",
                 "key.deserializer=org.apache.kafka.common.serialization.ByteArrayDeserializer"]
    elif listener == "SASL_SSL":
        lines = ["security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
                 # A continued line, as JAAS texts often are in such files.
                 "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\",
                 f'    required username="{kafka.user}" password="{kafka.password}";',
                 "ssl.truststore.type=PEM", f"ssl.truststore.location={kafka.ca}"]
    else:
        lines = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
                 f"sasl.username={kafka.user}"]
        options = ["--kafka-option", f"sasl.password={kafka.password}"]
    path.write_text("# written by tests/kafka/test_secured_kafka.py\n" + "\n".join(lines) + "\n")
    return getattr(kafka, listener.lower()), ["--kafka-config", str(path), *options]


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of a scrape, by (sample name, labels)."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def by_partition(samples: Samples, name: str) -> dict[str, float]:
    return {dict(labels)["partition"]: v for (n, labels), v in samples.items() if n == name}


def group_offsets(kafka: ApacheKafka, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, read by the super user on the PLAINTEXT listener."""
    consumer = Consumer({**kafka.client_config("PLAINTEXT"), "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                       timeout=60)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in committed}


def secrets_in(root: Path, secrets: list[bytes], skip: set[Path]) -> list[str]:
    """Every file below `root` (but `skip`) holding one of `secrets`: 'path: which'."""
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path in skip:
            continue
        data = path.read_bytes()
        found += [f"{path}: secret #{i}" for i, s in enumerate(secrets) if s in data]
    return found


@pytest.mark.spark
def test_every_secured_listener_streams_reports_and_commits_and_no_file_holds_the_password(
        apache_kafka: ApacheKafka, tmp_path: Path) -> None:
    kafka = apache_kafka
    jars = spark_kafka_jars()
    inputs, warehouse, events = tmp_path / "inputs", tmp_path / "warehouse", tmp_path / "events"
    events.mkdir()
    run = Runner(tmp_path / "logs")
    suffix = uuid.uuid4().hex[:8]
    flags = {listener: client_settings(kafka, listener, inputs) for listener in SECURED}
    topics = {listener: f"secured-{listener.lower()}-{suffix}" for listener in SECURED}

    # `ingest produce` over each listener creates the topic and writes the records (keyed
    # by id: both partitions get some).
    for listener in SECURED:
        servers, connect = flags[listener]
        produced = run(["-m", "ingest", "produce", "--bootstrap-servers", servers, *connect,
                        "--topic", topics[listener], "--sample", str(RECORDS),
                        "--key-field", "id", "--partitions", str(PARTITIONS), "--json"])
        assert produced.returncode == 0, produced.stderr[-3000:]
        assert json.loads(produced.stdout)["records"] == RECORDS

    # Both sources over each listener, in one Spark JVM with its event log on.
    plan: dict[str, Any] = {"records": RECORDS, "extra": EXTRA, "partitions": PARTITIONS,
                            "listeners": []}
    runs = {}
    for listener in SECURED:
        servers, connect = flags[listener]
        listener_runs = []
        for source in SOURCES:
            name = f"{listener.lower()}_{source}"
            runs[name] = {"listener": listener, "group": f"ingest-{name}-{suffix}",
                          "table": warehouse / name, "port": free_port()}
            listener_runs.append({"name": name, "port": runs[name]["port"], "argv": [
                "--bootstrap-servers", servers, *connect, "--topic", topics[listener],
                "--table", str(warehouse / name), "--schema", SCHEMA,
                "--checkpoint", str(warehouse / f"{name}.checkpoint"), "--available-now",
                "--kafka-source", source, "--metrics-port", str(runs[name]["port"]),
                "--commit-offsets-to-group", runs[name]["group"],
                "--compact", "off", "--clean", "off"]})
        plan["listeners"].append({"runs": listener_runs})
    (inputs / "plan.json").write_text(json.dumps(plan))
    spark_args = (f"--jars {','.join(jars)} --conf spark.eventLog.enabled=true "
                  f"--conf spark.eventLog.dir={events.as_uri()} "
                  "--conf spark.eventLog.compress=false pyspark-shell")
    streamed = run(["-c", DRIVER, str(inputs / "plan.json")], timeout=900,
                   env={"PYSPARK_SUBMIT_ARGS": spark_args})
    assert streamed.returncode == 0, streamed.stderr[-5000:]
    results = {r["name"]: r for r in json.loads(streamed.stdout.strip().splitlines()[-1])}
    assert sorted(results) == sorted(runs)

    for name, r in results.items():
        listener, table = runs[name]["listener"], str(runs[name]["table"])
        assert r["rows"] == RECORDS and r["batches"] >= 1, (name, r)
        with Metastore.open(default_metastore_url(table)) as store:
            snapshot = store.snapshot(table)
        ids = read_table(table, snapshot).column("id").to_pylist()
        assert sorted(ids) == list(range(RECORDS)), f"{name}: every record once"

        # The lag probe reached the broker over the listener: 0 once drained, then EXTRA.
        drained, behind = parse(r["drained"]), parse(r["behind"])
        committed = by_partition(drained, "ingest_kafka_committed_offset")
        assert sorted(committed) == ["0", "1"] and sum(committed.values()) == RECORDS, name
        assert by_partition(drained, "ingest_kafka_lag_records") == {"0": 0, "1": 0}, name
        lag = by_partition(behind, "ingest_kafka_lag_records")
        assert sorted(lag) == ["0", "1"] and sum(lag.values()) == EXTRA, (name, lag)
        commits = {dict(labels)["outcome"]: v for (n, labels), v in behind.items()
                   if n == "ingest_kafka_group_commits_total"}
        assert commits.get("committed", 0) >= 1 and not commits.get("failed"), (name, commits)

        # The consumer group holds the table's offsets, as the broker's own tools see them.
        offsets = group_offsets(kafka, runs[name]["group"], topics[listener])
        assert offsets == {int(p): int(o) for p, o in committed.items()}, (name, offsets)

    # `ingest status --bootstrap-servers` over each listener (of one of its tables, either
    # source's in turn): committed RECORDS, lag EXTRA.
    for listener, source in zip(SECURED, SOURCES * 2, strict=True):
        r = runs[name := f"{listener.lower()}_{source}"]
        servers, connect = flags[listener]
        status = run(["-m", "ingest", "status", str(r["table"]), "--bootstrap-servers",
                      servers, *connect, "--json"])
        assert status.returncode == 0, status.stderr[-3000:]
        stream = json.loads(status.stdout)["stream"]
        assert stream["lag_records"] == EXTRA, (name, stream)
        assert sum(p["committed_offset"] for p in stream["partitions"]) == RECORDS, stream
        assert sum(p["latest_offset"] for p in stream["partitions"]) == RECORDS + EXTRA

    # A wrong password for status is named (and is a secret too: looked for below).
    wrong = f"wrong-{uuid.uuid4().hex}"
    refused = run(["-m", "ingest", "status", str(runs["sasl_plaintext_python"]["table"]),
                   "--bootstrap-servers", kafka.sasl_plaintext, *flags["SASL_PLAINTEXT"][1],
                   "--kafka-option", f"sasl.password={wrong}", "--json"])
    assert refused.returncode == 3, refused.output[-3000:]
    assert "SASL authentication" in refused.output and "sasl.password" in refused.output

    # The password (and the client's private key) nowhere: not in any output, scrape, event
    # log, checkpoint, table file or metastore. Those files hold what is looked for...
    key_lines = Path(kafka.client_key).read_text().splitlines()
    secrets = [kafka.password.encode(), wrong.encode(), key_lines[1].encode(),
               key_lines[2].encode()]  # two whole lines of the key's base64
    logs = [p.read_text(errors="replace") for p in events.rglob("*") if p.is_file()]
    assert any("SparkListenerApplicationStart" in t for t in logs), "no event log written"
    assert all(any(topics[listener] in t for t in logs) for listener in SECURED)
    assert "ingest_kafka_lag_records" in streamed.stdout
    assert (warehouse / METASTORE_FILENAME).is_file(), "no metastore file to look in"
    # ... the check finds a secret where one is (the inputs) ...
    config_files = {p for p in inputs.rglob("*") if p.is_file()}
    assert secrets_in(inputs, secrets[:1], set()), "the password check finds nothing anywhere"
    # ... and nowhere else.
    leaks = secrets_in(tmp_path, secrets, skip=config_files)
    assert not leaks, leaks


@dataclass(frozen=True)
class Case:
    """One way of not reaching Kafka: the command and its Kafka flags (made from the broker
    and the case's files), and what its error must say: the cause and the setting to check."""

    command: str  # "stream" or "produce"
    flags: Any  # (kafka, files) -> (bootstrap servers, flags)
    exit_code: int
    cause: tuple[str, ...]
    setting: str


def _options(kafka: ApacheKafka, files: Path, options: tuple[str, ...]) -> list[str]:
    """--kafka-option items, with {files} (the cases' files), {ca}, {truststore} and
    {truststore_password} filled in."""
    return [x for o in options for x in (
        "--kafka-option", o.format(files=files, ca=kafka.ca, truststore=kafka.truststore,
                                   truststore_password=kafka.truststore_password))]


def _secured(listener: str, *extra: str) -> Any:
    """The listener's own client settings, and `extra` --kafka-option items after them."""
    def flags(kafka: ApacheKafka, files: Path) -> tuple[str, list[str]]:
        servers, connect = client_settings(kafka, listener, files / "inputs")
        return servers, [*connect, *_options(kafka, files, extra)]
    return flags


def _flags(servers: Any, *options: str) -> Any:
    """--kafka-option items alone, to the servers `servers(kafka)` names."""
    def flags(kafka: ApacheKafka, files: Path) -> tuple[str, list[str]]:
        return servers(kafka), _options(kafka, files, options)
    return flags


WRONG_PASSWORD = "wrong-" + uuid.uuid4().hex
CASES = {
    # A wrong password as --kafka-option over a file whose JAAS text holds the right one:
    # the option wins, and the refusal names the credentials.
    "wrong-password-scram": Case("stream", _secured("SASL_SSL", f"sasl.password={WRONG_PASSWORD}"),
                                 3, ("SASL authentication", "SCRAM-SHA-512", "'alice'"),
                                 "sasl.password"),
    "wrong-password-plain-produce": Case(
        "produce", _secured("SASL_PLAINTEXT", f"sasl.password={WRONG_PASSWORD}"), 3,
        ("SASL authentication", "PLAIN"), "sasl.password"),
    "mechanism-not-offered": Case("stream", _secured("SASL_SSL", "sasl.mechanism=SCRAM-SHA-256"),
                                  3, ("do not offer SASL mechanism SCRAM-SHA-256",),
                                  "sasl.mechanism"),
    # Another CA as --kafka-option over a file whose PEM truststore is the right one.
    "untrusted-ca": Case("stream", _secured("SASL_SSL", "ssl.ca.location={files}/other-ca.pem"),
                         3, ("not signed by a trusted CA",), "ssl.ca.location"),
    # 127.1 is 127.0.0.1 to the resolver, but a name the certificate (IP:127.0.0.1,
    # DNS:localhost) does not hold.
    "hostname-mismatch": Case(
        "stream", _flags(lambda k: "127.1:" + k.ssl.rsplit(":", 1)[1],
                         "security.protocol=SSL", "ssl.ca.location={ca}"), 3,
        ("does not name the host connected to, 127.1",), "--bootstrap-servers"),
    "expired-client-certificate": Case(
        "stream", _secured("MTLS", "ssl.certificate.location={files}/expired.pem",
                           "ssl.key.location={files}/expired.key"), 3,
        ("refused this client's certificate", "expired"), "ssl.certificate.location"),
    "no-client-certificate": Case(
        "stream", _flags(lambda k: k.mtls, "security.protocol=SSL", "ssl.ca.location={ca}"), 3,
        ("refused the TLS handshake", "client certificate"), "ssl.certificate.location"),
    "topic-denied": Case("stream", _secured("SASL_SSL"), 3,
                         ("does not let this client's principal see topic",), "sasl.username"),
    "unreachable": Case("stream", _flags(lambda k: f"127.0.0.1:{free_port()}"), 3,
                        ("answered within 10 s",), "--bootstrap-servers"),
    "tls-on-plaintext-listener": Case(
        "stream", _flags(lambda k: k.plaintext, "security.protocol=SSL", "ssl.ca.location={ca}"),
        3, ("TLS handshake failed", "PLAINTEXT broker listener"), "security.protocol"),
    # The other way round: a TLS listener closes a plaintext client's first request.
    "plaintext-on-tls-listener": Case(
        "stream", _flags(lambda k: k.ssl), 3,
        ("closes the connection at the first request", "security.protocol=PLAINTEXT"),
        "security.protocol=SSL"),
    "gssapi-on-python-source": Case(
        "stream", _secured("SASL_SSL", "sasl.mechanism=GSSAPI"), 2,
        ("GSSAPI", "Kerberos"), "--kafka-source jvm"),
    "pkcs12-truststore": Case(
        "stream", _flags(lambda k: k.ssl, "security.protocol=SSL",
                         "ssl.truststore.type=PKCS12", "ssl.truststore.location={truststore}",
                         "ssl.truststore.password={truststore_password}"), 2,
        ("PKCS12 truststore, which only Java clients can read",), "ssl.ca.location"),
}


@dataclass(frozen=True)
class CaseFiles:
    """What the error cases share: their files, a topic with a record and a topic alice may
    not read."""

    dir: Path
    topic: str
    denied: str


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def case_files(apache_kafka: ApacheKafka,
               tmp_path_factory: pytest.TempPathFactory) -> CaseFiles:
    kafka = apache_kafka
    files = tmp_path_factory.mktemp("secured-cases")
    # Another CA, self-signed, that signed nothing of the broker's.
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=another-ca",
             "-keyout", "other-ca.key", "-out", "other-ca.pem", "-days", "1", cwd=files)
    # A client certificate the broker's own CA signed, valid for one day in 2020.
    (files / "ca").mkdir()
    (files / "ca" / "index.txt").touch()
    (files / "ca" / "serial").write_text("01\n")
    (files / "ca.cnf").write_text(
        f"[ca]\ndefault_ca = test\n[test]\ndatabase = {files}/ca/index.txt\n"
        f"new_certs_dir = {files}/ca\nserial = {files}/ca/serial\ndefault_md = sha256\n"
        "policy = any\nunique_subject = no\n[any]\ncommonName = supplied\n[client]\n"
        "basicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage = clientAuth\n")
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=ingest-test-client",
             "-keyout", "expired.key", "-out", "expired.csr", cwd=files)
    _openssl("ca", "-batch", "-config", "ca.cnf", "-extensions", "client", "-notext",
             "-cert", kafka.ca, "-keyfile", str(kafka.dir / "ca.key"), "-in", "expired.csr",
             "-out", "expired.pem", "-startdate", "20200101000000Z",
             "-enddate", "20200102000000Z", cwd=files)
    suffix = uuid.uuid4().hex[:8]
    topic, denied = f"secured-errors-{suffix}", f"secured-denied-{suffix}"
    for name in (topic, denied):
        kafka.create_topic(name)
    from confluent_kafka import Producer

    producer = Producer(kafka.client_config("PLAINTEXT"))
    producer.produce(topic, value=json.dumps({"id": 1}).encode())
    assert producer.flush(60) == 0
    # alice may neither see nor read `denied` (everyone may where no ACL matches).
    admin = kafka.admin()
    acls = [AclBinding(ResourceType.TOPIC, denied, ResourcePatternType.LITERAL,
                       f"User:{kafka.user}", "*", operation, AclPermissionType.DENY)
            for operation in (AclOperation.READ, AclOperation.DESCRIBE)]
    for future in admin.create_acls(acls).values():
        future.result(timeout=60)
    return CaseFiles(files, topic, denied)


@pytest.fixture(scope="module")
def startup_s(tmp_path_factory: pytest.TempPathFactory) -> float:
    """What `ingest stream` takes to start and refuse a malformed --kafka-option, before any
    Kafka client exists: the part of a command's time that is Python starting, not Kafka."""
    directory = tmp_path_factory.mktemp("secured-startup")
    ran = Runner(directory / "logs")(
        ["-m", "ingest", "stream", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t",
         "--table", str(directory / "events"), "--schema", SCHEMA,
         "--checkpoint", str(directory / "checkpoint"), "--kafka-option", "no-equals-sign"])
    assert ran.returncode == 2 and "is not KEY=VALUE" in ran.stderr, ran.stderr[-2000:]
    return ran.seconds


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_way_of_not_reaching_kafka_is_named_fast_and_nothing_is_written(
        apache_kafka: ApacheKafka, case_files: CaseFiles,
        startup_s: float, tmp_path: Path, name: str) -> None:
    case = CASES[name]
    servers, flags = case.flags(apache_kafka, case_files.dir)
    topic = case_files.denied if name == "topic-denied" else case_files.topic
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    if case.command == "stream":
        args = ["stream", "--bootstrap-servers", servers, *flags, "--topic", topic,
                "--table", str(warehouse / "events"), "--schema", SCHEMA,
                "--checkpoint", str(warehouse / "checkpoint"), "--available-now"]
    else:
        args = ["produce", "--bootstrap-servers", servers, *flags, "--topic", topic,
                "--sample", "1"]
    ran = Runner(tmp_path / "logs")(["-m", "ingest", *args])

    assert ran.returncode == case.exit_code, ran.output[-3000:]
    # Our sentence, not librdkafka's log lines (which name ssl.ca.location for any TLS case).
    error = "\n".join(line for line in ran.stderr.splitlines() if line.startswith("Error: "))
    hint = "\n".join(line for line in ran.stderr.splitlines() if line.startswith("Hint: "))
    for phrase in case.cause:
        assert phrase in error, (name, ran.stderr[-3000:])
    assert case.setting in hint, (name, ran.stderr[-3000:])
    # Within FAIL_FAST_S of being able to ask Kafka (a busy machine slows Python's start-up,
    # not the Kafka clients' bounds: UNREACHABLE_S for a broker that does not answer).
    assert ran.seconds - startup_s < FAIL_FAST_S, (name, ran.seconds, startup_s)
    assert sorted(warehouse.iterdir()) == [], "no table directory, no metastore file"
    for secret in (apache_kafka.password, WRONG_PASSWORD):
        assert secret not in ran.output, name
