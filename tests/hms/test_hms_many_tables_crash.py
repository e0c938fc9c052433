"""The crash points of a many-table stream on a Hive Metastore 4 (issue 34, first acceptance
item; the SQL metastores' case is tests/crash/test_many_tables_crash_points.py): 20 topics into
20 tables through one `python -m ingest stream --metastore thrift://...`, SIGKILLed at
`sink.before_commit` and then inside the HMS commit (`metastore.during_commit`, before
`commit_txn`), then run clean. After every kill each table holds exactly the records of its
committed ranges and every table's committed write ids are the anchor's micro-batches; at the
end every record is once in its table, and Trino reads every table so.

The stream creates its tables in the anchor's database (Hive 4 keeps a managed table inside
its database's managed location, here the warehouse the anchor was created in). A killed
micro-batch's transaction stays open until the server's timeout (docs/many-tables.md: the HMS
does not say an open transaction's agent); its write ids are invalid in every table meanwhile.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hms_server import Server, trino_query
from kafka_server import ApacheKafka, apache_kafka  # noqa: F401 - the fixture
from many_tables_chain import Chain, check_tables, kill_at_each, make_topics

from ingest.records.routing import table_name_for
from ingest.spark.sink.deadletter import DEAD_LETTER_DDL
from ingest.table.write import create_table

pytestmark = [pytest.mark.hms, pytest.mark.kafka, pytest.mark.spark, pytest.mark.trino,
              pytest.mark.crash, pytest.mark.slow,
              pytest.mark.filterwarnings(
                  "ignore:PySpark does not yet fully support:FutureWarning")]

TOPICS, RECORDS, PER_BATCH = 20, 8, 80  # two micro-batches


@pytest.mark.timeout(1800)  # three `ingest stream` runs and Trino: about 240 s here
def test_twenty_topics_killed_at_each_point_end_exactly_once_and_trino_reads_them(
        apache_kafka: ApacheKafka, hms4: Server, trino_on_hms4: Server,  # noqa: F811
        tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = make_topics(apache_kafka, tag, TOPICS, RECORDS)
    chain = Chain(apache_kafka, tag, topics, tmp_path / "wh", hms4.uri, PER_BATCH)
    # The anchor in a new database, whose managed location becomes the warehouse.
    database = f"mt{tag}"
    create_table(chain.anchor, DEAD_LETTER_DDL, name=f"{database}.unrouted",
                 metastore=hms4.uri)

    # The second kill is in the replay of the micro-batch the first killed.
    kill_at_each(chain, (("sink.before_commit", 1), ("metastore.during_commit", 0)))

    done = chain.run()
    assert done.returncode == 0, done.stderr[-4000:]
    found = check_tables(chain, complete=True)
    assert len(found) == TOPICS

    union = " UNION ALL ".join(
        f"SELECT {k} AS k, id FROM {database}.{table_name_for(t.name)}"
        for k, t in enumerate(topics))
    rows = trino_query(trino_on_hms4, f"SELECT k, id FROM ({union}) ORDER BY k, id")
    assert rows == [[k, i] for k, t in enumerate(topics) for i in t.all_ids]
