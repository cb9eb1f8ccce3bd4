"""Faults real clusters produce, one test per defect found.

The operators run as processes with exactly their CSV's rules (``Cluster.operator_kubeconfig``),
watching only the test's namespace, against the local control plane (kwok nodes make the pods
Ready). Every test asserts convergence to exactly the right children and that nothing belonging
to someone else was touched.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.webserver import desired as webserver_desired
from tests.framework import netperfs, tdsets, webservers
from tests.framework.cluster import Cluster
from tests.framework.operator_process import OperatorProcess
from tests.framework.tcp_proxy import Proxy
from tests.framework.waits import wait_for

UTC = datetime.UTC


def user_service(name: str) -> dict[str, Any]:
    """A Service a user made by hand: no owner, their own selector and port."""
    return {
        "metadata": {"name": name, "labels": {"team": "payments"}},
        "spec": {"selector": {"app": "theirs"}, "ports": [{"port": 9000, "targetPort": 9000}]},
    }


def warning_events(cluster: Cluster, namespace: str, name: str, reason: str) -> list[client.CoreV1Event]:
    events = client.CoreV1Api(cluster.api).list_namespaced_event(namespace).items
    return [
        e for e in events if e.involved_object.name == name and e.reason == reason and e.type == "Warning"
    ]


def test_child_events_are_handled_on_the_event_loop(cluster, namespace, start):
    """Child watch handlers ran in kopf's thread pool and set asyncio Events off the loop.

    asyncio's debug mode raises "Non-thread-safe operation" for exactly that; kopf logged it as
    a failed handler, and the pass the pod event should have woken never ran.
    """
    op = start("webserver", env={"PYTHONASYNCIODEBUG": "1"})
    webservers.create(cluster, namespace, "web", {"replicas": 2})
    webservers.converged(cluster, namespace, "web", 2)
    # A pod deleted by someone else while the WebServer's loop is idle: only its event wakes it.
    # By UID: the replacement takes the victim's name (its slot) and, now that watch events go
    # straight to the handlers, often within one poll of this loop.
    victim = webservers.active_pods(cluster, namespace, "web")[0].metadata
    client.CoreV1Api(cluster.api).delete_namespaced_pod(victim.name, namespace, grace_period_seconds=0)
    wait_for(
        lambda: victim.uid not in {p.metadata.uid for p in webservers.active_pods(cluster, namespace, "web")},
        60,
        f"{victim.name} (uid {victim.uid}) gone",
    )
    webservers.converged(cluster, namespace, "web", 2)
    log = op.log_path.read_text(errors="replace")
    assert "Non-thread-safe operation" not in log, op.log_tail()
    assert "failed with an exception" not in log, op.log_tail()


@pytest.mark.parametrize("kind", ["webserver", "tdset"])
def test_a_foreign_service_is_never_taken_over(cluster, namespace, start, kind):
    """A Service of the same name that the owner does not control is reported, not patched."""
    core = client.CoreV1Api(cluster.api)
    theirs = core.create_namespaced_service(namespace, user_service("web"))
    start(kind)
    if kind == "webserver":
        webservers.create(cluster, namespace, "web", {"replicas": 1, "service": {"enabled": True}})
        get, cond_type = webservers.get, "ReplicaFailure"
    else:
        tdsets.create(cluster, namespace, "web", tdsets.steady(1, service={"port": 80}))
        get, cond_type = tdsets.get, "Degraded"

    def reported() -> dict[str, Any] | None:
        conds = {
            c["type"]: c for c in (get(cluster, namespace, "web").get("status") or {}).get("conditions", [])
        }
        cond = conds.get(cond_type) or {}
        return cond if cond.get("reason") == "ServiceConflict" and cond.get("status") == "True" else None

    cond = wait_for(reported, 60, f"{cond_type}=True ServiceConflict")
    assert "not controlled by this" in cond["message"]
    wait_for(lambda: warning_events(cluster, namespace, "web", "ServiceConflict"), 30, "a Warning Event")
    # Its other children are still made: the conflict costs the Service only.
    if kind == "webserver":
        webservers.converged(cluster, namespace, "web", 1)
    else:
        tdsets.replicas_become(cluster, namespace, "web", 1, "the Deployment made anyway")

    now = core.read_namespaced_service("web", namespace)
    assert now.metadata.resource_version == theirs.metadata.resource_version
    assert not now.metadata.owner_references and now.spec.selector == {"app": "theirs"}

    # Deleting the owner leaves the user's Service (the garbage collector had it before).
    co = client.CustomObjectsApi(cluster.api)
    group, version, plural = (
        (webservers.GROUP, webservers.VERSION, webservers.PLURAL)
        if kind == "webserver"
        else (tdsets.GROUP, tdsets.VERSION, tdsets.PLURAL)
    )
    co.delete_namespaced_custom_object(group, version, namespace, plural, "web")
    wait_for(
        lambda: (
            not core.list_namespaced_pod(namespace).items
            and not client.AppsV1Api(cluster.api).list_namespaced_deployment(namespace).items
        ),
        60,
        "the owner's children collected",
    )
    assert core.read_namespaced_service("web", namespace).metadata.resource_version == (
        theirs.metadata.resource_version
    )


def test_a_webserver_and_a_tdset_of_one_name_do_not_fight_over_the_service(cluster, namespace, start):
    """Both want Service ``shop``; the first keeps it, the second reports the conflict."""
    core = client.CoreV1Api(cluster.api)
    start("webserver")
    start("tdset")
    webservers.create(cluster, namespace, "shop", {"replicas": 1, "service": {"enabled": True}})
    ws_uid = webservers.get(cluster, namespace, "shop")["metadata"]["uid"]
    svc = wait_for(lambda: core.read_namespaced_service("shop", namespace), 60, "the WebServer's Service")
    tdsets.create(cluster, namespace, "shop", tdsets.steady(1, service={"port": 8080}))
    wait_for(
        lambda: (
            tdsets.condition(tdsets.get(cluster, namespace, "shop"), "Degraded").get("reason")
            == "ServiceConflict"
        ),
        60,
        "the TDSet reports ServiceConflict",
    )
    tdsets.replicas_become(cluster, namespace, "shop", 1, "the TDSet's Deployment")
    now = core.read_namespaced_service("shop", namespace)
    assert now.metadata.resource_version == svc.metadata.resource_version
    assert [r.uid for r in now.metadata.owner_references] == [ws_uid]


def test_a_failing_service_does_not_delay_the_schedule(cluster, namespace, start):
    """The Service keeps failing (a conflict); the Deployment still flips at the boundary.

    The failing passes back off exponentially; each also names the next boundary as the latest
    time to run again (``shared.controller.workqueue.RetryError``), which the unit test of the loop proves
    with a 100 s backoff. Here the whole operator does it.
    """
    client.CoreV1Api(cluster.api).create_namespaced_service(namespace, user_service("flip"))
    op = start("tdset", env=tdsets.clock_early_in_a_minute())
    boundary = tdsets.next_boundary(op)
    window = {"startTime": boundary.hour, "startMinute": boundary.minute, "endTime": (boundary.hour + 8) % 24}
    spec = {**tdsets.steady(2, service={"port": 80}), "schedulingConfig": [{**window, "replica": 4}]}
    tdsets.create(cluster, namespace, "flip", spec)
    wait_for(
        lambda: (
            tdsets.condition(tdsets.get(cluster, namespace, "flip"), "Degraded").get("reason")
            == "ServiceConflict"
            and tdsets.deployment(cluster, namespace, "flip").spec.replicas == 2
            and tdsets.shifted_now(op) < boundary
        ),
        30,
        "ServiceConflict and the default replicas, before the boundary",
    )
    tdsets.replicas_become(cluster, namespace, "flip", 4, "the window's replicas after the boundary")
    flipped_at = tdsets.shifted_now(op)
    assert flipped_at >= boundary
    assert tdsets.condition(tdsets.get(cluster, namespace, "flip"), "Degraded")["reason"] == (
        "ServiceConflict"
    )
    # Informational (boundary lag is measured by tools/bench/tdset_boundary.py, not asserted).
    print(f"flipped {flipped_at - boundary} after the boundary while the Service kept failing")


def owned_pods(cluster: Cluster, namespace: str, uid: str) -> list[client.V1Pod]:
    pods = client.CoreV1Api(cluster.api).list_namespaced_pod(namespace).items
    return [p for p in pods if any(r.controller and r.uid == uid for r in p.metadata.owner_references or [])]


def delete_webserver(cluster: Cluster, namespace: str, name: str, propagation: str) -> None:
    client.CustomObjectsApi(cluster.api).delete_namespaced_custom_object(
        webservers.GROUP,
        webservers.VERSION,
        namespace,
        webservers.PLURAL,
        name,
        body={"propagationPolicy": propagation},
    )
    wait_for(lambda: not _exists(cluster, namespace, name), 60, f"WebServer {name} gone")


def _exists(cluster: Cluster, namespace: str, name: str) -> bool:
    items = client.CustomObjectsApi(cluster.api).list_namespaced_custom_object(
        webservers.GROUP, webservers.VERSION, namespace, webservers.PLURAL
    )["items"]
    return any(i["metadata"]["name"] == name for i in items)


def test_recreated_after_an_orphaning_delete_adopts_the_pods(cluster, namespace, start):
    """``kubectl delete --cascade=orphan`` then apply: the pods are adopted, none created."""
    start("webserver")
    webservers.create(cluster, namespace, "web", {"replicas": 3})
    webservers.converged(cluster, namespace, "web", 3)
    before = {p.metadata.name: p.metadata.uid for p in webservers.active_pods(cluster, namespace, "web")}
    delete_webserver(cluster, namespace, "web", "Orphan")
    webservers.create(cluster, namespace, "web", {"replicas": 3})
    uid = webservers.get(cluster, namespace, "web")["metadata"]["uid"]
    webservers.converged(cluster, namespace, "web", 3)
    after = {p.metadata.name: p.metadata.uid for p in owned_pods(cluster, namespace, uid)}
    assert after == before  # the same pods, now controlled by the new WebServer
    pods = client.CoreV1Api(cluster.api).list_namespaced_pod(namespace).items
    assert len(pods) == 3


def test_recreated_while_the_old_pods_terminate_reports_it_and_converges(cluster, namespace, start):
    """The old pods hold the names (a finalizer keeps them terminating); the new WebServer
    says so in ReplicaFailure instead of a silent 0, and converges when they go."""
    core = client.CoreV1Api(cluster.api)
    start("webserver")
    webservers.create(cluster, namespace, "web", {"replicas": 2})
    webservers.converged(cluster, namespace, "web", 2)
    held = [p.metadata.name for p in webservers.active_pods(cluster, namespace, "web")]
    for name in held:
        core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": ["localcluster.dev/hold"]}})
    delete_webserver(cluster, namespace, "web", "Background")
    wait_for(
        lambda: all(core.read_namespaced_pod(n, namespace).metadata.deletion_timestamp for n in held),
        60,
        "the old pods terminating",
    )
    webservers.create(cluster, namespace, "web", {"replicas": 2})
    uid = webservers.get(cluster, namespace, "web")["metadata"]["uid"]

    def reported() -> dict[str, Any] | None:
        ws = webservers.get(cluster, namespace, "web")
        cond = {c["type"]: c for c in (ws.get("status") or {}).get("conditions", [])}.get(
            "ReplicaFailure", {}
        )
        return cond if cond.get("status") == "True" and "terminating" in cond.get("message", "") else None

    cond = wait_for(reported, 60, "ReplicaFailure naming the terminating pod")
    assert any(n in cond["message"] for n in held)
    for name in held:
        core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": None}})
    webservers.converged(cluster, namespace, "web", 2)
    assert len(owned_pods(cluster, namespace, uid)) == 2
    assert len(core.list_namespaced_pod(namespace).items) == 2


def test_a_stranger_pod_holding_a_name_is_reported_and_left_alone(cluster, namespace, start):
    """A pod nobody controls with the name slot 0 wants (and not our labels) is not adopted."""
    core = client.CoreV1Api(cluster.api)
    spec = {"replicas": 2}
    name = webserver_desired.pod_name("web", webserver_desired.template_hash(spec), 0)
    stranger = core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "labels": {"app": "mine"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    start("webserver")
    webservers.create(cluster, namespace, "web", spec)

    def reported() -> dict[str, Any] | None:
        ws = webservers.get(cluster, namespace, "web")
        cond = {c["type"]: c for c in (ws.get("status") or {}).get("conditions", [])}.get(
            "ReplicaFailure", {}
        )
        return cond if cond.get("status") == "True" and name in cond.get("message", "") else None

    assert "held by no controller" in wait_for(reported, 60, "ReplicaFailure naming the pod")["message"]
    # The scheduler and kwok move it on (its resourceVersion changes); its metadata is as made.
    pod = core.read_namespaced_pod(name, namespace)
    assert pod.metadata.uid == stranger.metadata.uid and pod.metadata.deletion_timestamp is None
    assert pod.metadata.labels == {"app": "mine"} and not pod.metadata.owner_references


def test_deletions_missed_in_a_partition_are_seen_after_the_relist(cluster, namespace, tmp_path):
    """A pod and a WebServer deleted while the operator is cut off, then an API-server
    restart, so the resumed watches get 410 Gone and kopf lists again. The listing only has
    what exists: the lost pod must still be replaced (not counted forever) and the deleted
    WebServer's loop must end (no zombie), which shared.controller.informer does by reporting what the
    listing lacked as DELETED."""
    local = cluster.need_local()
    core = client.CoreV1Api(cluster.api)
    proxy = Proxy(local.api_port)
    op = OperatorProcess(
        "operators.webserver",
        proxy.kubeconfig(cluster.operator_kubeconfig("webserver")),
        tmp_path / "webserver.log",
        namespaces=namespace,
    )
    try:
        op.start()
        webservers.create(cluster, namespace, "web", {"replicas": 3})
        gone_uid = webservers.create(cluster, namespace, "gone", {"replicas": 1})["metadata"]["uid"]
        webservers.converged(cluster, namespace, "web", 3)
        webservers.converged(cluster, namespace, "gone", 1)
        assert 'name="gone"' in op.metrics()
        victim = webservers.active_pods(cluster, namespace, "web")[0]

        proxy.partition()
        core.delete_namespaced_pod(victim.metadata.name, namespace, grace_period_seconds=0)
        delete_webserver(cluster, namespace, "gone", "Background")
        wait_for(
            lambda: (
                {p.metadata.uid for p in core.list_namespaced_pod(namespace).items}.isdisjoint(
                    {victim.metadata.uid}
                )
                and not webservers.active_pods(cluster, namespace, "gone")
            ),
            60,
            "the victim pod and the deleted WebServer's pod gone",
        )
        local.restart_apiserver()
        proxy.heal()

        def replaced() -> bool:
            pods = webservers.active_pods(cluster, namespace, "web")
            return len(pods) == 3 and victim.metadata.uid not in {p.metadata.uid for p in pods}

        wait_for(replaced, 120, "the pod deleted in the gap replaced")
        has_pods(cluster, namespace, "web", 3)
        wait_for(lambda: 'name="gone"' not in op.metrics(), 60, "the deleted WebServer forgotten")
        assert "deleted while not watching" in op.log_path.read_text(errors="replace")
        # The two relists end in either order: when the pods' listing comes first, a pass for
        # "gone" (not yet known deleted) may create its pod again, owned by the deleted UID, as a
        # ReplicaSet controller would from a stale cache. The garbage collector removes it; what
        # must not happen is a loop that goes on (the metric above) or a pod of another owner.
        stray = webservers.active_pods(cluster, namespace, "gone")
        assert all(p.metadata.owner_references[0].uid == gone_uid for p in stray), stray
        wait_for(
            lambda: not webservers.active_pods(cluster, namespace, "gone"),
            60,
            "a pod created for the deleted WebServer in the gap collected",
        )
        assert 'name="gone"' not in op.metrics()
    finally:
        op.stop()
        proxy.close()


def has_pods(cluster: Cluster, namespace: str, name: str, replicas: int, timeout: float = 120) -> None:
    """Exactly ``replicas`` active pods of the WebServer, and a status that counts them."""

    def check() -> bool:
        ws = webservers.get(cluster, namespace, name)
        st = ws.get("status") or {}
        return (
            len(owned_pods(cluster, namespace, ws["metadata"]["uid"])) == replicas
            and len(webservers.active_pods(cluster, namespace, name)) == replicas
            and st.get("replicas") == replicas
            and st.get("observedGeneration") == ws["metadata"]["generation"]
        )

    wait_for(check, timeout, f"{name}: {replicas} pods and a status that counts them")


@pytest.mark.parametrize("down_for", [20, 180], ids=["20s", "3min"])
def test_the_operator_keeps_watching_through_api_server_outages(cluster, namespace, start, down_for):
    """Kube-apiserver down for 20 s and for 3 min while the operator runs; changes
    made as it comes back and after converge, and the operator never stopped being healthy."""
    local = cluster.need_local()
    core = client.CoreV1Api(cluster.api)
    op = start("webserver")
    webservers.create(cluster, namespace, "web", {"replicas": 2})
    webservers.converged(cluster, namespace, "web", 2)
    local.restart_apiserver(down_for=down_for)
    # Changes right after the restart (caches still relisting) and a new object.
    webservers.patch_spec(cluster, namespace, "web", {"replicas": 3})
    victim = webservers.active_pods(cluster, namespace, "web")[0]
    core.delete_namespaced_pod(victim.metadata.name, namespace, grace_period_seconds=0)
    webservers.create(cluster, namespace, "after", {"replicas": 1})
    # Pod readiness is kwok's to restore after the outage (the node controller marked them
    # not ready meanwhile): the operator's part is the right pods and a status that says so.
    has_pods(cluster, namespace, "web", 3)
    has_pods(cluster, namespace, "after", 1)
    assert victim.metadata.uid not in {
        p.metadata.uid for p in webservers.active_pods(cluster, namespace, "web")
    }
    assert op.proc is not None and op.proc.poll() is None
    assert op.get(op.probe_port, "/healthz")[0] == 200


def test_a_watch_refused_for_a_while_recovers_and_healthz_tells(cluster, namespace, tmp_path):
    """A watch that fails with an API error (here 403: the operator's binding revoked,
    the API server restarted so every watch must be made again) must not escape kopf's watch
    stream and end the operator: the watch is retried, /healthz reports it once it has failed for longer than
    WATCH_FAILURE_TIMEOUT, and the operator works again once allowed, without a restart."""
    local = cluster.need_local()
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    account = f"blind-{uuid.uuid4().hex[:6]}"
    op = OperatorProcess(
        "operators.webserver",
        cluster.operator_kubeconfig("webserver", account=account),
        tmp_path / "webserver.log",
        namespaces=namespace,
        env={"WATCH_FAILURE_TIMEOUT": "5"},
    )
    try:
        op.start()
        webservers.create(cluster, namespace, "web", {"replicas": 1})
        webservers.converged(cluster, namespace, "web", 1)
        rbac.delete_cluster_role_binding(f"test:{account}")
        local.restart_apiserver()
        wait_for(
            lambda: op.get(op.probe_port, "/healthz")[0] == 503, 60, "/healthz reporting the failing watches"
        )
        cluster.operator_kubeconfig("webserver", account=account)  # bound again
        wait_for(lambda: op.get(op.probe_port, "/healthz")[0] == 200, 90, "/healthz healthy again")
        webservers.create(cluster, namespace, "later", {"replicas": 2})
        has_pods(cluster, namespace, "later", 2)
        webservers.patch_spec(cluster, namespace, "web", {"replicas": 2})
        has_pods(cluster, namespace, "web", 2)
    finally:
        op.stop()


LONG = "a" * 64


@pytest.mark.parametrize(
    "case",
    [
        ("webserver", LONG, {"replicas": 1}, "at most 63 characters"),
        ("webserver", "web.v2", {"replicas": 1, "service": {"enabled": True}}, "must not contain '.'"),
        ("tdset", LONG, None, "at most 63 characters"),
        ("tdset", "shop.v2", "service", "must not contain '.'"),
        ("netperf", LONG, {}, "at most 63 characters"),
    ],
    ids=["webserver-long", "webserver-dotted-service", "tdset-long", "tdset-dotted-service", "netperf-long"],
)
def test_names_children_could_not_carry_are_refused_at_admission(cluster, namespace, case):
    """Such names were accepted, then every child create failed with 422, retried forever."""
    kind, name, spec, fragment = case
    if kind == "tdset":
        spec = tdsets.steady(1, **({"service": {"port": 80}} if spec == "service" else {}))
    group, version, plural, kind_name = {
        "webserver": (webservers.GROUP, webservers.VERSION, webservers.PLURAL, "WebServer"),
        "tdset": (tdsets.GROUP, tdsets.VERSION, tdsets.PLURAL, "TDSet"),
        "netperf": ("app.example.com", "v1alpha1", "netperfs", "Netperf"),
    }[kind]
    body = {"apiVersion": f"{group}/{version}", "kind": kind_name, "metadata": {"name": name}, "spec": spec}
    with pytest.raises(ApiException) as err:
        client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
            group, version, namespace, plural, body
        )
    assert err.value.status == 422
    assert "metadata.name" in err.value.body and fragment in err.value.body


def test_a_dotted_webserver_that_later_asks_for_a_service_is_degraded_not_retried(cluster, namespace, start):
    """The rule is create-only (a stored object stays writable); the controller checks the
    same thing and reports it in Degraded, creating no Service the API server would refuse."""
    start("webserver")
    webservers.create(cluster, namespace, "web.v2", {"replicas": 1})  # dots are fine for pods
    webservers.converged(cluster, namespace, "web.v2", 1)
    webservers.patch_spec(cluster, namespace, "web.v2", {"service": {"enabled": True}})

    def degraded() -> dict[str, Any] | None:
        ws = webservers.get(cluster, namespace, "web.v2")
        cond = {c["type"]: c for c in (ws.get("status") or {}).get("conditions", [])}.get("Degraded", {})
        return cond if cond.get("status") == "True" else None

    cond = wait_for(degraded, 60, "Degraded=True")
    assert cond["reason"] == "InvalidSpec" and "metadata.name: must not contain '.'" in cond["message"]
    assert not client.CoreV1Api(cluster.api).list_namespaced_service(namespace).items


def test_a_netperf_recreated_mid_run_waits_for_its_predecessors_pods(cluster, namespace, start):
    """Pod names carry the generation only, so a Netperf deleted and re-created mid-run
    found its predecessor's terminating pods under its names and ended in Error/PodConflict."""
    core = client.CoreV1Api(cluster.api)
    start("netperf")
    netperfs.create(cluster, namespace, "np", {})
    netperfs.in_test(cluster, namespace, "np")
    held = [p.metadata.name for p in netperfs.pods(cluster, namespace)]
    assert len(held) == 2
    for name in held:
        core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": ["localcluster.dev/hold"]}})
    client.CustomObjectsApi(cluster.api).delete_namespaced_custom_object(
        netperfs.GROUP, netperfs.VERSION, namespace, netperfs.PLURAL, "np"
    )
    wait_for(
        lambda: all(core.read_namespaced_pod(n, namespace).metadata.deletion_timestamp for n in held),
        60,
        "the old run's pods terminating",
    )
    uid = netperfs.create(cluster, namespace, "np", {})["metadata"]["uid"]
    wait_for(
        lambda: "WaitingForPodName" in netperfs.reasons(cluster, namespace, "np"), 60, "the wait reported"
    )
    assert netperfs.st(cluster, namespace, "np").get("status") != "Error"
    for name in held:
        core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": None}})
    s = netperfs.in_test(cluster, namespace, "np")
    server = netperfs.pod(cluster, namespace, s["serverPod"])
    assert [r.uid for r in server.metadata.owner_references] == [uid]


