"""URLs, filesystems and storage options: where every file of `ingest` is opened.

`storage` turns a URL into an fsspec filesystem with the location's options and describes storage
failures; `files` holds the primitives beyond fsspec's (durable flush, truncate, moving a
directory file by file on object stores). Imports no layer: `ingest.orc` and everything above
may use it.
"""

from ingest.io import files, storage
from ingest.io.files import can_append, has_directories
from ingest.io.storage import parse_storage_options, url_to_fs

__all__ = [
    "can_append",
    "files",
    "has_directories",
    "parse_storage_options",
    "storage",
    "url_to_fs",
]
