"""Processes of the local cluster: start, stop and tail one (``Component``), free ports, log.

What the control plane (``localcluster.cluster``), the real node (``localcluster.node``)
and OLM (``localcluster.olm``) all run their processes with; it imports none of them.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path


def log(msg: str) -> None:
    print(f"[localcluster] {msg}", file=sys.stderr, flush=True)


# LOCALCLUSTER_PORTS=first-last: take ports from this range only. Several clusters started side
# by side (parallel test workers) each get a range of their own: a port one process found free
# and has not bound yet is then never handed to another. Below the kernel's ephemeral range
# (32768+ by default), no outgoing connection takes one either.
PORTS_ENV = "LOCALCLUSTER_PORTS"
_next_port: dict[str, int] = {}
_port_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (from ``LOCALCLUSTER_PORTS`` if set)."""
    spec = os.environ.get(PORTS_ENV)
    if not spec:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    first, last = (int(p) for p in spec.split("-"))
    with _port_lock:
        # Round robin through the range: a port handed out recently is the last to come again.
        for _ in range(last - first + 1):
            # A random start: two sessions given one range (by mistake) rarely walk in step.
            port = _next_port.get(spec) or random.randint(first, last)
            _next_port[spec] = first if port >= last else port + 1
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError(f"no free port in {PORTS_ENV}={spec}")


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ComponentError(RuntimeError):
    """A component failed to start; the message carries its log tail."""


@dataclass
class Component:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        out = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # Own session: a Ctrl-C aimed at `make run` reaches us, and we stop the children
            # in order instead of them all dying at once.
            start_new_session=True,
            preexec_fn=_set_pdeathsig if sys.platform == "linux" else None,  # noqa: PLW1509
        )
        out.close()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
