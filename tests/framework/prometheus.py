"""A real Prometheus server (Debian's ``prometheus`` package) scraping static targets every second.

With a ``token``, it scrapes as the bundle's ServiceMonitors make Prometheus Operator scrape:
HTTPS without verifying the operators' self-signed certificates, the token as bearer (a
ServiceAccount bound to metrics-reader).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from localcluster.process import free_port
from tests.framework.waits import wait_for


class Prometheus:
    def __init__(self, targets: dict[str, str], workdir: Path, *, token: str | None = None) -> None:
        """``targets``: operator name -> ``host:port`` of its metrics endpoint."""
        self.port = free_port()
        self.workdir = workdir
        secure: dict[str, Any] = {}
        if token:
            token_file = workdir / "token"
            token_file.write_text(token)
            token_file.chmod(0o600)
            secure = {
                "scheme": "https",
                "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
                "tls_config": {"insecure_skip_verify": True},
            }
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": f"{op}-operator-metrics", "static_configs": [{"targets": [address]}], **secure}
                for op, address in targets.items()
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        binary = shutil.which("prometheus")
        assert binary, "prometheus is installed by make system-deps (Debian's prometheus package)"
        self.log = (workdir / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: self._get("/-/ready") is not None, 60, "Prometheus /-/ready")

    def _get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as resp:
                body = resp.read()
        except OSError:
            assert self.proc.poll() is None, (self.workdir / "prometheus.log").read_text()[-2000:]
            return None
        return json.loads(body) if path.startswith("/api/") else body

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self._get("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert data is not None and data["status"] == "success", data
        return data["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def targets(self) -> list[dict[str, Any]]:
        return self._get("/api/v1/targets")["data"]["activeTargets"]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()
