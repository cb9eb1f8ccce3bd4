"""Run one of our operators as a real process against the test cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from localcluster.components import free_port
from tests.framework.waits import wait_for

REPO = Path(__file__).resolve().parents[2]


class OperatorProcess:
    def __init__(
        self,
        module: str,
        kubeconfig: Path,
        log_path: Path,
        namespaces: str = "",
        env: Mapping[str, str] | None = None,
        *,
        verbose: bool = True,
    ) -> None:
        self.module = module
        self.extra_env = dict(env or {})
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.namespaces = namespaces
        # Tests want kopf's debug log; benchmarks run the operator as deployed, without it.
        self.verbose = verbose
        self.metrics_port = free_port()
        self.probe_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90) -> OperatorProcess:
        """Start the process and wait until it is ready (/readyz)."""
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> OperatorProcess:
        """Start the process without waiting (several can then start at once)."""
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "WATCH_NAMESPACE": self.namespaces,
            "METRICS_PORT": str(self.metrics_port),
            "HEALTH_PORT": str(self.probe_port),
            **self.extra_env,
        }
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, *(["--verbose"] if self.verbose else [])],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_ready(self, timeout: float = 90) -> None:
        wait_for(self._ready, timeout, f"{self.module} /readyz")

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, f"{self.module} exited:\n{self.log_tail()}"
        return self.get(self.probe_port, "/readyz")[0] == 200

    def get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def metrics(self) -> str:
        status, text = self.get(self.metrics_port, "/metrics")
        assert status == 200
        return text

    def metric(self, name: str, /, **labels: str) -> float:
        """One sample's value from /metrics (0 when absent)."""
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in self.metrics().splitlines():
            if line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            lname, _, rest = key.partition("{")
            if lname == name and ",".join(sorted(rest.rstrip("}").split(","))) == want:
                return float(value)
        return 0.0

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def freeze(self) -> None:
        """SIGSTOP: the process stops dead (a paused VM, a stalled node) until :meth:`resume`."""
        assert self.proc is not None and self.proc.poll() is None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def wait_exit(self, timeout: float = 60) -> int:
        """The exit status once the process has ended by itself."""
        assert self.proc is not None
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, like a node failure or OOM kill."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.resume()  # a frozen process handles SIGTERM only once it runs again
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
