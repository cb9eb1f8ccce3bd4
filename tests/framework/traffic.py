"""A client on the host sending GETs to Services' cluster IPs and counting what is not answered:
the end-to-end suite's and the real-node benchmarks' measure of a rollout's failed requests."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from tests.framework.install import DIRECT


class Traffic:
    """A client sending GETs to each Service's cluster IP, one after another, and counting the
    answers that are not 200 (refused, reset, timed out, or an error status), per Service.

    Bounded: it stops when told, or after ``limit`` requests per Service."""

    def __init__(self, ips: Mapping[str, str], limit: int = 3000) -> None:
        self.ips = dict(ips)  # Service name -> cluster IP
        self.ok = dict.fromkeys(self.ips, 0)
        self.failed: dict[str, list[str]] = {name: [] for name in self.ips}
        self._stop = threading.Event()
        self._limit = limit
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for _ in range(self._limit):
            for name, ip in self.ips.items():
                if self._stop.is_set():
                    return
                try:
                    with DIRECT.open(f"http://{ip}/", timeout=5) as resp:
                        status = resp.status
                    if status == 200:
                        self.ok[name] += 1
                    else:
                        self.failed[name].append(f"HTTP {status}")
                except OSError as exc:
                    self.failed[name].append(repr(exc))
            self._stop.wait(0.1)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def answered(self, at_least: int) -> bool:
        """Whether every Service has answered ``at_least`` requests so far."""
        return all(n >= at_least for n in self.ok.values())

    def answering(self, in_a_row: int) -> bool:
        """Whether the last ``in_a_row`` requests to every Service were answered: a new Service
        refuses connections until kube-proxy has its endpoints. Then the count starts."""
        if not all(n >= in_a_row for n in self.ok.values()):
            return False
        if any(self.failed.values()):
            self.ok = dict.fromkeys(self.ok, 0)
            self.failed = {name: [] for name in self.failed}
            return False
        return True
