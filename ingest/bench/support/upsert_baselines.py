"""The upsert benchmark's baselines: the same batches of changes applied to a Delta table
(`deltalake`'s `DeltaTable.merge`) and to an Iceberg table (`pyiceberg`'s `Table.upsert`,
SQL catalog on SQLite), each loaded first with the same rows. Optional dependencies (the
`bench` extra); a missing one is reported, not faked.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Batch:
    """One batch of changes on distinct keys: the new images (updates, then `inserted`
    inserts) and the ids deleted."""

    images: pa.Table
    deleted: pa.Array
    inserted: int

    @property
    def changes(self) -> int:
        return self.images.num_rows + len(self.deleted)


def deltalake_seconds(initial: pa.Table, batches: list[Batch], root: str
                      ) -> tuple[list[float], int]:
    """Seconds of each batch as one `DeltaTable.merge` (update, delete and insert clauses),
    and the rows the table holds after the last.

    Raises:
        ImportError: deltalake is not installed (`pip install 'ingest[bench]'`).
    """
    from deltalake import DeltaTable, write_deltalake

    path = f"{root}/delta"
    write_deltalake(path, initial)
    out = []
    for b in batches:
        ops = pa.array(["u"] * b.images.num_rows + ["d"] * len(b.deleted))
        deletes = pa.table({name: pa.nulls(len(b.deleted), b.images.schema.field(name).type)
                            if name != "id" else b.deleted.cast(pa.int64())
                            for name in b.images.column_names})
        source = pa.concat_tables([b.images, deletes]).append_column("_op", ops)
        columns = b.images.column_names
        started = time.perf_counter()
        (DeltaTable(path)
         .merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_delete(predicate="s._op = 'd'")
         .when_matched_update(updates={c: f"s.{c}" for c in columns if c != "id"},
                              predicate="s._op = 'u'")
         .when_not_matched_insert(updates={c: f"s.{c}" for c in columns},
                                  predicate="s._op = 'u'")
         .execute())
        out.append(time.perf_counter() - started)
    return out, DeltaTable(path).to_pyarrow_table(columns=["id"]).num_rows


def pyiceberg_seconds(initial: pa.Table, batches: list[Batch], root: str
                      ) -> tuple[list[float], int]:
    """Seconds of each batch as `Table.upsert` of the images plus `Table.delete` of the
    deleted ids (pyiceberg's upsert has no delete clause: two commits a batch), and the rows
    the table holds after the last.

    Raises:
        ImportError: pyiceberg (with SQLAlchemy) is not installed.
    """
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import In

    os.makedirs(root, exist_ok=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/iceberg.db",
                         warehouse=f"file://{root}/iceberg")
    catalog.create_namespace("bench")
    schema = pa.schema([f.with_nullable(f.name != "id") for f in initial.schema])
    table = catalog.create_table("bench.t", schema=schema)
    table.append(initial.cast(schema))
    out = []
    for b in batches:
        images = b.images.cast(schema)
        ids = pc.cast(b.deleted, pa.int64()).to_pylist()
        started = time.perf_counter()
        table.upsert(images, join_cols=["id"])
        if ids:
            # pyiceberg's In takes (term, literals) at run time; typed as its pydantic
            # model's fields, it reads to mypy as In(term=UnboundTerm, values=set).
            table.delete(In("id", ids))  # type: ignore[call-arg, arg-type]
        out.append(time.perf_counter() - started)
    return out, table.scan(selected_fields=("id",)).to_arrow().num_rows


__all__ = ["Batch", "deltalake_seconds", "pyiceberg_seconds"]
