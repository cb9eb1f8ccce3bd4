"""The network paths of a Netperf (spec.path, spec.compare): pods and Service per path, the
client's fixed data ports, the Pod Security decision, and a compare run pass by pass."""

from __future__ import annotations

import asyncio
import datetime
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from operators.netperf import desired, schema, status
from operators.netperf.description import DESCRIPTION
from operators.netperf.parse import parse
from operators.netperf.reconciler import NetperfReconciler
from shared.api import ownership, podsecurity
from shared.api.clock import Clock
from shared.client.kube import namespaced
from tests.framework.fakekube import FakeKube, fail
from tests.framework.netperfs import fixture
from tests.framework.passes import OnePass

OWNER = {
    "apiVersion": "app.example.com/v1alpha1",
    "kind": "Netperf",
    "metadata": {"name": "np", "namespace": "ns", "uid": "u1", "generation": 3},
}
NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}


def test_the_pod_path_makes_the_same_pods_as_before_paths_existed():
    for spec in ({}, {"path": "pod"}):
        server, client = desired.server_pod(OWNER, spec), desired.client_pod(OWNER, spec, "10.1.2.3")
        assert server == desired.server_pod(OWNER, {}) and client == desired.client_pod(OWNER, {}, "10.1.2.3")
        assert server["spec"]["containers"][0]["ports"] == [
            {"name": "control", "containerPort": 12865, "protocol": "TCP"}
        ]
        assert "hostNetwork" not in server["spec"] and "hostNetwork" not in client["spec"]
        # Every path's client retries its first connection: it is made before netserver is Ready.
        assert set(_env(client)) == {"NETPERF_RESULT", "NETPERF_STREAMS", "NETPERF_CONNECT_RETRIES"}


@pytest.mark.parametrize(
    ("test_type", "protocol"),
    [("TCP_STREAM", "TCP"), ("TCP_CRR", "TCP"), ("UDP_RR", "UDP"), ("UDP_STREAM", "UDP")],
)
def test_the_service_path_fronts_this_runs_server_with_the_control_and_data_ports(test_type, protocol):
    parallel = 3 if test_type.endswith("STREAM") else 1
    spec = {"path": "service", "testType": test_type, "parallel": parallel}
    svc = desired.service(OWNER, spec)
    server = desired.server_pod(OWNER, spec)
    assert svc["metadata"]["name"] == "np-server-3" and svc["spec"]["type"] == "ClusterIP"
    assert ownership.is_controlled_by(svc, "u1")
    assert svc["spec"]["selector"].items() <= server["metadata"]["labels"].items()
    assert svc["spec"]["selector"][desired.UID_LABEL] == "u1"  # never a predecessor's server
    ports = [(p["name"], p["port"], p["targetPort"], p["protocol"]) for p in svc["spec"]["ports"]]
    assert ports == [
        ("control", 12865, 12865, "TCP"),
        *((f"data-{j}", 12866 + j, 12866 + j, protocol) for j in range(parallel)),
    ]
    assert [p["containerPort"] for p in server["spec"]["containers"][0]["ports"]] == [p[1] for p in ports]
    assert "hostNetwork" not in server["spec"]
    client = desired.client_pod(OWNER, spec, "10.96.0.10")
    assert client["spec"]["containers"][0]["command"][5:] == desired.netperf_argv(spec, "10.96.0.10")
    env = _env(client)
    assert env["NETPERF_DATA_PORT"] == "12866" and int(env["NETPERF_CONNECT_RETRIES"]) > 0


def test_the_service_selector_and_labels_pass_the_api_servers_label_rules():
    svc = desired.service(OWNER, {"path": "service"})
    assert svc["metadata"]["labels"][ownership.COMPONENT] == "service"
    assert svc["spec"]["selector"][ownership.COMPONENT] == "server"


@pytest.mark.parametrize("name", ["np", "a" * 40, "b" * 63, "x-" * 31 + "y"])
def test_service_names_are_dns_1035_labels_whatever_the_netperf_name(name):
    for run in ("1", "12-service", "r123-service"):
        svc = desired.service_name(name, run)
        assert len(svc) <= 63 and svc[0].isalpha() and svc[-1].isalnum() and "--" not in svc[-12:]
        assert svc.endswith(run)
    assert desired.service_name("b" * 63, "1") != desired.service_name("b" * 62 + "c", "1")


