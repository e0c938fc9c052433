"""ingest.acid.format."""
