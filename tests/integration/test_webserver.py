"""The WebServer operator against the real control plane."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from operators.webserver import desired
from tests.framework import kstatus
from tests.framework.cluster import Cluster
from tests.framework.namespaces import hold_pods_at
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for
from tests.framework.webservers import (
    GROUP,
    PLURAL,
    VERSION,
    active_pods,
    conditions,
    converged,
    create,
    get,
    patch_spec,
    ready,
)


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("webserver") / "operator.log"
    op = OperatorProcess("operators.webserver", cluster.operator_kubeconfig("webserver"), log).start()
    yield op
    op.stop()


def test_original_manifest_scales_up_down_to_zero_and_back(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 5})  # the tutorial's manifest, unchanged
    ws = converged(cluster, namespace, "web", 5)
    st = ws["status"]
    assert st["count"] == 5 and st["availableReplicas"] == 5 and st["updatedReplicas"] == 5
    assert st["selector"] == desired.selector_string("web")
    cond = conditions(ws)
    assert cond["Available"]["status"] == "True"
    assert (cond["Progressing"]["status"], cond["Progressing"]["reason"]) == ("False", "ReplicasReady")
    pod = active_pods(cluster, namespace, "web")[0]
    assert pod.metadata.owner_references[0].uid == ws["metadata"]["uid"]
    assert pod.metadata.labels["app"] == "web"
    assert pod.spec.containers[0].image == "nginxdemos/hello"
    assert pod.spec.containers[0].readiness_probe.tcp_socket.port == 80

    for replicas in (2, 0, 3):
        patch_spec(cluster, namespace, "web", {"replicas": replicas})
        converged(cluster, namespace, "web", replicas)


def test_kubectl_scale_uses_the_scale_subresource(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 1})
    converged(cluster, namespace, "web", 1)
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed for this test"
    out = subprocess.run(
        [
            kubectl,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "-n",
            namespace,
            "scale",
            "webserver/web",
            "--replicas=4",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    converged(cluster, namespace, "web", 4)
    scale = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object_scale(
        GROUP, VERSION, namespace, PLURAL, "web"
    )
    assert scale["spec"]["replicas"] == 4 and scale["status"]["replicas"] == 4
    assert scale["status"]["selector"] == desired.selector_string("web")


def test_deleted_pod_is_replaced_and_foreign_pod_left_alone(cluster, namespace, operator):
    core = client.CoreV1Api(cluster.api)
    foreign = {
        "metadata": {"name": "foreign", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    core.create_namespaced_pod(namespace, foreign)
    create(cluster, namespace, "web", {"replicas": 3})
    converged(cluster, namespace, "web", 3)

    victim = active_pods(cluster, namespace, "web")[0].metadata.name
    core.delete_namespaced_pod(victim, namespace)
    ws = converged(cluster, namespace, "web", 3)
    names = {p.metadata.name for p in active_pods(cluster, namespace, "web")}
    assert len(names) == 3
    # the foreign pod carries app=web but is not ours: never counted, never deleted
    assert core.read_namespaced_pod("foreign", namespace).metadata.deletion_timestamp is None
    assert ws["status"]["replicas"] == 3
    patch_spec(cluster, namespace, "web", {"replicas": 0})
    converged(cluster, namespace, "web", 0)
    assert core.read_namespaced_pod("foreign", namespace).metadata.deletion_timestamp is None


def test_a_status_overwritten_by_someone_else_is_put_right(cluster, namespace, operator):
    """A status-only change that is not the operator's own write wakes a pass at once (the
    echo of its own write does not): put right long before the 600 s resync."""
    create(cluster, namespace, "web", {"replicas": 2})
    converged(cluster, namespace, "web", 2)
    overwritten = client.CustomObjectsApi(cluster.api).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "web", {"status": {"readyReplicas": 7, "replicas": 7}}
    )
    # The server's answer, not a later read: the operator may put it right before that read.
    assert overwritten["status"]["readyReplicas"] == 7
    ws = converged(cluster, namespace, "web", 2, timeout=60)
    assert revision(ws) > revision(overwritten)  # put right after the overwrite, not before it


def revision(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_terminating_pods_are_not_counted(cluster, namespace, operator):
    core = client.CoreV1Api(cluster.api)
    create(cluster, namespace, "web", {"replicas": 2})
    converged(cluster, namespace, "web", 2)
    held = active_pods(cluster, namespace, "web")[0].metadata.name
    core.patch_namespaced_pod(held, namespace, {"metadata": {"finalizers": ["localcluster.dev/hold"]}})
    core.delete_namespaced_pod(held, namespace)
    # the held pod stays Terminating; a replacement must be created and status must say 2
    converged(cluster, namespace, "web", 2)
    assert core.read_namespaced_pod(held, namespace).metadata.deletion_timestamp is not None
    core.patch_namespaced_pod(held, namespace, {"metadata": {"finalizers": None}})


def test_image_change_rolls_every_pod(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 4, "image": "nginx:1.27"})
    converged(cluster, namespace, "web", 4)
    old = {p.metadata.name for p in active_pods(cluster, namespace, "web")}
    patch_spec(cluster, namespace, "web", {"image": "nginx:1.28", "port": 8080})

    def rolled() -> bool:
        pods = active_pods(cluster, namespace, "web")
        return (
            len(pods) == 4
            and all(p.spec.containers[0].image == "nginx:1.28" for p in pods)
            and all(p.spec.containers[0].ports[0].container_port == 8080 for p in pods)
        )

    wait_for(rolled, 120, "every pod on the new template")
    ws = converged(cluster, namespace, "web", 4)
    assert not old & {p.metadata.name for p in active_pods(cluster, namespace, "web")}
    assert ws["status"]["updatedReplicas"] == 4


def token_volumes(pod) -> list[str]:
    """The projected ServiceAccount-token volumes the API server's ServiceAccount admission added."""
    return [v.name for v in pod.spec.volumes or [] if v.name.startswith("kube-api-access-")]


