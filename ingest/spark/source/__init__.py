"""Spark's "hive-acid" source: batch and streaming reads of ACID tables through the one read
planner, with filters pushed down and the read's lease renewed by its tasks (`register`).
"""

from ingest.spark.source._plan import SourceOptions
from ingest.spark.source.datasource import HiveAcidDataSource, register

__all__ = [
    "HiveAcidDataSource",
    "SourceOptions",
    "register",
]
