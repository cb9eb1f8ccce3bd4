"""A real worker node on the local control plane: pods that really run, and a clean host after.

Against the session's ``real_cluster`` (its own control plane, one real node: containerd,
kubelet, kube-proxy on this machine; root only, skipped otherwise with the reason). Pods use the
busybox image made from the host's static busybox (no registry, no image build). Every test makes
its own namespace and pods and polls with deadlines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from localcluster import cluster as localcluster
from localcluster import node as realnode
from localcluster import ociimage
from localcluster.binaries import Binaries, k8s_version
from tests.framework.namespaces import delete_namespace, fresh_namespace
from tests.framework.waits import wait_for

# Straight to pod and Service IPs, whatever proxy the environment names.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(scope="module")
def core(real_cluster: localcluster.LocalCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(real_cluster.kubeconfig)))


@pytest.fixture
def node(real_cluster: localcluster.LocalCluster) -> realnode.RealNode:
    assert real_cluster.node is not None
    return real_cluster.node


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = fresh_namespace(core, "rn")
    yield name
    delete_namespace(core, name)


def pod_manifest(
    name: str, command: list[str], labels: dict[str, str] | None = None, restart: str = "Always"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "nodeSelector": {realnode.REAL_NODE_LABEL: "true"},
            "restartPolicy": restart,
            # busybox as PID 1 ignores SIGTERM: don't make namespace deletion wait 30 s.
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": realnode.BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": command,
                }
            ],
        },
    }


def httpd(name: str, body: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    script = f"echo {body} > /www/index.html && exec httpd -f -p 8080 -h /www"
    return pod_manifest(name, ["sh", "-c", script], labels)


def sleeper(name: str) -> dict[str, Any]:
    return pod_manifest(name, ["sleep", "3600"])


def ready_pod(core: client.CoreV1Api, ns: str, name: str, timeout: float = 60) -> Any:
    def ready() -> Any:
        pod = core.read_namespaced_pod(name, ns)
        conds = {c.type: c.status for c in pod.status.conditions or []}
        return pod if conds.get("Ready") == "True" and pod.status.pod_ip else None

    return wait_for(ready, timeout, f"pod {ns}/{name} Ready with an IP")


def http_get(url: str) -> str:
    with DIRECT.open(url, timeout=5) as resp:
        return str(resp.read().decode())


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", *args],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# -- without the fixture ------------------------------------------------------------------------


def test_real_node_is_refused_without_root(monkeypatch, tmp_path):
    monkeypatch.setattr(realnode.os, "geteuid", lambda: 1000)
    assert "not running as root" in (realnode.unavailable_reason() or "")
    local = localcluster.LocalCluster(
        workdir=tmp_path, binaries=Binaries(tmp_path), real_node=True, keep_workdir=True
    )
    with pytest.raises(realnode.RealNodeUnavailableError, match="not running as root"):
        local.up()
    assert local.components == [], "nothing may start when the real node is refused"


def test_image_archives_are_deterministic(tmp_path):
    if not ociimage.busybox_is_static():
        pytest.skip(f"{ociimage.BUSYBOX} is not a static busybox")
    a = ociimage.busybox_image(tmp_path / "a.tar", "localcluster.dev/x:1", cmd=["httpd"])
    b = ociimage.busybox_image(tmp_path / "b.tar", "localcluster.dev/x:1", cmd=["httpd"])
    assert a.read_bytes() == b.read_bytes()


def test_state_diff_names_what_changed():
    before = {"links": {"eth0": {"kind": ""}}, "routes": ["a"], "sysctls": {"kernel.panic": "1"}}
    after = {"links": {"eth0": {"kind": ""}, "br0": {"kind": "bridge"}}, "routes": [], "sysctls": {}}
    diff = realnode.state_diff(before, after)
    assert any(d.startswith("links.br0") for d in diff)
    assert any(d.startswith("routes: missing ['a']") for d in diff)
    assert any(d.startswith("sysctls.kernel.panic") for d in diff)
    assert realnode.state_diff(before, before) == []


# -- against the real node ----------------------------------------------------------------------


def test_node_is_ready_with_its_addresses(core, node):
    n = core.read_node(node.name)
    conds = {c.type: c.status for c in n.status.conditions}
    assert conds["Ready"] == "True"
    addresses = {a.type: a.address for a in n.status.addresses}
    assert addresses == {"InternalIP": realnode.NODE_IP, "Hostname": node.name}
    assert n.metadata.labels[realnode.REAL_NODE_LABEL] == "true"
    assert n.status.node_info.kubelet_version == k8s_version()
    assert n.status.node_info.container_runtime_version.startswith("containerd://")


def test_httpd_pod_answers_on_pod_ip_and_cluster_ip(core, ns, real_cluster):
    body = f"hello-{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    core.create_namespaced_pod(ns, httpd("web", body, {"app": "web"}))
    core.create_namespaced_pod(ns, sleeper("client"))
    web = ready_pod(core, ns, "web")
    print(f"httpd pod Ready {time.monotonic() - t0:.1f}s after create")
    assert web.status.pod_ip.startswith(realnode.POD_CIDR.split(".0.0/")[0])

    # host -> pod IP
    assert http_get(f"http://{web.status.pod_ip}:8080/").strip() == body

    svc = core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    cluster_ip = svc.spec.cluster_ip
    # host -> ClusterIP (kube-proxy DNAT); polled: kube-proxy programs the rule asynchronously
    assert wait_for(lambda: http_get(f"http://{cluster_ip}/").strip(), 30, "ClusterIP from host") == body

    # another pod -> ClusterIP
    ready_pod(core, ns, "client")

    def from_pod() -> str:
        out = kubectl(
            real_cluster.kubeconfig,
            "-n",
            ns,
            "exec",
            "client",
            "--",
            "wget",
            "-q",
            "-O-",
            f"http://{cluster_ip}/",
        )
        return out.stdout.strip() if out.returncode == 0 else ""

    assert wait_for(from_pod, 30, "ClusterIP from another pod") == body


def test_in_cluster_config_reaches_api_server_via_kubernetes_service(core, ns):
    # What an in-cluster client does: $KUBERNETES_SERVICE_HOST/PORT and the mounted token.
    script = (
        "echo HOST=$KUBERNETES_SERVICE_HOST; "
        "T=$(cat /var/run/secrets/kubernetes.io/serviceaccount/token); "
        'wget -q -O- --header "Authorization: Bearer $T" --header "Content-Type: application/json" '
        '--post-data \'{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}\' '
        "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/apis/authentication.k8s.io/v1/selfsubjectreviews"
    )
    core.create_namespaced_pod(ns, pod_manifest("whoami", ["sh", "-c", script], restart="Never"))
    phase = wait_for(
        lambda: (
            core.read_namespaced_pod("whoami", ns).status.phase in ("Succeeded", "Failed")
            and core.read_namespaced_pod("whoami", ns).status.phase
        ),
        60,
        "whoami pod finished",
    )
    logs = core.read_namespaced_pod_log("whoami", ns)
    assert phase == "Succeeded", logs
    # The log joins stdout and stderr, whose lines may interleave in either order (busybox wget
    # notes on stderr that it does not validate TLS; seen before the echo once in a full run).
    lines = logs.splitlines()
    kubernetes_ip = core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    assert f"HOST={kubernetes_ip}" in lines, logs
    body = "\n".join(line for line in lines if not line.startswith(("HOST=", "wget:")))
    review = json.loads(body[body.index("{") :])
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:default"


def test_kubectl_logs_and_exec(core, ns, real_cluster):
    token = uuid.uuid4().hex
    core.create_namespaced_pod(ns, pod_manifest("talker", ["sh", "-c", f"echo {token}; exec sleep 3600"]))
    ready_pod(core, ns, "talker")
    kc = real_cluster.kubeconfig
    logs = wait_for(lambda: token in kubectl(kc, "-n", ns, "logs", "talker").stdout, 30, "kubectl logs")
    assert logs
    out = kubectl(kc, "-n", ns, "exec", "talker", "--", "sh", "-c", "echo $((6*7)) $(hostname)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["42", "talker"]


def test_killed_container_is_restarted(core, ns, node):
    body = f"again-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_pod(ns, httpd("victim", body))
    pod = ready_pod(core, ns, "victim")
    status = pod.status.container_statuses[0]
    os.kill(node.container_pid(status.container_id), signal.SIGKILL)

    def restarted() -> Any:
        p = core.read_namespaced_pod("victim", ns)
        s = p.status.container_statuses[0]
        return p if s.restart_count >= 1 and s.ready and s.container_id != status.container_id else None

    pod = wait_for(restarted, 60, "container restarted by kubelet and Ready")
    assert wait_for(lambda: http_get(f"http://{pod.status.pod_ip}:8080/").strip(), 30, "httpd again") == body


def serves_again_after_restart(
    core: client.CoreV1Api, ns: str, node: realnode.RealNode, name: str, old_container: str
) -> str:
    """After the node restarted: Ready, and kubelet recreated the pod (as after a reboot; its
    old status may linger a moment); what the pod's httpd answers."""
    conds = {c.type: c.status for c in core.read_node(node.name).status.conditions}
    assert conds["Ready"] == "True"

    def recreated() -> Any:
        p = core.read_namespaced_pod(name, ns)
        s = (p.status.container_statuses or [None])[0]
        return p if s and s.ready and s.container_id != old_container and p.status.pod_ip else None

    pod = wait_for(recreated, 90, f"{name} recreated and Ready")
    return wait_for(lambda: http_get(f"http://{pod.status.pod_ip}:8080/").strip(), 30, "httpd")


