"""The SQL metastore: `Metastore` in one SQLite file, SQLite in memory, or a PostgreSQL
database several hosts share (SQLAlchemy Core; one declaration of the tables in `_schema`).

Registered for `sqlite://`, `postgresql://` and `postgres://` URLs (`ingest.txn.registry`):
open it with `ingest.txn.Metastore.open(url)`. Only `ingest.txn` imports this package; the
layers above use the `Metastore` interface.
"""

from ingest.txn.sql._store import SqlMetastore

__all__ = ["SqlMetastore"]
