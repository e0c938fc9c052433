"""ingest.acid.write."""
