"""ingest.acid.predicate."""
