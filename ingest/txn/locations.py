"""Table locations as normalised fsspec URL strings, and their parents.

Knows URL strings only, never opens a file. Mirrors what Hive's metastore stores as a table's
`LOCATION` (a fully qualified URI), so equal tables always compare equal as strings.
"""

from __future__ import annotations

import os
import posixpath

_LOCAL_PROTOCOLS = ("file", "local")


def _split(url: str) -> tuple[str | None, str]:
    if "://" in url:
        protocol, rest = url.split("://", 1)
        return protocol.lower(), rest
    if url.startswith("file:"):
        return "file", url[len("file:") :]
    return None, url


def is_local(url: str) -> bool:
    """True for a plain path or a `file://` / `local://` URL."""
    protocol, _ = _split(url)
    return protocol is None or protocol in _LOCAL_PROTOCOLS


def normalize_location(url: str) -> str:
    """Return the canonical form of a table location.

    Plain and `file:` paths become `file://<absolute path>`, `memory:` paths lose their leading
    slashes (fsspec treats `memory://a` and `memory:///a` alike), and trailing slashes go.

    Args:
        url: a path or fsspec URL.

    Returns:
        The normalised URL string.

    Raises:
        ValueError: url is empty.
    """
    if not url:
        raise ValueError("a table location must not be empty")
    protocol, rest = _split(url)
    if protocol is None or protocol in _LOCAL_PROTOCOLS:
        return "file://" + os.path.normpath(os.path.abspath(os.path.expanduser(rest)))
    if protocol == "memory":
        return "memory://" + posixpath.normpath("/" + rest).lstrip("/")
    return f"{protocol}://{rest.rstrip('/')}"


def local_path(url: str) -> str:
    """The filesystem path of a local location.

    Raises:
        ValueError: the location is not local.
    """
    if not is_local(url):
        raise ValueError(f"not a local location: {url}")
    return normalize_location(url)[len("file://") :]


def parent_location(url: str) -> str:
    """The normalised location of the directory holding `url` (itself at a root)."""
    norm = normalize_location(url)
    protocol, rest = norm.split("://", 1)
    if protocol == "file":
        return "file://" + os.path.dirname(rest)
    head, sep, _ = rest.rpartition("/")
    return f"{protocol}://{head}" if sep else norm


def ancestors(url: str) -> list[str]:
    """`url` normalised, then each parent up to the root, nearest first."""
    out = [normalize_location(url)]
    while True:
        parent = parent_location(out[-1])
        if parent == out[-1]:
            return out
        out.append(parent)


__all__ = ["ancestors", "is_local", "local_path", "normalize_location", "parent_location"]