def test_stop_restores_host_state_then_node_starts_again(core, ns, node):
    # Something running first, so stopping has pods, veths, mounts and cgroups to undo.
    core.create_namespaced_pod(ns, httpd("survivor", "still-here"))
    old_container = ready_pod(core, ns, "survivor").status.container_statuses[0].container_id
    assert node.snapshot is not None
    before = node.snapshot
    assert realnode.state_diff(before, realnode.host_state()), "a running node changes the host"

    node.stop()
    try:
        after = realnode.host_state()
        assert realnode.state_diff(before, after) == []
        assert after == before
    finally:
        node.start()  # later tests need the node, whatever happened above

    assert serves_again_after_restart(core, ns, node, "survivor", old_container) == "still-here"


def test_a_node_that_died_unstopped_is_cleared_by_the_next_start(core, ns, node):
    """A node whose owner was SIGKILLed (a CI time-out) leaves processes, pods, links and chains;
    the next start clears them instead of refusing every later run on this host."""
    core.create_namespaced_pod(ns, httpd("orphan", "from-before"))
    old_container = ready_pod(core, ns, "orphan").status.container_statuses[0].container_id
    first = node.snapshot
    assert first is not None
    # Die like a killed owner: the components go, nothing is restored, the host lock is let go.
    for comp in node.components:
        assert comp.proc is not None
        comp.proc.kill()
        comp.proc.wait(30)
    node.components.clear()
    node._release_lock()
    assert realnode.state_diff(first, realnode.host_state()), "a dead node leaves traces"
    node.start()  # stops (and restores) by itself if it fails
    assert serves_again_after_restart(core, ns, node, "orphan", old_container) == "from-before"
    # Its processes, links, chains, mounts and cgroups are gone. What it set in sysctls and the
    # files it left outside the work dir (shim sockets, log links) stay: which of them were
    # there before it died with it (the node started after it restores what it found).
    node.stop()
    try:
        diff = realnode.state_diff(first, realnode.host_state())
        assert all(line.startswith(("sysctls", "paths")) for line in diff), diff
    finally:
        # This test knows what the host was like before its own node died: put that back too,
        # so what it did leaves no trace for later tests.
        assert (
            realnode.restore_host(first, [node.directory], [realnode.CNI_BRIDGE, realnode.NODE_BRIDGE]) == []
        )
        node.start()
