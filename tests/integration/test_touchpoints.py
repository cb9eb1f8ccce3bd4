"""Where the operators touch users' traffic and objects, against the real control plane.

Each test is a scenario a user meets on a busy day — a port change, a quota, an orphaning delete
and re-apply, a hand-edited Service, a replace under the same name — and failed on the code
before its fix. The operators run as processes with exactly their CSV's rules, watching only
the test's namespace; kwok nodes make the pods Ready (traffic itself is checked on the real node,
in ``test_e2e``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client, config

from shared.api.errors import SupersededError
from shared.client import kube
from shared.client.kube import KubeClient
from shared.client.statuses import StatusWriter
from tests.framework import netperfs, tdsets, webservers
from tests.framework.cluster import Cluster
from tests.framework.namespaces import hold_pods_at
from tests.framework.waits import wait_for


def service(cluster: Cluster, namespace: str, name: str) -> client.V1Service | None:
    try:
        return client.CoreV1Api(cluster.api).read_namespaced_service(name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def endpoint_ports(cluster: Cluster, namespace: str, name: str) -> dict[int, set[str]]:
    """Ready endpoints of the Service by port number (what kube-proxy sends traffic to)."""
    slices = (
        client.DiscoveryV1Api(cluster.api)
        .list_namespaced_endpoint_slice(namespace, label_selector=f"kubernetes.io/service-name={name}")
        .items
    )
    out: dict[int, set[str]] = {}
    for s in slices:
        for port in s.ports or []:
            for ep in s.endpoints or []:
                if ep.conditions and ep.conditions.ready and ep.target_ref is not None:
                    out.setdefault(port.port, set()).add(ep.target_ref.name)
    return out


def pod_names(cluster: Cluster, namespace: str, selector: str) -> set[str]:
    pods = client.CoreV1Api(cluster.api).list_namespaced_pod(namespace, label_selector=selector).items
    return {p.metadata.name for p in pods if p.metadata.deletion_timestamp is None}


@pytest.mark.parametrize("kind", ["webserver", "tdset"])
def test_a_port_change_leaves_the_service_on_the_pods_that_serve(cluster, namespace, start, kind):
    """Port 8080 -> 8081 while no new pod can start (a quota stands in for an image that does not
    serve 8081): the Service must keep sending traffic to the old pods on 8080. Before, it
    targeted the number 8081 at once, on old pods that listen on 8080."""
    start(kind)
    if kind == "webserver":
        spec = {"replicas": 2, "port": 8080, "rollout": {"maxSurge": 1, "maxUnavailable": 0}}
        webservers.create(cluster, namespace, "web", {**spec, "service": {"enabled": True, "port": 80}})
        webservers.converged(cluster, namespace, "web", 2)
        selector = "app=web"
    else:
        spec = tdsets.steady(2, service={"port": 80})
        spec["container"]["port"] = 8080
        tdsets.create(cluster, namespace, "web", spec)
        selector = "app.kubernetes.io/instance=web"
    # Both pods: the ReplicaSet may create (and kwok ready) one before the other.
    old = wait_for(
        lambda: (
            len(pods := pod_names(cluster, namespace, selector)) == 2
            and endpoint_ports(cluster, namespace, "web") == {8080: pods}
            and pods
        ),
        120,
        "the Service's endpoints: both pods on 8080",
    )
    hold_pods_at(client.CoreV1Api(cluster.api), namespace, 2)

    if kind == "webserver":
        webservers.patch_spec(cluster, namespace, "web", {"port": 8081})
        wait_for(
            lambda: "pods" in str(webservers.conditions(webservers.get(cluster, namespace, "web"))),
            120,
            "the new pod refused by the quota (ReplicaFailure)",
        )
    else:
        tdsets.patch_spec(cluster, namespace, "web", {"container": {"image": "nginx:1.27", "port": 8081}})
        wait_for(
            lambda: (
                tdsets.deployment(cluster, namespace, "web")
                .spec.template.spec.containers[0]
                .ports[0]
                .container_port
                == 8081
            ),
            60,
            "the Deployment's template on 8081",
        )
    svc = service(cluster, namespace, "web")
    assert svc is not None and svc.spec.ports[0].target_port == "http"
    assert endpoint_ports(cluster, namespace, "web") == {8080: old}

    # The quota lifted: the rollout completes and the Service follows the pods to 8081.
    client.CoreV1Api(cluster.api).delete_namespaced_resource_quota("hold", namespace)
    wait_for(
        lambda: (
            (eps := endpoint_ports(cluster, namespace, "web")).keys() == {8081}
            and len(eps[8081]) == 2
            and not eps[8081] & old
        ),
        180,
        "two new pods on 8081 behind the Service, none of the old",
    )


def test_a_quota_refusing_pods_does_not_hold_back_the_service(cluster, namespace, start):
    """Before, the Service was converged only when every pod write succeeded: with room for 2 of
    3 pods it was never created, and `enabled: false` never deleted it."""
    core = client.CoreV1Api(cluster.api)
    hold_pods_at(core, namespace, 2)
    start("webserver")
    webservers.create(cluster, namespace, "web", {"replicas": 3, "service": {"enabled": True}})
    wait_for(lambda: service(cluster, namespace, "web"), 60, "the Service, despite the quota")
    # The Service can be there before the first status write: wait for the condition.
    wait_for(
        lambda: (
            webservers.conditions(webservers.get(cluster, namespace, "web"))["ReplicaFailure"]["status"]
            == "True"
        ),
        60,
        "ReplicaFailure=True",
    )
    webservers.patch_spec(cluster, namespace, "web", {"service": {"enabled": True, "type": "NodePort"}})
    wait_for(lambda: service(cluster, namespace, "web").spec.type == "NodePort", 60, "type changed")
    webservers.patch_spec(cluster, namespace, "web", {"service": {"enabled": False}})
    wait_for(lambda: service(cluster, namespace, "web") is None, 60, "the Service deleted, despite the quota")
    assert len(pod_names(cluster, namespace, "app=web")) == 2


def delete_orphaning(cluster: Cluster, namespace: str, module: Any, name: str) -> None:
    """``kubectl delete <kind> <name> --cascade=orphan``, waiting until it is gone."""
    group, version, plural = module.GROUP, module.VERSION, module.PLURAL
    co = client.CustomObjectsApi(cluster.api)
    co.delete_namespaced_custom_object(
        group, version, namespace, plural, name, body={"propagationPolicy": "Orphan"}
    )

    def gone() -> bool:
        items = co.list_namespaced_custom_object(group, version, namespace, plural)["items"]
        return all(i["metadata"]["name"] != name for i in items)

    wait_for(gone, 60, f"{plural}/{name} deleted")


def controller_uid(obj: Any) -> str | None:
    refs = [r for r in obj.metadata.owner_references or [] if r.controller]
    return refs[0].uid if refs else None


def test_a_tdset_reapplied_after_an_orphaning_delete_adopts_its_deployment_and_service(
    cluster, namespace, start
):
    """Adopted, not `Degraded=DeploymentConflict` with the schedule stuck."""
    start("tdset")
    tdsets.create(cluster, namespace, "shop", tdsets.steady(2, service={"port": 80}))
    tdsets.replicas_become(cluster, namespace, "shop", 2, "Deployment created")
    wait_for(lambda: service(cluster, namespace, "shop"), 60, "Service created")
    dep_uid = tdsets.deployment(cluster, namespace, "shop").metadata.uid
    svc_uid = service(cluster, namespace, "shop").metadata.uid
    delete_orphaning(cluster, namespace, tdsets, "shop")
    wait_for(lambda: controller_uid(tdsets.deployment(cluster, namespace, "shop")) is None, 60, "orphaned")

    uid = tdsets.create(cluster, namespace, "shop", tdsets.steady(3, service={"port": 80}))["metadata"]["uid"]
    tdsets.replicas_become(cluster, namespace, "shop", 3, "the adopted Deployment scaled by the schedule")
    dep = tdsets.deployment(cluster, namespace, "shop")
    assert (dep.metadata.uid, controller_uid(dep)) == (dep_uid, uid)
    wait_for(lambda: controller_uid(service(cluster, namespace, "shop")) == uid, 60, "the Service adopted")
    assert service(cluster, namespace, "shop").metadata.uid == svc_uid
    tdsets.wait_event(cluster, namespace, "shop", "AdoptedDeployment")
    tds = wait_for(
        lambda: (
            (t := tdsets.get(cluster, namespace, "shop"))
            and tdsets.condition(t, "Degraded").get("status") == "False"
            and t
        ),
        60,
        "not Degraded",
    )
    assert tds["status"]["observedGeneration"] == tds["metadata"]["generation"]


def test_a_webserver_reapplied_after_an_orphaning_delete_adopts_its_service(cluster, namespace, start):
    """Adopted, not a permanent `ServiceConflict`."""
    start("webserver")
    spec = {"replicas": 1, "service": {"enabled": True}}
    webservers.create(cluster, namespace, "web", spec)
    webservers.converged(cluster, namespace, "web", 1)
    svc_uid = wait_for(lambda: service(cluster, namespace, "web"), 60, "Service").metadata.uid
    delete_orphaning(cluster, namespace, webservers, "web")
    uid = webservers.create(cluster, namespace, "web", spec)["metadata"]["uid"]
    wait_for(lambda: controller_uid(service(cluster, namespace, "web")) == uid, 60, "the Service adopted")
    assert service(cluster, namespace, "web").metadata.uid == svc_uid
    ws = webservers.converged(cluster, namespace, "web", 1)
    assert webservers.conditions(ws)["ReplicaFailure"]["status"] == "False"


def test_a_netperf_reapplied_after_an_orphaning_delete_runs_with_pods_of_its_own(cluster, namespace, start):
    """Not `PodConflict` on the orphaned server pod: its pods are of the old run, so
    they are adopted and deleted, and the new Netperf runs with its own."""
    start("netperf")
    netperfs.create(cluster, namespace, "np", {"samples": 3})
    s = netperfs.in_test(cluster, namespace, "np")
    old = pod_names(cluster, namespace, "app.kubernetes.io/instance=np")
    assert s["serverPod"] in old
    delete_orphaning(cluster, namespace, netperfs, "np")
    uid = netperfs.create(cluster, namespace, "np", {"samples": 3})["metadata"]["uid"]
    s = netperfs.in_test(cluster, namespace, "np")
    core = client.CoreV1Api(cluster.api)
    client_pod = core.read_namespaced_pod(s["clientPod"], namespace)
    assert controller_uid(client_pod) == uid
    server_pod = core.read_namespaced_pod(s["serverPod"], namespace)
    assert controller_uid(server_pod) == uid
    netperfs.finish_client(cluster, namespace, s["clientPod"], netperfs.fixture("tcp_stream"))
    done = netperfs.phase_is(cluster, namespace, "np", "Done")
    assert done["observedGeneration"] == 1


def test_a_selector_key_someone_added_is_removed_once_and_not_patched_again(cluster, namespace, start):
    """The key is removed (a merge patch cannot remove it), once: not the same PATCH and an
    `UpdatedService` Event every pass while the Service has no endpoints."""
    start("webserver")
    webservers.create(cluster, namespace, "web", {"replicas": 1, "service": {"enabled": True}})
    webservers.converged(cluster, namespace, "web", 1)
    core = client.CoreV1Api(cluster.api)
    wait_for(lambda: service(cluster, namespace, "web"), 60, "Service")
    core.patch_namespaced_service("web", namespace, {"spec": {"selector": {"tier": "foreign"}}})
    repaired = wait_for(
        lambda: (s := service(cluster, namespace, "web")) and "tier" not in s.spec.selector and s,
        60,
        "the foreign selector key removed",
    )
    # Passes after the repair (a scale-up, converged) leave the Service as it is.
    webservers.patch_spec(cluster, namespace, "web", {"replicas": 2})
    webservers.converged(cluster, namespace, "web", 2)
    assert service(cluster, namespace, "web").metadata.resource_version == repaired.metadata.resource_version

    def updates() -> int:
        events = core.list_namespaced_event(namespace).items
        return sum(
            e.count or 1 for e in events if e.involved_object.name == "web" and e.reason == "UpdatedService"
        )

    # Events are posted by their own queue: wait for the repair's, then count.
    wait_for(updates, 60, "the UpdatedService Event of the repair")
    assert updates() == 1


def test_a_status_write_for_an_object_replaced_under_its_name_is_refused(cluster, namespace, monkeypatch):
    """`kubectl replace --force` just as a pass writes its result: the write must not land on the
    new object (before, it did: the new Netperf showed the old `Done` and never ran)."""
    co = client.CustomObjectsApi(cluster.api)
    args = (netperfs.GROUP, netperfs.VERSION, namespace, netperfs.PLURAL)
    body = {"apiVersion": f"{netperfs.GROUP}/{netperfs.VERSION}", "kind": "Netperf"}
    old = co.create_namespaced_custom_object(*args, {**body, "metadata": {"name": "np"}, "spec": {}})
    co.delete_namespaced_custom_object(*args, "np")
    wait_for(lambda: not co.list_namespaced_custom_object(*args)["items"], 60, "deleted")
    new = co.create_namespaced_custom_object(*args, {**body, "metadata": {"name": "np"}, "spec": {}})

    # The client deletes the credential files of the kubernetes package's loader once it has read
    # them (they would outlive a SIGKILLed operator); in this process they are the tests' own.
    monkeypatch.setattr(kube, "_forget_credential_files", lambda cfg: None)

    async def write() -> None:
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
        api = KubeClient(cfg)
        try:
            writer = StatusWriter(api, netperfs.GROUP, netperfs.VERSION, netperfs.PLURAL)
            await writer.write(old, {"status": "Done", "observedGeneration": 1})
        finally:
            await api.close()

    with pytest.raises(SupersededError):
        asyncio.run(write())
    now = co.get_namespaced_custom_object(*args[:3], args[3], "np")
    assert now["metadata"]["uid"] == new["metadata"]["uid"]
    assert (now.get("status") or {}).get("status") != "Done"
