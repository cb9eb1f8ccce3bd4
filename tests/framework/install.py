"""Our operators installed on the real node's cluster, and WebServers served by our ``web`` image.

``Install`` is what a user has after installing (with kubectl or OLM): the cluster, the
real node and the images imported into it, and the operators running as pods in
``k8s-operators-py``.
"""

from __future__ import annotations

import functools
import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from localcluster.kube import kubectl
from localcluster.node import RealNode
from tests.framework.cluster import REPO, metrics_reader_token
from tests.framework.waits import SLACK, wait_for
from tools.generate.bundle import OPERATOR_REPLICAS

INSTALL_NAMESPACE = "k8s-operators-py"
OPERATORS = ("netperf", "tdset", "webserver")
CRDS = [
    REPO / "bundle" / "manifests" / f
    for f in ("app.example.com_netperfs.yaml", "schedule.rs_tdsets.yaml", "demo.k8s.io_webservers.yaml")
]
# Straight to pod and Service IPs, whatever proxy the environment names.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# The same, for the operators' HTTPS /metrics: their certificate is self-signed, and what the
# scraper proves is its token (the ServiceMonitors' insecureSkipVerify).
_UNVERIFIED = ssl.create_default_context()
_UNVERIFIED.check_hostname, _UNVERIFIED.verify_mode = False, ssl.CERT_NONE
DIRECT_TLS = urllib.request.build_opener(
    urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=_UNVERIFIED)
)
WEB_UID = 101  # images/web/Dockerfile
METRICS_PORT = 8443  # the operators' HTTPS /metrics (shared.controller.serving)


@dataclass
class Install:
    kubeconfig: Path
    api: client.ApiClient
    node: RealNode
    images: dict[str, str]

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def co(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def kubectl(self, *args: str, check: bool = True) -> str:
        return kubectl(self.kubeconfig, *args, check=check)

    def uninstall(self) -> None:
        """``kubectl delete -f deploy/install.yaml``, waiting until it is gone (the namespace's
        pods terminate first: minutes on a loaded machine, hence the suite's slack)."""
        seconds = int(120 * SLACK)
        install = str(REPO / "deploy" / "install.yaml")
        wait = ("--wait=true", f"--timeout={seconds}s")
        kubectl(self.kubeconfig, "delete", *wait, "-f", install, timeout=seconds + 60)

    @functools.cached_property
    def metrics_token(self) -> str:
        """A token of a ServiceAccount bound to install.yaml's metrics-reader ClusterRole."""
        return metrics_reader_token(self.api)

    def metrics(self, pod: client.V1Pod) -> str:
        """An operator pod's ``/metrics`` (HTTPS, the metrics-reader token)."""
        request = urllib.request.Request(
            f"https://{pod.status.pod_ip}:{METRICS_PORT}/metrics",
            headers={"Authorization": f"Bearer {self.metrics_token}"},
        )
        with DIRECT_TLS.open(request, timeout=5) as resp:
            return str(resp.read().decode(errors="replace"))

    def operator_pods(self, op: str) -> list[client.V1Pod]:
        pods = self.core.list_namespaced_pod(
            INSTALL_NAMESPACE, label_selector=f"app.kubernetes.io/name={op}-operator"
        ).items
        return [p for p in pods if p.metadata.deletion_timestamp is None]

    def operator_pod(self, op: str) -> client.V1Pod:
        """The pod leading ``op`` (its Lease's holder identity is ``<pod name>_<uuid>``)."""

        def leader() -> client.V1Pod | None:
            lease = client.CoordinationV1Api(self.api).read_namespaced_lease(
                f"{op}-leader", INSTALL_NAMESPACE
            )
            holder = lease.spec.holder_identity or ""
            return next((p for p in self.operator_pods(op) if holder.startswith(f"{p.metadata.name}_")), None)

        return wait_for(leader, 60, f"the pod leading {op}")

    def operator_ready(self, op: str) -> bool:
        dep = client.AppsV1Api(self.api).read_namespaced_deployment(f"{op}-operator", INSTALL_NAMESPACE)
        st = dep.status
        return bool(
            st.observed_generation == dep.metadata.generation
            and st.updated_replicas == OPERATOR_REPLICAS
            and st.ready_replicas == OPERATOR_REPLICAS
            and (st.replicas or 0) == OPERATOR_REPLICAS
            # The Deployment's status lags its pods: right after a pod is deleted it still counts
            # it as ready. The pods themselves say whether the replacement is up.
            and self.pods_ready(op)
        )

    def pods_ready(self, op: str) -> bool:
        pods = self.operator_pods(op)
        return len(pods) == OPERATOR_REPLICAS and all(
            any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []) for p in pods
        )

    def diagnose(self) -> str:
        """What a user would look at when an operator does not come up."""
        return self.kubectl("-n", INSTALL_NAMESPACE, "describe", "pods", check=False)[-6000:] + "".join(
            self.kubectl("-n", INSTALL_NAMESPACE, "logs", f"deploy/{op}-operator", "--tail=30", check=False)
            for op in OPERATORS
        )

    def wait_operators_ready(self, timeout: float = 240) -> None:
        try:
            wait_for(lambda: all(self.operator_ready(op) for op in OPERATORS), timeout, "operators Ready")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnose()}") from None


def webserver(installed: Install, name: str, replicas: int, service: bool = True) -> dict[str, Any]:
    spec = {
        "replicas": replicas,
        "image": installed.images["web"],
        "port": 8080,
        "runAsUser": WEB_UID,
        "service": {"enabled": service, "port": 80},
    }
    return {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": name},
        "spec": spec,
    }


def web_pods(installed: Install, ns: str, name: str) -> list[client.V1Pod]:
    pods = installed.core.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/instance={name}").items
    return [
        p
        for p in pods
        if p.metadata.deletion_timestamp is None and p.status.phase not in ("Succeeded", "Failed")
    ]


def ready_pods(installed: Install, ns: str, name: str) -> list[client.V1Pod]:
    return [
        p
        for p in web_pods(installed, ns, name)
        if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def ws_status(installed: Install, ns: str, name: str) -> dict[str, Any]:
    obj = installed.co.get_namespaced_custom_object("demo.k8s.io", "v1alpha1", ns, "webservers", name)
    return obj.get("status") or {}


def exactly_ready(installed: Install, ns: str, name: str, n: int) -> bool:
    return (
        len(web_pods(installed, ns, name)) == n
        and len(ready_pods(installed, ns, name)) == n
        and (ws_status(installed, ns, name).get("readyReplicas", 0) == n)
    )