def test_the_host_path_runs_both_pods_on_the_nodes_network_with_host_ports():
    spec = {"path": "host", "testType": "UDP_STREAM", "parallel": 2}
    server, client = desired.server_pod(OWNER, spec), desired.client_pod(OWNER, spec, "192.168.0.4")
    for pod in (server, client):
        assert pod["spec"]["hostNetwork"] is True
        assert pod["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True  # otherwise still restricted
    ports = [
        (p["containerPort"], p["hostPort"], p["protocol"]) for p in server["spec"]["containers"][0]["ports"]
    ]
    assert ports == [(12865, 12865, "TCP"), (12866, 12866, "UDP"), (12867, 12867, "UDP")]
    assert "ports" not in client["spec"]["containers"][0]  # two hostNetwork pods fit one node
    env = _env(client)
    assert env["NETPERF_DATA_PORT"] == "12866" and int(env["NETPERF_CONNECT_RETRIES"]) > 0


def _fake_netperf(tmp_path: Path, body: str) -> Path:
    fake = tmp_path / "netperf"
    fake.write_text("#!/bin/sh\n" + body)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return fake


def _client(tmp_path: Path, fake: Path, samples: int, **env: str) -> tuple[int, str]:
    out = tmp_path / "result"
    argv = desired.netperf_argv({}, "10.0.0.1")
    result = subprocess.run(
        ["sh", "-c", desired.CLIENT_SCRIPT, "netperf-samples", str(samples), str(fake), *argv[1:]],
        # TMPDIR: each stream's output file (the pod's /tmp) stays in this test's directory.
        env={**os.environ, "NETPERF_RESULT": str(out), "TMPDIR": str(tmp_path), **env},
        cwd=tmp_path,
        check=False,
        timeout=60,
    )
    return result.returncode, out.read_text()


@pytest.fixture
def tmp_dir(tmp_path):
    return tmp_path


def test_each_stream_pins_its_own_data_port_after_the_test_options(tmp_dir):
    fake = _fake_netperf(tmp_dir, 'echo "THROUGHPUT=1.0"; echo "ARGS=$*"\n')
    rc, text = _client(tmp_dir, fake, 1, NETPERF_STREAMS="2", NETPERF_DATA_PORT="12866")
    assert rc == 0
    args = sorted(line for line in text.splitlines() if line.startswith("ARGS="))
    assert [a.split(" -- ")[1].split()[-2:] for a in args] == [["-P", ",12866"], ["-P", ",12867"]]
    rc, text = _client(tmp_dir, fake, 1)
    assert rc == 0 and "-P ," not in text.split(" -- ")[1]  # the pod path: netserver picks


def test_a_refused_control_connection_is_retried_on_the_first_sample_only(tmp_dir):
    tries = tmp_dir / "tries"
    fake = _fake_netperf(
        tmp_dir,
        f'echo x >> "{tries}"\n'
        f'if [ "$(wc -l < "{tries}")" -lt 2 ]; then\n'
        '  echo "establish control: are you sure there is a netserver listening on 10.0.0.1"; exit 255\n'
        "fi\n"
        'echo "THROUGHPUT=1.0"\n',
    )
    rc, text = _client(tmp_dir, fake, 2, NETPERF_CONNECT_RETRIES="3")
    assert rc == 0 and "establish control" not in text  # the refused attempt's output is dropped
    assert text.count("SAMPLE=") == 2 and text.count("EXIT=0") == 2
    tries.unlink()
    rc, text = _client(tmp_dir, fake, 2)  # no retries asked for: the failure is the result
    assert rc == 255 and "establish control" in text


@pytest.mark.parametrize(
    ("labels", "forbidden"),
    [
        ({}, None),
        ({podsecurity.ENFORCE_LABEL: "privileged"}, None),
        ({podsecurity.ENFORCE_LABEL: "baseline"}, "baseline"),
        ({podsecurity.ENFORCE_LABEL: "restricted"}, "restricted"),
        ({"pod-security.kubernetes.io/warn": "restricted"}, None),  # warn and audit never refuse
    ],
)
def test_pod_security_levels_that_refuse_host_network(labels, forbidden):
    assert podsecurity.forbids_host_network(labels) == forbidden


def test_paths_of_a_spec():
    assert schema.paths({}) == ("pod",)
    assert schema.paths({"path": "host"}) == ("host",)
    assert schema.paths({"compare": ["service", "pod"]}) == ("service", "pod")
    assert schema.requests_service({"compare": ["pod", "service"]}) and not schema.requests_service({})


def test_compare_status_has_each_paths_figures_and_their_ratios():
    pod = parse(fixture("tcp_stream"), "TCP_STREAM", 3)
    entries = [status.path_entry("pod", pod, NOW), status.path_entry("host", pod, NOW)]
    assert entries[0]["path"] == "pod" and entries[0]["unit"] == "bitsPerSec"
    assert entries[0]["mean"] == pytest.approx(pod.throughput_bits.mean)
    assert entries[0]["headline"] == status.headline(pod) and len(entries[0]["samples"]) == 3
    assert status.ratios(entries) == {"podToHost": 1.0}
    half = {**entries[1], "path": "service", "mean": entries[0]["mean"] / 2}
    assert status.ratios([entries[0], half]) == {"serviceToPod": 0.5}
    assert status.ratios([entries[0], {"path": "host", "result": "Error"}]) is None


# --- a compare run, pass by pass, on the fake API server ---------------------------------------

NS = "ns"
NP = "app.example.com/v1alpha1"
NP_PATH = namespaced(NS, "netperfs", "np", NP)


class Pass(OnePass):
    def __init__(self, kube: FakeKube) -> None:
        super().__init__(
            DESCRIPTION, NetperfReconciler, kube, NP_PATH, Clock(NOW - datetime.datetime.now(datetime.UTC))
        )
        assert isinstance(self.reconciler, NetperfReconciler)
        self.np = self.reconciler

    def kubelet(self, name: str, st: dict[str, Any]) -> None:
        asyncio.run(self.kube.merge_patch(namespaced(NS, "pods", name) + "/status", {"status": st}))
        self.np.pods.observe("MODIFIED", self.kube.object(namespaced(NS, "pods", name)))

    def ready(self, name: str, ip: str = "10.0.0.5") -> None:
        self.kubelet(
            name, {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]}
        )

    def finish(self, name: str, text: str) -> None:
        terminated = {"exitCode": 0, "message": text}
        self.kubelet(
            name,
            {
                "phase": "Succeeded",
                "containerStatuses": [{"name": "netperf", "state": {"terminated": terminated}}],
            },
        )

    def cluster_ip(self, name: str, ip: str) -> None:
        """The API server's allocator (the fake has none) gives the Service its ClusterIP."""
        path = namespaced(NS, "services", name)
        asyncio.run(self.kube.merge_patch(path, {"spec": {"clusterIP": ip}}))
        self.np.services.observe("MODIFIED", self.kube.object(path))


