"""Progress lines of started ranks brought back to a callable of the launching process.

A rank's `echo` is a `RemoteEcho` (picklable: it opens its own connection in whichever process
uses it); each line it gets goes over TCP to the launcher's `LineRelay`, which hands it to the
launcher's own `echo` in the order each rank sent them.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any


class RemoteEcho:
    """A picklable `echo` for a started rank: each line goes over TCP to a `LineRelay`."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._socket: socket.socket | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The connection is this process's own; a copy in another process opens its own.
        return {"host": self.host, "port": self.port, "_socket": None}

    def __call__(self, line: str) -> None:
        if self._socket is None:
            self._socket = socket.create_connection((self.host, self.port))
        self._socket.sendall((line.rstrip("\n") + "\n").encode())

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


class LineRelay:
    """Receives the lines of `RemoteEcho`s and passes each to `echo` here, in the order each
    rank sent them (a thread per connection)."""

    def __init__(self, echo: Callable[[str], None], host: str = "127.0.0.1") -> None:
        self._echo = echo
        self._server = socket.create_server((host, 0))
        # accept() wakes up now and then to notice `close`.
        self._server.settimeout(0.2)
        self.host, self.port = host, self._server.getsockname()[1]
        self._closing = threading.Event()
        self._readers: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="line-relay")
        self._acceptor.start()

    def sender(self) -> RemoteEcho:
        return RemoteEcho(self.host, self.port)

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                # Only once nothing waits to be accepted: a connection made just before `close`
                # still has its lines read.
                if self._closing.is_set():
                    return
                continue
            except OSError:
                return
            reader = threading.Thread(target=self._read, args=(connection,), daemon=True)
            reader.start()
            self._readers.append(reader)

    def _read(self, connection: socket.socket) -> None:
        connection.settimeout(None)
        with connection, connection.makefile("r", encoding="utf-8", errors="replace") as lines:
            for line in lines:
                self._echo(line.rstrip("\n"))

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting; wait (bounded) for the lines still on their way from finished ranks."""
        self._closing.set()
        self._acceptor.join(timeout)
        self._server.close()
        for reader in self._readers:
            reader.join(timeout)
