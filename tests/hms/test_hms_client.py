"""ingest.txn.hms against real Hive Metastores (4.0.1 and 3.1.3; Hive 2.3 for the refusal):
connecting and its errors, tables, transactions, write ids, locks, heartbeats and snapshots."""

from __future__ import annotations

import http.server
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from external import free_port
from hms_server import TXN_TIMEOUT_S, Server

from ingest.acid import ValidWriteIdList
from ingest.errors import (
    CommitConflictError,
    ConfigError,
    TableExistsError,
    TableNotFoundError,
    UnknownMethodError,
    UnsupportedFormatError,
)
from ingest.txn import MetastoreError, hms
from ingest.txn.hms.thrift import _stubs

pytestmark = pytest.mark.hms

ROWS = pa.schema([("id", pa.int64()), ("v", pa.string()),
                  ("s", pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))]))])


def _table(conn: hms.HmsConnection, database: str, tmp_path: Path, *, name: str = "events",
           partitions: tuple[str, ...] = ("dt",)) -> hms.HiveTable:
    spec = hms.HiveTableSpec.from_schema(
        f"{database}.{name}", ROWS, partition_columns=partitions,
        location=f"file://{tmp_path}/db/{name}", properties={"_meta.ingest": "none"})
    return hms.create_table(conn, spec)


# -- connecting ---------------------------------------------------------------------------


def test_connect_learns_version_and_txn_timeout(metastore: Server,
                                                request: pytest.FixtureRequest) -> None:
    with hms.connect(metastore.uri) as conn:
        info = conn.info
    hive4 = "hive4" in request.node.callspec.id
    assert info.uri == metastore.uri
    # fb303 getVersion: the release on Hive 4, the constant "3.0" on Hive 3.1 (and 2.3).
    assert (info.version, info.major) == (("4.0.1", 4) if hive4 else ("3.0", 3))
    # hive.txn.timeout as scripts/hms.sh set it, read with get_config_value (not the default).
    assert info.txn_timeout_s == TXN_TIMEOUT_S
    assert info.heartbeat_interval_s == TXN_TIMEOUT_S / 2


def test_unreachable_port_names_the_uri() -> None:
    uri = f"thrift://127.0.0.1:{free_port()}"
    with pytest.raises(MetastoreError) as caught:
        hms.connect(uri, connect_timeout_s=3)
    assert caught.value.location == uri
    assert f"Cannot reach the Hive Metastore at {uri}" in str(caught.value)
    assert "scripts/hms.sh start" in str(caught.value)


