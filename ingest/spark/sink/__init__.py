"""ingest.spark.sink."""
