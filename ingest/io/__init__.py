"""ingest.io."""
