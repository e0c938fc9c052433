"""ingest.spark.kafka."""
