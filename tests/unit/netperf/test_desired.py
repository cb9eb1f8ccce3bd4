"""Pods of a Netperf run: names, command line, placement, security."""

import datetime
from pathlib import Path

import pytest

from operators.netperf import desired, schema, status
from operators.netperf.parse import parse
from operators.netperf.schema import CRD, DEFAULT_IMAGE
from shared.api import conditions, ownership
from shared.api.validation import SchemaValidator

OWNER = {
    "apiVersion": "app.example.com/v1alpha1",
    "kind": "Netperf",
    "metadata": {"name": "np", "namespace": "ns", "uid": "u1", "generation": 3},
}
NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


def test_pod_names_are_per_generation():
    assert desired.pod_names("np", 3) == desired.PodNames("np-server-3", "np-client-3")
    assert desired.pod_names("np", 4).server != desired.pod_names("np", 3).server


def test_netperf_argv_asks_for_every_key_of_the_test_type():
    argv = desired.netperf_argv({"testType": "TCP_RR", "duration": 7, "messageSize": 64}, "10.0.0.5")
    assert argv[:7] == ["netperf", "-P", "0", "-H", "10.0.0.5", "-p", "12865"]
    assert argv[argv.index("-l") + 1] == "7" and argv[argv.index("-t") + 1] == "TCP_RR"
    assert "MEAN_LATENCY" in argv[argv.index("-k") + 1]
    assert argv[-2:] == ["-r", "64,64"]
    assert desired.netperf_argv({"messageSize": 1400}, "h")[-2:] == ["-m", "1400"]
    assert "-m" not in desired.netperf_argv({}, "h") and "TCP_STREAM" in desired.netperf_argv({}, "h")


def test_defaults_match_the_schema_and_timeout_covers_the_samples():
    validator = SchemaValidator(CRD.openapi_schema())
    assert validator.errors(desired.effective({})) == []
    assert desired.effective({})["image"] == DEFAULT_IMAGE
    assert desired.timeout_seconds({"samples": 3, "duration": 10}) == 60 + 3 * 25
    assert desired.timeout_seconds({"timeoutSeconds": 9}) == 9


def test_server_pod_is_owned_restricted_and_probed():
    pod = desired.server_pod(OWNER, {"serverNode": "node-a"})
    assert pod["metadata"]["name"] == "np-server-3"
    assert ownership.is_controlled_by(pod, "u1")
    labels = pod["metadata"]["labels"]
    assert labels[ownership.COMPONENT] == "server" and labels[desired.RUN_LABEL] == "3"
    spec = pod["spec"]
    (c,) = spec["containers"]
    assert c["command"] == ["netserver", "-D", "-p", "12865"]
    assert c["readinessProbe"]["tcpSocket"]["port"] == 12865
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]


def test_client_pod_runs_the_sample_loop_and_writes_the_termination_message():
    pod = desired.client_pod(OWNER, {"samples": 4}, "10.1.2.3")
    (c,) = pod["spec"]["containers"]
    assert c["command"][:2] == ["sh", "-c"] and c["command"][2] == desired.CLIENT_SCRIPT
    assert c["command"][3:5] == ["netperf-samples", "4"]
    assert c["command"][5:] == desired.netperf_argv({"samples": 4}, "10.1.2.3")
    assert {"name": "NETPERF_RESULT", "value": c["terminationMessagePath"]} in c["env"]
    assert {"name": "NETPERF_STREAMS", "value": "1"} in c["env"]
    assert c["terminationMessagePolicy"] == "File"
    parallel = desired.client_pod(OWNER, {"parallel": 4}, "10.1.2.3")["spec"]["containers"][0]
    assert {"name": "NETPERF_STREAMS", "value": "4"} in parallel["env"]
    assert parallel["command"] == [*c["command"][:4], "3", *c["command"][5:]]


@pytest.mark.parametrize(
    ("spec", "errors"),
    [
        ({"testType": "TCP_STREAM", "parallel": 8, "samples": 3}, []),
        ({"testType": "UDP_RR"}, []),
        ({"testType": "TCP_CRR", "parallel": 2}, ["spec.parallel: parallel > 1 needs testType TCP_STREAM"]),
        ({"parallel": 4, "samples": 10}, ["spec.parallel: samples x parallel must be at most 24"]),
        ({"path": "host", "serverNode": "a", "clientNode": "a"}, []),  # two pods, one node: fine
        ({"compare": ["pod", "host"]}, []),
        ({"path": "pod", "compare": ["pod", "host"]}, ["spec.compare: path and compare are exclusive"]),
        ({"compare": ["pod", "pod"]}, ["spec.compare: compare: each path at most once"]),
    ],
)
def test_impossible_combinations_are_field_errors_in_the_controller_too(spec, errors):
    """The CEL rules' Python twins: an object that reached the controller without them is Degraded."""
    found = [str(e) for e in schema.combination_errors(spec)]
    assert len(found) == len(errors) and all(f.startswith(e) for f, e in zip(found, errors, strict=True))
    rules = [r["rule"] for r in CRD.openapi_schema()["properties"]["spec"]["x-kubernetes-validations"]]
    assert len(rules) == 9 and all(r.startswith("(oldSelf.hasValue()") for r in rules)  # ratcheting


