import random

from hypothesis import given
from hypothesis import strategies as st

from operators.webserver import desired
from operators.webserver.desired import PodView, plan

SPEC = {"replicas": 3, "image": "nginx:1", "port": 80}
H = desired.template_hash(SPEC)
OWNER = {
    "apiVersion": "demo.k8s.io/v1alpha1",
    "kind": "WebServer",
    "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
}


def pod(slot, thash=H, *, phase="Running", ready=True, scheduled=True, deleting=False, created=None):
    return PodView(
        name=desired.pod_name("web", thash, slot),
        template_hash=thash,
        created=created or f"2026-01-01T00:00:{slot:02d}Z",
        phase=phase,
        scheduled=scheduled,
        ready=ready,
        deleting=deleting,
    )


def test_template_hash_ignores_replicas_and_tracks_template():
    assert desired.template_hash({**SPEC, "replicas": 9}) == H
    assert desired.template_hash({**SPEC, "image": "nginx:2"}) != H
    assert desired.template_hash({"replicas": 1}) == desired.template_hash(
        {"replicas": 1, "image": "nginxdemos/hello", "port": 80}
    )


def test_pod_manifest_is_owned_labelled_and_probed():
    p = desired.pod_manifest(OWNER, SPEC, 2)
    meta = p["metadata"]
    assert meta["name"] == f"web-{H}-2"
    assert meta["labels"]["app"] == "web"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "k8s-operators-py"
    assert meta["ownerReferences"][0]["uid"] == "u1" and meta["ownerReferences"][0]["controller"]
    c = p["spec"]["containers"][0]
    assert c["image"] == "nginx:1" and c["readinessProbe"]["tcpSocket"]["port"] == 80
    assert desired.selector_string("web") == "app.kubernetes.io/instance=web,app.kubernetes.io/name=webserver"
    assert all(meta["labels"][k] == v for k, v in desired.selector_labels("web").items())


def test_pod_view_from_body():
    body = {
        "metadata": {"name": "p", "labels": {desired.HASH_LABEL: "h"}, "creationTimestamp": "t"},
        "spec": {"nodeName": "n"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert desired.pod_view(body) == PodView("p", "h", "t", "Running", True, True, False)
    body["metadata"]["deletionTimestamp"] = "x"
    assert not desired.pod_view(body).active
    assert not PodView("q", "h", "t", phase="Succeeded").active


def test_scale_up_fills_lowest_free_slots():
    assert plan("web", SPEC, []).create_slots == [0, 1, 2]
    assert plan("web", SPEC, [pod(1)]).create_slots == [0, 2]
    # a terminating pod holds its name but does not count
    result = plan("web", SPEC, [pod(0, deleting=True), pod(1)])
    assert result.create_slots == [2, 3] and result.delete == []


def test_failed_and_succeeded_pods_are_not_counted():
    result = plan("web", SPEC, [pod(0, phase="Failed", ready=False), pod(1), pod(2)])
    assert result.create_slots == [3]


def test_scale_down_ranks_like_replicaset():
    pods = [
        pod(0),  # old, ready, running
        pod(1, ready=False),  # not ready
        pod(2, phase="Pending", ready=False),  # pending
        pod(3, scheduled=False, phase="Pending", ready=False),  # unscheduled
        pod(4),  # newest ready
    ]
    assert plan("web", {**SPEC, "replicas": 1}, pods).delete == [
        pods[3].name,
        pods[2].name,
        pods[1].name,
        pods[4].name,
    ]


def test_steady_state_plans_nothing():
    assert plan("web", SPEC, [pod(0), pod(1), pod(2)]).empty


def test_slow_start_batches():
    assert desired.slow_start_batches(0) == []
    assert desired.slow_start_batches(1) == [1]
    assert desired.slow_start_batches(10) == [1, 2, 4, 3]
    assert sum(desired.slow_start_batches(100)) == 100


def simulate_rollout(replicas, seed):
    """Apply plans step by step, new pods becoming ready one pass later; check the invariant."""
    rng = random.Random(seed)
    old_spec = {**SPEC, "replicas": replicas}
    new_spec = {**old_spec, "image": "nginx:2"}
    old_hash = desired.template_hash(old_spec)
    pods = {p.name: p for p in (pod(i, thash=old_hash) for i in range(replicas))}
    min_ready = replicas
    for _ in range(10 * replicas + 10):
        result = plan("web", new_spec, list(pods.values()))
        for name in result.delete:
            del pods[name]
        # pods created earlier become ready at random
        for name, p in list(pods.items()):
            if not p.ready and rng.random() < 0.5:
                pods[name] = PodView(p.name, p.template_hash, p.created, "Running", True, True)
        for slot in result.create_slots:
            p = pod(slot, thash=desired.template_hash(new_spec), ready=False, phase="Pending")
            pods[p.name] = p
        min_ready = min(min_ready, sum(p.ready for p in pods.values()))
        if all(p.ready for p in pods.values()) and plan("web", new_spec, list(pods.values())).empty:
            break
    return pods, min_ready, desired.template_hash(new_spec)


@given(st.integers(1, 12), st.integers(0, 10_000))
def test_rollout_replaces_every_pod_never_below_replicas_minus_one(replicas, seed):
    pods, min_ready, new_hash = simulate_rollout(replicas, seed)
    assert len(pods) == replicas
    assert all(p.template_hash == new_hash for p in pods.values())
    assert min_ready >= replicas - 1


@given(st.integers(0, 20), st.lists(st.integers(0, 30), max_size=12, unique=True))
def test_plan_reaches_exactly_replicas_from_any_start(replicas, slots):
    spec = {**SPEC, "replicas": replicas}
    pods = {p.name: p for p in (pod(s) for s in slots)}
    for _ in range(3):
        result = plan("web", spec, list(pods.values()))
        for name in result.delete:
            del pods[name]
        for s in result.create_slots:
            p = pod(s)
            assert p.name not in pods  # never a duplicate name
            pods[p.name] = p
    assert len(pods) == replicas
    assert plan("web", spec, list(pods.values())).empty


def test_service_manifest_and_drift():
    assert desired.service_manifest(OWNER, SPEC) is None
    spec = {**SPEC, "port": 8080, "service": {"enabled": True, "type": "NodePort", "port": 80}}
    svc = desired.service_manifest(OWNER, spec)
    assert svc["metadata"]["name"] == "web"
    assert svc["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert svc["spec"]["selector"] == desired.selector_labels("web")
    assert svc["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]
    observed = {**desired.service_view(svc), "nodePort": 31234}  # allocated by the API server
    assert not desired.service_differs(observed, svc)
    assert desired.service_differs({**observed, "targetPort": 80}, svc)
    pinned = desired.service_manifest(OWNER, {**spec, "service": {**spec["service"], "nodePort": 30001}})
    assert desired.service_differs(observed, pinned)


def test_run_as_user_gives_restricted_pods_and_leaves_other_hashes_alone():
    # A WebServer without runAsUser keeps the hash it had before the field existed.
    assert desired.template(SPEC) == {"image": "nginx:1", "port": 80, "resources": {}}
    spec = {**SPEC, "runAsUser": 101}
    assert desired.template_hash(spec) != H
    pod = desired.pod_manifest(OWNER, spec, 0)
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["runAsUser"] == 101
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = pod["spec"]["containers"]
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert "securityContext" not in desired.pod_manifest(OWNER, SPEC, 0)["spec"]
