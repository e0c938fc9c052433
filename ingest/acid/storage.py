"""fsspec storage options per table location: the one place a URL becomes (filesystem, path).

Entry points (CLI, Python API, Spark job and tasks) register the options they were given for
a location prefix; every file access resolves its URL here, so the options reach each call
without threading them through every signature. fsspec's own config (`FSSPEC_S3_*`) still
applies underneath (docs/architecture.md, "Storage options").
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import fsspec

_lock = threading.Lock()
_registered: dict[str, dict[str, Any]] = {}

# Protocols whose listings s3fs-style filesystems would cache: another process (an executor, a
# second job) writes files the cache does not know, and a compaction or clean that plans from a
# stale listing could miss a committed delta (docs/invariants.md, "Object stores").
_NO_LISTINGS_CACHE = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "az", "adl", "oss"})

# Keys whose values never appear in messages or logs.
_SECRET_WORDS = ("secret", "key", "token", "password", "credential", "sas", "session")


def _normalize(location: str) -> str:
    location = str(location).rstrip("/")
    if "://" not in location:
        return "file://" + location
    protocol, rest = location.split("://", 1)
    return f"{protocol.lower()}://{rest}"


def root_of(location: str) -> str:
    """The bucket (or container) holding `location`, as `protocol://bucket`; a local path's
    root is `file://`. CLI options apply to the whole bucket of the table they name."""
    normalized = _normalize(location)
    protocol, rest = normalized.split("://", 1)
    if protocol in ("file", "local"):
        return "file://"
    return f"{protocol}://{rest.lstrip('/').split('/', 1)[0]}"


def register(location: str, options: Mapping[str, Any] | None) -> None:
    """Use `options` for every URL at or below `location` in this process.

    Args:
        location: a URL prefix, e.g. `s3://bucket` or `s3://bucket/warehouse/events`.
        options: fsspec storage options (`endpoint_url`, `key`, `client_kwargs`, ...); None or
            empty registers nothing. A later registration of the same prefix replaces it.
    """
    if not options:
        return
    with _lock:
        _registered[_normalize(location)] = dict(options)


def register_all(registrations: Mapping[str, Mapping[str, Any]]) -> None:
    """Register every (prefix, options) pair of `registered()` (how Spark tasks receive them)."""
    for location, options in registrations.items():
        register(location, options)


def registered() -> dict[str, dict[str, Any]]:
    """A copy of every registration in this process, to ship to other processes."""
    with _lock:
        return {k: dict(v) for k, v in _registered.items()}


def options_for(url: str) -> dict[str, Any]:
    """The options registered for the longest prefix of `url` (empty when none is)."""
    target = _normalize(url)
    with _lock:
        best = max((p for p in _registered
                    if target == p or target.startswith(p if p.endswith("/") else p + "/")),
                   key=len, default=None)
        return dict(_registered[best]) if best is not None else {}


def url_to_fs(url: str,
              storage_options: Mapping[str, Any] | None = None,
              ) -> tuple[fsspec.AbstractFileSystem, str]:
    """(filesystem, path within it) for a URL or plain path.

    Args:
        url: a path or fsspec URL.
        storage_options: options for this call; they win over the registered ones for `url`,
            which win over fsspec's config and environment (`FSSPEC_S3_*`).

    Raises:
        ValueError, ImportError: fsspec does not know the protocol or its package is missing.
    """
    options = {**options_for(url), **(storage_options or {})}
    protocol = _normalize(url).split("://", 1)[0]
    if protocol in _NO_LISTINGS_CACHE:
        options.setdefault("use_listings_cache", False)
    fs, path = fsspec.core.url_to_fs(str(url), **options)
    return fs, str(path)


def redacted(options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` with the values of secret-looking keys replaced, for messages and logs."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, Mapping):
            out[key] = redacted(value)
        elif any(word in key.lower() for word in _SECRET_WORDS) and key != "key_prefix":
            out[key] = "***"
        else:
            out[key] = value
    return out