@pytest.mark.parametrize("operator_down", [False, True], ids=["live", "deleted-while-down"])
def test_an_hpa_gets_its_own_min_replicas_back_when_the_tdset_goes(cluster, namespace, start, operator_down):
    """The TDSet raises the HPA's minReplicas to the schedule; deleting the TDSet left
    the raised value for good. Now the user's own value comes back, also when the TDSet went
    while the operator was down (an annotation on the HPA remembers it)."""
    autoscaling = client.AutoscalingV2Api(cluster.api)
    op = start("tdset")
    tdsets.create(cluster, namespace, "shop", tdsets.steady(4))
    tdsets.replicas_become(cluster, namespace, "shop", 4, "scheduled replicas")
    autoscaling.create_namespaced_horizontal_pod_autoscaler(namespace, tdsets.hpa("shop-hpa", "shop", 2, 10))

    def hpa() -> client.V2HorizontalPodAutoscaler:
        return autoscaling.read_namespaced_horizontal_pod_autoscaler("shop-hpa", namespace)

    wait_for(lambda: hpa().spec.min_replicas == 4, 60, "the floor raised to 4")
    if operator_down:
        op.stop()
    tdsets.co(cluster).delete_namespaced_custom_object(
        tdsets.GROUP, tdsets.VERSION, namespace, tdsets.PLURAL, "shop"
    )
    if operator_down:
        wait_for(
            lambda: (
                not tdsets.co(cluster).list_namespaced_custom_object(
                    tdsets.GROUP, tdsets.VERSION, namespace, tdsets.PLURAL
                )["items"]
            ),
            60,
            "TDSet gone",
        )
        start("tdset")
    wait_for(lambda: hpa().spec.min_replicas == 2, 60, "minReplicas back to the HPA's own 2")
    annotations = hpa().metadata.annotations or {}
    assert not [k for k in annotations if k.startswith("schedule.rs/")], annotations


