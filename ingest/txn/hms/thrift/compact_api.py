"""Hive 4's compaction queue over Thrift: the calls a remote compactor makes (`compact2`,
`find_next_compact2`, `update_compactor_state`, `mark_compacted`, `mark_failed`,
`mark_refused`, `mark_cleaned`) and `show_compact` (SHOW COMPACTIONS).

The stubs we ship (pyiceberg's `hive_metastore`) predate Hive 4.0's pool name and the
compaction's transaction fields, so the few structs that need them are declared here with
Hive 4.0.1's field ids (`hive_metastore.thrift`: CompactionRequest.poolName = 9,
FindNextCompactRequest.poolName = 3, ShowCompactRequest 1-9, ShowCompactResponseElement
nextTxnId 21, txnId 22, commitTime 23, hightestWriteId 24) and read and written by thrift's
generic struct codec. Knows the queue only, not what a compaction does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ingest.txn.hms.thrift import _stubs
from ingest.txn.hms.thrift.connection import HmsConnection

# thrift's TType and TMessageType values (fixed by the protocol), so this module imports
# without the `hms` extra like the rest of the package.
_S, _I32, _I64, _STRUCT, _LIST, _MAP = 11, 8, 10, 12, 15, 13
_CALL, _EXCEPTION = 1, 3


class _Struct:
    """A Thrift struct declared by its `thrift_spec` (thrift's generic codec)."""

    thrift_spec: tuple[Any, ...] = ()

    def __init__(self, **fields: Any) -> None:
        for spec in self.thrift_spec:
            if spec is not None:
                setattr(self, spec[2], fields.get(spec[2]))

    def read(self, iprot: Any) -> None:
        iprot.readStruct(self, self.thrift_spec)

    def write(self, oprot: Any) -> None:
        oprot.writeStruct(self, self.thrift_spec)


def _spec(*fields: tuple[int, int, str, Any]) -> tuple[Any, ...]:
    """A thrift_spec tuple indexed by field id."""
    out: list[Any] = [None] * (max(f[0] for f in fields) + 1)
    for fid, ttype, name, args in fields:
        out[fid] = (fid, ttype, name, args, None)
    return tuple(out)


class CompactionRequest(_Struct):
    thrift_spec = _spec((1, _S, "dbname", "UTF8"), (2, _S, "tablename", "UTF8"),
                        (3, _S, "partitionname", "UTF8"), (4, _I32, "type", None),
                        (5, _S, "runas", "UTF8"),
                        (6, _MAP, "properties", (_S, "UTF8", _S, "UTF8", False)),
                        (7, _S, "initiatorId", "UTF8"), (8, _S, "initiatorVersion", "UTF8"),
                        (9, _S, "poolName", "UTF8"))


class FindNextCompactRequest(_Struct):
    thrift_spec = _spec((1, _S, "workerId", "UTF8"), (2, _S, "workerVersion", "UTF8"),
                        (3, _S, "poolName", "UTF8"))


class ShowCompactRequest(_Struct):
    thrift_spec = _spec((1, _I64, "id", None), (2, _S, "poolName", "UTF8"),
                        (3, _S, "dbName", "UTF8"), (4, _S, "tbName", "UTF8"),
                        (5, _S, "partName", "UTF8"), (6, _I32, "type", None),
                        (7, _S, "state", "UTF8"), (8, _I64, "limit", None),
                        (9, _S, "order", "UTF8"))


class ShowCompactElement(_Struct):
    thrift_spec = _spec((1, _S, "dbname", "UTF8"), (2, _S, "tablename", "UTF8"),
                        (3, _S, "partitionname", "UTF8"), (4, _I32, "type", None),
                        (5, _S, "state", "UTF8"), (6, _S, "workerid", "UTF8"),
                        (7, _I64, "start", None), (8, _S, "runAs", "UTF8"),
                        (11, _I64, "endTime", None), (13, _I64, "id", None),
                        (14, _S, "errorMessage", "UTF8"), (15, _I64, "enqueueTime", None),
                        (20, _S, "poolName", "UTF8"), (21, _I64, "nextTxnId", None),
                        (22, _I64, "txnId", None), (23, _I64, "commitTime", None),
                        (24, _I64, "hightestWriteId", None))


class _ShowCompactResponse(_Struct):
    thrift_spec = _spec((1, _LIST, "compacts", (_STRUCT, (ShowCompactElement,
                                                          ShowCompactElement.thrift_spec),
                                                False)))


class _ShowCompactResult(_Struct):
    thrift_spec = ((0, _STRUCT, "success", (_ShowCompactResponse,
                                            _ShowCompactResponse.thrift_spec), None),)
    success: _ShowCompactResponse | None  # set from thrift_spec (_Struct)


@dataclass(frozen=True)
class QueueEntry:
    """One compaction as SHOW COMPACTIONS lists it (queue and completed ones).

    Attributes:
        compaction_id: CQ_ID / CC_ID.
        partition: Hive's partition name ("dt=2026-01-01"), "" for the table.
        kind: "major" or "minor".
        state: Hive's words: "initiated", "working", "ready for cleaning", "succeeded",
            "failed", "did not initiate", "refused", ...
        worker: the worker id.
        pool: the pool name (ingest's compactions use "ingest-<txn id>").
        txn_id: the compactor's transaction (None until `update_compactor_state`).
        next_txn_id: the highest txn id allocated when that transaction committed.
        highest_write_id: the compactor's write-id high-water mark.
        enqueued_at, started_at, ended_at, committed_at: seconds since the epoch, or None.
        error: why it failed.
    """

    compaction_id: int
    partition: str
    kind: str
    state: str
    worker: str
    pool: str
    txn_id: int | None
    next_txn_id: int | None
    highest_write_id: int | None
    enqueued_at: float | None
    started_at: float | None
    ended_at: float | None
    committed_at: float | None
    error: str | None


def _seconds(ms: int | None) -> float | None:
    return None if not ms else ms / 1000


def _kind(t: Any, kind: str) -> int:
    return int(t.CompactionType.MAJOR if kind == "major" else t.CompactionType.MINOR)


def compact2(conn: HmsConnection, db: str, table: str, partition: str, kind: str, *,
             pool: str, user: str, initiator: str) -> tuple[int, bool, str]:
    """Queue a compaction ('initiated'): (its id or -1, accepted, the server's message).
    Hive refuses one while another of the partition is initiated or working, or ready for
    cleaning at the same write-id high-water mark.

    Raises:
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()
    request = CompactionRequest(dbname=db, tablename=table, partitionname=partition or None,
                                type=_kind(t, kind), runas=user, initiatorId=initiator,
                                initiatorVersion="ingest", poolName=pool, properties={})
    response = conn.call("compact2", request)
    return int(response.id), bool(response.accepted), str(response.errormessage or "")


def take(conn: HmsConnection, *, pool: str, worker: str) -> Any | None:
    """Move the oldest 'initiated' compaction of `pool` to 'working' for `worker`
    (`find_next_compact2`); its CompactionInfoStruct, or None.

    Raises:
        MetastoreError: the metastore failed.
    """
    found = conn.call("find_next_compact2",
                      FindNextCompactRequest(workerId=worker, workerVersion="ingest",
                                             poolName=pool))
    return getattr(found, "ci", None)


def info_struct(compaction_id: int, db: str, table: str, partition: str, kind: str, *,
                highest_write_id: int | None = None, error: str | None = None,
                user: str | None = None) -> Any:
    """The CompactionInfoStruct the mark_* calls take (they go by id)."""
    t = _stubs.ttypes()
    return t.CompactionInfoStruct(id=compaction_id, dbname=db, tablename=table,
                                  partitionname=partition or None, type=_kind(t, kind),
                                  runas=user, highestWriteId=highest_write_id,
                                  errorMessage=error)


def set_txn(conn: HmsConnection, info: Any, txn_id: int) -> None:
    """`update_compactor_state`: record the compactor's transaction and high-water mark; the
    transaction then names the partition (op 'c'), so the server keeps it in the aborted list
    until its output is cleaned, should it abort.

    Raises:
        MetastoreError: the metastore failed.
    """
    conn.call("update_compactor_state", info, txn_id)


def mark(conn: HmsConnection, what: str, info: Any) -> None:
    """`mark_compacted` (-> 'ready for cleaning'), `mark_failed` (-> 'failed', with
    `info.errorMessage`), `mark_refused` (-> 'refused') or `mark_cleaned` (-> 'succeeded').

    Raises:
        MetastoreError: the metastore failed.
    """
    conn.call(f"mark_{what}", info)


def show(conn: HmsConnection, db: str, table: str) -> list[QueueEntry]:
    """The table's compactions, queue and history (`show_compact`, filtered by the server
    when it knows the request's fields, here too otherwise), by id.

    Raises:
        MetastoreError: the metastore failed.
    """
    t = _stubs.ttypes()

    def body(client: Any) -> Any:
        client._seqid += 1
        oprot = client._oprot
        oprot.writeMessageBegin("show_compact", _CALL, client._seqid)
        args = _Struct()
        args.thrift_spec = _spec((1, _STRUCT, "rqst", None))
        args.rqst = ShowCompactRequest(dbName=db, tbName=table)  # type: ignore[attr-defined]
        args.write(oprot)
        oprot.writeMessageEnd()
        oprot.trans.flush()
        iprot = client._iprot
        _, mtype, _ = iprot.readMessageBegin()
        if mtype == _EXCEPTION:
            error = _stubs.require()[5][0]()
            error.read(iprot)
            iprot.readMessageEnd()
            raise error
        result = _ShowCompactResult()
        result.read(iprot)
        iprot.readMessageEnd()
        return result.success

    response = conn.call_with("show_compact", body)
    out = []
    for e in getattr(response, "compacts", None) or ():
        if (e.dbname or "").lower() != db.lower() or (e.tablename or "").lower() != table.lower():
            continue
        out.append(QueueEntry(
            int(e.id or 0), e.partitionname or "",
            str(t.CompactionType._VALUES_TO_NAMES.get(e.type, "?")).lower(), e.state or "",
            e.workerid or "", e.poolName or "", e.txnId or None, e.nextTxnId or None,
            e.hightestWriteId, _seconds(e.enqueueTime), _seconds(e.start),
            _seconds(e.endTime), _seconds(e.commitTime), e.errorMessage))
    return sorted(out, key=lambda q: q.compaction_id)


__all__ = ["QueueEntry", "compact2", "info_struct", "mark", "set_txn", "show", "take"]
