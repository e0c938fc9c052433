"""ingest.acid.recovery."""
