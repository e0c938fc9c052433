"""A STAND-IN for a Confluent-compatible schema registry, for the tests: the smallest honest one.

No real registry can run here: Karapace has no release on the package index this machine
reaches, and its source wants Python >= 3.12, a Go build step and a patched avro package
downloaded from a code host at install time; Confluent's registry is not on Maven Central. So
this implements only the REST endpoints ingest and the tests use, with the registry's JSON
shapes and error codes:

- POST /subjects/{subject}/versions  {"schema": "..."}  -> {"id": N} (the same schema text
  keeps its id; a new one under a subject is its next version)
- GET  /schemas/ids/{id}                               -> {"schema": "..."} or 404 (40403)
- GET  /subjects/{subject}/versions/latest             -> {"subject", "version", "id",
  "schema"} or 404 (40401)

It checks no compatibility and keeps schemas in memory. It runs as its own process
(`python tests/schema_registry_standin.py PORT`), reached over HTTP by confluent-kafka's
`SchemaRegistryClient`, like a real registry; the `schema_registry` fixture starts it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest
from external import free_port

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_id: dict[int, str] = {}
        self.ids: dict[str, int] = {}
        self.subjects: dict[str, list[int]] = {}

    def register(self, subject: str, schema: str) -> int:
        with self.lock:
            schema_id = self.ids.get(schema)
            if schema_id is None:
                schema_id = self.ids[schema] = len(self.by_id) + 1
                self.by_id[schema_id] = schema
            versions = self.subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id


class _Handler(BaseHTTPRequestHandler):
    store: _Store

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass

    def _send(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", _CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _parts(self) -> list[str]:
        return [unquote(p) for p in self.path.split("?", 1)[0].strip("/").split("/")]

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        parts = self._parts()
        if len(parts) != 3 or parts[0] != "subjects" or parts[2] != "versions":
            self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        schema = body.get("schema")
        try:
            json.loads(schema)
        except (TypeError, ValueError):
            self._send(422, {"error_code": 42201, "message": "Invalid schema"})
            return
        self._send(200, {"id": self.store.register(parts[1], schema)})

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        parts = self._parts()
        store = self.store
        if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
            schema = store.by_id.get(int(parts[2]))
            if schema is None:
                self._send(404, {"error_code": 40403, "message": "Schema not found"})
            else:
                self._send(200, {"schema": schema})
            return
        if len(parts) == 4 and parts[0] == "subjects" and parts[2:] == ["versions", "latest"]:
            versions = store.subjects.get(parts[1])
            if not versions:
                self._send(404, {"error_code": 40401,
                                 "message": f"Subject '{parts[1]}' not found."})
                return
            schema_id = versions[-1]
            self._send(200, {"subject": parts[1], "version": len(versions), "id": schema_id,
                             "schema": store.by_id[schema_id]})
            return
        self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})


def serve(port: int) -> None:
    """Serve on 127.0.0.1:port until killed."""
    _Handler.store = _Store()
    ThreadingHTTPServer(("127.0.0.1", port), _Handler).serve_forever()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[str]:
    """The stand-in registry as its own process; yields its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"{url}/schemas/ids/0", timeout=1)
            except urllib.error.HTTPError:
                break  # a 404: it answers
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the schema registry stand-in did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
