"""TLS on the metastore's Thrift port (issue 33, item 5): the URI's tls= and tls_ca= options,
our client against real TLS metastores (scripts/hms.sh --tls: Hive 4.0.1 and 3.1.3, one
server per version for the module, and Hive 4 with Kerberos inside TLS), the bytes on the wire
encrypted, and each failure named within 15 s (ConfigError for the user's settings, exit 2;
MetastoreError for the server, exit 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pyarrow as pa
import pytest
from external import free_port
from hms_server import Server, hms_server
from kdc_server import Kdc, kdc, krb5_env, with_keytab  # noqa: F401 - fixtures
from wire_relay import Relay, relay_to  # noqa: F401 - the fixture

from ingest.acid.format.committed import CommittedFile
from ingest.errors import ConfigError
from ingest.txn import Metastore, MetastoreError, TableDefinition, hms
from ingest.txn.hms.thrift import ThriftOptions, parse_thrift_options

pytestmark = pytest.mark.hms

ROWS = pa.schema([("id", pa.int64()), ("v", pa.string())])
QUICK_S = 15.0
"""Issue 33: every failure is named within this long."""
ROOT = Path(__file__).resolve().parents[2]


# -- the options ------------------------------------------------------------------------------


def test_tls_options_are_parsed_and_written_back_canonically() -> None:
    options = parse_thrift_options("thrift://h:9083?tls_ca=/etc/ssl/hms-ca.pem&tls=TRUE")
    assert options == ThriftOptions(tls=True, tls_ca="/etc/ssl/hms-ca.pem")
    assert options.query() == "tls=true&tls_ca=/etc/ssl/hms-ca.pem"
    assert parse_thrift_options("thrift://h:9083?tls=true").query() == "tls=true"
    assert parse_thrift_options("thrift://h:9083?tls=false") == ThriftOptions()
    both = parse_thrift_options("thrift://h1:9083,h2:9083?tls=true&auth=kerberos&tls_ca=/c.pem")
    assert both.kerberos and both.tls
    assert both.query() == "auth=kerberos&principal=hive/_HOST&qop=auth&tls=true&tls_ca=/c.pem"


@pytest.mark.parametrize(("query", "words"), [
    ("tls=yes", r"tls=yes is not true or false.*hive\.metastore\.use\.SSL"),
    ("tls=", r"the option tls is empty"),
    ("tls=true&tls=true", r"the option tls is given twice"),
    ("tls=true&tls_ca=", r"the option tls_ca is empty"),
    ("tls_ca=/c.pem", r"tls_ca needs tls=true.*add tls=true"),
    ("tls=false&tls_ca=/c.pem", r"tls_ca needs tls=true"),
    ("tls=true&tls_ca=/a.pem&tls_ca=/b.pem", r"the option tls_ca is given twice"),
    ("tls=true&tls_cert=/c.pem", r"unknown option 'tls_cert'.*tls, tls_ca"),
])
def test_bad_tls_options_are_config_errors_naming_the_option(query: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_thrift_options(f"thrift://h:9083?{query}")


# -- servers and helpers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_hms() -> Iterator[Callable[[str], Server]]:
    """One TLS metastore per version for the module, started when a test first asks for it
    (under xdist each version's tests run on its group's worker, which starts only that one)."""
    with ExitStack() as stack:
        started: dict[str, Server] = {}

        def get(version: str) -> Server:
            if version not in started:
                started[version] = stack.enter_context(
                    hms_server(version, start_args=("--tls",)))
            return started[version]

        yield get


@pytest.fixture(params=["4", "3"], ids=["hive4", "hive3"])
def version(request: pytest.FixtureRequest) -> str:
    """Hive 4.0.1 and 3.1.3 (the xdist grouping of tests/conftest.py reads this parameter)."""
    return str(request.param)


def _port(uri: str) -> int:
    return int(uri.split("://", 1)[1].split("?", 1)[0].rsplit(":", 1)[1])


def _ca(server: Server) -> Path:
    return server.directory / "tls" / "ca.pem"


def _on_port(server: Server, port: int, host: str = "127.0.0.1") -> str:
    """The server's URI, options kept, pointed at `host:port` (a relay)."""
    return server.uri.replace(f"127.0.0.1:{_port(server.uri)}", f"{host}:{port}")


def _quickly(call: Callable[[], object], error: type[Exception], words: str) -> Exception:
    """Run `call`, which must raise `error` (exactly: a ConfigError is no MetastoreError)
    matching `words` within QUICK_S."""
    start = time.monotonic()
    with pytest.raises(error, match=words) as raised:
        call()
    assert type(raised.value) is error
    assert time.monotonic() - start < QUICK_S
    return raised.value


# -- against real TLS metastores --------------------------------------------------------------


