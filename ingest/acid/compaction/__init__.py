"""ingest.acid.compaction."""
