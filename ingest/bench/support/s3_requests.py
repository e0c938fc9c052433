"""Count the S3 requests a run makes, by kind, with moto's server-side recorder.

moto's server records every request it serves (method, URL, headers) between
`/moto-api/recorder/start-recording` and `stop-recording`; that sees the driver and every
Spark executor alike, which a client-side hook in one process would not. Only for a moto
endpoint (the benchmarks' and tests' S3); the recording also stores bodies, so a counted
run is never a timed one.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

KINDS = ("PUT", "GET", "HEAD", "LIST", "COPY", "DELETE", "MPU")


def classify(entry: Mapping[str, Any]) -> str:
    """The kind of one recorded request: PUT (an object or a part of one), GET (object
    bytes), HEAD, LIST (a listing, or a bucket's location), COPY (a server-side copy),
    DELETE (one object, or a bulk delete), MPU (starting, completing or aborting a
    multipart upload)."""
    method = str(entry.get("method", "")).upper()
    parts = urlsplit(str(entry.get("url", "")))
    query = parse_qs(parts.query, keep_blank_values=True)
    headers = {str(k).lower(): v for k, v in (entry.get("headers") or {}).items()}
    path = parts.path.strip("/")
    if method == "PUT":
        return "COPY" if "x-amz-copy-source" in headers else "PUT"
    if method == "POST":
        return "DELETE" if "delete" in query else "MPU"
    if method == "DELETE":
        return "MPU" if "uploadId" in query else "DELETE"
    if method == "HEAD":
        return "HEAD"
    # A GET of a bucket (no key) lists it; so does `?list-type=2` or `?location`.
    if "/" not in path or "list-type" in query or "location" in query:
        return "LIST"
    return "GET"


def count(entries: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Requests by kind (every kind in KINDS, zeros included)."""
    found = Counter(classify(e) for e in entries)
    return {kind: found.get(kind, 0) for kind in KINDS}


def keys_of(entries: Iterable[Mapping[str, Any]], kind: str) -> list[str]:
    """The URL paths of the requests of `kind` (to see which objects they touched)."""
    return [urlsplit(str(e.get("url", ""))).path for e in entries if classify(e) == kind]


def _call(endpoint: str, action: str) -> bytes:
    request = urllib.request.Request(f"{endpoint.rstrip('/')}/moto-api/recorder/{action}",
                                     method="POST" if action != "download-recording" else "GET")
    with urllib.request.urlopen(request, timeout=30) as response:
        return bytes(response.read())


class Recording:
    """The requests recorded by `recording` (filled in when its block ends)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def counts(self) -> dict[str, int]:
        return count(self.entries)


@contextmanager
def recording(endpoint: str) -> Iterator[Recording]:
    """Record the requests moto's server at `endpoint` serves during the block.

    Raises:
        OSError: the endpoint is not a moto server (no recorder API) or cannot be reached.
    """
    out = Recording()
    _call(endpoint, "reset-recording")
    _call(endpoint, "start-recording")
    try:
        yield out
    finally:
        _call(endpoint, "stop-recording")
        text = _call(endpoint, "download-recording").decode()
        out.entries = [json.loads(line) for line in text.splitlines() if line.strip()]
        _call(endpoint, "reset-recording")