def test_hms_sh_prints_the_ca_and_a_uri_with_the_options_but_never_the_password(
        tls_hms: Callable[[str], Server]) -> None:
    server = tls_hms("4")
    assert server.uri == (f"thrift://127.0.0.1:{_port(server.uri)}?tls=true"
                          f"&tls_ca={_ca(server)}")
    password = (server.directory / "tls" / "keystore.pass").read_text().strip()
    assert len(password) >= 32
    assert password not in server.log.read_text(errors="replace")
    site = server.directory / "conf" / "metastore-site.xml"
    assert password in site.read_text() and site.stat().st_mode & 0o077 == 0


def test_our_client_calls_a_tls_metastore_and_writes_through_it_encrypted(
        version: str, tls_hms: Callable[[str], Server],
        relay_to: Callable[..., Relay], tmp_path: Path) -> None:  # noqa: F811 - the fixture
    """getVersion and get_all_databases, then the metastore backend's create, a transaction
    with its heartbeat, and its commit, all through a relay: what the client sent is a TLS
    handshake and records, never the table's name or a Thrift method's."""
    server = tls_hms(version)
    relay = relay_to(_port(server.uri))
    uri = _on_port(server, relay.port)
    with hms.connect(uri) as conn:
        assert conn.uri == uri  # tls= and tls_ca= stay: reconnects and heartbeats use them
        assert conn.info.major == int(version)
        assert "default" in conn.call("get_all_databases")
    db = "tls_" + uuid.uuid4().hex[:10]
    defn = TableDefinition(f"{db}.events", f"file://{tmp_path}/wh/events", ROWS,
                           partition_columns=("dt",))
    with Metastore.open(uri) as store:
        store.create_table(defn)
        txn = store.open_transaction(defn, agent="host:1:ingest-tls-test")
        store.heartbeat(txn)
        entry = CommittedFile("dt=2024-01-01/delta_0000001_0000001_0000/bucket_00000",
                              txn.write_id, 100, "0" * 16, 1)
        store.commit(txn, files={defn.name: [entry]})
        assert store.committed_files(defn) == {entry.path: entry}
        assert store.write_id_states(defn) == {txn.write_id: "committed"}
    with Metastore.open(server.uri, read_only=True) as again:
        assert again.get_table(defn.location).name == defn.name
        assert again.snapshot(defn).high_watermark == txn.write_id
    with hms.connect(server.uri) as conn:
        conn.call("drop_database", db, False, True)
    assert relay.sent[:1] == b"\x16"  # a TLS handshake record (ClientHello)
    assert len(relay.sent) > 4_000  # every call of the write went through it
    for plain in (db.encode(), b"events", b"get_all_databases", b"open_txns", b"commit_txn"):
        assert plain not in relay.sent


def test_the_host_name_localhost_verifies_and_several_hosts_fail_over_under_tls(
        tls_hms: Callable[[str], Server]) -> None:
    """The certificate names DNS:localhost too; a list whose first host does not answer
    connects to the next, with TLS and its CA kept."""
    server = tls_hms("4")
    port = _port(server.uri)
    dead = free_port()
    uri = f"thrift://127.0.0.1:{dead},localhost:{port}?tls=true&tls_ca={_ca(server)}"
    with hms.connect(uri) as conn:
        assert conn.uri == f"thrift://localhost:{port}?tls=true&tls_ca={_ca(server)}"
        assert conn.service_uri == uri
        assert "default" in conn.call("get_all_databases")


def test_tls_under_kerberos_runs_sasl_inside_the_tls_session(
        krb5_env: Kdc, relay_to: Callable[..., Relay]) -> None:  # noqa: F811 - the fixture
    """Hive 4 with SASL GSSAPI (qop auth: SASL itself encrypts nothing) on a TLS port: our
    client calls it, and the SASL handshake's mechanism name never crosses the wire in
    plain, because it runs inside TLS."""
    with hms_server("4", start_args=("--tls", "--kerberos", str(krb5_env.directory))) as server:
        assert "auth=kerberos" in server.uri and "tls=true" in server.uri
        relay = relay_to(_port(server.uri))
        with hms.connect(with_keytab(_on_port(server, relay.port), krb5_env)) as conn:
            assert conn.info.version == "4.0.1"
            assert "default" in conn.call("get_all_databases")
        assert relay.sent[:1] == b"\x16"
        assert b"GSSAPI" not in relay.sent and b"get_all_databases" not in relay.sent
        # Kerberos without TLS on this port: the server's TLS alert, named as such.
        plain = with_keytab(server.uri.split("&tls=", 1)[0], krb5_env)
        _quickly(lambda: hms.connect(plain), ConfigError,
                 r"(?s)answered with a TLS alert.*add tls=true&tls_ca=")


# -- the failures -----------------------------------------------------------------------------


