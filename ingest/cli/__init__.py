"""The `ingest` command line: one click command per module, grouped in `main`.

Commands parse their options, call the layers' public functions (`ingest.table`,
`ingest.txn`, `ingest.acid`, `ingest.spark`) and print the result; no logic lives here.
"""
