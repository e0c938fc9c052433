"""Run real Apache ORC (orc-core 2.3) and Hive 2.3 classes from pyspark's jars against our files.

The Java sources in ``tests/compat/java/`` are compiled once (per source hash) into a cache
directory and run as ``java -cp <jars>:<classes> IngestTools <command>`` with a JSON request on
stdin; the JSON answer comes back on stdout (log noise goes to stderr). One JVM per call, so
batch work with the ``*_many`` functions.

Public API (all raise :class:`JavaToolError` on failure, with the JVM's stderr):

``orc_read(path, *, use_flush_length=True, max_length=None, rows=True) -> dict``
    Open one ORC file with ``org.apache.orc.OrcFile.createReader``. Length used:
    ``max_length`` if given; else, if ``use_flush_length`` and ``<path>_flush_length`` exists,
    ``OrcAcidUtils.getLastFlushLength`` (error if it returns -1); else the whole file.
    Keys: ``path, file_length, side_file_exists, last_flush_length (None if no side file),
    max_length, length_source ("explicit"|"side_file"|"file"), num_rows, schema, compression,
    compression_size, row_index_stride, file_version, writer_version, software_version,
    content_length, stripes [{offset, length, rows, index_length, data_length, footer_length}],
    user_metadata {key: utf-8 text}, user_metadata_b64 {key: base64}, file_statistics,
    stripe_statistics (list per stripe, same shape as file_statistics), rows`` (if rows=True).

    ``file_statistics``: one entry per column id (0 = root struct), each
    ``{column_id, type, count, has_null, bytes_on_disk}`` plus, by type:
    integers ``min, max`` (JSON ints, absent when count == 0), ``sum`` (int or None on overflow);
    float/double ``min, max, sum`` (numbers); string/varchar/char ``min, max, lower_bound,
    upper_bound`` (str) and ``sum_length`` (total UTF-8 bytes); binary ``sum_length``;
    boolean ``true_count, false_count``; date ``min, max`` ("YYYY-MM-DD") and ``min_days,
    max_days``; decimal ``min, max, sum`` (str, HiveDecimal form, trailing zeros trimmed);
    timestamp ``min, max, min_utc, max_utc`` (same string form as row values).

    Row values: bool; ints; float/double as numbers (float = exact value of the float32; NaN and
    Infinity allowed); string/varchar/char as str; binary as base64 str; date "YYYY-MM-DD";
    timestamp "YYYY-MM-DDTHH:MM:SS.fffffffff" (9 fraction digits, UTC, JVM runs in UTC),
    timestamp with local time zone the same + "Z"; decimal as str with the column's scale;
    struct as dict; list as list; map as list of [key, value]; union as {"tag", "value"}.
    Use :func:`parse_timestamp` to turn timestamp strings into ``datetime``.

``orc_read_many(specs, *, raise_on_error=True) -> list[dict]``
    Several reads in one JVM. A spec is a path or a dict with ``path`` and optional
    ``use_flush_length``, ``max_length``, ``rows``. With ``raise_on_error=False`` a failed read
    yields ``{"path", "error", "error_class", "traceback"}`` instead of raising.

``orc_write_timestamps(path, values, *, compression="ZLIB") -> dict``
    ORC Java writes a one-column ``struct<ts:timestamp>`` file from ``(epoch_second,
    nanos_of_second)`` pairs (None = null): what Hive stores, for our reader to decode.

``orc_read_at_flush_lengths(path, *, rows=True) -> list[dict]``
    Read the file at every length recorded in its side file (one JVM); see
    :func:`read_flush_lengths`.

``hive_acid_state(partition_dir, valid_list) -> dict``
    Hive 2.3 ``AcidUtils.getAcidState(Path, Configuration, ValidTxnList)``. Returns
    ``{base (abs path or None), deltas [abs paths, Hive's order], delta_details [{path, min,
    max, statement_id, delete_delta}], obsolete [...], original_files [...], valid_txns,
    valid_txns_normalized}``. Hive 2.3's Directory has no aborted list.
    ``valid_list`` is either the Hive 2.x ValidReadTxnList string
    ``"<hwm>:<minOpenTxn>[:<exception>]*"`` (exceptions = open + aborted txn ids, ascending;
    minOpenTxn = 9223372036854775807 when none open; "" = all valid) or our Hive 3 write-id
    list ``"db.table:hwm:minOpen:open_csv:aborted_csv"``, converted with
    :func:`write_id_list_to_valid_txns` (write id == txn id in Hive 2.x).

``hive_acid_state_many(queries) -> list[dict]``: ``[(partition_dir, valid_list), ...]`` in one JVM.

``hive_merged_read(partition_dir, valid_list, *, columns, columns_types) -> dict``
    The rows Hive 2.3 reads: ``AcidUtils.getAcidState`` picks the directories, then
    ``OrcInputFormat.getRawReader(collapseEvents=true)`` (an ``OrcRawRecordMerger``) per bucket;
    rows whose newest event is a delete are left out, as Hive's compactor does. Returns
    ``{base, deltas, buckets, rows [{originalTransaction, bucket (as stored), rowId,
    currentTransaction, operation_is_update, row {col: value}}]}``. ``columns``/``columns_types``
    are Hive's ``"id,value"`` / ``"bigint:string"``; primitive columns only; no original files.

    ``reader="input_format"`` reads as Hive's (non-vectorized) queries do instead:
    ``OrcInputFormat.getSplits`` (getAcidState inside, a split per bucket) and
    ``OrcInputFormat.getReader`` per split; rows then carry only ``originalTransaction,
    bucket, rowId, row``, and ``splits`` replaces ``base/deltas/buckets``.
    ``transactional_properties`` ("default" or "legacy") is the table's, for that path.

``hive_merged_read_many(queries, *, columns, columns_types, reader, transactional_properties)``:
    several in one JVM.

``hive_write_reference_table(table_dir, scenario="basic", *, transactional_properties="default")``
    Hive 2.3 ``OrcRecordUpdater`` writes a small table; returns the manifest (see
    ``java/HiveWriteReferenceTool.java``). ``scenario``: "basic" (all writers closed) or
    "streaming_open" (the delta_0000002_0000004 writer is flushed after each txn, never closed,
    so its ``_flush_length`` side file stays). ``transactional_properties``: "default"
    (split-update) or "legacy".
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

JAVA_DIR = Path(__file__).resolve().parent / "java"
MAIN_CLASS = "IngestTools"
DEFAULT_TIMEOUT = 120.0
LONG_MAX = 9223372036854775807

_LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
rootLogger.level = error
rootLogger.appenderRef.err.ref = err
"""

