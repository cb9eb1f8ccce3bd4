"""Metrics flood: what a flood of forged bearer tokens on ``/metrics`` costs the operator.

    python -m tools.bench.metrics_flood [--seconds 30] [--clients 8]

Starts the local control plane and the WebServer operator as deployed (no debug log; HTTPS
metrics with TokenReview and SubjectAccessReview, its CSV's rules including the cluster
permissions, as a ServiceAccount the API server audits). A stand-in for Prometheus (a
ServiceAccount bound to the metrics-reader ClusterRole) scrapes ``/metrics`` over one kept-open
connection, and the kubelet's stand-in GETs ``/healthz`` (plain HTTP, served on the same event
loop), each every ``--every`` seconds: first for ``--seconds`` with nothing else, then for as
long again while ``--clients`` processes each send requests with a new forged token on a new
connection, one after the other, as fast as they are answered.
"""

from __future__ import annotations

import argparse
import http.client
import ssl
import tempfile
import time
import urllib.request
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kubernetes import config

from localcluster.cluster import AUDITED_NAMESPACE
from tests.framework.cluster import Cluster
from tests.framework.operator_process import OperatorProcess
from tools.bench.lib import AuditLog, ProcStats, control_plane, load, say, summary

UNVERIFIED = ssl.create_default_context()
UNVERIFIED.check_hostname, UNVERIFIED.verify_mode = False, ssl.CERT_NONE


def flood(port: int, seconds: float, worker: int) -> Counter[str]:
    """One flooding client: a new connection and a new forged token per request."""
    outcomes: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        i += 1
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=UNVERIFIED, timeout=30)
        try:
            conn.request("GET", "/metrics", headers={"Authorization": f"Bearer forged-{worker}-{i}"})
            response = conn.getresponse()
            response.read()
            outcomes[str(response.status)] += 1
        except OSError:
            outcomes["closed"] += 1
        finally:
            conn.close()
    return outcomes


def watch(
    operator: OperatorProcess, seconds: float, every: float
) -> tuple[list[float], list[float], Counter[str]]:
    """Scrape (one kept-open connection) and probe every ``every`` seconds for ``seconds``:
    their latencies, and the count of each non-200 outcome."""
    scrapes: list[float] = []
    probes: list[float] = []
    failures: Counter[str] = Counter()
    prometheus = http.client.HTTPSConnection(
        "127.0.0.1", operator.metrics_port, context=UNVERIFIED, timeout=30
    )
    headers = {"Authorization": f"Bearer {operator.metrics_token}"}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = time.monotonic()
        try:
            prometheus.request("GET", "/metrics", headers=headers)
            response = prometheus.getresponse()
            response.read()
            if response.status != 200:
                failures[f"scrape {response.status}"] += 1
        except OSError as exc:
            failures[f"scrape {type(exc).__name__}"] += 1
            prometheus.close()
        scrapes.append(time.monotonic() - start)
        start = time.monotonic()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{operator.probe_port}/healthz", timeout=30) as r:
                r.read()
        except OSError as exc:
            failures[f"probe {type(exc).__name__}"] += 1
        probes.append(time.monotonic() - start)
        time.sleep(max(0.0, every - (time.monotonic() - start)))
    prometheus.close()
    return scrapes, probes, failures


def main(argv: list[str] | None = None) -> int:
    """Reported, quiet and flooded: the scrape's and the probe's latency (p50, p99, max) and every
    non-200 answer; the flood's requests by outcome (closed before the TLS handshake, 401 after a
    TokenReview, 429 without one); the TokenReviews the API server received from the operator (its
    audit log); the operator's CPU; the load average.
    """
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0, help="length of the quiet and of the flooded phase")
    p.add_argument("--clients", type=int, default=8, help="flooding processes")
    p.add_argument("--every", type=float, default=0.5, help="seconds between scrapes (and probes)")
    args = p.parse_args(argv)
    with control_plane(nodes=1, pods_per_node=110) as cl, tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(cl.kubeconfig, config.new_client_from_config(config_file=str(cl.kubeconfig)), cl)
        account = "bench-metrics-flood"
        user = f"system:serviceaccount:{AUDITED_NAMESPACE}:{account}"
        operator = OperatorProcess(
            "operators.webserver",
            cluster.operator_kubeconfig("webserver", account=account),
            Path(tmp) / "operator.log",
            verbose=False,
            metrics_token=cluster.metrics_reader_token(),
        ).start()
        try:
            assert operator.proc is not None
            stats, audit = ProcStats(operator.proc.pid), AuditLog(cl.audit_log)
            say(f"quiet for {args.seconds:g} s; {load()}")
            before = stats.sample()
            scrapes, probes, failures = watch(operator, args.seconds, args.every)
            quiet_cpu = stats.sample().cpu_s - before.cpu_s
            say(f"quiet: scrape {summary(scrapes)}; probe {summary(probes)}; failures {dict(failures)}")
            say(f"quiet: operator CPU {quiet_cpu:.2f} s")

            say(f"flood: {args.clients} clients for {args.seconds:g} s; {load()}")
            mark, before = audit.mark(), stats.sample()
            with ProcessPoolExecutor(args.clients) as pool:
                floods = [
                    pool.submit(flood, operator.metrics_port, args.seconds, w) for w in range(args.clients)
                ]
                scrapes, probes, failures = watch(operator, args.seconds, args.every)
                outcomes = sum((f.result() for f in floods), Counter[str]())
            after = stats.sample()
            time.sleep(2)  # the audit log's last lines
            reviews = audit.requests(user, mark)
            total = sum(outcomes.values())
            say(f"flood: scrape {summary(scrapes)}; probe {summary(probes)}; failures {dict(failures)}")
            say(
                f"flood: {total} forged requests ({total / args.seconds:.0f}/s): {dict(outcomes)}; "
                f"TokenReviews received {reviews['create tokenreviews']}, "
                f"SubjectAccessReviews {reviews['create subjectaccessreviews']}"
            )
            cpu = after.cpu_s - before.cpu_s
            say(f"flood: operator CPU {cpu:.2f} s in {after.at - before.at:.1f} s; {load()}")
        finally:
            operator.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
