"""``/metrics`` only for those allowed to read it, on a real API server.

The WebServer operator runs as shipped: two processes (leader and standby, leader election on)
as ServiceAccounts holding exactly the CSV's rules (its cluster permissions included: TokenReview
and SubjectAccessReview create), ``/metrics`` over HTTPS with a self-signed certificate. Each is
asked by callers the real kube-apiserver authenticates and authorizes: no token, a forged one, a
ServiceAccount without the bundle's metrics-reader ClusterRole, one with it; the probes stay plain
HTTP on their own port. Then a mounted certificate, served by the shared runtime alone; and a
flood of forged tokens, which costs the API server no more than the new tokens' rate limit
allows (counted in its audit log) while the scraper keeps being answered from the cache.
"""

from __future__ import annotations

import http.client
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kubernetes import client

from localcluster.cluster import AUDITED_NAMESPACE
from shared.api import leases
from shared.api import metricsauth as rules
from shared.controller import certs
from tests.framework.audit import made_by
from tests.framework.cluster import SCRAPERS_NAMESPACE, Cluster, service_account_token
from tests.framework.operator_process import UNVERIFIED, OperatorProcess, sample
from tests.framework.waits import wait_for


@pytest.fixture
def pair(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[list[OperatorProcess]]:
    """The WebServer operator twice (a leader and a standby), secure metrics as shipped."""
    reader = cluster.metrics_reader_token()
    started = []
    for name in ("a", "b"):
        process = OperatorProcess(
            "operators.webserver",
            cluster.operator_kubeconfig("webserver", account=f"sm-{name}-{namespace[-6:]}"),
            tmp_path / f"{name}.log",
            namespaces=namespace,
            env={"LEADER_ELECT": "true", "POD_NAME": name},
            metrics_token=reader,
        )
        started.append(process)
        process.start()
    yield started
    for process in started:
        process.stop()


def test_metrics_answer_401_403_or_200_as_the_api_server_says_and_probes_stay_http(cluster, pair):
    nobody = service_account_token(cluster.api, "metrics-nobody")
    # Exactly one leads; the standby answers its scrapers as well (its reviews are not fenced).
    lease = leases.lease_name("webserver")
    wait_for(
        lambda: sorted(p.metric("leader_election_master_status", name=lease) for p in pair) == [0, 1],
        60,
        "a leader and a standby",
    )
    for process in pair:
        port = process.metrics_port
        assert process.get(port, "/metrics") == (401, "Unauthorized")
        assert process.get(port, "/metrics", token="not-a-token") == (401, "Unauthorized")
        assert process.get(port, "/metrics", token=nobody) == (
            403,
            f"Authorization denied for user system:serviceaccount:{SCRAPERS_NAMESPACE}:metrics-nobody",
        )
        status, body = process.get(port, "/metrics", token=process.metrics_token)
        assert status == 200
        assert 'controller_runtime_max_concurrent_reconciles{controller="webserver"} 8.0' in body
        # No plain HTTP on the metrics port: the TLS handshake fails before any answer.
        with pytest.raises((urllib.error.URLError, http.client.HTTPException, ConnectionError)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).close()
        # The kubelet's probes: plain HTTP, no token, on their own port; nothing of them on the
        # metrics port.
        assert process.get(process.probe_port, "/healthz") == (200, "ok")
        assert process.get(process.probe_port, "/readyz") == (200, "ok")
        assert process.get(process.probe_port, "/metrics")[0] == 404
        assert process.get(port, "/readyz", token=process.metrics_token)[0] == 404


def test_a_denial_lasts_only_until_the_caller_is_bound_to_metrics_reader(cluster, pair):
    """A denial is cached 30 s (controller-runtime's), not for good: once Prometheus' account is
    bound to metrics-reader, its scrapes succeed without restarting the operator."""
    token = service_account_token(cluster.api, "metrics-later")
    leader = pair[0]
    assert leader.get(leader.metrics_port, "/metrics", token=token)[0] == 403
    client.RbacAuthorizationV1Api(cluster.api).create_cluster_role_binding(
        {
            "metadata": {"name": f"test:metrics-later:{leader.namespaces}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "k8s-operators-py-metrics-reader",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "metrics-later", "namespace": SCRAPERS_NAMESPACE}
            ],
        }
    )
    try:
        wait_for(
            lambda: leader.get(leader.metrics_port, "/metrics", token=token)[0] == 200,
            90,
            "the scrape allowed once the denial's cache entry expired",
        )
    finally:
        client.RbacAuthorizationV1Api(cluster.api).delete_cluster_role_binding(
            f"test:metrics-later:{leader.namespaces}"
        )


def test_a_mounted_certificate_is_served_and_a_runtime_without_a_client_of_its_own_makes_one(
    cluster, namespace, tmp_path
):
    """The shared runtime alone (the test operator manages no API client: the filter makes one
    for its reviews), with a certificate in ``METRICS_CERT_DIR``, as the Deployments mount the
    optional ``<operator>-metrics-cert`` Secret."""
    cert_pem, key_pem = certs.self_signed(names=("demo-metrics.example",))
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "certs" / "tls.key").write_bytes(key_pem)
    demo = OperatorProcess(
        "tests.framework.demo_operator",
        cluster.kubeconfig,
        tmp_path / "demo.log",
        namespace,
        env={"METRICS_CERT_DIR": str(tmp_path / "certs")},
        metrics_token=cluster.metrics_reader_token(),
    ).start()
    try:
        served = ssl.get_server_certificate(("127.0.0.1", demo.metrics_port), timeout=5)
        assert served.strip() == cert_pem.decode().strip()
        assert demo.get(demo.metrics_port, "/metrics")[0] == 401
        assert "controller_runtime_reconcile_total" in demo.metrics()
    finally:
        demo.stop()