def test_pods_get_no_service_account_token_unless_asked_and_a_change_rolls(cluster, namespace, operator):
    """No API credentials in a web server's pods; an image that calls the API asks for them."""
    create(cluster, namespace, "web", {"replicas": 2})
    ws = converged(cluster, namespace, "web", 2)
    assert ws["spec"]["automountServiceAccountToken"] is False  # the CRD's default, as stored
    old = active_pods(cluster, namespace, "web")
    assert all(p.spec.automount_service_account_token is False and not token_volumes(p) for p in old)

    patch_spec(cluster, namespace, "web", {"automountServiceAccountToken": True})

    def rolled() -> list | None:
        pods = active_pods(cluster, namespace, "web")
        return pods if len(pods) == 2 and all(p.spec.automount_service_account_token for p in pods) else None

    wait_for(rolled, 120, "every pod replaced by one that mounts the token")
    ws = converged(cluster, namespace, "web", 2)
    pods = active_pods(cluster, namespace, "web")
    assert not {p.metadata.name for p in old} & {p.metadata.name for p in pods}
    # The API server mounted the token into the new pods: the field reached it, not just our spec.
    assert all(token_volumes(p) for p in pods)
    assert ws["status"]["updatedReplicas"] == 2


def test_kstatus_sees_the_live_webserver_in_progress_until_its_pods_are_ready(cluster, namespace, operator):
    """What Flux, Helm 4 --wait and kpt compute from the live object: InProgress while pods are
    not ready (kwok keeps pods of this image Pending for as long as the test needs), Current only
    once every pod runs the current template and is ready."""
    create(cluster, namespace, "web", {"replicas": 5, "image": "localcluster.dev/unpullable:latest"})

    def judged() -> tuple[dict, dict]:
        ws = get(cluster, namespace, "web")
        (result,) = kstatus.compute(ws)
        return ws, result

    def stuck() -> dict | None:
        ws, result = judged()
        st = ws.get("status") or {}
        seen = st.get("observedGeneration") == ws["metadata"]["generation"] and st.get("replicas") == 5
        return result if seen else None

    result = wait_for(stuck, 120, "a status for 5 pods that cannot start")
    assert (result["status"], result["message"]) == ("InProgress", "0/5 pods ready")

    patch_spec(cluster, namespace, "web", {"image": "nginx:1.28"})
    samples: list[tuple[str, dict]] = []

    def current() -> bool:
        ws, result = judged()
        samples.append((result["status"], ws.get("status") or {}))
        return result["status"] == "Current"

    wait_for(current, 120, "kstatus Current")
    judged_current = [st for status, st in samples if status == "Current"]
    assert all(
        (st["readyReplicas"], st["updatedReplicas"], st["replicas"]) == (5, 5, 5) for st in judged_current
    ), judged_current
    pods = active_pods(cluster, namespace, "web")
    assert len(pods) == 5 and all(ready(p) and p.spec.containers[0].image == "nginx:1.28" for p in pods)


