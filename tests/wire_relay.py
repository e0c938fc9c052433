"""A TCP relay that keeps every byte a client sent, to show what crosses the wire (Kerberos'
auth-conf and TLS must leave no table or method name readable), and its fixture."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest


class Relay:
    """A TCP relay on `listen` to 127.0.0.1:`port` that keeps every byte the client sent."""

    def __init__(self, port: int, listen: str = "127.0.0.1") -> None:
        self.sent = bytearray()
        self._target = port
        self._listener = socket.create_server((listen, 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._target))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False),
                             daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if record:
                    self.sent += chunk
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            sink.close()

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def relay_to() -> Iterator[Callable[..., Relay]]:
    """Makes relays (`relay_to(port, listen=...)`), closed when the test ends."""
    made: list[Relay] = []

    def make(port: int, listen: str = "127.0.0.1") -> Relay:
        made.append(Relay(port, listen))
        return made[-1]

    yield make
    for r in made:
        r.close()
