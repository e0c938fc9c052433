"""ingest.spark.source."""
