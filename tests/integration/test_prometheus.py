"""The three operators scraped by a real Prometheus server (Debian's ``prometheus`` package).

The module starts the three operators (as their ServiceAccounts, watching one namespace of the
module's own, so what they export depends on nothing another module left behind) and a
Prometheus with a static scrape config, one job per operator named like the job its
ServiceMonitor would produce (``<operator>-operator-metrics``), scraping every second. Then it
drives reconciles and asks Prometheus' HTTP API what it saw, comparing with each operator's own
``/metrics``. The metrics are served as shipped (HTTPS, TokenReview + SubjectAccessReview) and
scraped as the ServiceMonitors do, with the token of a ServiceAccount bound to metrics-reader.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest
from kubernetes import client

from operators import PACKAGES, description
from shared.controller.metrics import TABLE
from tests.framework import netperfs
from tests.framework.cluster import Cluster
from tests.framework.namespaces import delete_namespace, fresh_namespace
from tests.framework.operator_process import OperatorProcess
from tests.framework.prometheus import Prometheus
from tests.framework.waits import wait_for

OPERATORS = PACKAGES


@pytest.fixture(scope="module")
def watched(cluster: Cluster) -> Iterator[str]:
    """The one namespace this module's operators watch."""
    core = client.CoreV1Api(cluster.api)
    name = fresh_namespace(core, "prom", {"localcluster.dev/test": "true"})
    yield name
    delete_namespace(core, name)


@pytest.fixture(scope="module")
def scraper_token(cluster: Cluster) -> str:
    return cluster.metrics_reader_token()


@pytest.fixture(scope="module")
def operators(
    cluster: Cluster, watched: str, scraper_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, OperatorProcess]]:
    logs = tmp_path_factory.mktemp("operators")
    started = {
        # Leader election on, as deployed: leader_election_master_status has a sample then.
        op: OperatorProcess(
            f"operators.{op}",
            cluster.operator_kubeconfig(op),
            logs / f"{op}.log",
            namespaces=watched,
            env={"LEADER_ELECT": "true"},
            metrics_token=scraper_token,
        ).start()
        for op in OPERATORS
    }
    yield started
    for op in started.values():
        op.stop()


@pytest.fixture(scope="module")
def prometheus(
    operators: dict[str, OperatorProcess], scraper_token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    prom = Prometheus(
        {op: f"127.0.0.1:{p.metrics_port}" for op, p in operators.items()},
        tmp_path_factory.mktemp("prometheus"),
        token=scraper_token,
    )
    yield prom
    prom.stop()


def families_without_samples(operator: str, text: str) -> set[str]:
    """Families of ``operator``'s metrics table that have no sample in ``text`` yet."""
    sampled = {line.split("{")[0].split()[0] for line in text.splitlines() if line and line[0] != "#"}
    return {
        spec.name
        for spec in (*TABLE, *description(operator).metrics)
        if not any(s == spec.name or s.startswith(spec.name + "_") for s in sampled)
    }


def create_webserver_and_tdset(
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    webserver_replicas: int,
    tdset_replicas: int,
    tdset: str | None = None,
) -> None:
    """A WebServer ``name`` and a window-less TDSet (``tdset``, default ``name``) for the operators."""
    co = client.CustomObjectsApi(cluster.api)
    web = {"apiVersion": "demo.k8s.io/v1alpha1", "kind": "WebServer", "metadata": {"name": name}}
    co.create_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", namespace, "webservers", {**web, "spec": {"replicas": webserver_replicas}}
    )
    tds = {"apiVersion": "schedule.rs/v1", "kind": "TDSet", "metadata": {"name": tdset or name}}
    spec = {
        "container": {"image": "nginx", "port": 80},
        "schedulingConfig": [],
        "defaultReplica": tdset_replicas,
    }
    co.create_namespaced_custom_object("schedule.rs", "v1", namespace, "tdsets", {**tds, "spec": spec})


