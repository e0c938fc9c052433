"""Several Hive Metastore hosts (`thrift://h1:9083,h2:9083`): the URI list, connect failover in
the order given, and writes that survive the loss of their host, between calls and inside
`open_txns` and `commit_txn`, against two Hive 4.0.1 metastores on one PostgreSQL database."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pytest
from external import free_port
from hms_server import Server, hms_server
from pg_server import PgServer
from support import wait_until

from ingest.errors import CommitConflictError, ConfigError
from ingest.txn import Metastore, MetastoreError, TableDefinition, hms
from ingest.txn.hms.thrift import abort_txn, commit_txn_settled, open_txns, ttypes
from ingest.txn.hms.thrift.address import parse_thrift_hosts

pytestmark = pytest.mark.hms

ROWS = pa.schema([("id", pa.int64()), ("v", pa.string())])


# -- the URI list ----------------------------------------------------------------------------


def test_a_list_of_hosts_is_parsed_in_order_with_its_options() -> None:
    uri = "thrift://H2.example:9084,h1.example:9083,[::1]:9085?auth=kerberos&qop=auth-conf"
    assert parse_thrift_hosts(uri) == [("h2.example", 9084), ("h1.example", 9083),
                                       ("::1", 9085)]
    assert hms.parse_thrift_uri(uri) == ("h2.example", 9084)  # the first, as before
    assert parse_thrift_hosts("thrift://127.0.0.1:9083") == [("127.0.0.1", 9083)]


@pytest.mark.parametrize(("uri", "named"), [
    ("thrift://h1:9083,,h2:9083", "empty"),
    ("thrift://h1:9083,:9084", "':9084'"),
    ("thrift://h1:9083,h2", "'h2'"),
    ("thrift://h1:9083,h2:port", "'h2:port'"),
    ("thrift://h1:9083,h2:0", "'h2:0'"),
    ("thrift://h1:9083,h2:70000", "'h2:70000'"),
    ("thrift://h1:9083,H1:9083", "'H1:9083' is listed twice"),
])
def test_a_bad_entry_of_the_list_is_named(uri: str, named: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_thrift_hosts(uri)
    assert named in e.value.message
    with pytest.raises(ConfigError):
        hms.connect(uri)


# -- connect failover ------------------------------------------------------------------------


class _Silent:
    """A port that accepts connections (the kernel's backlog) and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[_Silent]:
    s = _Silent()
    yield s
    s.close()


def test_nothing_answering_names_every_host_and_its_reason(silent: _Silent) -> None:
    refused = free_port()
    uri = f"thrift://127.0.0.1:{refused},127.0.0.1:{silent.port}"
    with pytest.raises(MetastoreError) as e:
        hms.connect(uri, connect_timeout_s=0.5)
    text = e.value.message
    assert f"127.0.0.1:{refused}: " in text and f"127.0.0.1:{silent.port}: " in text
    assert "refused" in text.lower() and "timeout" in text.lower()


@pytest.mark.parametrize("dead", ["refusing", "silent"])
def test_a_dead_first_host_costs_at_most_one_connect_timeout(
        hms4: Server, silent: _Silent, dead: str) -> None:
    first = free_port() if dead == "refusing" else silent.port
    live = hms4.uri.removeprefix("thrift://")
    timeout_s = 3.0
    started = time.monotonic()
    with hms.connect(f"thrift://127.0.0.1:{first},{live}",
                     connect_timeout_s=timeout_s) as conn:
        took = time.monotonic() - started
        assert conn.uri == hms4.uri  # the connection names the host it is on
        assert conn.service_uri == f"thrift://127.0.0.1:{first},{live}"
        assert conn.call("getVersion")
    assert took < timeout_s + 2.0, took  # one timeout, then the live host's own answer


# -- two metastores on one PostgreSQL ----------------------------------------------------------


@pytest.fixture(scope="module")
def backing_db(pg_server: PgServer) -> str:
    """One database for the module: the first metastore initialises it, the others find it."""
    return pg_server.url(pg_server.create_database())


@pytest.fixture
def pair(backing_db: str) -> Iterator[tuple[Server, Server]]:
    """Two Hive 4.0.1 metastores serving the same PostgreSQL database."""
    with hms_server("4", backing_db=backing_db) as one, \
            hms_server("4", backing_db=backing_db) as two:
        yield one, two


def _hostport(server: Server) -> str:
    return server.uri.removeprefix("thrift://")


def _kill(server: Server) -> None:
    os.kill(int((server.directory / "pid").read_text()), signal.SIGKILL)


def _open_txn_ids(uri: str) -> list[int]:
    """The transactions open in the metastore (get_open_txns lists aborted ones too)."""
    with hms.connect(uri) as conn:
        infos = conn.call("get_open_txns_info").open_txns or []
        return sorted(i.id for i in infos if i.state == ttypes().TxnState.OPEN)


def _defn(tmp_path: Path) -> TableDefinition:
    db = "f_" + uuid.uuid4().hex[:10]
    return TableDefinition(f"{db}.events", f"file://{tmp_path}/wh/events", ROWS)


def test_the_pair_shares_one_metastore(pair: tuple[Server, Server], tmp_path: Path) -> None:
    one, two = pair
    # The second start found the schema the first (or an earlier pair) put there.
    assert (two.directory / "schematool-info.log").exists()
    assert not (two.directory / "schematool.log").exists()
    defn = _defn(tmp_path)
    with Metastore.open(one.uri) as first:
        first.create_table(defn)
    with Metastore.open(two.uri) as second:
        assert second.get_table(defn.name).location == defn.location


def test_a_write_survives_the_sigkill_of_its_host_between_calls(
        pair: tuple[Server, Server], tmp_path: Path) -> None:
    one, two = pair
    uri = f"thrift://{_hostport(one)},{_hostport(two)}"
    defn = _defn(tmp_path)
    with Metastore.open(uri) as store:
        assert store.location == uri
        assert store._conn.uri == one.uri  # the first host: the order given
        store.create_table(defn)
        before = set(_open_txn_ids(two.uri))
        _kill(one)
        txn = store.open_transaction(defn.name, agent="failover-test")
        assert store._conn.uri == two.uri
        store.commit(txn)
        assert store.write_id_states(defn.name)[txn.write_id] == "committed"
    assert txn.txn_id not in _open_txn_ids(two.uri)
    assert set(_open_txn_ids(two.uri)) <= before


def test_a_transaction_opened_before_the_sigkill_commits_on_the_other_host(
        pair: tuple[Server, Server], tmp_path: Path) -> None:
    one, two = pair
    uri = f"thrift://{_hostport(one)},{_hostport(two)}"
    defn = _defn(tmp_path)
    with Metastore.open(uri) as store:
        store.create_table(defn)
        txn = store.open_transaction(defn.name)
        _kill(one)
        store.commit(txn)  # its first call finds the host gone; the commit's outcome decides
        assert store.write_id_states(defn.name)[txn.write_id] == "committed"
    assert txn.txn_id not in _open_txn_ids(two.uri)


def test_a_hive3_pair_on_postgresql_fails_over(pg_server: PgServer, tmp_path: Path) -> None:
    """`hms.sh start --version 3 --backing-db`: two Hive 3.1.3 metastores on one database; a
    transaction opened on the first commits on the second after the first's SIGKILL."""
    url = pg_server.url(pg_server.create_database())
    with hms_server("3", backing_db=url) as one, hms_server("3", backing_db=url) as two:
        assert not (two.directory / "schematool.log").exists()  # the first made the schema
        uri = f"thrift://{_hostport(one)},{_hostport(two)}"
        defn = _defn(tmp_path)
        with Metastore.open(uri) as store:
            assert store._conn.info.major == 3
            store.create_table(defn)
            txn = store.open_transaction(defn.name)
            _kill(one)
            store.commit(txn)
            assert store._conn.uri == two.uri
            assert store.write_id_states(defn.name) == {txn.write_id: "committed"}
        assert txn.txn_id not in _open_txn_ids(two.uri)


# -- a call cut off mid-flight, through a relay we control -------------------------------------


class _Relay:
    """A TCP relay to a metastore that, once armed with a Thrift method name, cuts the
    client's connection at that call: after the server answered it (`after=True`: the call
    happened, its answer is lost) or before forwarding it (the call never reached the
    server)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.armed: tuple[bytes, bool] | None = None
        self.cut = threading.Event()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, method: str, *, after: bool) -> None:
        self.armed = (method.encode(), after)

    def close(self) -> None:
        self._closed = True
        self.sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            answered = threading.Event()
            dropping = threading.Event()
            threading.Thread(target=self._down, args=(server, client, dropping, answered),
                             daemon=True).start()
            threading.Thread(target=self._up, args=(client, server, dropping, answered),
                             daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, dropping: threading.Event,
            answered: threading.Event) -> None:
        while True:
            try:
                data = client.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            armed = self.armed
            if armed is not None and armed[0] in data:
                self.armed = None
                if armed[1]:
                    dropping.set()
                    server.sendall(data)
                    answered.wait(60)  # the server did it; the answer goes nowhere
                self.cut.set()
                break
            server.sendall(data)
        for s in (client, server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    @staticmethod
    def _down(server: socket.socket, client: socket.socket, dropping: threading.Event,
              answered: threading.Event) -> None:
        while True:
            try:
                data = server.recv(65536)
            except OSError:
                return
            if not data:
                return
            if dropping.is_set():
                answered.set()
                continue
            try:
                client.sendall(data)
            except OSError:
                return


@pytest.fixture
def relayed(pair: tuple[Server, Server]) -> Iterator[tuple[_Relay, Server, str]]:
    """A relay to the first metastore, and the URI listing the relay, then the second."""
    one, two = pair
    relay = _Relay(int(one.uri.rsplit(":", 1)[1]))
    yield relay, two, f"thrift://127.0.0.1:{relay.port},{_hostport(two)}"
    relay.close()


@pytest.mark.parametrize("after", [True, False], ids=["answer-lost", "never-sent"])
def test_a_commit_cut_off_is_looked_up_before_it_is_redone(
        relayed: tuple[_Relay, Server, str], tmp_path: Path, after: bool) -> None:
    relay, two, uri = relayed
    defn = _defn(tmp_path)
    with Metastore.open(uri) as store:
        store.create_table(defn)
        txn = store.open_transaction(defn.name)
        relay.arm("commit_txn", after=after)
        store.commit(txn)
        assert relay.cut.is_set()
        assert store._conn.uri == two.uri
        assert store.write_id_states(defn.name)[txn.write_id] == "committed"
        # Exactly once: the next transaction's write id follows directly.
        again = store.open_transaction(defn.name)
        assert again.write_id == txn.write_id + 1
        store.abort(again)
    assert not {txn.txn_id, again.txn_id} & set(_open_txn_ids(two.uri))


def test_an_open_txns_cut_off_leaves_no_orphan(relayed: tuple[_Relay, Server, str],
                                               tmp_path: Path) -> None:
    relay, two, uri = relayed
    defn = _defn(tmp_path)
    with Metastore.open(uri) as store:
        store.create_table(defn)
        before = set(_open_txn_ids(two.uri))
        with hms.connect(two.uri) as conn:
            high = conn.call("get_open_txns_info").txn_high_water_mark
        relay.arm("open_txns", after=True)
        txn = store.open_transaction(defn.name)
        assert relay.cut.is_set()
        opened = set(_open_txn_ids(two.uri)) - before
        assert opened == {txn.txn_id}
        # The lost attempt's transaction (the relay forwarded the call and the server
        # answered it) is the one before, and it is not left open.
        orphan = txn.txn_id - 1
        assert orphan == high + 1 and orphan not in _open_txn_ids(two.uri)
        store.commit(txn)
    wait_until("no transaction of ours left open",
               lambda: txn.txn_id not in _open_txn_ids(two.uri), timeout_s=30)


def test_a_write_id_allocation_cut_off_gets_the_lost_calls_write_id(
        relayed: tuple[_Relay, Server, str], tmp_path: Path) -> None:
    relay, two, uri = relayed
    defn = _defn(tmp_path)
    with Metastore.open(uri) as store:
        store.create_table(defn)
        relay.arm("allocate_table_write_ids", after=True)
        txn = store.open_transaction(defn.name)
        assert relay.cut.is_set()
        # The lost call allocated write id 1 to the transaction; asked again, Hive answers
        # it rather than a second one.
        assert txn.write_id == 1
        store.commit(txn)
        assert store.write_id_states(defn.name) == {1: "committed"}
    assert txn.txn_id not in _open_txn_ids(two.uri)


# -- a commit whose answer is lost: the outcome, on either Hive ----------------------------------


def _cut(uri: str) -> hms.HmsConnection:
    """A connection that broke: every call on it fails as a call cut off does."""
    conn = hms.connect(uri)
    conn.close()
    return conn


def _infos(uri: str) -> dict[int, str]:
    with hms.connect(uri) as conn:
        return {i.id: str(i.state) for i in conn.call("get_open_txns_info").open_txns or ()}


def test_a_commit_whose_answer_was_lost_is_confirmed_not_redone(
        metastore: Server, tmp_path: Path) -> None:
    """The commit happened, its answer did not arrive: sent again, Hive answers that it is
    committed (commit_txn of a committed transaction succeeds on 4.0.1 and 3.1.3)."""
    defn = _defn(tmp_path)
    with Metastore.open(metastore.uri) as store:
        store.create_table(defn)
        txn = store.open_transaction(defn.name)
        store.commit(txn)
        commit_txn_settled(_cut(metastore.uri), lambda: hms.connect(metastore.uri), txn.txn_id)
        assert store.write_id_states(defn.name) == {txn.write_id: "committed"}


def test_a_transaction_aborted_by_the_server_is_no_commit(
        metastore: Server, tmp_path: Path) -> None:
    """Aborted (here by another client, as the timeout reaper would) while the commit's
    answer was lost: the commit did not happen, and the caller is told so."""
    defn = _defn(tmp_path)
    with Metastore.open(metastore.uri) as store:
        store.create_table(defn)
        txn = store.open_transaction(defn.name)
        with hms.connect(metastore.uri) as other:
            assert abort_txn(other, txn.txn_id)
        with pytest.raises(CommitConflictError, match="aborted"):
            commit_txn_settled(_cut(metastore.uri), lambda: hms.connect(metastore.uri),
                               txn.txn_id)
        assert store.write_id_states(defn.name)[txn.write_id] == "aborted"


def test_an_aborted_transaction_the_housekeeper_removed_is_not_taken_for_committed(
        hms4: Server) -> None:
    """Hive 4's housekeeper deletes an aborted transaction that wrote nothing from TXNS, after
    which it looks like a committed one in get_open_txns_info (listed no more, below the high
    water mark). The outcome of a commit cut off then is unknown, never "committed"."""
    with hms.connect(hms4.uri) as conn:
        txn_id, later = open_txns(conn, 2)  # Hive never removes the highest transaction
        assert abort_txn(conn, txn_id) and abort_txn(conn, later)
    assert _infos(hms4.uri).get(txn_id) == str(ttypes().TxnState.ABORTED)
    wait_until("the housekeeper removed the empty aborted transaction",
               lambda: txn_id not in _infos(hms4.uri), timeout_s=180)
    with pytest.raises(MetastoreError, match="Cannot tell whether") as caught:
        commit_txn_settled(_cut(hms4.uri), lambda: hms.connect(hms4.uri), txn_id)
    assert not isinstance(caught.value, CommitConflictError)


# -- the stream --------------------------------------------------------------------------------


def _load_sibling(name: str) -> ModuleType:
    """A module beside this one (the tests import in importlib mode: no package path)."""
    spec = importlib.util.spec_from_file_location(f"_failover_{name}",
                                                  Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_the_stream_goes_on_when_its_metastore_host_is_sigkilled(
        pair: tuple[Server, Server], kafka_broker: str, topic: str, warehouse: Path) -> None:
    """kill -9 of the metastore host the job is on, mid-stream: the job moves to the other
    host and goes on without a restart, every record exactly once, nothing left open."""
    stream = _load_sibling("test_hms_stream")  # its job helpers
    _create, _env, _ids, _job_args, _produce, _sink = (
        stream._create, stream._env, stream._ids, stream._job_args, stream._produce,
        stream._sink)
    one, two = pair
    uri = f"thrift://{_hostport(one)},{_hostport(two)}"
    records = 300
    location, name = _create(uri, warehouse)
    _produce(kafka_broker, topic, 0, records)
    job = subprocess.Popen(
        _job_args(kafka_broker, topic, warehouse, uri, "--available-now",
                  "--max-offsets-per-trigger", "20"),
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with Metastore.open(two.uri) as store:
            wait_until("a micro-batch committed",
                       lambda: (store.last_committed_batch(_sink(name, warehouse)) or -1) >= 1,
                       timeout_s=240)
            at_kill = store.last_committed_batch(_sink(name, warehouse))
        assert job.poll() is None, "the job ended before the kill"
        _kill(one)
        _, err = job.communicate(timeout=600)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert job.returncode == 0, err[-3000:]
    assert _ids(two.uri, location) == list(range(records)), "every record exactly once"
    with Metastore.open(two.uri) as store:
        assert not [t for t in store.transactions(name) if t.state == "open"]
        last = store.last_committed_batch(_sink(name, warehouse))
    assert at_kill is not None and last is not None and last > at_kill, (at_kill, last)
