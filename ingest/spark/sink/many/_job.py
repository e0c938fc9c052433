"""The Spark job of a many-table micro-batch: every touched table parsed and written in one
pass over the micro-batch (`_tasks`), what the tasks reported handed back by plan index. The
driver's half (it knows Spark); the tasks' half is `_tasks`, which executors import."""

from __future__ import annotations

import warnings
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ingest.spark.sink._batch import small_batch
from ingest.spark.sink._results import TaskResult, from_arrow
from ingest.spark.sink.many._tasks import MANY_RESULT_DDL, PLAN_INDEX, ManyPlan, many_write_task

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def run_many_tasks(batch_df: DataFrame, plan: ManyPlan) -> dict[int, list[TaskResult]]:
    """Parse and write every table of a many-table micro-batch in one Spark job (`_tasks`);
    what the tasks reported, by plan index. Routed by field, a micro-batch known to be small
    is read by one task (a file per table partition, as `run_tasks`); routed by topic a
    table's rows are those of its topics' read tasks already, which stay parallel."""
    if plan.column != "topic" and plan.plans and small_batch(batch_df, plan.plans[0]):
        batch_df = batch_df.coalesce(1)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support",
                                category=FutureWarning)
        out = batch_df.mapInArrow(partial(many_write_task, plan), MANY_RESULT_DDL).toArrow()
    by_index: dict[int, list[TaskResult]] = {}
    if out.num_rows == 0:
        return by_index
    indices = out.column(PLAN_INDEX).to_numpy()
    rows = out.drop_columns([PLAN_INDEX])
    for index in np.unique(indices).tolist():
        by_index[int(index)] = from_arrow(rows.filter(pa.array(indices == index)))
    return by_index


__all__ = ["run_many_tasks"]