_JVM_FLAGS = [
    "-Duser.timezone=UTC",
    "-Dfile.encoding=UTF-8",
    "-Djava.net.preferIPv4Stack=true",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xmx512m",
]


class JavaToolError(RuntimeError):
    """A Java tool failed: non-zero exit, timeout, unparsable output, or a per-file error."""


# ---------------------------------------------------------------------------------------------
# environment


def java_available() -> bool:
    return shutil.which("java") is not None and shutil.which("javac") is not None


def pyspark_jars_dir() -> Path | None:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        jars = Path(loc) / "jars"
        if jars.is_dir():
            return jars
    return None


def available() -> tuple[bool, str]:
    """(ok, what is missing) for use with conftest.require()."""
    if not java_available():
        return False, "java and javac on PATH"
    if pyspark_jars_dir() is None:
        return False, "pyspark jars directory"
    return True, ""


@lru_cache(maxsize=1)
def classpath_jars() -> tuple[str, ...]:
    """Explicit, ordered jar list.

    hive-common-2.3.10.jar goes first: it and hive-storage-api-2.8.1.jar both ship
    org.apache.hadoop.hive.common.{ValidTxnList,ValidReadTxnList}, and only hive-common's copy
    matches what hive-exec 2.3 calls (``isValidBase``). A ``jars/*`` wildcard leaves the order
    to the directory listing.
    """
    jars = pyspark_jars_dir()
    if jars is None:
        raise JavaToolError("pyspark jars directory not found")
    names = sorted(p.name for p in jars.glob("*.jar"))
    first = [n for n in names if n.startswith("hive-common-")]
    rest = [n for n in names if n not in first]
    return tuple(str(jars / n) for n in first + rest)


def _java_sources() -> list[Path]:
    return sorted(JAVA_DIR.glob("*.java"))


def _cache_root() -> Path:
    env = os.environ.get("INGEST_JAVATOOLS_CACHE")
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / f"ingest-javatools-{os.getuid()}"


