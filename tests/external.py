"""What tests need from outside Python: a required tool (skipped in the dev loop, a failure
under INGEST_REQUIRE_ALL=1 as .ci/run sets it), Spark's Kafka source jars, and a free
loopback port for a server.
Kept apart from conftest.py so the server fixtures it imports can use them too."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

REQUIRE_ALL = os.environ.get("INGEST_REQUIRE_ALL") == "1"


def require(condition: bool, what: str) -> None:
    """Skip (dev loop) or fail (CI) when an external tool is missing."""
    if condition:
        return
    if REQUIRE_ALL:
        pytest.fail(f"required tool missing: {what} (INGEST_REQUIRE_ALL=1)")
    pytest.skip(f"missing: {what}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_kafka_jars() -> list[str]:
    """The jars of Spark's Kafka source laid out by scripts/fetch-servers.sh (or fail/skip)."""
    root = Path(os.environ.get("INGEST_SERVERS", Path.home() / ".cache/ingest/servers"))
    done = sorted(root.glob("spark-kafka-*/.complete"))
    jars = ((done[-1].parent / "classpath").read_text().strip().split(":") if done else [])
    require(bool(jars) and all(Path(j).is_file() for j in jars),
            f"Spark's Kafka source jars under {root} (run scripts/fetch-servers.sh sparkkafka)")
    assert any("spark-sql-kafka-0-10" in Path(j).name for j in jars), jars
    return jars