def test_a_sigkilled_operator_leaves_no_credentials_on_disk(cluster, namespace, tmp_path):
    """Each SIGKILL left the kubeconfig's client key (and certificate) in the temp
    directory: the official loader removes its files only at a clean exit."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    op = OperatorProcess(
        "operators.webserver",
        cluster.kubeconfig,  # the admin's: a client certificate and key embedded as data
        tmp_path / "webserver.log",
        namespaces=namespace,
        env={"TMPDIR": str(tmpdir)},
    )
    assert "client-key-data" in cluster.kubeconfig.read_text()
    try:
        op.start()
        webservers.create(cluster, namespace, "web", {"replicas": 1})
        webservers.converged(cluster, namespace, "web", 1)  # both clients have talked
    finally:
        op.kill()
    assert sorted(p.name for p in tmpdir.iterdir()) == []


def test_a_tdset_recreated_while_its_deployment_terminates_says_so_and_converges(cluster, namespace, start):
    """Same-name delete and re-create for TDSet: the old Deployment holds the name until it
    is gone (a finalizer keeps it here); the new TDSet reports that and takes over the name."""
    apps = client.AppsV1Api(cluster.api)
    start("tdset")
    tdsets.create(cluster, namespace, "shop", tdsets.steady(2))
    tdsets.replicas_become(cluster, namespace, "shop", 2, "the Deployment")
    apps.patch_namespaced_deployment(
        "shop", namespace, {"metadata": {"finalizers": ["test.k8s-operators-py.dev/hold"]}}
    )
    tdsets.co(cluster).delete_namespaced_custom_object(
        tdsets.GROUP, tdsets.VERSION, namespace, tdsets.PLURAL, "shop"
    )
    wait_for(
        lambda: tdsets.deployment(cluster, namespace, "shop").metadata.deletion_timestamp,
        60,
        "terminating",
    )
    uid = tdsets.create(cluster, namespace, "shop", tdsets.steady(3))["metadata"]["uid"]
    wait_for(
        lambda: (
            "is being deleted"
            in tdsets.condition(tdsets.get(cluster, namespace, "shop"), "Degraded").get("message", "")
        ),
        60,
        "Degraded says the Deployment is being deleted",
    )
    apps.patch_namespaced_deployment("shop", namespace, {"metadata": {"finalizers": None}})
    tdsets.replicas_become(cluster, namespace, "shop", 3, "a new Deployment for the new TDSet")
    dep = tdsets.deployment(cluster, namespace, "shop")
    assert [r.uid for r in dep.metadata.owner_references] == [uid]
    wait_for(
        lambda: tdsets.condition(tdsets.get(cluster, namespace, "shop"), "Degraded").get("status") == "False",
        60,
        "Degraded cleared",
    )