def _other_ca(directory: Path) -> Path:
    """A CA certificate that did not sign the metastore's."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    str(directory / "other.key"), "-out", str(directory / "other.pem"),
                    "-days", "1", "-subj", "/CN=another CA"],
                   check=True, capture_output=True, timeout=60)
    return directory / "other.pem"


def test_a_certificate_another_ca_signed_names_the_tls_ca_file_and_the_host(
        tls_hms: Callable[[str], Server], tmp_path: Path) -> None:
    server = tls_hms("4")
    other = _other_ca(tmp_path)
    uri = server.uri.replace(str(_ca(server)), str(other))
    _quickly(lambda: hms.connect(uri), ConfigError,
             rf"(?s)certificate of 127\.0\.0\.1 does not verify against a CA of the tls_ca "
             rf"file {other}.*set tls_ca=")
    # Without tls_ca, the system's trust store, which does not hold the throwaway CA.
    _quickly(lambda: hms.connect(uri.split("&tls_ca=", 1)[0]), ConfigError,
             r"(?s)does not verify against a CA of the system's trust store.*set tls_ca=")


def test_a_host_name_the_certificate_does_not_list_is_named(
        tls_hms: Callable[[str], Server],
        relay_to: Callable[..., Relay]) -> None:  # noqa: F811 - the fixture
    """127.0.0.2 reaches the server through a relay, but the certificate lists only
    127.0.0.1 and localhost."""
    server = tls_hms("4")
    relay = relay_to(_port(server.uri), listen="127.0.0.2")
    _quickly(lambda: hms.connect(_on_port(server, relay.port, host="127.0.0.2")), ConfigError,
             r"(?s)certificate does not name the host 127\.0\.0\.2.*subjectAltName")


def test_a_tls_client_against_a_plain_metastore_is_told_to_drop_tls(hms4: Server) -> None:
    _quickly(lambda: hms.connect(f"{hms4.uri}?tls=true"), MetastoreError,
             r"(?s)did not complete a TLS handshake.*hive\.metastore\.use\.SSL=true.*"
             r"drop tls=true")


def test_a_plain_client_against_a_tls_metastore_is_told_to_add_tls(
        tls_hms: Callable[[str], Server]) -> None:
    plain = tls_hms("4").uri.split("?", 1)[0]
    _quickly(lambda: hms.connect(plain), MetastoreError,
             r"(?s)getVersion.*if the metastore uses TLS \(hive\.metastore\.use\.SSL\), add "
             r"\?tls=true&tls_ca=")


@pytest.mark.parametrize("kind", ["missing", "directory", "not PEM"])
def test_a_tls_ca_that_cannot_be_used_is_named_before_connecting(
        kind: str, tmp_path: Path) -> None:
    """Nothing needs to listen: the file is read first (the port is a closed one)."""
    path = tmp_path / "ca.pem"
    if kind == "directory":
        path.mkdir()
    elif kind == "not PEM":
        path.write_text("not a certificate\n")
    words = {"missing": "No such file", "directory": "Is a directory",
             "not PEM": "holds no PEM certificate"}[kind]
    _quickly(lambda: hms.connect(f"thrift://127.0.0.1:{free_port()}?tls=true&tls_ca={path}"),
             ConfigError, rf"(?s)tls_ca file {path} .*{words}")


# -- the command ------------------------------------------------------------------------------


def _ingest(uri: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`ingest ARGS` in a process of its own, the metastore in INGEST_METASTORE."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")}
    env.update(INGEST_METASTORE=uri, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "ingest", *args], env=env, capture_output=True,
                          text=True, timeout=240, check=False)


def test_the_command_writes_over_tls_and_exits_2_or_3_naming_the_cause(
        tls_hms: Callable[[str], Server], tmp_path: Path) -> None:
    """create, load and cat with the TLS URI in INGEST_METASTORE; a CA that did not sign the
    certificate exits 2 (the user's setting), a plain URI against the TLS port exits 3 (the
    server), and neither creates anything."""
    server = tls_hms("4")
    table = tmp_path / "events"
    name = f"tls_{uuid.uuid4().hex[:10]}.events"
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": i, "v": f"v{i}"}) + "\n" for i in range(5)))
    other = _other_ca(tmp_path / "other")
    refused = {
        server.uri.replace(str(_ca(server)), str(other)): (2, "does not verify against a CA of "
                                                              f"the tls_ca file {other}"),
        server.uri.split("?", 1)[0]: (3, "hive.metastore.use.SSL"),
    }
    for uri, (code, words) in refused.items():
        done = _ingest(uri, "create", str(table), "--name", name, "--schema",
                       "id BIGINT, v STRING")
        assert done.returncode == code, done.stderr[-3000:]
        assert words in done.stderr
        assert not table.exists()
    for args in (("create", str(table), "--name", name, "--schema", "id BIGINT, v STRING"),
                 ("load", str(table), "--input", str(rows))):
        done = _ingest(server.uri, *args)
        assert done.returncode == 0, done.stderr[-3000:]
    done = _ingest(server.uri, "cat", str(table))
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(json.loads(line)["id"] for line in done.stdout.splitlines()) == list(range(5))
    with Metastore.open(server.uri, read_only=True) as store:
        assert store.get_table(f"file://{table}").name == name
    with hms.connect(server.uri) as conn:
        conn.call("drop_database", name.split(".")[0], False, True)
