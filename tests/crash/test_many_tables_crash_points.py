"""The crash points of a many-table stream, end to end (issue 34, first acceptance item): 20
topics (1-3 partitions, one Debezium-named `m<tag>.public.orders`) into 20 tables through one
`python -m ingest stream --topic-pattern ... --table-template ...`, SIGKILLed at one crash
point per run, one run after the other, then run clean. After every kill each table holds at
most once exactly the records of its committed ranges, and every table's committed write ids
are the anchor's micro-batches (tests/many_tables_chain.py); at the end every record is once
in its own table. On SQLite and PostgreSQL; the Hive Metastore's case is in tests/hms.

The points are those the many-table sink passes: `sink.before_commit` (every table's files
written, nothing committed), `metastore.during_commit` (inside the SQL commit, before it is
durable). (The writer's points, in Spark's Python workers, are the single-table sink's code,
run per table here: tests/crash/test_stream_crash_points.py.)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from many_tables_chain import Chain, check_tables, kill_at_each, make_topics

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.crash, pytest.mark.slow,
              pytest.mark.filterwarnings(
                  "ignore:PySpark does not yet fully support:FutureWarning")]

# 160 records, 80 a micro-batch: two micro-batches, each writing nearly every table in one
# Spark job. The first kill comes in the second micro-batch, after the first
# committed; the second kills that micro-batch's replay; the clean run writes it: four
# micro-batches run in all.
TOPICS, RECORDS, PER_BATCH = 20, 8, 80


@pytest.mark.timeout(1800)  # three `ingest stream` runs: 72-128 s here, idle to loaded
@pytest.mark.parametrize(("backend", "points"), [
    pytest.param("sqlite", [("sink.before_commit", 1), ("metastore.during_commit", 0)],
                 id="sqlite"),
    pytest.param("postgres", [("metastore.during_commit", 1), ("sink.before_commit", 0)],
                 id="postgres"),
])
def test_twenty_topics_killed_at_each_point_end_exactly_once_in_their_tables(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        request: pytest.FixtureRequest, backend: str, points: list[tuple[str, int]]) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = make_topics(apache_kafka, tag, TOPICS, RECORDS)
    assert {t.partitions for t in topics} == {1, 2, 3}
    metastore = request.getfixturevalue("pg_url") if backend == "postgres" else None
    chain = Chain(apache_kafka, tag, topics, tmp_path / "wh", metastore, PER_BATCH)

    kill_at_each(chain, points)

    done = chain.run()
    assert done.returncode == 0, done.stderr[-4000:]
    found = check_tables(chain, complete=True)
    assert len(found) == TOPICS
    from ingest.txn import Metastore

    with Metastore.open(chain.url()) as store:
        # The restarts aborted every killed micro-batch's transaction, in every table.
        assert store.transactions(states=("open",)) == []


@pytest.mark.timeout(1800)
def test_keyed_tables_killed_at_each_point_end_exactly_once(
        apache_kafka: ApacheKafka, tmp_path: Path,  # noqa: F811 - the fixture
        ) -> None:
    """The same chain in `--mode upsert --key id`: each keyed table is written apart on a
    read view taken inside the micro-batch's one transaction, with a delete delta beside its
    insert delta. A kill leaves no table's delta of the killed micro-batch visible, and the
    replay upserts each record once (read back merged, one row per id)."""
    tag = uuid.uuid4().hex[:8]
    topics = make_topics(apache_kafka, tag, 3, RECORDS)
    chain = Chain(apache_kafka, tag, topics, tmp_path / "wh", None, 12,
                  extra=("--mode", "upsert", "--key", "id", "--buckets", "2"))

    kill_at_each(chain, [("sink.before_commit", 1), ("metastore.during_commit", 0)])

    done = chain.run()
    assert done.returncode == 0, done.stderr[-4000:]
    found = check_tables(chain, complete=True)
    assert len(found) == 3
    from ingest.txn import Metastore

    with Metastore.open(chain.url()) as store:
        assert store.transactions(states=("open",)) == []
        # Keyed: every table was created bucketed by its key.
        for topic in topics:
            assert store.get_table(chain.location(topic)).bucket_columns == ("id",)
