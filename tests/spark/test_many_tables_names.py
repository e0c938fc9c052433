"""The names of the tables a many-table stream creates on first use (docs/many-tables.md, Next
6): the directory's name in the anchor's database, so that on a Hive Metastore 4 they lie in the
managed location that holds the anchor; on a SQL metastore the anchor's `default` as before."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ingest.spark.job import ensure_tables, table_layout
from ingest.spark.many_job import name_beside
from ingest.spark.sink import DEAD_LETTER_DDL
from ingest.table.write import create_table
from ingest.txn import Metastore, default_metastore_url


def test_tables_created_on_first_use_go_into_the_anchors_database(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    url = default_metastore_url(str(warehouse / "_unrouted"))
    anchor = create_table(str(warehouse / "_unrouted"), DEAD_LETTER_DDL, name="shop._unrouted",
                          metastore=url)
    location = str(warehouse / "Shop_Public-Orders")
    assert name_beside(anchor, location) == "shop.shop_public_orders"

    table, dead = ensure_tables(location, table_layout("id BIGINT, name STRING", None),
                                metastore_url=url, name=name_beside(anchor, location))
    assert (table.name, dead.name) == ("shop.shop_public_orders",
                                       "shop.shop_public_orders__dead_letter")
    with Metastore.open(url) as store:
        assert store.get_table(location).name == "shop.shop_public_orders"
        assert store.get_table(location).row_schema == pa.schema(
            [("id", pa.int64()), ("name", pa.string())])
    # Found again by its location on the next micro-batch (or run): checked, not made twice.
    again, _ = ensure_tables(location, table_layout("id BIGINT, name STRING", None),
                             metastore_url=url, name=name_beside(anchor, location))
    assert again.name == table.name


def test_an_anchor_in_default_keeps_the_default_names(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    url = default_metastore_url(str(warehouse / "_unrouted"))
    anchor = create_table(str(warehouse / "_unrouted"), DEAD_LETTER_DDL, metastore=url)
    assert anchor.name == "default.t__unrouted"
    assert name_beside(anchor, str(warehouse / "a.b-c")) == "default.a_b_c"