@pytest.fixture
def http_port() -> Iterator[int]:
    """A port where an HTTP server, not a metastore, answers."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_port_of_another_service_is_not_a_metastore(http_port: int) -> None:
    uri = f"thrift://127.0.0.1:{http_port}"
    started = time.monotonic()
    with pytest.raises(MetastoreError) as caught:
        hms.connect(uri, connect_timeout_s=5)
    assert time.monotonic() - started < 15
    assert caught.value.location == uri
    assert "did not answer in its Thrift protocol" in str(caught.value)


@pytest.mark.parametrize("uri", ["http://127.0.0.1:9083", "thrift://127.0.0.1",
                                 "thrift://:9083", "thrift://host:99999"])
def test_bad_uri_is_a_config_error(uri: str) -> None:
    with pytest.raises(ConfigError, match="thrift://"):
        hms.connect(uri)


def test_hive2_is_refused(hms2: Server) -> None:
    with pytest.raises(MetastoreError) as caught:
        hms.connect(hms2.uri)
    message = str(caught.value)
    assert hms2.uri in message
    assert "does not know get_valid_write_ids" in message and "Hive 2" in message
    assert "Hive 3.0 or later is required" in message


def test_unknown_method_keeps_the_connection(hms3: Server) -> None:
    t = _stubs.ttypes()
    with hms.connect(hms3.uri) as conn:
        # Hive 4's call for open transactions; Hive 3.1 answers UNKNOWN_METHOD.
        with pytest.raises(UnknownMethodError) as caught:
            conn.call("get_open_txns_req", t.GetOpenTxnsRequest(excludeTxnTypes=[]))
        assert caught.value.method == "get_open_txns_req"
        assert "version 3.0" in str(caught.value)
        assert conn.call("getVersion") == "3.0"


# -- tables -------------------------------------------------------------------------------


def test_create_get_drop_table(conn: hms.HmsConnection, database: str, tmp_path: Path) -> None:
    spec = hms.HiveTableSpec.from_schema(
        f"{database}.Events", ROWS, partition_columns=["dt", "hour"], bucket_columns=["id"],
        bucket_count=4, location=f"file://{tmp_path}/db/events/")
    table = hms.create_table(conn, spec)
    assert table == hms.get_table(conn, f"{database}.events")
    assert table.name == f"{database}.events"
    assert table.table_type == "MANAGED_TABLE"
    assert table.location == f"file:{tmp_path}/db/events"  # Hadoop's spelling, no slash
    assert [(c.name, c.type) for c in table.columns] == [
        ("id", "bigint"), ("v", "string"), ("s", "struct<a:int,b:array<string>>")]
    assert table.row_schema == ROWS
    assert [(c.name, c.type) for c in table.partition_columns] == [("dt", "string"),
                                                                   ("hour", "string")]
    assert (table.bucket_columns, table.bucket_count) == (("id",), 4)
    assert (table.input_format, table.serde) == (hms.ORC_INPUT_FORMAT, hms.ORC_SERDE)
    assert table.thrift.sd.outputFormat == hms.ORC_OUTPUT_FORMAT
    for key, value in hms.ACID_PROPERTIES.items():
        assert table.properties[key] == value
    assert table.full_acid_problem() is None
    with pytest.raises(TableExistsError):
        hms.create_table(conn, spec)
    hms.drop_table(conn, f"{database}.events")
    with pytest.raises(TableNotFoundError, match=f"Cannot find table {database}.events"):
        hms.get_table(conn, f"{database}.events")
    with pytest.raises(TableNotFoundError):
        hms.drop_table(conn, f"{database}.events")


def test_create_in_missing_database_is_refused(conn: hms.HmsConnection) -> None:
    spec = hms.HiveTableSpec.from_schema("no_such_db_x.events", ROWS)
    with pytest.raises(ConfigError, match="Cannot create table no_such_db_x.events"):
        hms.create_table(conn, spec)


def _raw_table(conn: hms.HmsConnection, database: str, name: str, params: dict[str, str],
               *, table_type: str = "MANAGED_TABLE", input_format: str = hms.ORC_INPUT_FORMAT,
               location: str) -> None:
    """A table as Hive or Trino would create it, not through our create_table (`location` in
    Hadoop's spelling, `file:/path`, which Hive 4 compares with the database's as strings)."""
    t = _stubs.ttypes()
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema(name="id", type="bigint")], location=location,
        inputFormat=input_format, outputFormat=hms.ORC_OUTPUT_FORMAT, compressed=False,
        numBuckets=-1, serdeInfo=t.SerDeInfo(serializationLib=hms.ORC_SERDE, parameters={}),
        bucketCols=[], sortCols=[], parameters={})
    table = t.Table(tableName=name, dbName=database, sd=sd, partitionKeys=[],
                    parameters=params, tableType=table_type, catName="hive")
    if conn.info.major >= 4:
        conn.call("create_table_req", t.CreateTableRequest(
            table=table, processorCapabilities=[*hms.PROCESSOR_CAPABILITIES,
                                                "HIVEMANAGEDINSERTWRITE"],
            processorIdentifier="test"))
    else:
        conn.call("create_table", table)


def test_not_full_acid_tables_are_refused_naming_the_property(
        conn: hms.HmsConnection, database: str, tmp_path: Path) -> None:
    _raw_table(conn, database, "plain", {"EXTERNAL": "TRUE"}, table_type="EXTERNAL_TABLE",
               location=f"file:{tmp_path}/ext/plain")
    _raw_table(conn, database, "mm", {"transactional": "true",
                                      "transactional_properties": "insert_only"},
               location=f"file:{tmp_path}/db/mm")
    _raw_table(conn, database, "hive_made", {"transactional": "true"},
               location=f"file:{tmp_path}/db/hive_made")
    plain = hms.get_table(conn, f"{database}.plain")
    with pytest.raises(UnsupportedFormatError) as caught:
        plain.require_full_acid(conn.uri)
    assert f"Cannot write table {database}.plain" in str(caught.value)
    assert "its property transactional is not set, expected 'true'" in str(caught.value)
    mm = hms.get_table(conn, f"{database}.mm")
    assert "transactional_properties is 'insert_only'" in (mm.full_acid_problem() or "")
    # What CREATE TABLE ... STORED AS ORC TBLPROPERTIES ('transactional'='true') makes is ours.
    assert hms.get_table(conn, f"{database}.hive_made").full_acid_problem() is None
    before = hms.txn_snapshot(conn).high_watermark
    with pytest.raises(UnsupportedFormatError, match="transactional"):
        with hms.write_transaction(conn, plain):
            pytest.fail("a transaction was opened on a non-transactional table")
    assert hms.txn_snapshot(conn).high_watermark == before  # nothing opened


# -- transactions, locks, snapshots -------------------------------------------------------


def test_write_commit_and_snapshots(conn: hms.HmsConnection, database: str,
                                    tmp_path: Path) -> None:
    table = _table(conn, database, tmp_path)
    name = table.name
    assert hms.snapshot(conn, name) == ValidWriteIdList(name, 0)
    with hms.write_transaction(conn, table) as first:
        assert first.write_id == 1
        assert hms.snapshot(conn, name) == ValidWriteIdList(name, 1, open_write_ids=(1,))
        first.partitions = hms.add_partitions(conn, table, [["2024-01-01"], ["a/b"]])
    assert first.partitions == ["dt=2024-01-01", "dt=a%2Fb"]
    assert hms.list_partition_names(conn, table) == ["dt=2024-01-01", "dt=a%2Fb"]
    assert hms.snapshot(conn, name) == ValidWriteIdList(name, 1)

    with pytest.raises(RuntimeError, match="writer failed"):
        with hms.write_transaction(conn, table) as second:
            raise RuntimeError("writer failed")
    assert second.write_id == 2
    third = hms.open_txns(conn)[0]
    assert hms.allocate_write_ids(conn, name, [third]) == {third: 3}
    snap = hms.snapshot(conn, name)
    assert snap == ValidWriteIdList(name, 3, open_write_ids=(3,), aborted_write_ids=(2,))
    assert snap.to_hive_string() == f"{name}:3:3:3:2"
    assert [snap.is_valid(w) for w in (1, 2, 3)] == [True, False, False]
    # The aborted write released its lock: a new one is granted at once.
    hms.lock(conn, third, table, timeout_s=5)
    hms.commit_txn(conn, third)
    assert hms.snapshot(conn, name) == ValidWriteIdList(name, 3, aborted_write_ids=(2,))
    txns = hms.txn_snapshot(conn)
    assert second.txn_id in txns.aborted_txns and third not in txns.open_txns


def test_commit_key_value_is_written_by_hive4_only(conn: hms.HmsConnection, database: str,
                                                   tmp_path: Path) -> None:
    table = _table(conn, database, tmp_path)
    with hms.write_transaction(conn, table) as write:
        write.key_value = (table.table_id or 0, "_meta.ingest", "batch-7")
    stored = hms.get_table(conn, table.name).properties["_meta.ingest"]
    if conn.info.major >= 4:
        assert table.table_id is not None and stored == "batch-7"
    else:
        # Hive 3.1 skips CommitTxnRequest.keyValue (a Hive 4 field) without a word.
        assert table.table_id is None and stored == "none"


def test_lock_not_granted_names_the_blocker(conn: hms.HmsConnection, database: str,
                                            tmp_path: Path) -> None:
    table = _table(conn, database, tmp_path, partitions=())
    (holder,) = hms.open_txns(conn)
    hms.lock(conn, holder, table, lock_type="EXCLUSIVE", operation="UPDATE")
    started = time.monotonic()
    with pytest.raises(CommitConflictError) as caught:
        with hms.write_transaction(conn, table, lock_timeout_s=1.5):
            pytest.fail("the lock was granted beside an EXCLUSIVE one")
    assert 1.5 <= time.monotonic() - started < 10
    message = str(caught.value)
    assert f"SHARED_READ lock for INSERT on {table.name}" in message
    assert f"EXCLUSIVE of transaction {holder}" in message
    # The writer's transaction was aborted on the way out, so it holds nothing either.
    snap = hms.snapshot(conn, table.name)
    assert snap.aborted_write_ids == (1,) and snap.open_write_ids == ()
    hms.abort_txn(conn, holder)
    with hms.write_transaction(conn, table, lock_timeout_s=5) as write:
        assert write.write_id == 2


@pytest.mark.slow
def test_server_aborts_what_is_not_heartbeated(conn: hms.HmsConnection, database: str,
                                               tmp_path: Path) -> None:
    table = _table(conn, database, tmp_path, partitions=())
    silent, kept = hms.open_txns(conn, 2)
    with hms.Heartbeater(conn.uri, kept, interval_s=1) as beats:
        # The reaper aborts the silent transaction; Hive 4's cleaner of empty aborted
        # transactions may then forget it within seconds, before a poll sees it aborted. So
        # the claim is that the server no longer has it open, and the checks below accept
        # either answer (aborted, or unknown).
        deadline = time.monotonic() + TXN_TIMEOUT_S * 6
        while silent in hms.txn_snapshot(conn).open_txns:
            assert time.monotonic() < deadline, f"transaction {silent} never timed out"
            time.sleep(1)
        assert kept in hms.txn_snapshot(conn).open_txns
        assert beats.beats >= TXN_TIMEOUT_S // 2 and beats.last_error is None
        beats.check()
    with pytest.raises(CommitConflictError, match=f"transaction {silent}: the Hive Metastore"):
        hms.commit_txn(conn, silent)
    assert hms.allocate_write_ids(conn, table.name, [kept]) == {kept: 1}
    hms.commit_txn(conn, kept)
    # A heartbeat for what the server aborted says so, and the writer's check raises.
    with hms.Heartbeater(conn.uri, silent, interval_s=0.2) as late:
        deadline = time.monotonic() + 10
        while True:
            try:
                late.check()
            except CommitConflictError as e:
                assert (f"aborted [{silent}]" in str(e)
                        or f"aborted [], unknown [{silent}]" in str(e)), str(e)
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_heartbeat_reports_unknown_transactions(conn: hms.HmsConnection) -> None:
    high = hms.txn_snapshot(conn).high_watermark
    result = hms.heartbeat(conn, high + 1000, high + 1001)
    assert not result.ok and result.missing == {high + 1000, high + 1001}


def test_qualified_names_and_unknown_tables(conn: hms.HmsConnection) -> None:
    with pytest.raises(ConfigError, match="expected '<table>' or '<database>.<table>'"):
        hms.get_table(conn, "a.b.c")
    with pytest.raises(TableNotFoundError, match="default.no_such_" ):
        hms.get_table(conn, "no_such_" + uuid.uuid4().hex[:6])