def serving(pod: client.V1Pod) -> bool:
    """Ready and not terminating: what a Service still sends traffic to."""
    return ready(pod) and pod.metadata.deletion_timestamp is None


def counted(pod: client.V1Pod) -> bool:
    """Active as the operator counts it: not terminating, not finished."""
    return pod.metadata.deletion_timestamp is None and pod.status.phase not in ("Succeeded", "Failed")


@pytest.mark.parametrize(
    ("spec", "bounds"),
    [
        # (ready pods at least, active pods at most) = (replicas - maxUnavailable, replicas + maxSurge)
        ({"replicas": 1}, (1, 2)),  # defaults: maxUnavailable 0, maxSurge 1
        ({"replicas": 4}, (3, 5)),  # defaults: maxUnavailable 1, maxSurge 1
        ({"replicas": 3, "rollout": {"maxSurge": 0, "maxUnavailable": 1}}, (2, 3)),
    ],
    ids=["one-replica", "four-replicas", "no-surge"],
)
def test_rollout_keeps_ready_pods_at_every_step(
    cluster: Cluster,
    namespace: str,
    operator: OperatorProcess,
    spec: dict,
    bounds: tuple[int, int],
) -> None:
    """Every pod change of the rollout, seen through a watch (nothing between two polls is missed)."""
    core = client.CoreV1Api(cluster.api)
    replicas, (min_ready, max_active) = spec["replicas"], bounds
    create(cluster, namespace, "web", {**spec, "image": "nginx:1.27"})
    converged(cluster, namespace, "web", replicas)
    listed = core.list_namespaced_pod(namespace, label_selector="app=web")
    pods: dict[str, client.V1Pod] = {p.metadata.name: p for p in listed.items}
    old = set(pods)
    patch_spec(cluster, namespace, "web", {"image": "nginx:1.28"})
    new_hash = desired.template_hash(get(cluster, namespace, "web")["spec"])

    def finished() -> bool:
        # Terminating old pods stay in ``pods`` until their DELETED event: none may be left.
        return len(pods) == replicas and all(
            p.metadata.labels[desired.HASH_LABEL] == new_hash and serving(p) for p in pods.values()
        )

    trace: list[str] = []
    resource_version = listed.metadata.resource_version
    deadline = time.monotonic() + 120
    while not finished():
        remaining = deadline - time.monotonic()
        assert remaining > 0, "rollout not finished within 120s:\n" + "\n".join(trace)
        w = watch.Watch()
        for event in w.stream(
            core.list_namespaced_pod,
            namespace,
            label_selector="app=web",
            resource_version=resource_version,
            timeout_seconds=max(1, min(30, int(remaining))),
        ):
            pod = event["object"]
            resource_version = pod.metadata.resource_version
            if event["type"] == "DELETED":
                pods.pop(pod.metadata.name, None)
            else:
                pods[pod.metadata.name] = pod
            ready_now = sum(serving(p) for p in pods.values())
            active_now = sum(counted(p) for p in pods.values())
            trace.append(
                f"{event['type']} {pod.metadata.name} ready={ready(pod)} "
                f"deleting={pod.metadata.deletion_timestamp is not None} -> "
                f"{ready_now} ready, {active_now} active"
            )
            assert ready_now >= min_ready, f"fewer than {min_ready} ready pods:\n" + "\n".join(trace)
            assert active_now <= max_active, f"more than {max_active} active pods:\n" + "\n".join(trace)
            if finished():
                w.stop()
                break

    assert not old & set(pods)
    converged(cluster, namespace, "web", replicas)
    # The status of a pass that still saw an old pod can be the latest one for a moment.
    wait_for(
        lambda: get(cluster, namespace, "web")["status"]["updatedReplicas"] == replicas,
        60,
        f"status.updatedReplicas == {replicas}",
    )


