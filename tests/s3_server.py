"""A real S3 HTTP server for the tests: moto's server mode in its own process on loopback.

`s3_server` (session) runs it; `s3` (function) gives a fresh bucket and the storage options
that reach it. `s3_auth` runs a second server that checks credentials (moto's IAM mode), and
`FlakyProxy` sits between a client and the server to cut connections mid-transfer.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from external import free_port

# Fail fast instead of retrying for a minute: one attempt, short timeouts.
FAST_FAILING = {"config_kwargs": {"connect_timeout": 2, "read_timeout": 10,
                                  "retries": {"max_attempts": 1, "mode": "standard"}}}



@dataclass
class MotoServer:
    """One moto server process."""

    endpoint: str
    process: subprocess.Popen[bytes]
    log: Path


def start_moto(log: Path, **env: str) -> MotoServer:
    """Start `python -m moto.server` on a free loopback port; ready when it answers."""
    port = free_port()
    out = open(log, "wb")  # noqa: SIM115 - the process owns it; closed in stop_moto
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env})
    out.close()
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"moto server exited with {process.returncode}: "
                               f"{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"moto server not ready in 30 s: {log.read_text()}") from None
            time.sleep(0.05)
    return MotoServer(f"http://127.0.0.1:{port}", process, log)


def stop_moto(server: MotoServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """moto's S3 server for the whole run (any key is accepted)."""
    server = start_moto(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server
    finally:
        stop_moto(server)


@dataclass
class Bucket:
    """A fresh bucket and how to reach it."""

    name: str
    endpoint: str
    options: dict[str, Any]
    upstream: str = ""  # behind a proxy: the server's own endpoint
    url: str = field(init=False)

    def __post_init__(self) -> None:
        self.url = f"s3://{self.name}"

    def cli_args(self, options: dict[str, Any] | None = None) -> list[str]:
        """`--storage-option KEY=VALUE` for each option (values as JSON when not strings)."""
        out = []
        for key, value in (self.options if options is None else options).items():
            text = value if isinstance(value, str) else json.dumps(value)
            out += ["--storage-option", f"{key}={text}"]
        return out

    def fs(self) -> Any:
        """A fresh s3fs filesystem (no listing cache) to look at the bucket from outside."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False,
                                 **self.options)


@pytest.fixture
def s3(s3_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Bucket:
    """A new bucket on the session's server; fsspec's S3 environment is cleared, so only the
    storage options a test passes reach the server."""
    for name in list(os.environ):
        if name.startswith(("FSSPEC_S3", "AWS_")):
            monkeypatch.delenv(name)
    bucket = Bucket(f"b-{uuid.uuid4().hex[:16]}", s3_server.endpoint,
                    {"endpoint_url": s3_server.endpoint, "key": "test", "secret": "test"})
    bucket.fs().mkdir(bucket.name)
    return bucket


@dataclass
class AuthServer:
    """A moto server that checks credentials: `good` reaches `bucket`, nothing else does."""

    server: MotoServer
    bucket: str
    good: dict[str, Any]


@pytest.fixture(scope="session")
def s3_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    """moto in IAM mode: the first 4 requests (a user, its key, its policy, a bucket) pass
    without credentials, every later one needs a key of that user."""
    import boto3

    server = start_moto(tmp_path_factory.mktemp("moto-auth") / "moto.log",
                        INITIAL_NO_AUTH_ACTION_COUNT="4")
    try:
        anyone = {"endpoint_url": server.endpoint, "aws_access_key_id": "setup",
                  "aws_secret_access_key": "setup", "region_name": "us-east-1"}
        iam = boto3.client("iam", **anyone)
        iam.create_user(UserName="ingest")
        key = iam.create_access_key(UserName="ingest")["AccessKey"]
        iam.put_user_policy(UserName="ingest", PolicyName="all", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        boto3.client("s3", **anyone).create_bucket(Bucket="bucket-auth")
        yield AuthServer(server, "bucket-auth", {
            "endpoint_url": server.endpoint, "key": key["AccessKeyId"],
            "secret": key["SecretAccessKey"]})
    finally:
        stop_moto(server)


class FlakyProxy:
    """A TCP proxy to an endpoint that, once armed, lets `budget` more bytes of requests
    through and then drops every connection, and refuses new ones, until healed."""

    def __init__(self, endpoint: str) -> None:
        host, port = endpoint.rsplit("//", 1)[1].split(":")
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._budget: int | None = None
        self._sockets: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, budget: int) -> None:
        with self._lock:
            self._budget = budget

    def heal(self) -> None:
        with self._lock:
            self._budget = None

    @property
    def broken(self) -> bool:
        with self._lock:
            return self._budget is not None and self._budget <= 0

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self._drop_all()

    def _drop_all(self) -> None:
        with self._lock:
            doomed, self._sockets = self._sockets, set()
        for s in doomed:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.broken:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets |= {client, server}
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False),
                             daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if counted:
                    with self._lock:
                        if self._budget is not None:
                            self._budget -= len(data)
                    if self.broken:
                        break
                sink.sendall(data)
        except OSError:
            pass
        if self.broken:
            self._drop_all()
            return
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def flaky_s3(s3: Bucket) -> Iterator[tuple[Bucket, FlakyProxy]]:
    """The bucket of `s3`, reached through a `FlakyProxy` (options point at the proxy)."""
    proxy = FlakyProxy(s3.endpoint)
    through = Bucket(s3.name, proxy.endpoint, {**s3.options, "endpoint_url": proxy.endpoint,
                                                **FAST_FAILING}, upstream=s3.endpoint)
    try:
        yield through, proxy
    finally:
        proxy.close()