def netperf(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": NP, "kind": "Netperf", "metadata": {"name": "np", "namespace": NS}, "spec": spec}


def test_the_service_path_creates_its_service_before_the_server_and_targets_its_cluster_ip():
    kube = FakeKube(netperf({"path": "service", "samples": 1}))
    p = Pass(kube)
    p.run()
    assert kube.keys() == [
        ("patch", "netperfs", NS, "np", "status"),
        ("create", "services", NS, "np-server-1", ""),
        ("create", "pods", NS, "np-server-1", ""),
        ("patch", "netperfs", NS, "np", "status"),
    ]
    p.cluster_ip("np-server-1", "10.96.0.10")
    p.ready("np-server-1")
    p.run()
    client = kube.object(namespaced(NS, "pods", "np-client-1"))
    assert client["spec"]["containers"][0]["command"][5:] == desired.netperf_argv({}, "10.96.0.10")
    st = kube.object(NP_PATH)["status"]
    assert (st["status"], st["serviceIP"], st["serverIP"], st["path"]) == (
        "Test",
        "10.96.0.10",
        "10.0.0.5",
        "service",
    )
    p.finish("np-client-1", fixture("tcp_stream").split("SAMPLE=1")[0])
    p.run()
    actions = kube.keys()
    assert ("delete", "services", NS, "np-server-1", "") in actions
    assert kube.object(NP_PATH)["status"]["status"] == "Done" and kube.objects("services", NS) == []


def test_a_strangers_service_with_our_name_is_left_alone_and_the_run_fails():
    kube = FakeKube(netperf({"path": "service"}))
    stranger = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "np-server-1", "namespace": NS},
        "spec": {"ports": [{"port": 80}]},
    }
    kube.add(stranger)
    p = Pass(kube)
    assert p.run() is None
    st = kube.object(NP_PATH)["status"]
    assert (st["status"], st["reason"]) == ("Error", "ServiceConflict")
    assert {c["type"]: c["status"] for c in st["conditions"]}["Degraded"] == "True"
    assert kube.object(namespaced(NS, "services", "np-server-1"))["spec"] == {"ports": [{"port": 80}]}
    actions = kube.keys()
    assert not [k for k in actions if k[1] == "services" and k[0] != "create"]
    assert kube.objects("pods", NS) == []