def test_owner_deletion_garbage_collects_pods(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 3})
    converged(cluster, namespace, "web", 3)
    client.CustomObjectsApi(cluster.api).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "web"
    )
    wait_for(
        lambda: (
            not client.CoreV1Api(cluster.api).list_namespaced_pod(namespace, label_selector="app=web").items
        ),
        120,
        "pods garbage-collected",
    )


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ({"replicas": -1}, ["spec.replicas", "greater than or equal to 0"]),
        ({}, ["spec.replicas", "Required value"]),
        ({"replicas": 1, "image": "has space"}, ["spec.image", "should match"]),
        ({"replicas": 1, "port": 70000}, ["spec.port", "less than or equal to 65535"]),
        (
            {"replicas": 1, "service": {"enabled": True, "nodePort": 30080}},
            ["spec.service.nodePort", "nodePort requires service.type NodePort or LoadBalancer"],
        ),
        (
            {"replicas": 1, "rollout": {"maxSurge": 0, "maxUnavailable": 0}},
            ["spec.rollout", "maxSurge and maxUnavailable must not both be 0"],
        ),
        (
            {"replicas": 1, "rollout": {"maxSurge": -1}},
            ["spec.rollout.maxSurge", "greater than or equal to 0"],
        ),
        (
            {"replicas": 1, "automountServiceAccountToken": "yes"},
            ["spec.automountServiceAccountToken", "must be of type boolean"],
        ),
    ],
)
def test_invalid_specs_rejected_with_field_messages(cluster, namespace, spec, fragments):
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "bad", spec)
    assert err.value.status == 422
    for fragment in fragments:
        assert fragment in err.value.body


def test_restart_in_the_middle_of_a_scale_up_creates_no_duplicates(cluster, namespace, operator):
    core = client.CoreV1Api(cluster.api)
    hold_pods_at(core, namespace, 5)  # the scale-up stops at 5 of 40 until the quota goes
    create(cluster, namespace, "web", {"replicas": 40})
    wait_for(lambda: len(active_pods(cluster, namespace, "web")) == 5, 60, "scale-up held at 5 of 40")
    operator.kill()  # SIGKILL: no clean shutdown, mid scale-up
    core.delete_namespaced_resource_quota("hold", namespace)
    operator.start()
    ws = converged(cluster, namespace, "web", 40, timeout=180)
    thash = desired.template_hash(ws["spec"])
    names = sorted(p.metadata.name for p in active_pods(cluster, namespace, "web"))
    assert names == sorted(desired.pod_name("web", thash, i) for i in range(40))


