"""Run one of our operators as a real process against the test cluster.

Its ``/metrics`` is served as shipped (HTTPS, TokenReview + SubjectAccessReview) when the test
gives a ``metrics_token`` (a ServiceAccount bound to metrics-reader:
``tests.framework.cluster.Cluster.metrics_reader_token``), which every read of the metrics
then carries; without one, as plain HTTP (``--metrics-secure=false``, what a developer runs),
for the tests about something else.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from localcluster.process import free_port
from tests.framework.waits import wait_for

REPO = Path(__file__).resolve().parents[2]
UNVERIFIED = ssl.create_default_context()
UNVERIFIED.check_hostname, UNVERIFIED.verify_mode = False, ssl.CERT_NONE


def sample(exposition: str, name: str, /, **labels: str) -> float:
    """One sample's value in a Prometheus text exposition (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in exposition.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        lname, _, rest = key.partition("{")
        if lname == name and ",".join(sorted(rest.rstrip("}").split(","))) == want:
            return float(value)
    return 0.0


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
        metrics_token: str | None = None,
    ) -> None:
        self.module = module
        self.extra_env = dict(env or {})
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.namespaces = namespaces
        # Tests want kopf's debug log; benchmarks run the operator as deployed, without it.
        self.verbose = verbose
        self.metrics_token = metrics_token
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
            "METRICS_SECURE": "true" if self.metrics_token else "false",
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

    @property
    def metrics_secure(self) -> bool:
        return (self.extra_env.get("METRICS_SECURE") or ("true" if self.metrics_token else "false")) == "true"

    def get(self, port: int, path: str, *, token: str | None = None) -> tuple[int, str]:
        """GET over HTTPS on a secure metrics port (the operator's self-signed certificate is
        not verified: what a scraper checks is the token), else plain HTTP; ``token`` as bearer."""
        tls = port == self.metrics_port and self.metrics_secure
        request = urllib.request.Request(f"{'https' if tls else 'http'}://127.0.0.1:{port}{path}")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5, context=UNVERIFIED if tls else None) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def metrics(self) -> str:
        status, text = self.get(self.metrics_port, "/metrics", token=self.metrics_token)
        assert status == 200, (status, text)
        return text

    def metric(self, name: str, /, **labels: str) -> float:
        """One sample's value from /metrics (0 when absent)."""
        return sample(self.metrics(), name, **labels)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def freeze(self) -> None:
        """SIGSTOP: the process stops dead (a paused VM, a stalled node) until ``resume``."""
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
