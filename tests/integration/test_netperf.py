"""The Netperf operator against the real control plane.

Pods do not run here: kwok makes them Running with an IP, and a test finishes the client pod
with a chosen exit code and termination message (kwok's ``pod-finish`` stage, driven by the
``localcluster.dev/*`` annotations), using messages captured from real netperf runs. Real pods
running real netperf are in ``test_e2e.py`` (the real node).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.netperf import desired
from tests.framework import audit
from tests.framework.cluster import Cluster
from tests.framework.netperfs import (
    GROUP,
    PLURAL,
    VERSION,
    co,
    create,
    finish_client,
    fixture,
    get,
    in_test,
    mbits,
    no_pods_left,
    phase_is,
    pod,
    pods,
    reasons,
    st,
)
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for

UNPULLABLE = "localcluster.dev/unpullable:latest"
HOLD = "localcluster.dev/hold"  # kwok keeps a deleted pod with this finalizer until it is removed


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("netperf") / "operator.log"
    op = OperatorProcess("operators.netperf", cluster.operator_kubeconfig("netperf"), log).start()
    yield op
    op.stop()


def test_one_step_run_records_results_and_cleans_up(cluster, namespace, operator):
    create(cluster, namespace, "np", {"serverNode": "kwok-node-0", "clientNode": "kwok-node-1", "samples": 3})
    s = in_test(cluster, namespace, "np")
    assert (s["serverPod"], s["clientPod"]) == ("np-server-1", "np-client-1")
    server, client_pod = pod(cluster, namespace, "np-server-1"), pod(cluster, namespace, "np-client-1")
    assert (server.spec.node_name, client_pod.spec.node_name) == ("kwok-node-0", "kwok-node-1")
    assert s["serverIP"] == server.status.pod_ip
    command = client_pod.spec.containers[0].command
    assert command[5:] == desired.netperf_argv({"samples": 3}, server.status.pod_ip)
    assert client_pod.metadata.owner_references[0].kind == "Netperf"

    text = fixture("tcp_stream")
    finish_client(cluster, namespace, "np-client-1", text)
    s = phase_is(cluster, namespace, "np", "Done")
    assert s["speedBitsPerSec"] == pytest.approx(statistics.fmean(mbits(text)) * 1e6)
    assert s["throughputBitsPerSec"]["samples"] == pytest.approx([m * 1e6 for m in mbits(text)])
    assert s["throughputBitsPerSec"]["ci95Low"] < s["speedBitsPerSec"] < s["throughputBitsPerSec"]["ci95High"]
    assert s["retransmits"] > 0
    assert s["startedAt"] <= s["completedAt"]
    assert s["observedGeneration"] == 1
    conds = {c["type"]: c for c in s["conditions"]}
    assert conds["Complete"]["status"] == "True" and conds["Progressing"]["status"] == "False"
    no_pods_left(cluster, namespace)
    assert st(cluster, namespace, "np")["speedBitsPerSec"] == s["speedBitsPerSec"]  # results stay
    wait_for(lambda: {"TestStarted", "TestFinished"} <= set(reasons(cluster, namespace, "np")), 30, "Events")
    assert reasons(cluster, namespace, "np").count("CreatedPod") == 2
    assert operator.metric(
        "netperf_throughput_bytes_per_second", namespace=namespace, name="np"
    ) == pytest.approx(s["speedBitsPerSec"] / 8)


@pytest.mark.parametrize("test_type", ["TCP_RR", "TCP_CRR", "UDP_RR"])
def test_rr_results(cluster, namespace, operator, test_type):
    name = test_type.lower().replace("_", "-")
    create(cluster, namespace, name, {"testType": test_type, "samples": 3})
    s = in_test(cluster, namespace, name)
    command = pod(cluster, namespace, s["clientPod"]).spec.containers[0].command
    assert command[command.index("-t") + 1] == test_type
    text = fixture(test_type.lower())
    finish_client(cluster, namespace, s["clientPod"], text)
    s = phase_is(cluster, namespace, name, "Done")
    assert "speedBitsPerSec" not in s
    assert s["transactionsPerSec"]["samples"] == pytest.approx(
        [float(v) for v in re.findall(r"^TRANSACTION_RATE=(.*)$", text, re.M)]
    )
    assert 0 < s["latencySeconds"]["p50"] <= s["latencySeconds"]["p99"] < 1
    unit = "conn/s" if test_type == "TCP_CRR" else "trans/s"
    assert (
        s["headline"]
        == f"{s['transactionsPerSec']['mean']:.0f} {unit}, p99 {s['latencySeconds']['p99'] * 1e6:.0f}us"
    )


def test_parallel_streams_sum_with_each_streams_samples(cluster, namespace, operator):
    create(cluster, namespace, "par", {"testType": "TCP_STREAM", "samples": 3, "parallel": 4})
    s = in_test(cluster, namespace, "par")
    env = {e.name: e.value for e in pod(cluster, namespace, s["clientPod"]).spec.containers[0].env}
    assert env["NETPERF_STREAMS"] == "4"
    text = fixture("tcp_stream_parallel")
    finish_client(cluster, namespace, s["clientPod"], text)
    s = phase_is(cluster, namespace, "par", "Done")
    per_run = [m * 1e6 for m in mbits(text)]
    sums = [sum(per_run[i * 4 : i * 4 + 4]) for i in range(3)]
    assert s["throughputBitsPerSec"]["samples"] == pytest.approx(sums)
    assert s["speedBitsPerSec"] == pytest.approx(statistics.fmean(sums))
    assert [st_["samples"] for st_ in s["streams"]] == [pytest.approx(per_run[j::4]) for j in range(4)]
    assert "4 parallel streams" in {c["type"]: c for c in s["conditions"]}["Complete"]["message"]


def test_default_placement_puts_the_client_on_another_node(cluster, namespace, operator):
    create(cluster, namespace, "apart", {})
    s = in_test(cluster, namespace, "apart")
    assert (
        pod(cluster, namespace, s["serverPod"]).spec.node_name
        != pod(cluster, namespace, s["clientPod"]).spec.node_name
    )
    create(cluster, namespace, "together", {"placement": "SameNode"})
    s = in_test(cluster, namespace, "together")
    assert (
        pod(cluster, namespace, s["serverPod"]).spec.node_name
        == pod(cluster, namespace, s["clientPod"]).spec.node_name
    )


@pytest.mark.parametrize(
    "case",
    [
        (fixture("no_server"), 255, "ClientFailed", "are you sure there is a netserver listening"),
        ("SAMPLE=0\nEXIT=0\nTHROUGHPUT=0.00\n", 0, "InvalidResult", "THROUGHPUT=0.00"),
    ],
    ids=["netperf-failed", "unparseable"],
)
def test_client_failures_end_in_error_with_the_raw_output(cluster, namespace, operator, case):
    message, exit_code, reason, fragment = case
    create(cluster, namespace, "bad", {"samples": 1})
    s = in_test(cluster, namespace, "bad")
    finish_client(cluster, namespace, s["clientPod"], message, exit_code)
    s = phase_is(cluster, namespace, "bad", "Error")
    assert s["reason"] == reason and fragment in s["message"]
    assert {c["type"]: c for c in s["conditions"]}["Degraded"]["status"] == "True"
    no_pods_left(cluster, namespace)
    wait_for(lambda: "TestFailed" in reasons(cluster, namespace, "bad"), 30, "TestFailed Event")


@pytest.mark.parametrize(
    "case",
    [
        ({"serverNode": "no-such-node"}, "Unschedulable", "NodeAffinity"),
        ({"image": UNPULLABLE}, "ServerNotReady", "ErrImagePull"),
        ({}, "ClientTimeout", "NetworkPolicy"),
    ],
    ids=["unschedulable-node", "server-never-ready", "client-never-finishes"],
)
def test_timeouts_end_in_error_with_a_clear_reason_and_no_pods(cluster, namespace, operator, case):
    spec, reason, fragment = case
    create(cluster, namespace, "slow", {**spec, "timeoutSeconds": 6, "samples": 1, "duration": 1})
    s = phase_is(cluster, namespace, "slow", "Error", timeout=60)
    assert s["reason"] == reason, s
    assert fragment in s["message"]
    no_pods_left(cluster, namespace)


def test_operator_killed_mid_test_continues_the_same_run(cluster, namespace, operator):
    create(cluster, namespace, "r", {"samples": 3})
    s = in_test(cluster, namespace, "r")
    uids = {p.metadata.name: p.metadata.uid for p in pods(cluster, namespace)}
    assert set(uids) == {s["serverPod"], s["clientPod"]}
    operator.kill()
    finish_client(cluster, namespace, s["clientPod"], fixture("tcp_stream"))  # finishes while it is down
    operator.start()
    done = phase_is(cluster, namespace, "r", "Done")
    assert done["startedAt"] == s["startedAt"] and done["speedBitsPerSec"] > 0
    # The API server's record, not Events: an Event still queued in a killed operator is lost.
    assert audit.created(cluster, namespace, "pods") == [s["serverPod"], s["clientPod"]]


def test_operator_killed_before_the_server_is_up_creates_no_duplicates(cluster, namespace, operator):
    operator.kill()
    create(cluster, namespace, "k", {"samples": 1})
    operator.start()
    s = in_test(cluster, namespace, "k")
    operator.kill()
    operator.start()
    finish_client(cluster, namespace, s["clientPod"], fixture("tcp_stream").split("SAMPLE=1")[0])
    phase_is(cluster, namespace, "k", "Done")
    # The API server's record, not Events: an Event still queued in a killed operator is lost.
    assert audit.created(cluster, namespace, "pods") == [s["serverPod"], s["clientPod"]]


def test_spec_change_reruns_and_a_finished_test_is_left_alone(cluster, namespace, operator):
    create(cluster, namespace, "again", {"samples": 1})
    s = in_test(cluster, namespace, "again")
    finish_client(cluster, namespace, s["clientPod"], fixture("tcp_stream").split("SAMPLE=1")[0])
    first = phase_is(cluster, namespace, "again", "Done")
    no_pods_left(cluster, namespace)

    before = operator.metric("controller_runtime_reconcile_total", controller="netperf", result="success")
    touched = co(cluster).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "again", {"metadata": {"labels": {"touched": "yes"}}}
    )
    wait_for(
        lambda: (
            operator.metric("controller_runtime_reconcile_total", controller="netperf", result="success")
            > before
        ),
        30,
        "a pass after the touch",
    )
    assert (
        get(cluster, namespace, "again")["metadata"]["resourceVersion"]
        == touched["metadata"]["resourceVersion"]
    )
    assert not pods(cluster, namespace)

    co(cluster).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "again", {"spec": {"samples": 3}}
    )
    s = in_test(cluster, namespace, "again")
    assert s["observedGeneration"] == 2 and s["clientPod"] == "again-client-2"
    assert "speedBitsPerSec" not in s  # the old result is cleared with the new run
    assert "netperf_throughput_bytes_per_second" not in {
        line.partition("{")[0] for line in operator.metrics().splitlines() if 'name="again"' in line
    }  # and its series
    finish_client(cluster, namespace, s["clientPod"], fixture("tcp_stream"))
    second = phase_is(cluster, namespace, "again", "Done")
    assert second["observedGeneration"] == 2 and second["startedAt"] >= first["startedAt"]
    assert len(second["throughputBitsPerSec"]["samples"]) == 3


def test_deleting_the_netperf_garbage_collects_its_pods(cluster, namespace, operator):
    create(cluster, namespace, "gc", {})
    in_test(cluster, namespace, "gc")
    co(cluster).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "gc")
    wait_for(lambda: not pods(cluster, namespace), 120, "pods garbage-collected")


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ({"testType": "SCTP_STREAM"}, ["spec.testType", "Unsupported value"]),
        ({"samples": 11}, ["spec.samples", "less than or equal to 10"]),
        ({"duration": 0}, ["spec.duration", "greater than or equal to 1"]),
        ({"serverNode": "Bad Node"}, ["spec.serverNode", "should match"]),
        ({"placement": "Anywhere"}, ["spec.placement", "Unsupported value"]),
        ({"parallel": 9}, ["spec.parallel", "less than or equal to 8"]),
        (
            {"testType": "TCP_RR", "parallel": 2},
            ["spec.parallel", "needs testType TCP_STREAM or UDP_STREAM"],  # ">" is escaped in the JSON body
        ),
        ({"parallel": 4, "samples": 10}, ["spec.parallel", "samples x parallel must be at most 24"]),
    ],
)
def test_invalid_specs_are_rejected_with_the_field(cluster, namespace, spec, fragments):
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "bad", spec)
    assert err.value.status == 422
    for fragment in fragments:
        assert fragment in err.value.body


def test_pods_are_admitted_under_the_restricted_pod_security_standard(cluster, namespace):
    core = client.CoreV1Api(cluster.api)
    core.patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    owner = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Netperf",
        "metadata": {"name": "psa", "namespace": namespace, "uid": "0d6c2e54-0000-4000-8000-000000000001"},
    }
    for manifest in (desired.server_pod(owner, {}), desired.client_pod(owner, {}, "10.0.0.1")):
        core.create_namespaced_pod(namespace, manifest, dry_run="All")  # raises 403 when PSA forbids it
    # The check bites: a root container is refused in the same namespace.
    root = desired.server_pod(owner, {})
    root["spec"]["securityContext"] = {"runAsUser": 0}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(namespace, root, dry_run="All")
    assert err.value.status == 403 and "restricted" in err.value.body


def test_a_strangers_pod_with_the_server_name_is_a_conflict_not_a_takeover(cluster, namespace, operator):
    core = client.CoreV1Api(cluster.api)
    stranger = {
        "metadata": {"name": "taken-server-1"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "kwok-node-2"},
    }
    core.create_namespaced_pod(namespace, stranger)
    create(cluster, namespace, "taken", {})
    s = phase_is(cluster, namespace, "taken", "Error")
    assert s["reason"] == "PodConflict" and "taken-server-1" in s["message"]
    assert core.read_namespaced_pod("taken-server-1", namespace).metadata.owner_references is None


def _delete(cluster: Cluster, namespace: str, name: str, propagation: str = "Background") -> None:
    co(cluster).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, body={"propagationPolicy": propagation}
    )

    def gone() -> bool:
        try:
            get(cluster, namespace, name)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, 60, f"{name} deleted")


@pytest.mark.parametrize("propagation", ["Orphan", "Background"])
def test_a_recreated_netperf_never_shows_its_predecessors_result(cluster, namespace, operator, propagation):
    """Delete and re-create under the same name while the old client pod, finished with the old
    result in its termination message, still holds the run's pod name: the new object's result
    is its own run's, never the old pod's.

    A finalizer holds the old client pod in deletion as long as the test needs (a kubelet slow to
    confirm a deletion does the same for a while). Orphan (``--cascade=orphan``): the operator
    adopts and deletes the orphan, and must then wait for the name, not take the dying pod for
    its own run's client. Background (``kubectl delete``): the garbage collector deletes it, and
    it stays the old object's until it is gone."""
    old_text = fixture("tcp_stream").split("SAMPLE=1")[0]  # sample 0 of each capture
    new_text = fixture("udp_stream").split("SAMPLE=1")[0]
    create(cluster, namespace, "same", {"samples": 1})
    first = get(cluster, namespace, "same")
    s = in_test(cluster, namespace, "same")
    operator.kill()
    finish_client(cluster, namespace, s["clientPod"], old_text)
    wait_for(
        lambda: pod(cluster, namespace, s["clientPod"]).status.phase == "Succeeded", 60, "old client done"
    )
    core = client.CoreV1Api(cluster.api)
    core.patch_namespaced_pod(s["clientPod"], namespace, {"metadata": {"finalizers": [HOLD]}})
    _delete(cluster, namespace, "same", propagation)
    create(cluster, namespace, "same", {"samples": 1, "testType": "UDP_STREAM"})
    second = get(cluster, namespace, "same")
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    operator.start()

    def new_client_running() -> bool:
        p = pod(cluster, namespace, "same-client-1")
        refs = p.metadata.owner_references or []
        return any(r.uid == second["metadata"]["uid"] for r in refs) and p.status.phase == "Running"

    try:
        # The operator adopts the orphaned client pod, deletes it, and finds it still holding the
        # name when it creates its own client: it must wait (WaitingForPodName), not use it.
        # The Event is posted in the background: the status saying where the run is may follow it.
        wait_for(
            lambda: (
                st(cluster, namespace, "same").get("status") in ("Done", "Error")
                or (
                    "WaitingForPodName" in reasons(cluster, namespace, "same")
                    and st(cluster, namespace, "same").get("status") in ("Server", "Test")
                )
            ),
            120,
            "the new run at the held client pod name",
        )
        early = st(cluster, namespace, "same")
        # The old pod's output is TCP: taken for this UDP run's, it ends in Error (InvalidResult);
        # with the same test type it would be Done with the predecessor's figures.
        assert early.get("status") in ("Server", "Test"), early
        held = pod(cluster, namespace, s["clientPod"])
        assert held.metadata.deletion_timestamp is not None
        owner = first if propagation == "Background" else second  # else adopted
        assert held.metadata.owner_references[0].uid == owner["metadata"]["uid"]
    finally:
        core.patch_namespaced_pod(s["clientPod"], namespace, {"metadata": {"finalizers": None}})
    wait_for(lambda: _quietly(new_client_running), 120, "the new run's own client pod")
    finish_client(cluster, namespace, "same-client-1", new_text)
    done = phase_is(cluster, namespace, "same", "Done", "Error")
    assert done["status"] == "Done", done
    assert done["speedBitsPerSec"] == pytest.approx(mbits(new_text)[0] * 1e6)
    assert "retransmits" not in done  # UDP: the old TCP run's figures are nowhere
    no_pods_left(cluster, namespace)


def _quietly(probe):  # a pod that does not exist yet is a "not yet"
    try:
        return probe()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
