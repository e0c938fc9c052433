"""Hive 4.0.1's own ACID readers (hive-exec, the metastore's version) on our tables: the harness
tests/hms/java/Hive4AcidRead.java (row by row, or vectorized as Hive 4 queries read by default
through Hive4VectorizedRows.java), compiled once per source and class path with `javac` against
the jars scripts/fetch-servers.sh lists (target hive4reader, which .ci/run fetches), run in one
JVM per call with the snapshot the Hive Metastore hands a reader (`get_open_txns` +
`get_valid_write_ids`). Missing Java, Maven or the jars skip, or fail under
INGEST_REQUIRE_ALL=1.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from external import require

from ingest.txn import hms

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (Path(__file__).resolve().parent / "java" / "Hive4AcidRead.java",
           Path(__file__).resolve().parent / "java" / "Hive4VectorizedRows.java")
FETCH = ROOT / "scripts" / "fetch-servers.sh"

# hive-exec 4 reflects into the JDK (StringInternUtils, the shims), which Java 17 allows only
# to modules opened for it, as Hive's own launch scripts do.
_OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.lang.reflect", "java.net", "java.util", "java.util.concurrent",
    "java.util.regex", "java.io", "java.nio", "java.time", "java.text", "sun.nio.ch")]
_JVM_FLAGS = ["-Duser.timezone=UTC", "-Dfile.encoding=UTF-8", "-XX:+UseSerialGC",
              "-XX:TieredStopAtLevel=1", "-Xmx512m", *_OPENS]


@lru_cache(maxsize=1)
def _jdk_bin() -> Path:
    """A JDK 17 or 21 from /usr/lib/jvm (the harness runs on 17 with the flags above; the Java
    24+ that Trino needs is not tried), else the one on PATH."""
    for pattern in ("java-17-openjdk-*", "java-21-openjdk-*", "temurin-17*", "temurin-21*"):
        for home in sorted(Path("/usr/lib/jvm").glob(pattern)):
            if (home / "bin" / "javac").exists():
                return home / "bin"
    javac = shutil.which("javac")
    require(javac is not None and shutil.which("java") is not None,
            "java and javac 17 or 21 (Hive 4's reader)")
    return Path(javac).resolve().parent


@lru_cache(maxsize=1)
def classpath() -> str:
    """hive-exec 4.0.1 and the Hadoop jars, fetched into ~/.m2 once."""
    _jdk_bin()
    require(shutil.which("mvn") is not None, "mvn (Maven) to fetch hive-exec 4.0.1")
    done = subprocess.run(["bash", str(FETCH), "hive4reader"], capture_output=True, text=True,
                          timeout=900)
    lines = done.stdout.strip().splitlines()
    require(done.returncode == 0 and bool(lines),
            f"hive-exec 4.0.1 from Maven Central (fetch-servers.sh hive4reader: "
            f"{done.stderr[-2000:]})")
    return (Path(lines[-1]) / "classpath").read_text().strip()


@lru_cache(maxsize=1)
def _classes() -> Path:
    """The compiled harness, cached by source and class path (concurrent runs compile apart and
    rename into place)."""
    cp = classpath()
    digest = hashlib.sha256(b"\0".join([*(s.read_bytes() for s in SOURCES),
                                        cp.encode()])).hexdigest()[:16]
    final = Path(tempfile.gettempdir()) / f"ingest-hive4read-{os.getuid()}" / digest
    if (final / "Hive4AcidRead.class").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=final.parent))
    done = subprocess.run([str(_jdk_bin() / "javac"), "-nowarn", "-encoding", "UTF-8",
                           "-d", str(tmp), "-cp", cp, *map(str, SOURCES)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise AssertionError(f"javac {SOURCES[0].name} failed:\n{done.stderr}{done.stdout}")
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _run(command: str, location: str, table: hms.HiveTable, valid_txns: str,
         valid_write_ids: str) -> list[dict[str, Any]]:
    args = [command, location, ",".join(c.name for c in table.columns),
            ":".join(c.type for c in table.columns),
            ",".join(c.name for c in table.partition_columns), valid_txns, valid_write_ids]
    done = subprocess.run(
        [str(_jdk_bin() / "java"), *_JVM_FLAGS, "-cp", f"{classpath()}{os.pathsep}{_classes()}",
         "Hive4AcidRead", *args], capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise AssertionError(f"Hive 4's reader failed on {location} ({done.returncode}):\n"
                             f"{done.stderr[-6000:]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def snapshot_strings(conn: hms.HmsConnection, table: str) -> tuple[str, str]:
    """(hive.txn.valid.txns, hive.txn.valid.writeids) as a Hive 4 query takes them from the
    metastore now."""
    txns = hms.txn_snapshot(conn)
    return txns.to_hive_string(), hms.snapshot(conn, table, txns=txns).to_hive_string()


def read_rows(conn: hms.HmsConnection, table: str) -> list[dict[str, Any]]:
    """The rows Hive 4's row-by-row ACID reader (OrcInputFormat.getReader) reads from `table`
    at the metastore's snapshot now, each with its partition values and `row__id`, ordered by
    ROW__ID."""
    hive_table = hms.get_table(conn, table)
    rows = _run("rows", hive_table.location, hive_table, *snapshot_strings(conn, table))
    return sorted(rows, key=lambda r: (r["row__id"]["writeid"], r["row__id"]["bucketid"],
                                       r["row__id"]["rowid"]))


def read_rows_vectorized(conn: hms.HmsConnection, table: str) -> list[dict[str, Any]]:
    """The rows Hive 4's vectorized ACID reader (VectorizedOrcAcidRowBatchReader) reads from
    `table` at the metastore's snapshot now, with their partition values, in file order."""
    hive_table = hms.get_table(conn, table)
    return _run("vrows", hive_table.location, hive_table, *snapshot_strings(conn, table))


def acid_state(conn: hms.HmsConnection, table: str) -> list[dict[str, Any]]:
    """`AcidUtils.getAcidState` of each partition of `table` at the metastore's snapshot now."""
    hive_table = hms.get_table(conn, table)
    return _run("state", hive_table.location, hive_table, *snapshot_strings(conn, table))
