"""Benchmarks: `python -m ingest.bench NAME`; each prints one JSON object as its last line with
ingest_rows_per_s, baseline_rows_per_s and ratio (ingest / baseline), medians of repeats."""
