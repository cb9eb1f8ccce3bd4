"""TDSets in a test cluster: specs, create, read, change, their Deployment, conditions and Events,
and the TDSet operators the tests start (``Operators``, the ``start_tdset_operator`` fixture)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from kubernetes import client

from shared.api.clock import OFFSET_ENV
from tests.framework.cluster import Cluster
from tests.framework.operator_process import OperatorProcess
from tests.framework.resources import Kind
from tests.framework.waits import wait_for

GROUP, VERSION, PLURAL = "schedule.rs", "v1", "tdsets"
KIND = Kind(GROUP, VERSION, PLURAL, "TDSet")
create, get, patch_spec = KIND.create, KIND.get, KIND.patch_spec
UTC = datetime.UTC


# The state before a boundary must be seen before it: a boundary is at least this far ahead of
# the operator's clock once it is up (a busy machine takes seconds to start it and reconcile).
BOUNDARY_MARGIN = datetime.timedelta(seconds=30)


class Operators:
    """Starts TDSet operators watching only one namespace, each with its own log, and stops them
    all at the end of the test (the ``start_tdset_operator`` fixture)."""

    def __init__(self, cluster: Cluster, namespace: str, logs: Path) -> None:
        self.cluster, self.namespace, self.logs = cluster, namespace, logs
        self.started: list[OperatorProcess] = []

    def __call__(self, at: datetime.datetime | None = None, *, account: str | None = None) -> OperatorProcess:
        """Start one: ``at`` shifts its clock to that instant (default: the real time), ``account``
        runs it as that ServiceAccount (default: the one holding exactly the CSV's rules)."""
        offset = (at - datetime.datetime.now(UTC)).total_seconds() if at is not None else 0.0
        op = OperatorProcess(
            "operators.tdset",
            self.cluster.operator_kubeconfig("tdset", account=account),
            self.logs / f"operator-{len(self.started)}.log",
            namespaces=self.namespace,
            env={OFFSET_ENV: f"{offset:.6f}"},
        )
        self.started.append(op)
        return op.start()

    def stop_all(self) -> None:
        for op in self.started:
            op.stop()


def clock_early_in_a_minute() -> dict[str, str]:
    """The environment that starts an operator's clock at hh:mm:20 of the current minute.

    The next boundary ``next_boundary`` finds is then about 40 s after it is up, rather
    than anywhere from 30 to 90 s.
    """
    at = datetime.datetime.now(UTC).replace(second=20, microsecond=0)
    return {OFFSET_ENV: f"{(at - datetime.datetime.now(UTC)).total_seconds():.6f}"}


def next_boundary(op: OperatorProcess) -> datetime.datetime:
    """The first whole minute of ``op``'s clock at least ``BOUNDARY_MARGIN`` from now."""
    later = shifted_now(op) + BOUNDARY_MARGIN + datetime.timedelta(minutes=1)
    return later.replace(second=0, microsecond=0)


def shifted_now(op: OperatorProcess) -> datetime.datetime:
    """The instant the operator process believes it is."""
    return datetime.datetime.now(UTC) + datetime.timedelta(seconds=float(op.extra_env[OFFSET_ENV]))


def steady(replicas: int, **extra: Any) -> dict[str, Any]:
    """A spec without windows: the schedule asks for ``replicas`` at every instant."""
    return {
        "container": {"image": "nginx:1.27", "port": 80},
        "schedulingConfig": [],
        "defaultReplica": replicas,
        **extra,
    }


def co(cluster: Cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api)


def deployment(cluster: Cluster, namespace: str, name: str) -> client.V1Deployment:
    return client.AppsV1Api(cluster.api).read_namespaced_deployment(name, namespace)


def scale_deployment(cluster: Cluster, namespace: str, name: str, replicas: int) -> None:
    """What ``kubectl scale deployment`` does: write the scale subresource."""
    client.AppsV1Api(cluster.api).patch_namespaced_deployment_scale(
        name, namespace, {"spec": {"replicas": replicas}}
    )


def condition(tds: dict[str, Any], type_: str) -> dict[str, Any]:
    found = [c for c in (tds.get("status") or {}).get("conditions") or [] if c["type"] == type_]
    return found[0] if found else {}


def events(cluster: Cluster, namespace: str, name: str) -> list[client.CoreV1Event]:
    return (
        client.CoreV1Api(cluster.api)
        .list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name},involvedObject.kind=TDSet"
        )
        .items
    )


def wait_event(
    cluster: Cluster, namespace: str, name: str, reason: str, *fragments: str
) -> client.CoreV1Event:
    def found() -> client.CoreV1Event | None:
        for e in events(cluster, namespace, name):
            if e.reason == reason and all(f in e.message for f in fragments):
                return e
        return None

    return wait_for(found, 60, f"a {reason} Event mentioning {fragments}")


def replicas_become(cluster: Cluster, namespace: str, name: str, replicas: int, what: str) -> None:
    wait_for(lambda: deployment(cluster, namespace, name).spec.replicas == replicas, 60, what)


def table(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """``kubectl get tdsets``: the server-side table with the CRD's printer columns."""
    url = f"{cluster.api.configuration.host}/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    cluster.api.update_params_for_auth(headers, None, ["BearerToken"], "GET", url, None)
    response = cluster.api.call_api("GET", url, header_params=headers)
    response.read()
    return json.loads(response.data)


def hpa(name: str, target: str, min_replicas: int, max_replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
                }
            ],
        },
    }
