"""The check of `--txns-per-delta` K > 1 (a transaction batch: K micro-batches appending to
one delta directory, as Hive Streaming's TransactionBatch), made before Spark starts or
anything is created (docs/invariants.md, 6): the table's storage must append to files, and
its metastore's backend must keep such deltas (`Metastore.refuses_transaction_batches`).
"""

from __future__ import annotations

from ingest.acid import can_append
from ingest.errors import ConfigError
from ingest.txn import backend_for, redact_url


def check_transaction_batches(table_location: str, metastore_url: str,
                              txns_per_delta: int) -> None:
    """Refuse transaction batches (K > 1) where they cannot be written or read correctly.

    Args:
        table_location: the target table's root (path or fsspec URL).
        metastore_url: the metastore the stream commits to.
        txns_per_delta: K, micro-batches per delta directory; 1 is always accepted.

    Raises:
        ConfigError: K > 1 on storage that cannot append to files (object stores), or with
            a metastore whose backend refuses transaction batches (a Hive Metastore, whose
            tables Trino and Doris read); the metastore URL is not one a backend opens.
    """
    if txns_per_delta <= 1:
        return
    if not can_append(table_location):
        protocol = table_location.split("://", 1)[0].lower() if "://" in table_location \
            else "file"
        raise ConfigError(
            f"Cannot use --txns-per-delta {txns_per_delta} on {table_location}: "
            f"{protocol}:// storage cannot append to files, and a transaction batch "
            "appends every micro-batch to the same bucket files",
            hint="use --txns-per-delta 1 on object stores (s3, gs, abfs)")
    refused = backend_for(metastore_url).refuses_transaction_batches
    if refused is not None:
        raise ConfigError(
            f"Cannot use --txns-per-delta {txns_per_delta} with metastore "
            f"{redact_url(metastore_url)}: {refused}",
            hint="use --txns-per-delta 1 (the default): one transaction and one delta "
                 "directory per micro-batch; for fewer, larger deltas raise "
                 "--max-offsets-per-trigger or --trigger, and let compaction merge them")


__all__ = ["check_transaction_batches"]
