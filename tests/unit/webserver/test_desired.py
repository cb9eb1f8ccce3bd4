import hashlib
import json
import math
import random
from dataclasses import dataclass

from hypothesis import assume, given
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


def test_numeric_quantities_reach_the_pod_as_strings_and_keep_the_template_hash():
    """The schema admits ``cpu: 0``; a typed client refuses a number where a quantity is."""
    spec = {**SPEC, "resources": {"requests": {"cpu": 0, "memory": "64Mi"}, "limits": {"cpu": 0.5}}}
    c = desired.pod_manifest(OWNER, spec, 0)["spec"]["containers"][0]
    assert c["resources"] == {"requests": {"cpu": "0", "memory": "64Mi"}, "limits": {"cpu": "0.5"}}
    assert desired.template_hash(spec) != desired.template_hash(
        {**spec, "resources": {"requests": {"cpu": "0", "memory": "64Mi"}, "limits": {"cpu": "0.5"}}}
    )  # what the user wrote is hashed: an upgrade rolls no existing pod


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


def expected_limits(replicas: int, rollout: dict[str, int] | None = None) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as a Deployment's RollingUpdate resolves them, worked out here
    independently of the code under test."""
    rollout = rollout or {}
    surge = rollout.get("maxSurge", math.ceil(replicas * 0.25))
    unavailable = rollout.get("maxUnavailable", math.floor(replicas * 0.25))
    if surge == 0 and unavailable == 0:
        if "maxSurge" in rollout:
            unavailable = 1
        else:
            surge = 1
    return surge, unavailable


def ready_pod(p: PodView) -> PodView:
    return PodView(p.name, p.template_hash, p.created, "Running", True, True)


def test_single_replica_rollout_keeps_the_only_ready_pod_until_its_replacement_is_ready() -> None:
    old_spec = {**SPEC, "replicas": 1}
    new_spec = {**old_spec, "image": "nginx:2"}
    new_hash = desired.template_hash(new_spec)
    old = pod(0, thash=H)

    first = plan("web", new_spec, [old])
    assert (first.create_slots, first.delete) == ([0], [])  # surge first, delete nothing

    new = pod(0, thash=new_hash, phase="Pending", ready=False, created="2026-01-01T00:01:00Z")
    assert plan("web", new_spec, [old, new]).empty  # wait for the new pod

    last = plan("web", new_spec, [old, ready_pod(new)])
    assert (last.create_slots, last.delete) == ([], [old.name])


def test_single_replica_rollout_replaces_a_not_ready_old_pod_at_once() -> None:
    new_spec = {**SPEC, "replicas": 1, "image": "nginx:2"}
    broken = pod(0, thash=H, ready=False)
    result = plan("web", new_spec, [broken])
    assert (result.create_slots, result.delete) == ([0], [broken.name])


def test_four_replicas_roll_with_one_unavailable_and_one_surge() -> None:
    new_spec = {**SPEC, "replicas": 4, "image": "nginx:2"}
    new_hash = desired.template_hash(new_spec)
    olds = [pod(i, thash=H) for i in range(4)]

    first = plan("web", new_spec, olds)
    # 3 of 4 must stay ready: one old pod goes (the newest), and 4 + 1 - 3 = 2 new ones come.
    assert first.delete == [olds[3].name] and first.create_slots == [0, 1]

    news = [pod(i, thash=new_hash, phase="Pending", ready=False) for i in range(2)]
    assert plan("web", new_spec, olds[:3] + news).empty  # 5 active, 3 ready: nothing moves

    step = plan("web", new_spec, [*olds[:3], ready_pod(news[0]), news[1]])
    assert step.delete == [olds[2].name] and step.create_slots == [2]


def test_rollout_limits_default_like_a_deployment_and_follow_spec_rollout() -> None:
    got = {r: desired.rollout_limits({"replicas": r}) for r in (0, 1, 3, 4, 5, 8, 9, 1000)}
    assert {r: (lim.max_surge, lim.max_unavailable) for r, lim in got.items()} == {
        0: (1, 0),
        1: (1, 0),
        3: (1, 0),
        4: (1, 1),
        5: (2, 1),
        8: (2, 2),
        9: (3, 2),
        1000: (250, 250),
    }
    lim = desired.rollout_limits({"replicas": 4, "rollout": {"maxSurge": 0, "maxUnavailable": 2}})
    assert (lim.max_surge, lim.max_unavailable) == (0, 2)
    # Only one field set: the other keeps its default; if that makes both 0, the unset one is 1.
    lim = desired.rollout_limits({"replicas": 8, "rollout": {"maxSurge": 0}})
    assert (lim.max_surge, lim.max_unavailable) == (0, 2)
    lim = desired.rollout_limits({"replicas": 2, "rollout": {"maxSurge": 0}})
    assert (lim.max_surge, lim.max_unavailable) == (0, 1)
    lim = desired.rollout_limits({"replicas": 0, "rollout": {"maxUnavailable": 0}})
    assert (lim.max_surge, lim.max_unavailable) == (1, 0)
    # Both 0 gets past the schema only if its CEL rule is bypassed: the Deployment's fallback.
    lim = desired.rollout_limits({"replicas": 3, "rollout": {"maxSurge": 0, "maxUnavailable": 0}})
    assert (lim.max_surge, lim.max_unavailable) == (0, 1)


def test_max_surge_zero_deletes_before_it_creates() -> None:
    new_spec = {**SPEC, "replicas": 3, "image": "nginx:2", "rollout": {"maxSurge": 0, "maxUnavailable": 1}}
    olds = [pod(i, thash=H) for i in range(3)]
    result = plan("web", new_spec, olds)
    assert result.delete == [olds[2].name] and result.create_slots == [0]


@dataclass
class Rollout:
    pods: dict[str, PodView]
    min_ready: int
    max_active: int
    new_hash: str
    finished: bool


def simulate_rollout(replicas: int, seed: int, rollout: dict[str, int] | None = None) -> Rollout:
    """Apply plans step by step, new pods becoming ready at random; the worst moments recorded."""
    rng = random.Random(seed)
    old_spec = {**SPEC, "replicas": replicas}
    new_spec = {**old_spec, "image": "nginx:2", **({"rollout": rollout} if rollout else {})}
    new_hash = desired.template_hash(new_spec)
    pods = {p.name: p for p in (pod(i, thash=H) for i in range(replicas))}
    min_ready, max_active, finished = replicas, replicas, False
    for step in range(10 * replicas + 10):
        result = plan("web", new_spec, list(pods.values()))
        for name in result.delete:
            del pods[name]
        # Right after the deletes is when the fewest pods are ready.
        min_ready = min(min_ready, sum(p.ready for p in pods.values()))
        for slot in result.create_slots:
            created = f"2026-01-01T01:{step:02d}:{slot:02d}Z"
            p = pod(slot, thash=new_hash, ready=False, phase="Pending", created=created)
            assert p.name not in pods
            pods[p.name] = p
        max_active = max(max_active, len(pods))
        if all(p.ready for p in pods.values()) and plan("web", new_spec, list(pods.values())).empty:
            finished = True
            break
        for name, p in list(pods.items()):
            if not p.ready and rng.random() < 0.5:
                pods[name] = ready_pod(p)
    return Rollout(pods, min_ready, max_active, new_hash, finished)


@given(st.integers(1, 12), st.integers(0, 10_000))
def test_rollout_keeps_availability_within_the_surge_and_finishes(replicas: int, seed: int) -> None:
    surge, unavailable = expected_limits(replicas)
    result = simulate_rollout(replicas, seed)
    assert result.finished
    assert len(result.pods) == replicas
    assert all(p.template_hash == result.new_hash for p in result.pods.values())
    assert result.min_ready >= replicas - unavailable
    assert result.max_active <= replicas + surge


@given(
    st.integers(1, 12),
    st.integers(0, 10_000),
    st.fixed_dictionaries({}, optional={"maxSurge": st.integers(0, 4), "maxUnavailable": st.integers(0, 4)}),
)
def test_rollout_honours_spec_rollout(replicas: int, seed: int, rollout: dict[str, int]) -> None:
    assume(rollout.get("maxSurge", 1) or rollout.get("maxUnavailable", 1))  # both 0: rejected by the CRD
    surge, unavailable = expected_limits(replicas, rollout)
    result = simulate_rollout(replicas, seed, rollout)
    assert result.finished
    assert len(result.pods) == replicas
    assert all(p.template_hash == result.new_hash for p in result.pods.values())
    assert result.min_ready >= replicas - unavailable
    assert result.max_active <= replicas + surge


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
    # The pods' named port: each pod is reached on its own port during a rollout that changes it.
    assert svc["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]
    assert desired.pod_manifest(OWNER, spec, 0)["spec"]["containers"][0]["ports"][0]["name"] == "http"
    observed = {**desired.service_view(svc), "nodePort": 31234}  # allocated by the API server
    assert not desired.service_differs(observed, svc)
    assert desired.service_differs({**observed, "targetPort": 8080}, svc)
    pinned = desired.service_manifest(OWNER, {**spec, "service": {**spec["service"], "nodePort": 30001}})
    assert desired.service_differs(observed, pinned)


def test_run_as_user_gives_restricted_pods_and_leaves_other_hashes_alone():
    # Without runAsUser the template has no security context: setting it is what changes the hash.
    assert desired.template(SPEC) == {
        "image": "nginx:1",
        "port": 80,
        "resources": {},
        "automountServiceAccountToken": False,
    }
    spec = {**SPEC, "runAsUser": 101}
    assert desired.template_hash(spec) != H
    pod = desired.pod_manifest(OWNER, spec, 0)
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["runAsUser"] == 101
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = pod["spec"]["containers"]
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert "securityContext" not in desired.pod_manifest(OWNER, SPEC, 0)["spec"]


def test_pods_mount_no_service_account_token_unless_asked():
    """A web server needs no API credentials; an image that calls the API asks for them."""
    assert desired.pod_manifest(OWNER, SPEC, 0)["spec"]["automountServiceAccountToken"] is False
    off = {**SPEC, "automountServiceAccountToken": False}  # what the schema's default stores
    assert desired.template_hash(off) == H
    assert desired.pod_manifest(OWNER, off, 0) == desired.pod_manifest(OWNER, SPEC, 0)
    on = {**SPEC, "automountServiceAccountToken": True}
    assert desired.pod_manifest(OWNER, on, 0)["spec"]["automountServiceAccountToken"] is True
    # Asking for it (or no longer) is a template change: the pods are rolled, under new names.
    assert desired.template_hash(on) != H
    assert desired.pod_manifest(OWNER, on, 0)["metadata"]["name"] != desired.pod_name("web", H, 0)
    # Three ready old pods, default bounds (surge 1, unavailable 0): one new pod first.
    assert plan("web", on, [pod(0), pod(1), pod(2)]) == desired.Plan(create_slots=[0])
    # Only an explicit true mounts one: a value that slipped past the schema does not.
    assert desired.template_hash({**SPEC, "automountServiceAccountToken": "yes"}) == H


def test_the_hash_of_a_webserver_from_before_the_token_default_changes_once():
    """Pods made by a release that did not set the field carry the hash of a template without
    it: the upgrade rolls them (docs/operations/upgrades.md), whatever the field's value."""
    before = {"image": "nginx:1", "port": 80, "resources": {}}
    old_hash = hashlib.sha256(json.dumps(before, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[
        :10
    ]
    assert old_hash not in {
        desired.template_hash({**SPEC, "automountServiceAccountToken": v}) for v in (False, True)
    }
    old = [pod(0, old_hash), pod(1, old_hash), pod(2, old_hash)]
    assert plan("web", SPEC, old) == desired.Plan(create_slots=[0])


def test_topology_spread_is_soft_on_by_default_and_rolls_no_pod_until_switched():
    owner = {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": "web", "uid": "u"},
    }
    spec = {"replicas": 2}
    constraints = desired.pod_manifest(owner, spec, 0)["spec"]["topologySpreadConstraints"]
    assert [(c["topologyKey"], c["whenUnsatisfiable"], c["maxSkew"]) for c in constraints] == [
        ("kubernetes.io/hostname", "ScheduleAnyway", 1),
        ("topology.kubernetes.io/zone", "ScheduleAnyway", 1),
    ]
    assert all(c["labelSelector"]["matchLabels"] == desired.selector_labels("web") for c in constraints)
    # On by default and explicitly: the hash of before the field existed (no roll on upgrade).
    on = {**spec, "topologySpread": {"enabled": True}}
    assert desired.template_hash(on) == desired.template_hash(spec)
    off = {**spec, "topologySpread": {"enabled": False}}
    assert desired.template_hash(off) != desired.template_hash(spec)  # a switch rolls the pods
    assert "topologySpreadConstraints" not in desired.pod_manifest(owner, off, 0)["spec"]


def test_a_budget_only_from_two_replicas_and_unless_switched_off():
    owner = {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": "web", "uid": "u"},
    }
    assert desired.budget_manifest(owner, {"replicas": 1}) is None
    pdb = desired.budget_manifest(owner, {"replicas": 2})
    assert pdb is not None and pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert pdb["metadata"]["ownerReferences"][0]["uid"] == "u"
    assert desired.budget_manifest(owner, {"replicas": 5, "disruptionBudget": {"enabled": False}}) is None
