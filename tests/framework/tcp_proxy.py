"""A TCP proxy a test can cut: a network partition between one client and the API server.

The operator under test talks to the API server through it (TLS passes through untouched; the
server certificate names 127.0.0.1, whatever the port). ``Proxy.partition`` closes every
open connection and refuses new ones until ``Proxy.heal``, so whatever the API server
sends meanwhile never reaches the operator: the watch events of a real partition are lost,
not delayed in a socket buffer.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import yaml


class Proxy:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server((host, 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._cut:
                    client.close()
                    continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()  # the API server itself is down: so is the connection
                continue
            server.settimeout(None)
            with self._lock:
                self._open |= {client, server}
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close(src, dst)

    def _close(self, *socks: socket.socket) -> None:
        with self._lock:
            for s in socks:
                self._open.discard(s)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def partition(self) -> None:
        with self._lock:
            self._cut = True
            socks = list(self._open)
        self._close(*socks)

    def heal(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.partition()
        self._listener.close()

    def kubeconfig(self, original: Path) -> Path:
        """A copy of ``original`` that reaches the API server through this proxy."""
        config = yaml.safe_load(original.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path = original.with_name(f"{original.name}-via-{self.port}")
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path