def _get(
    port: int, token: str, connection: http.client.HTTPSConnection | None = None
) -> tuple[int | str, str]:
    """GET /metrics with ``token``: on ``connection`` (kept open, as Prometheus keeps its
    connection between scrapes), else on a new one; ``closed`` if the server closed it first."""
    conn = connection or http.client.HTTPSConnection("127.0.0.1", port, context=UNVERIFIED, timeout=60)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        return response.status, response.read().decode()
    except (ConnectionError, ssl.SSLError, http.client.RemoteDisconnected):
        return "closed", ""
    finally:
        if connection is None:
            conn.close()


def test_a_flood_of_forged_tokens_costs_at_most_the_rate_limits_reviews_and_prometheus_is_served(
    cluster, namespace, tmp_path
):
    """Hundreds of distinct forged tokens, each on a new connection, eight at once, with
    Prometheus' scrapes in between on its kept-open connection: every forged request is closed
    before its TLS handshake (the handshake bound), or answered 401 (reviewed) or 429 (not, the
    new tokens' bound), as the operator counts them; the API server's audit log shows no more
    TokenReviews by the operator than the new tokens' bucket allows over the flood's duration;
    and every scrape is a 200 from the cache (no SubjectAccessReview, no TokenReview beyond its
    token's renewals)."""
    account = f"sm-flood-{namespace[-6:]}"
    user = f"system:serviceaccount:{AUDITED_NAMESPACE}:{account}"
    operator = OperatorProcess(
        "operators.webserver",
        cluster.operator_kubeconfig("webserver", account=account),
        tmp_path / "flood.log",
        namespaces=namespace,
        metrics_token=cluster.metrics_reader_token(),
    ).start()
    port, token = operator.metrics_port, operator.metrics_token
    assert token is not None
    prometheus = http.client.HTTPSConnection("127.0.0.1", port, context=UNVERIFIED, timeout=60)

    def reviews(resource: str) -> int:
        return len(made_by(cluster, user, resource=resource))

    def counted(name: str, **labels: str) -> int:
        status, body = _get(port, token, prometheus)
        if status == "closed":  # idle past the server's keep-alive: Prometheus reconnects too
            prometheus.close()
            status, body = _get(port, token, prometheus)
        assert status == 200, (status, body)
        return int(sample(body, name, **labels))

    try:
        assert _get(port, token, prometheus)[0] == 200
        wait_for(lambda: reviews("subjectaccessreviews") == 1, 30, "the scraper's review in the audit log")
        before = {kind: reviews(kind) for kind in ("tokenreviews", "subjectaccessreviews")}
        renewed_before = counted("metrics_auth_reviews_total", review="tokenreview", result="authenticated")
        forged = [f"forged-{namespace}-{i}" for i in range(400)]
        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            flood = pool.map(lambda forgery: _get(port, forgery)[0], forged)
            scrapes = [_get(port, token, prometheus)[0] for _ in range(20)]
            answers = list(flood)
        elapsed = time.monotonic() - started
        assert scrapes == [200] * 20
        assert set(answers) <= {401, 429, "closed"}

        def limited(*limits: str) -> int:
            return sum(counted("metrics_auth_limited_total", limit=limit) for limit in limits)

        # What the operator did, by its own count: each forgery closed, reviewed (401) or not (429).
        unauthenticated = counted(
            "metrics_auth_reviews_total", review="tokenreview", result="unauthenticated"
        )
        assert (answers.count("closed"), answers.count(401), answers.count(429)) == (
            limited("connections", "handshakes"),
            unauthenticated,
            limited("rate", "in_flight"),
        )
        # The scraper's token: renewed at most once per token TTL, allowed from the cache.
        renewals = (
            counted("metrics_auth_reviews_total", review="tokenreview", result="authenticated")
            - renewed_before
        )
        assert renewals <= elapsed // rules.TOKEN_TTL + 1
        # What the API server received (its audit log catches up with the operator's count).
        wait_for(
            lambda: reviews("tokenreviews") - before["tokenreviews"] == unauthenticated + renewals,
            30,
            "every TokenReview the operator counted in the audit log",
        )
        assert unauthenticated <= rules.NEW_TOKEN_BURST + rules.NEW_TOKEN_QPS * elapsed + 1
        assert reviews("subjectaccessreviews") - before["subjectaccessreviews"] <= elapsed // rules.ALLOW_TTL
    finally:
        prometheus.close()
        operator.stop()