def _source_hash() -> str:
    h = hashlib.sha256()
    for src in _java_sources():
        h.update(src.name.encode())
        h.update(b"\0")
        h.update(src.read_bytes())
        h.update(b"\0")
    h.update("\n".join(Path(j).name for j in classpath_jars()).encode())
    h.update(_LOG4J2.encode())
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def build() -> Path:
    """Compile the Java sources once; returns the classes dir. Safe under concurrent runs:
    each process compiles into its own temp dir and renames it into place atomically."""
    final = _cache_root() / _source_hash()
    if (final / "OK").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=final.parent))
    try:
        cmd = [
            "javac",
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-d",
            str(tmp / "classes"),
            "-cp",
            os.pathsep.join(classpath_jars()),
            *map(str, _java_sources()),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise JavaToolError(f"javac failed ({proc.returncode}):\n{proc.stderr}\n{proc.stdout}")
        (tmp / "log4j2.properties").write_text(_LOG4J2)
        (tmp / "OK").write_text("ok\n")
        try:
            os.rename(tmp, final)
        except OSError:
            # another process won the race; its build is identical
            if not (final / "OK").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def run_tool(command: str, request: dict[str, Any], *, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """Run one IngestTools command in a fresh JVM; returns the parsed JSON answer."""
    out_dir = build()
    cp = os.pathsep.join([*classpath_jars(), str(out_dir / "classes")])
    cmd = [
        "java",
        *_JVM_FLAGS,
        f"-Dlog4j2.configurationFile={out_dir / 'log4j2.properties'}",
        "-cp",
        cp,
        MAIN_CLASS,
        command,
    ]
    try:
        proc = subprocess.run(
            cmd,
            input=json.dumps(request).encode(),
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = (exc.stderr or b"").decode(errors="replace")
        raise JavaToolError(f"{command} timed out after {timeout}s\n{stderr[-4000:]}") from exc
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        raise JavaToolError(f"{command} exited with {proc.returncode}\n{stderr[-8000:]}")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise JavaToolError(
            f"{command}: stdout is not JSON ({exc})\n"
            f"stdout: {proc.stdout[:2000]!r}\n{stderr[-4000:]}"
        ) from exc


# ---------------------------------------------------------------------------------------------
# orc_read


def _spec(s: str | os.PathLike[str] | dict[str, Any]) -> dict[str, Any]:
    if isinstance(s, dict):
        d = dict(s)
        d["path"] = str(Path(d["path"]).absolute())
        return d
    return {"path": str(Path(s).absolute())}


def orc_read_many(
    specs: Iterable[str | os.PathLike[str] | dict[str, Any]],
    *,
    raise_on_error: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[dict[str, Any]]:
    files = [_spec(s) for s in specs]
    if not files:
        return []
    results: list[dict[str, Any]] = run_tool("orc_read", {"files": files}, timeout=timeout)["files"]
    if raise_on_error:
        for r in results:
            if "error" in r:
                raise JavaToolError(f"orc_read {r['path']}: {r['error']}\n{r.get('traceback', '')}")
    return results


def orc_read(
    path: str | os.PathLike[str],
    *,
    use_flush_length: bool = True,
    max_length: int | None = None,
    rows: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    spec = {
        "path": path,
        "use_flush_length": use_flush_length,
        "max_length": max_length,
        "rows": rows,
    }
    return orc_read_many([spec], timeout=timeout)[0]


def read_flush_lengths(path: str | os.PathLike[str]) -> list[int] | None:
    """Longs in ``<path>_flush_length`` (big-endian int64, partial tail ignored); None if absent."""
    side = Path(f"{os.fspath(path)}_flush_length")
    if not side.exists():
        return None
    data = side.read_bytes()
    n = len(data) // 8
    return list(struct.unpack(f">{n}q", data[: n * 8]))


def orc_read_at_flush_lengths(
    path: str | os.PathLike[str],
    *,
    rows: bool = True,
    raise_on_error: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[dict[str, Any]]:
    """One read per recorded flush length (0 entries are read too: an empty file)."""
    lengths = read_flush_lengths(path)
    if lengths is None:
        raise JavaToolError(f"no side file for {path}")
    specs = [{"path": path, "max_length": n, "rows": rows} for n in lengths]
    return orc_read_many(specs, raise_on_error=raise_on_error, timeout=timeout)


def orc_write_timestamps(path: str | os.PathLike[str],
                         values: Sequence[tuple[int, int] | None], *,
                         compression: str = "ZLIB") -> dict[str, Any]:
    """ORC Java writes ``struct<ts:timestamp>`` (UTC, proleptic Gregorian): one row per
    ``(epoch_second, nanos_of_second)`` or None (null)."""
    return run_tool("orc_write_timestamps", {  # type: ignore[no-any-return]
        "path": str(Path(path).absolute()),
        "values": [None if v is None else [int(v[0]), int(v[1])] for v in values],
        "compression": compression,
    })


def parse_timestamp(s: str) -> _dt.datetime:
    """Timestamp string from orc_read -> datetime (microsecond precision; tz-aware if "Z")."""
    aware = s.endswith("Z")
    body = s[:-1] if aware else s
    date_part, _, frac = body.partition(".")
    value = _dt.datetime.fromisoformat(date_part)
    if frac:
        value = value.replace(microsecond=int(frac[:6].ljust(6, "0")))
    return value.replace(tzinfo=_dt.UTC) if aware else value


def decode_binary(s: str) -> bytes:
    return base64.b64decode(s)


# ---------------------------------------------------------------------------------------------
# hive_acid_state


def write_id_list_to_valid_txns(write_id_list: str) -> str:
    """Hive 3 ``db.table:hwm:minOpen:open_csv:aborted_csv`` -> Hive 2.x ValidReadTxnList string
    ``hwm:minOpen[:exc]*`` (exceptions = sorted union of open and aborted ids).

    Example: ``"default.t:20:15:15,18:16"`` -> ``"20:15:15:16:18"``.
    """
    parts = write_id_list.split(":")
    if len(parts) < 2:
        raise ValueError(f"not a write-id list: {write_id_list!r}")
    hwm = int(parts[1])
    min_open = int(parts[2]) if len(parts) > 2 and parts[2] else LONG_MAX
    exceptions: set[int] = set()
    for field in parts[3:5]:
        exceptions.update(int(x) for x in field.split(",") if x)
    return ":".join(str(x) for x in [hwm, min_open, *sorted(exceptions)])


def _looks_like_write_id_list(s: str) -> bool:
    head = s.split(":", 1)[0]
    return bool(s) and not head.lstrip("-").isdigit()


def to_valid_txns(valid_list: str) -> str:
    return (
        write_id_list_to_valid_txns(valid_list)
        if _looks_like_write_id_list(valid_list)
        else valid_list
    )


def hive_acid_state_many(
    queries: Sequence[tuple[str | os.PathLike[str], str]],
    *,
    raise_on_error: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[dict[str, Any]]:
    """Several getAcidState calls in one JVM. With ``raise_on_error=False`` a failing query
    (e.g. Hive's "Not enough history available") yields ``{..., "error", "error_class"}``."""
    req = {
        "queries": [
            {"partition_dir": str(Path(d).absolute()), "valid_txns": to_valid_txns(v)}
            for d, v in queries
        ]
    }
    if not req["queries"]:
        return []
    results: list[dict[str, Any]] = run_tool("hive_acid_state", req, timeout=timeout)["results"]
    if raise_on_error:
        for r in results:
            if "error" in r:
                raise JavaToolError(
                    f"getAcidState {r['partition_dir']} [{r['valid_txns']}]: {r['error']}\n"
                    f"{r.get('traceback', '')}"
                )
    return results


def hive_acid_state(
    partition_dir: str | os.PathLike[str],
    valid_list: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    return hive_acid_state_many([(partition_dir, valid_list)], timeout=timeout)[0]


def relative_state(state: dict[str, Any], partition_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """hive_acid_state result with paths relative to partition_dir (handy in assertions)."""
    root = Path(partition_dir).absolute()

    def rel(p: str | None) -> str | None:
        return None if p is None else os.path.relpath(p, root)

    return {
        "base": rel(state["base"]),
        "deltas": [rel(p) for p in state["deltas"]],
        "obsolete": [rel(p) for p in state["obsolete"]],
        "original_files": [rel(p) for p in state["original_files"]],
    }


# ---------------------------------------------------------------------------------------------
# hive_merged_read


def hive_merged_read_many(
    queries: Sequence[tuple[str | os.PathLike[str], str]],
    *,
    columns: str,
    columns_types: str,
    reader: str = "raw_merger",
    transactional_properties: str = "default",
    timeout: float = DEFAULT_TIMEOUT,
) -> list[dict[str, Any]]:
    """Hive 2.3's merged read of each (partition_dir, valid_list) in one JVM; raises on the
    first failed query. ``reader="input_format"``: through OrcInputFormat's splits instead."""
    if not queries:
        return []
    req = {
        "columns": columns,
        "columns_types": columns_types,
        "reader": reader,
        "transactional_properties": transactional_properties,
        "queries": [
            {"partition_dir": str(Path(d).absolute()), "valid_txns": to_valid_txns(v)}
            for d, v in queries
        ],
    }
    results: list[dict[str, Any]] = run_tool("hive_merged_read", req, timeout=timeout)["results"]
    for r in results:
        if "error" in r:
            raise JavaToolError(
                f"merged read {r['partition_dir']} [{r['valid_txns']}]: {r['error']}\n"
                f"{r.get('traceback', '')}"
            )
    return results


def hive_merged_read(
    partition_dir: str | os.PathLike[str],
    valid_list: str,
    *,
    columns: str,
    columns_types: str,
    reader: str = "raw_merger",
    transactional_properties: str = "default",
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    return hive_merged_read_many([(partition_dir, valid_list)], columns=columns,
                                 columns_types=columns_types, reader=reader,
                                 transactional_properties=transactional_properties,
                                 timeout=timeout)[0]


# ---------------------------------------------------------------------------------------------
# hive_write_reference_table


def hive_write_reference_table(
    table_dir: str | os.PathLike[str],
    scenario: str = "basic",
    *,
    transactional_properties: str = "default",
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    req = {
        "table_dir": str(Path(table_dir).absolute()),
        "scenario": scenario,
        "transactional_properties": transactional_properties,
    }
    return run_tool("hive_write_reference_table", req, timeout=timeout)