@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_a_namespace_forbidding_host_network_ends_a_host_run_with_the_reason(level):
    kube = FakeKube(netperf({"path": "host"}))
    kube.add(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NS, "labels": {podsecurity.ENFORCE_LABEL: level}},
        }
    )
    p = Pass(kube)
    assert p.run() is None
    st = kube.object(NP_PATH)["status"]
    assert (st["status"], st["reason"]) == ("Error", "HostNetworkForbidden")
    assert level in st["message"] and podsecurity.ENFORCE_LABEL in st["message"]
    assert kube.objects("pods", NS) == []


def test_a_pod_refused_by_pod_security_ends_the_run_instead_of_retrying():
    kube = FakeKube(netperf({"path": "host"}))
    kube.prepend_reactor(
        "create",
        "pods",
        fail(
            403,
            message='pods "np-server-1" is forbidden: violates PodSecurity "baseline:latest": hostNetwork',
        ),
    )
    p = Pass(kube)
    assert p.run() is None
    st = kube.object(NP_PATH)["status"]
    assert (st["status"], st["reason"]) == ("Error", "PodRejected") and "violates PodSecurity" in st[
        "message"
    ]


def test_a_compare_run_measures_each_path_once_in_order_and_reports_the_ratio():
    kube = FakeKube(netperf({"compare": ["pod", "host"], "samples": 1}))
    p = Pass(kube)
    text = fixture("tcp_stream").split("SAMPLE=1")[0]
    p.run()
    assert [o["metadata"]["name"] for o in kube.objects("pods", NS)] == ["np-server-1-pod"]
    assert "hostNetwork" not in kube.objects("pods", NS)[0]["spec"]
    p.ready("np-server-1-pod")
    p.run()
    p.finish("np-client-1-pod", text)
    p.run()
    st = kube.object(NP_PATH)["status"]
    assert (st["status"], st["path"], st["serverPod"]) == ("Initial", "host", "np-server-1-host")
    assert [e["path"] for e in st["paths"]] == ["pod"] and st["speedBitsPerSec"] > 0  # the first path's
    assert kube.objects("pods", NS) == []  # the pod path's pods went before the host path starts
    p.run()
    [server] = kube.objects("pods", NS)
    assert server["metadata"]["name"] == "np-server-1-host" and server["spec"]["hostNetwork"] is True
    p.ready("np-server-1-host", "192.168.0.4")
    p.run()
    client = kube.object(namespaced(NS, "pods", "np-client-1-host"))
    assert client["spec"]["hostNetwork"] is True
    p.finish("np-client-1-host", text)
    p.run()
    st = kube.object(NP_PATH)["status"]
    assert st["status"] == "Done" and [e["path"] for e in st["paths"]] == ["pod", "host"]
    assert st["ratios"] == {"podToHost": 1.0}
    assert st["headline"] == st["paths"][0]["headline"]
    actions = kube.keys()
    created = [k[3] for k in actions if k[:2] == ("create", "pods")]
    assert created == []  # nothing started after the last path
    assert kube.objects("pods", NS) == []


def test_a_failing_path_ends_the_compare_run_with_the_path_in_the_message():
    kube = FakeKube(netperf({"compare": ["pod", "service"], "samples": 1}))
    p = Pass(kube)
    p.run()
    p.ready("np-server-1-pod")
    p.run()
    p.kubelet(
        "np-client-1-pod",
        {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "netperf",
                    "state": {"terminated": {"exitCode": 255, "message": fixture("no_server")}},
                }
            ],
        },
    )
    p.run()
    st = kube.object(NP_PATH)["status"]
    assert (st["status"], st["reason"]) == ("Error", "ClientFailed") and st["message"].startswith(
        "path pod: "
    )
    assert kube.objects("services", NS) == []  # the service path never started
