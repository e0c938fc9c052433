"""ingest.acid.read."""