def test_steady_state_makes_no_writes_and_metrics_move(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 2})
    converged(cluster, namespace, "web", 2)
    before = operator.metric("controller_runtime_reconcile_total", controller="webserver", result="success")
    # Touch the object without changing its spec: the operator runs a pass and must not write.
    co = client.CustomObjectsApi(cluster.api)
    touched = co.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "web", {"metadata": {"annotations": {"touched": "1"}}}
    )
    wait_for(
        lambda: (
            operator.metric("controller_runtime_reconcile_total", controller="webserver", result="success")
            > before
        ),
        60,
        "a reconcile pass after the touch",
    )
    ws = converged(cluster, namespace, "web", 2)
    assert ws["metadata"]["resourceVersion"] == touched["metadata"]["resourceVersion"]

    text = operator.metrics()
    promtool = shutil.which("promtool")
    assert promtool
    check = subprocess.run(
        [promtool, "check", "metrics"], input=text.encode(), capture_output=True, check=False
    )
    assert check.returncode == 0 and not check.stdout.strip(), check.stdout + check.stderr


def test_service_created_updated_and_removed(cluster, namespace, operator):
    core = client.CoreV1Api(cluster.api)
    create(cluster, namespace, "web", {"replicas": 1, "service": {"enabled": True}})
    svc = wait_for(lambda: core.read_namespaced_service("web", namespace), 60, "Service created")
    assert svc.spec.selector == desired.selector_labels("web")
    assert svc.metadata.owner_references[0].kind == "WebServer"
    # The pods' named port: each pod is reached on its own port, through and after a port change.
    assert svc.spec.ports[0].target_port == "http"
    patch_spec(cluster, namespace, "web", {"port": 8080})
    wait_for(
        lambda: (
            all(
                p.spec.containers[0].ports[0].container_port == 8080
                for p in active_pods(cluster, namespace, "web")
            )
            and len(active_pods(cluster, namespace, "web")) == 1
        ),
        60,
        "the pod rolled to port 8080",
    )
    assert core.read_namespaced_service("web", namespace).spec.ports[0].target_port == "http"
    core.delete_namespaced_service("web", namespace)  # deleted by someone else: recreated
    wait_for(
        lambda: core.read_namespaced_service("web", namespace).metadata.uid != svc.metadata.uid,
        60,
        "Service recreated",
    )
    patch_spec(cluster, namespace, "web", {"service": {"enabled": False}})

    def gone() -> bool:
        return "web" not in {s.metadata.name for s in core.list_namespaced_service(namespace).items}

    wait_for(gone, 60, "Service removed when disabled")


def test_failed_creates_surface_in_conditions_and_events_then_recover(cluster, namespace, operator):
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": "two-pods"}, "spec": {"hard": {"pods": "2"}}}
    )
    wait_for(
        lambda: core.read_namespaced_resource_quota("two-pods", namespace).status.hard,
        60,
        "quota status computed",
    )
    create(cluster, namespace, "web", {"replicas": 4})

    def failure_reported() -> dict | None:
        ws = get(cluster, namespace, "web")
        cond = conditions(ws).get("ReplicaFailure") if ws.get("status") else None
        return cond if cond and cond["status"] == "True" else None

    cond = wait_for(failure_reported, 60, "ReplicaFailure=True")
    assert cond["reason"] == "FailedCreate" and "exceeded quota" in cond["message"]
    wait_for(
        lambda: any(
            e.reason == "FailedCreate" and e.type == "Warning" and "exceeded quota" in e.message
            for e in core.list_namespaced_event(namespace, field_selector="involvedObject.name=web").items
        ),
        60,
        "a FailedCreate Warning Event",
    )
    # The refusal can answer before a concurrent create the quota admitted is listed.
    wait_for(lambda: len(active_pods(cluster, namespace, "web")) == 2, 60, "the 2 pods the quota admits")
    assert operator.metric("controller_runtime_reconcile_errors_total", controller="webserver") > 0

    core.delete_namespaced_resource_quota("two-pods", namespace)
    ws = converged(cluster, namespace, "web", 4, timeout=180)
    assert conditions(ws)["ReplicaFailure"]["status"] == "False"
