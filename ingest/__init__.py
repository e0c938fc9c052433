"""ingest: stream Kafka into Hive ACID transactional tables stored as ORC.

Layers, each importing only those before it: `orc` (ORC bytes), `acid` (Hive ACID files),
`records` (records shaped into rows), `txn` (the metastore), `table` (table operations),
`spark` (the streaming sink), `cli`.
`ingest.open_table(location)` returns a `Table` to read as Arrow; it is imported on first use,
so `import ingest` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ingest.table import Table, open_table

_LAZY = {"open_table", "Table"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from ingest import table

        return getattr(table, name)
    raise AttributeError(f"module 'ingest' has no attribute {name!r}")


__all__ = ["Table", "__version__", "open_table"]