def test_live_metrics_pass_promtool_check_metrics(cluster, watched, operators):
    """promtool lints only families with samples: first give every family one, then lint."""
    create_webserver_and_tdset(cluster, watched, "lint", webserver_replicas=1, tdset_replicas=1)
    netperfs.create(cluster, watched, "lint", {"samples": 3})
    s = netperfs.in_test(cluster, watched, "lint")
    netperfs.finish_client(cluster, watched, s["clientPod"], netperfs.fixture("tcp_stream"))
    netperfs.phase_is(cluster, watched, "lint", "Done")
    # The RR families (transactions/s, latency percentiles) and a scheduled run's (regressed).
    netperfs.create(cluster, watched, "lint-rr", {"samples": 1, "testType": "TCP_RR"})
    s = netperfs.in_test(cluster, watched, "lint-rr")
    netperfs.finish_client(cluster, watched, s["clientPod"], netperfs.fixture("tcp_rr").split("SAMPLE=1")[0])
    netperfs.phase_is(cluster, watched, "lint-rr", "Done")
    netperfs.create(cluster, watched, "lint-cron", {"samples": 1, "schedule": "* * * * *"})
    s = netperfs.in_test(cluster, watched, "lint-cron")  # within a minute: the next due time
    netperfs.finish_client(
        cluster, watched, s["clientPod"], netperfs.fixture("tcp_stream").split("SAMPLE=1")[0]
    )
    netperfs.phase_is(cluster, watched, "lint-cron", "Done")

    promtool = shutil.which("promtool")
    assert promtool
    for op, process in operators.items():
        wait_for(
            lambda op=op, process=process: not families_without_samples(op, process.metrics()),
            60,
            f"{op}: a sample in every family",
        )
        text = process.metrics()
        assert "_created" not in text
        assert f'controller_runtime_reconcile_total{{controller="{op}",result="requeue"}} 0.0' in text
        assert "process_resident_memory_bytes" in text
        check = subprocess.run(
            [promtool, "check", "metrics"], input=text.encode(), capture_output=True, check=False
        )
        assert check.returncode == 0 and not check.stdout.strip(), (op, check.stdout + check.stderr)


def test_prometheus_scrapes_the_operators_and_sees_reconciles_move(cluster, watched, operators, prometheus):
    namespace = watched

    def all_up() -> bool:
        return {t["labels"]["job"]: t["health"] for t in prometheus.targets()} == {
            f"{op}-operator-metrics": "up" for op in OPERATORS
        }

    wait_for(all_up, 60, "three targets up")
    assert {r["metric"]["job"] for r in prometheus.query("up == 1")} == {
        f"{op}-operator-metrics" for op in OPERATORS
    }

    # TDSet passes end in requeue_after (they schedule the next boundary), WebServer's in success.
    total = 'sum(controller_runtime_reconcile_total{{controller="{op}"}})'
    before = {op: prometheus.value(total.format(op=op)) or 0.0 for op in OPERATORS}

    create_webserver_and_tdset(cluster, namespace, "w", webserver_replicas=2, tdset_replicas=3, tdset="t")
    wait_for(
        lambda: prometheus.value(f'tdset_desired_replicas{{namespace="{namespace}",name="t"}}') == 3,
        60,
        "Prometheus sees the TDSet's desired replicas",
    )
    wait_for(
        lambda: prometheus.value(f'webserver_ready_replicas{{namespace="{namespace}",name="w"}}') == 2,
        90,
        "Prometheus sees the WebServer's ready replicas",
    )

    for op, result in (("tdset", "requeue_after"), ("webserver", "success")):
        # Prometheus catches up with the operator's own counter, and the counter moved.
        own = operators[op].metric("controller_runtime_reconcile_total", controller=op, result=result)
        series = f'controller_runtime_reconcile_total{{controller="{op}",result="{result}"}}'
        wait_for(lambda series=series, own=own: (prometheus.value(series) or 0) >= own, 30, f"{op}'s count")
        assert (prometheus.value(total.format(op=op)) or 0) > before[op]
        moved = prometheus.value(f"increase({series}[5m])")
        assert moved is not None and moved > 0
        # Every reconcile is timed: the histogram's count equals the sum over all results.
        count = prometheus.value(f'controller_runtime_reconcile_time_seconds_count{{controller="{op}"}}')
        assert count == prometheus.value(total.format(op=op))
        # The operator's own API writes were counted by code.
        created = prometheus.value(
            f'sum(rest_client_requests_total{{job="{op}-operator-metrics",code=~"2.."}})'
        )
        assert created is not None and created > 0
    # Series Prometheus keeps for each object carry its namespace and name.
    assert {
        (r["metric"]["namespace"], r["metric"]["name"])
        for r in prometheus.query("webserver_desired_replicas")
    } >= {(namespace, "w")}