@pytest.mark.parametrize(
    ("placement", "kind"), [("DifferentNodes", "podAntiAffinity"), ("SameNode", "podAffinity")]
)
def test_client_placement_relative_to_this_runs_server(placement, kind):
    pod = desired.client_pod(OWNER, {"placement": placement}, "10.1.2.3")
    (term,) = pod["spec"]["affinity"][kind]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    selector = term["labelSelector"]["matchLabels"]
    server_labels = desired.server_pod(OWNER, {})["metadata"]["labels"]
    assert selector.items() <= server_labels.items()


def test_named_client_node_wins_over_placement():
    pod = desired.client_pod(OWNER, {"clientNode": "node-b", "placement": "SameNode"}, "10.1.2.3")
    assert set(pod["spec"]["affinity"]) == {"nodeAffinity"}


def pod_body(**status_fields):
    pod = desired.client_pod(OWNER, {}, "10.1.2.3")
    pod["status"] = status_fields
    return pod


def test_pod_view_reads_termination_scheduling_and_waiting():
    done = desired.pod_view(
        pod_body(
            phase="Succeeded",
            podIP="10.0.0.7",
            containerStatuses=[{"state": {"terminated": {"exitCode": 0, "message": "SAMPLE=0"}}}],
        )
    )
    assert (done.finished, done.exit_code, done.message, done.component, done.run) == (
        True,
        0,
        "SAMPLE=0",
        "client",
        "3",
    )
    pending = desired.pod_view(
        pod_body(
            phase="Pending",
            conditions=[
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
            ],
        )
    )
    assert pending.unschedulable == "0/3 nodes" and not pending.ready and pending.ip is None
    pulling = desired.pod_view(
        pod_body(
            phase="Pending",
            containerStatuses=[{"state": {"waiting": {"reason": "ErrImagePull", "message": "nope"}}}],
        )
    )
    assert pulling.waiting == "ErrImagePull: nope"


def test_a_run_is_its_owners_uid_and_generation_not_its_pod_names():
    view = desired.pod_view(pod_body(phase="Succeeded"))
    assert view.created_for == "u1" and desired.of_run(view, "u1", 3)
    assert not desired.of_run(view, "u1", 4)  # an older generation's pod
    # A re-created Netperf of the same name has the same pod names but another UID: the pod of
    # its predecessor's run (adopted, so controlled by it) is not its own.
    adopted = desired.pod_view(pod_body(phase="Succeeded"))
    assert not desired.of_run(adopted, "u2", 3)
    # Made before pods carried the UID label: counted by generation (an upgrade mid-run).
    legacy = pod_body(phase="Running")
    del legacy["metadata"]["labels"][desired.UID_LABEL]
    assert desired.of_run(desired.pod_view(legacy), "u2", 3)


def test_status_through_a_run():
    names = desired.pod_names("np", 3)
    old = {"status": "Done", "speedBitsPerSec": 5.0, "observedGeneration": 2, "conditions": []}
    initial = status.started(current=old, generation=3, names=names, now=NOW)
    assert initial["status"] == "Initial" and initial["speedBitsPerSec"] is None
    assert initial["observedGeneration"] == 3 and initial["startedAt"] == "2026-11-22T12:00:00Z"
    assert conditions.get(initial["conditions"], conditions.PROGRESSING)["status"] == "True"
    text = (Path(__file__).parent / "fixtures" / "tcp_stream.txt").read_text()
    done = status.done(current=initial, result=parse(text, "TCP_STREAM", 3), now=NOW)
    assert done["status"] == "Done" and done["speedBitsPerSec"] > 1e9
    assert done["throughputBitsPerSec"]["mean"] == done["speedBitsPerSec"]
    assert conditions.get(done["conditions"], status.COMPLETE)["status"] == "True"
    assert conditions.get(done["conditions"], conditions.PROGRESSING)["status"] == "False"
    assert conditions.get(done["conditions"], conditions.DEGRADED)["status"] == "False"
    failed = status.error(current=initial, reason="ClientTimeout", message="too slow", now=NOW)
    assert (failed["status"], failed["reason"], failed["message"]) == ("Error", "ClientTimeout", "too slow")
    degraded = conditions.get(failed["conditions"], conditions.DEGRADED)
    assert degraded["status"] == "True" and degraded["reason"] == "ClientTimeout"
