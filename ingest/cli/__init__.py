"""The `ingest` command line: one click command per module, grouped in `main`.

Commands parse their options, open their table once with the `--metastore` and
`--storage-option` given (`ingest.table.open_table_root`, `open_table_or_files`), call its
methods (or another layer's public function) and print the result; no logic lives here.
"""
