"""End to end, the way users run it: our images, as pods, on a real node, installed with kubectl.

The session's ``real_cluster`` (its own control plane with this machine as its one real node:
containerd, kubelet, kube-proxy) gets every image ``make images`` builds (``images`` fixture),
then "Install without OLM" (docs/operations/install.md): the three CRDs and
``deploy/install.yaml`` applied with kubectl. From there on everything is what a user's cluster
does: the operators run in-cluster (service-account token, the ``kubernetes`` Service),
WebServer pods serve HTTP through their Service, a TDSet's Deployment pods run, Netperf pods
run netperf for real, a real Prometheus scrapes the operators through their metrics Services
(HTTPS, with the token of a ServiceAccount bound to the metrics-reader ClusterRole).

Each test makes its own namespace and objects and polls with deadlines; the install is shared by
the module (and removed at its end).
"""

from __future__ import annotations

import datetime
import statistics
import threading
import urllib.error
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, config, watch

from localcluster import cluster as localcluster
from localcluster.node import RealNode
from shared.api.conditions import rfc3339
from tests.framework.install import (
    CRDS,
    DIRECT,
    DIRECT_TLS,
    INSTALL_NAMESPACE,
    METRICS_PORT,
    OPERATORS,
    REPO,
    WEB_UID,
    Install,
    exactly_ready,
    ready_pods,
    web_pods,
    webserver,
    ws_status,
)
from tests.framework.namespaces import delete_namespace, fresh_namespace, hold_pods_at
from tests.framework.prometheus import Prometheus
from tests.framework.traffic import Traffic
from tests.framework.waits import wait_for
from tools.generate.bundle import OPERATOR_REPLICAS


@pytest.fixture(scope="module")
def installed(real_cluster: localcluster.LocalCluster, images: dict[str, str]) -> Iterator[Install]:
    assert real_cluster.node is not None
    inst = Install(
        real_cluster.kubeconfig,
        config.new_client_from_config(config_file=str(real_cluster.kubeconfig)),
        real_cluster.node,
        images,
    )
    inst.kubectl("apply", "--server-side", *(f"-f={crd}" for crd in CRDS))
    inst.kubectl("wait", "--for=condition=Established", "--timeout=60s", *(f"-f={crd}" for crd in CRDS))
    inst.kubectl("apply", "-f", str(REPO / "deploy" / "install.yaml"))
    inst.wait_operators_ready()
    yield inst
    inst.uninstall()


def wait_for_one_warning(installed: Install, ns: str, name: str, reason: str) -> None:
    """Exactly one Warning Event ``reason`` about ``name``. Events are posted by their own queue,
    after the status write a test waits for, so this polls."""

    def types() -> list[str]:
        selector = f"involvedObject.name={name},reason={reason}"
        return [e.type for e in installed.core.list_namespaced_event(ns, field_selector=selector).items]

    wait_for(lambda: types() == ["Warning"], 60, f"one {reason} Warning")


RESTRICTED = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "warn")}
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def make_namespace(installed: Install, labels: dict[str, str]) -> Iterator[str]:
    name = fresh_namespace(installed.core, "e2e", labels)
    yield name
    delete_namespace(installed.core, name)


@pytest.fixture
def ns(installed: Install) -> Iterator[str]:
    """A namespace enforcing the `restricted` Pod Security profile."""
    yield from make_namespace(installed, RESTRICTED)


@pytest.fixture
def baseline_ns(installed: Install) -> Iterator[str]:
    """A namespace without Pod Security enforcement (TDSet pods carry no restricted context yet)."""
    yield from make_namespace(installed, {})


def http_get(url: str) -> tuple[int, str]:
    with DIRECT.open(url, timeout=5) as resp:
        return resp.status, resp.read().decode(errors="replace")


def kill_container(node: RealNode, pod: client.V1Pod) -> None:
    """SIGKILL the pod's (first) container through containerd, as an OOM kill would."""
    cid = pod.status.container_statuses[0].container_id.removeprefix("containerd://")
    node.ctr("tasks", "kill", "--signal", "SIGKILL", cid)


# -- the operators themselves ------------------------------------------------------------------


def test_operators_run_from_their_images_in_cluster_as_non_root(installed):
    # install.yaml's namespace enforces `restricted`: the operator pods were admitted under it.
    labels = installed.core.read_namespace(INSTALL_NAMESPACE).metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = [(op, pod) for op in OPERATORS for pod in installed.operator_pods(op)]
    assert len(pods) == OPERATOR_REPLICAS * len(OPERATORS), [p.metadata.name for _, p in pods]
    for op, pod in pods:
        status = pod.status.container_statuses[0]
        assert status.image == installed.images[f"{op}-operator"]
        # The first real run crash-looped (kopf's getpass.getuser() for a UID without a passwd
        # entry): a pod that started clean has never restarted.
        assert status.ready and status.restart_count == 0, (op, status)
        container = pod.spec.containers[0]
        assert container.security_context.read_only_root_filesystem is True
        assert pod.spec.security_context.run_as_non_root is True
        assert installed.kubectl(
            "-n", INSTALL_NAMESPACE, "exec", pod.metadata.name, "--", "id", "-u"
        ).strip() == ("65532")
        # In-cluster: credentials from the mounted service-account token, the API server via the
        # `kubernetes` Service; no kubeconfig anywhere.
        assert not any(e.name == "KUBECONFIG" for e in container.env or [])
        logs = installed.kubectl("-n", INSTALL_NAMESPACE, "logs", pod.metadata.name)
        assert "Traceback" not in logs, logs[-3000:]
        # The leader and the standby alike: ready once their caches listed.
        assert http_get(f"http://{pod.status.pod_ip}:8081/readyz")[0] == 200
        assert "controller_runtime_reconcile_total" in installed.metrics(pod)
        # Nobody else: no token, 401 (the body names nothing of any tenant).
        with pytest.raises(urllib.error.HTTPError) as refused:
            DIRECT_TLS.open(f"https://{pod.status.pod_ip}:{METRICS_PORT}/metrics", timeout=5)
        assert refused.value.code == 401
    for op in OPERATORS:
        leading = installed.operator_pod(op)
        for pod in installed.operator_pods(op):
            # One leads, the other stands by: controller-runtime's gauge says which.
            text = installed.metrics(pod)
            value = 1 if pod.metadata.name == leading.metadata.name else 0
            sample = f'leader_election_master_status{{name="{op}-leader"}} {value}.0'
            assert sample in text, (op, pod.metadata.name)


def test_an_operator_image_runs_under_a_uid_it_has_never_heard_of(installed, ns):
    """OpenShift's restricted-v2 runs images under an arbitrary UID with no passwd entry."""
    image = installed.images["webserver-operator"]
    probe = "from shared.controller.runtime import operator_identity; print('identity', operator_identity())"
    pod = {
        "metadata": {"name": "random-uid"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsUser": 1000770000, "runAsGroup": 0},
            "containers": [
                {
                    "name": "c",
                    "image": image,
                    "command": ["python", "-c", probe],
                    "securityContext": {**RESTRICTED_CONTAINER, "readOnlyRootFilesystem": True},
                }
            ],
        },
    }
    installed.core.create_namespaced_pod(ns, pod)
    wait_for(
        lambda: installed.core.read_namespaced_pod("random-uid", ns).status.phase == "Succeeded",
        120,
        "the probe pod to succeed",
    )
    out = installed.kubectl("-n", ns, "logs", "random-uid")
    assert out.strip() == "identity uid1000770000@random-uid", out


def test_prometheus_scrapes_the_operator_pods_through_their_metrics_services(installed, tmp_path):
    targets = {}
    for op in OPERATORS:
        svc = installed.core.read_namespaced_service(f"{op}-operator-metrics", INSTALL_NAMESPACE)
        port = next(p.port for p in svc.spec.ports if p.name == "metrics")
        targets[op] = f"{svc.spec.cluster_ip}:{port}"
    # As the ServiceMonitors scrape: HTTPS, a token of an account bound to metrics-reader.
    prom = Prometheus(targets, tmp_path, token=installed.metrics_token)
    try:
        wait_for(
            lambda: (
                {t["labels"]["job"]: t["health"] for t in prom.targets()}
                == {f"{op}-operator-metrics": "up" for op in OPERATORS}
            ),
            90,
            "three targets up",
        )
        for op in OPERATORS:
            series = f'controller_runtime_max_concurrent_reconciles{{controller="{op}"}}'
            wait_for(lambda series=series: (prom.value(series) or 0) > 0, 30, f"{op}'s metrics in Prometheus")
    finally:
        prom.stop()


# -- WebServer ----------------------------------------------------------------------------------


def test_webserver_pods_serve_http_scale_and_are_replaced(installed, ns):
    installed.co.create_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", ns, "webservers", webserver(installed, "web", 5)
    )
    wait_for(lambda: exactly_ready(installed, ns, "web", 5), 180, "5 real pods Ready")
    pods = web_pods(installed, ns, "web")
    assert {p.spec.node_name for p in pods} == {installed.node.name}
    assert all(p.spec.security_context.run_as_user == WEB_UID for p in pods)

    # Through the WebServer's Service (ClusterIP, kube-proxy): every pod answers in turn.
    svc = installed.core.read_namespaced_service("web", ns)
    names = {p.metadata.name for p in pods}
    seen: set[str] = set()

    def answered_by_all() -> bool:
        status, body = http_get(f"http://{svc.spec.cluster_ip}/")
        assert status == 200
        seen.update(n for n in names if n in body)
        return seen == names

    wait_for(answered_by_all, 60, "an answer from each of the 5 pods through the Service")

    installed.kubectl("-n", ns, "scale", "webserver/web", "--replicas=3")
    wait_for(lambda: exactly_ready(installed, ns, "web", 3), 120, "scaled down to 3 Ready pods")

    # A container killed (as by the OOM killer) is restarted in place by kubelet.
    victim = ready_pods(installed, ns, "web")[0]
    kill_container(installed.node, victim)

    def restarted() -> bool:
        pod = installed.core.read_namespaced_pod(victim.metadata.name, ns)
        return pod.metadata.uid == victim.metadata.uid and pod.status.container_statuses[0].restart_count >= 1

    wait_for(restarted, 60, "the killed container restarted")
    wait_for(lambda: exactly_ready(installed, ns, "web", 3), 120, "3 Ready pods again")

    # A pod deleted by someone is replaced by the operator.
    gone = ready_pods(installed, ns, "web")[0]
    installed.core.delete_namespaced_pod(gone.metadata.name, ns)
    wait_for(
        lambda: (
            exactly_ready(installed, ns, "web", 3)
            and gone.metadata.uid not in {p.metadata.uid for p in web_pods(installed, ns, "web")}
        ),
        120,
        "the deleted pod replaced",
    )


def test_webserver_http_readiness_configuration_and_a_missing_secret(installed, ns):
    """On a real kubelet: HTTP readiness and liveness on /healthz (the web image
    answers it on the named port), env and a read-only volume from a labelled ConfigMap; then a
    reference to a Secret that does not exist: the kubelet's CreateContainerConfigError reaches
    ReplicaFailure with the Secret's name while the old pods keep serving (maxUnavailable 0),
    and creating the Secret finishes the rollout."""
    installed.core.create_namespaced_config_map(
        ns,
        {
            "metadata": {"name": "site", "labels": {"webserver.k8s-operators-py.dev/config": "true"}},
            "data": {"greeting": "hello"},
        },
    )
    ws = webserver(installed, "web", 2)
    ws["spec"].update(
        {
            "readinessPath": "/healthz",
            "liveness": {"path": "/healthz", "periodSeconds": 5},
            "minReadySeconds": 2,
            "env": [
                {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "site", "key": "greeting"}}}
            ],
            "volumes": [{"name": "site", "mountPath": "/etc/site", "configMap": {"name": "site"}}],
            "rollout": {"maxSurge": 1, "maxUnavailable": 0},
        }
    )
    installed.co.create_namespaced_custom_object("demo.k8s.io", "v1alpha1", ns, "webservers", ws)
    wait_for(lambda: exactly_ready(installed, ns, "web", 2), 180, "2 real pods Ready by HTTP GET /healthz")
    wait_for(lambda: ws_status(installed, ns, "web").get("availableReplicas") == 2, 60, "2 available")
    pod = ready_pods(installed, ns, "web")[0]
    assert pod.spec.containers[0].readiness_probe.http_get.path == "/healthz"
    assert pod.status.container_statuses[0].restart_count == 0  # liveness passes
    svc = installed.core.read_namespaced_service("web", ns)
    assert http_get(f"http://{svc.spec.cluster_ip}/")[0] == 200
    old = {p.metadata.name for p in web_pods(installed, ns, "web")}

    installed.co.patch_namespaced_custom_object(
        "demo.k8s.io",
        "v1alpha1",
        ns,
        "webservers",
        "web",
        {"spec": {"envFrom": [{"secretRef": {"name": "creds"}}]}},
    )

    def failure() -> dict[str, Any] | None:
        # Under load the kubelet's first word can be "failed to sync secret cache: timed out";
        # its retry names the Secret, and the condition follows.
        conds = {c["type"]: c for c in ws_status(installed, ns, "web").get("conditions") or []}
        cond = conds.get("ReplicaFailure") or {}
        named = cond.get("reason") == "CreateContainerConfigError" and "creds" in cond.get("message", "")
        return cond if named else None

    wait_for(failure, 120, "ReplicaFailure from the kubelet's CreateContainerConfigError naming the Secret")
    assert old <= {p.metadata.name for p in ready_pods(installed, ns, "web")}
    assert http_get(f"http://{svc.spec.cluster_ip}/")[0] == 200

    installed.core.create_namespaced_secret(ns, {"metadata": {"name": "creds"}, "stringData": {"TOKEN": "t"}})
    wait_for(
        lambda: (
            exactly_ready(installed, ns, "web", 2)
            and not old & {p.metadata.name for p in web_pods(installed, ns, "web")}
        ),
        240,
        "rolled onto the pods that read the Secret",
    )


def test_operator_killed_mid_scale_up_converges_without_duplicates(installed, ns):
    """SIGKILL the leading WebServer operator's container in the middle of a scale-up to 20 pods.

    kubelet restarts it in place; the standby, or the restarted process, takes the Lease once it
    expires and must converge without a duplicate pod.
    """
    ws = installed.co.create_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", ns, "webservers", webserver(installed, "burst", 0, service=False)
    )
    created: list[str] = []
    stop = threading.Event()

    def record() -> None:
        w = watch.Watch()
        for event in w.stream(installed.core.list_namespaced_pod, ns, timeout_seconds=300):
            if event["type"] == "ADDED":
                created.append(event["object"].metadata.uid)
            if stop.is_set():
                w.stop()

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    before = installed.operator_pod("webserver")
    restarts = before.status.container_statuses[0].restart_count
    hold_pods_at(installed.core, ns, 5)  # the scale-up stops at 5 of 20 until the quota goes
    installed.kubectl("-n", ns, "scale", "webserver/burst", "--replicas=20")
    wait_for(lambda: len(web_pods(installed, ns, "burst")) == 5, 60, "the scale-up held at 5 of 20")
    kill_container(installed.node, before)
    installed.core.delete_namespaced_resource_quota("hold", ns)

    wait_for(
        lambda: (
            installed.core.read_namespaced_pod(before.metadata.name, INSTALL_NAMESPACE)
            .status.container_statuses[0]
            .restart_count
            > restarts
        ),
        60,
        "the operator container restarted by kubelet",
    )
    wait_for(lambda: exactly_ready(installed, ns, "burst", 20), 300, "20 Ready pods")
    stop.set()
    pods = web_pods(installed, ns, "burst")
    assert len({p.metadata.name for p in pods}) == 20
    assert all(p.metadata.owner_references[0].uid == ws["metadata"]["uid"] for p in pods)
    # Every pod ever created is one of the 20: none was created twice and deleted again.
    assert len(set(created)) == 20, len(set(created))
    # Leave a fresh operator pod behind (restartCount 0), as other tests expect to find it.
    installed.core.delete_namespaced_pod(before.metadata.name, INSTALL_NAMESPACE)
    wait_for(
        lambda: before.metadata.uid not in {p.metadata.uid for p in installed.operator_pods("webserver")},
        60,
        "the killed pod going",
    )
    installed.wait_operators_ready()


# -- TDSet ---------------------------------------------------------------------------------------


def cluster_ips(installed: Install, ns: str, services: tuple[str, ...]) -> dict[str, str]:
    return {name: installed.core.read_namespaced_service(name, ns).spec.cluster_ip for name in services}


def test_a_port_change_the_image_does_not_serve_keeps_every_service_answering(installed, baseline_ns):
    """Port 8080 -> 8081 (the web image serves 8080 only) on a WebServer and a TDSet. The
    Services target the pods' named port, so the old pods, still Ready on 8080, keep answering:
    the new pods never get Ready and the rollouts stop there. Before, both Services targeted the
    new number at once (the WebServer's answered 0 of 40 requests, the TDSet's 1 of 40). Then the
    user reverts the bad value, and rolls the WebServer for real (new resources): nothing fails."""
    ns = baseline_ns
    ws = webserver(installed, "web", 2)
    ws["spec"]["rollout"] = {"maxSurge": 1, "maxUnavailable": 0}
    installed.co.create_namespaced_custom_object("demo.k8s.io", "v1alpha1", ns, "webservers", ws)
    tds_spec = {
        "container": {"image": installed.images["web"], "port": 8080},
        "schedulingConfig": [],
        "defaultReplica": 2,
        "service": {"port": 80},
    }
    tds = {"apiVersion": "schedule.rs/v1", "kind": "TDSet", "metadata": {"name": "shop"}, "spec": tds_spec}
    installed.co.create_namespaced_custom_object("schedule.rs", "v1", ns, "tdsets", tds)
    apps = client.AppsV1Api(installed.api)
    wait_for(lambda: exactly_ready(installed, ns, "web", 2), 180, "2 WebServer pods Ready")
    wait_for(
        lambda: (apps.read_namespaced_deployment("shop", ns).status.ready_replicas or 0) == 2,
        180,
        "2 TDSet pods Ready",
    )
    wait_for(lambda: installed.core.read_namespaced_service("shop", ns), 60, "the TDSet's Service")
    old = {p.metadata.name for p in ready_pods(installed, ns, "web")}

    def patch(port: int) -> None:
        installed.co.patch_namespaced_custom_object(
            "demo.k8s.io", "v1alpha1", ns, "webservers", "web", {"spec": {"port": port}}
        )
        installed.co.patch_namespaced_custom_object(
            "schedule.rs",
            "v1",
            ns,
            "tdsets",
            "shop",
            {"spec": {"container": {**tds_spec["container"], "port": port}}},
        )

    def new_pods_started() -> bool:
        web_new = [p for p in web_pods(installed, ns, "web") if p.metadata.name not in old]
        shop = installed.core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/instance=shop").items
        shop_new = [p for p in shop if p.spec.containers[0].ports[0].container_port == 8081]
        return (
            bool(web_new) and bool(shop_new) and all(p.status.phase == "Running" for p in web_new + shop_new)
        )

    with Traffic(cluster_ips(installed, ns, ("web", "shop"))) as traffic:
        wait_for(lambda: traffic.answering(10), 120, "both Services answering, 10 in a row")
        patch(8081)
        wait_for(new_pods_started, 120, "pods on 8081 running (never Ready: nothing listens there)")
        mark = dict(traffic.ok)
        wait_for(lambda: all(traffic.ok[n] >= mark[n] + 40 for n in mark), 120, "40 more requests each")
        assert traffic.failed == {"web": [], "shop": []}
        assert {p.metadata.name for p in ready_pods(installed, ns, "web")} == old
        assert ws_status(installed, ns, "web")["readyReplicas"] == 2

        patch(8080)  # the user reverts the bad value
        wait_for(
            lambda: (
                exactly_ready(installed, ns, "web", 2)
                and {p.metadata.name for p in web_pods(installed, ns, "web")} == old
            ),
            120,
            "the WebServer back on its old pods",
        )
        wait_for(
            lambda: (
                (d := apps.read_namespaced_deployment("shop", ns)).status.ready_replicas == 2
                and d.status.updated_replicas == 2
                and (d.status.replicas or 0) == 2
            ),
            180,
            "the TDSet's Deployment rolled back",
        )
        # A good rollout: new resources, new pods that get Ready, old ones deleted one by one.
        installed.co.patch_namespaced_custom_object(
            "demo.k8s.io",
            "v1alpha1",
            ns,
            "webservers",
            "web",
            {"spec": {"resources": {"requests": {"cpu": "10m"}}}},
        )
        wait_for(
            lambda: (
                exactly_ready(installed, ns, "web", 2)
                and not {p.metadata.name for p in web_pods(installed, ns, "web")} & old
            ),
            180,
            "the WebServer rolled to new pods",
        )
        mark = dict(traffic.ok)
        wait_for(lambda: all(traffic.ok[n] >= mark[n] + 10 for n in mark), 60, "10 more requests each")
    assert traffic.failed == {"web": [], "shop": []}


def test_a_bad_image_rolls_back_by_itself_while_the_service_keeps_answering(installed, ns):
    """A rollout to an image that cannot be pulled, with maxUnavailable 0 and autoRollback.
    The new pod never gets Ready, so no old pod goes; past progressDeadlineSeconds the operator
    goes back to revision 1's template (deleting the new pod) and says so. Through it all the
    Service answers every request (goal: 0 failed). Prints the time from the spec change to the
    rollback done (the deadline plus the rollback itself)."""
    ws = webserver(installed, "web", 2)
    ws["spec"]["rollout"] = {"maxSurge": 1, "maxUnavailable": 0, "autoRollback": True}
    ws["spec"]["progressDeadlineSeconds"] = 20
    installed.co.create_namespaced_custom_object("demo.k8s.io", "v1alpha1", ns, "webservers", ws)
    wait_for(lambda: exactly_ready(installed, ns, "web", 2), 180, "2 WebServer pods Ready")
    wait_for(lambda: installed.core.read_namespaced_service("web", ns), 60, "the WebServer's Service")
    old = {p.metadata.name for p in ready_pods(installed, ns, "web")}

    def rolled_back() -> dict[str, Any] | None:
        st = ws_status(installed, ns, "web")
        done = st.get("rollback") and st.get("lastRolloutOutcome") == "Available"
        return st if done and {p.metadata.name for p in web_pods(installed, ns, "web")} == old else None

    with Traffic(cluster_ips(installed, ns, ("web",))) as traffic:
        wait_for(lambda: traffic.answering(10), 120, "the Service answering, 10 in a row")
        started = datetime.datetime.now(datetime.UTC)
        installed.co.patch_namespaced_custom_object(
            "demo.k8s.io",
            "v1alpha1",
            ns,
            "webservers",
            "web",
            {"spec": {"image": "localcluster.dev/unpullable:latest"}},
        )
        st = wait_for(rolled_back, 180, "the rollback to revision 1, on the old pods")
        took = (datetime.datetime.now(datetime.UTC) - started).total_seconds()
        mark = dict(traffic.ok)
        wait_for(lambda: traffic.ok["web"] >= mark["web"] + 20, 60, "20 more requests")
    assert traffic.failed == {"web": []}
    assert [(e["revision"], e["outcome"]) for e in st["history"]] == [
        (1, "Available"),
        (2, "RolledBack"),
        (3, "Available"),
    ]
    assert st["rollback"]["toRevision"] == 1
    wait_for_one_warning(installed, ns, "web", "RolledBack")
    print(f"bad rollout to rollback done: {took:.1f}s (deadline 20s), {traffic.ok['web']} requests, 0 failed")


BROKEN_NGINX = """worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr;
events { worker_connections 512; }
http {
    access_log off;
    client_body_temp_path /tmp/nginx-client-body;
    proxy_temp_path /tmp/nginx-proxy;
    fastcgi_temp_path /tmp/nginx-fastcgi;
    uwsgi_temp_path /tmp/nginx-uwsgi;
    scgi_temp_path /tmp/nginx-scgi;
    server {
        listen 8080 default_server;
        location = /healthz { return 200 "ok\\n"; }
        location / { default_type text/html; return 500 "<title>$hostname</title>broken\\n"; }
    }
}
"""


def revision_of(installed: Install, ip: str) -> tuple[int, str]:
    """One request through the Service (a new connection): its status and the answering pod's
    template hash (the page names the pod: web-<hash>-<slot>); status 0 and the error when it
    was not answered."""
    try:
        with DIRECT.open(f"http://{ip}/", timeout=5) as resp:
            status, body = resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read().decode(errors="replace")
    except OSError as exc:  # refused, reset, timed out: a failed request, kept as one
        return 0, repr(exc)
    title = body.split("<title>", 1)[-1].split("</title>", 1)[0]
    return status, title.rsplit("-", 2)[-2] if title.count("-") >= 2 else ""


def test_canary_by_pod_ratio_judged_by_the_operator_then_aborted_and_fast_rolled_back(installed, ns):
    """#43's proof on the real node. A canary at 25 % of 4 pods (1 pod) with the operator's own
    HTTP analysis: through the Service, the share of requests answered by the canary is within
    7.5 points of 25 % over 400 new connections (3.5 standard deviations of a binomial 400 x
    0.25); the good canary is promoted; a canary answering 500 is aborted by the analysis and
    no request answered by a stable pod fails; a fast rollback moves every request to the
    revision asked for. Prints the times (docs/benchmarks.md)."""
    installed.core.create_namespaced_config_map(
        ns, {"metadata": {"name": "broken"}, "data": {"nginx.conf": BROKEN_NGINX}}
    )
    ws = webserver(installed, "web", 4)
    ws["spec"]["readinessPath"] = "/healthz"
    ws["spec"]["rollout"] = {
        "strategy": "Canary",
        "canary": {
            "steps": [{"weight": 25}, {"pause": {}}],
            "analysis": {"intervalSeconds": 1, "timeoutSeconds": 1, "samples": 10, "minSuccessPercent": 99},
        },
    }
    co = installed.co

    def patch(spec: dict[str, Any]) -> None:
        co.patch_namespaced_custom_object("demo.k8s.io", "v1alpha1", ns, "webservers", "web", {"spec": spec})

    co.create_namespaced_custom_object("demo.k8s.io", "v1alpha1", ns, "webservers", ws)
    wait_for(lambda: exactly_ready(installed, ns, "web", 4), 180, "4 WebServer pods Ready")
    wait_for(lambda: installed.core.read_namespaced_service("web", ns), 60, "the WebServer's Service")
    ip = cluster_ips(installed, ns, ("web",))["web"]
    wait_for(
        lambda: all(revision_of(installed, ip)[0] == 200 for _ in range(10)), 120, "the Service answering"
    )
    v1 = ws_status(installed, ns, "web")["history"][0]["templateHash"]

    # A good canary (an env change), held at 25 % by the pause after its analysis passed.
    started = datetime.datetime.now(datetime.UTC)
    patch({"env": [{"name": "RELEASE", "value": "2"}]})

    def held() -> dict[str, Any] | None:
        st = ws_status(installed, ns, "web")
        return st if (st.get("canary") or {}).get("step") == 1 else None

    st = wait_for(held, 240, "the canary past its analysis, paused at step 1")
    to_pause = (datetime.datetime.now(datetime.UTC) - started).total_seconds()
    v2 = st["canary"]["canaryHash"]
    assert st["canary"]["stableHash"] == v1 and (st["canary"]["canaryPods"], st["canary"]["stablePods"]) == (
        1,
        3,
    )
    wait_for(lambda: exactly_ready(installed, ns, "web", 4), 120, "1 canary and 3 stable pods Ready")
    answers = [revision_of(installed, ip) for _ in range(400)]
    assert all(status == 200 for status, _ in answers)
    share = sum(h == v2 for _, h in answers) / len(answers)
    assert {h for _, h in answers} == {v1, v2}
    assert abs(share - 0.25) <= 0.075, share

    revision = st["canary"]["revision"]
    started = datetime.datetime.now(datetime.UTC)
    patch({"rollout": {"canary": {"resume": {"revision": revision, "step": 1}}}})

    def promoted() -> dict[str, Any] | None:
        st = ws_status(installed, ns, "web")
        hashes = {p.metadata.labels["demo.k8s.io/template-hash"] for p in ready_pods(installed, ns, "web")}
        done = st.get("lastRolloutOutcome") == "Available" and st.get("revision") == revision
        return st if done and hashes == {v2} and exactly_ready(installed, ns, "web", 4) else None

    wait_for(promoted, 240, "the canary promoted: every pod revision 2")
    to_promoted = (datetime.datetime.now(datetime.UTC) - started).total_seconds()

    # A canary answering 500 on / (ready all the same: /healthz answers): the analysis aborts it.
    started = datetime.datetime.now(datetime.UTC)
    patch(
        {
            "volumes": [{"name": "conf", "configMap": {"name": "broken"}, "mountPath": "/etc/web"}],
            "args": ["nginx", "-e", "stderr", "-g", "daemon off;", "-c", "/etc/web/nginx.conf"],
        }
    )
    seen: list[tuple[int, str]] = []

    def aborted() -> dict[str, Any] | None:
        seen.extend(revision_of(installed, ip) for _ in range(5))
        st = ws_status(installed, ns, "web")
        degraded = next((c for c in st.get("conditions", ()) if c["type"] == "Degraded"), {})
        hashes = {p.metadata.labels["demo.k8s.io/template-hash"] for p in web_pods(installed, ns, "web")}
        done = degraded.get("reason") == "CanaryAnalysisFailed" and hashes == {v2}
        return st if done else None

    st = wait_for(aborted, 240, "the bad canary aborted, only revision 2's pods left")
    to_aborted = (datetime.datetime.now(datetime.UTC) - started).total_seconds()
    assert "success" in st["rollback"]["analysis"] and st["rollback"]["toRevision"] == revision
    assert all(status == 200 for status, h in seen if h == v2), seen  # no stable answer failed
    assert not [h for status, h in seen if status == 0]  # every request answered
    assert all(h == v2 or status == 500 for status, h in seen)
    bad = len([1 for status, _ in seen if status != 200])
    wait_for_one_warning(installed, ns, "web", "CanaryAborted")

    # Fast rollback to revision 1: from the field change to every request answered by it.
    started = datetime.datetime.now(datetime.UTC)
    patch({"rollout": {"rollbackTo": {"revision": 1}}})

    def all_on_v1() -> bool:
        return exactly_ready(installed, ns, "web", 4) and all(
            revision_of(installed, ip) == (200, v1) for _ in range(40)
        )

    wait_for(all_on_v1, 240, "every request answered by revision 1")
    to_fast = (datetime.datetime.now(datetime.UTC) - started).total_seconds()

    # Against it, a rolling rollback by hand: the spec put back to revision 2's template, as a
    # RollingUpdate (maxSurge 1, maxUnavailable 1 of 4), timed the same way.
    started = datetime.datetime.now(datetime.UTC)
    patch(
        {
            "volumes": None,
            "args": None,
            "rollout": {"strategy": "RollingUpdate", "canary": None, "rollbackTo": None},
        }
    )

    def all_on_v2() -> bool:
        return exactly_ready(installed, ns, "web", 4) and all(
            revision_of(installed, ip) == (200, v2) for _ in range(40)
        )

    wait_for(all_on_v2, 240, "every request answered by revision 2")
    to_rolling = (datetime.datetime.now(datetime.UTC) - started).total_seconds()
    print(
        f"canary 25 % of 4: {share:.3f} of 400 requests; good canary to its pause {to_pause:.1f}s, "
        f"resume to promoted {to_promoted:.1f}s; bad canary to aborted {to_aborted:.1f}s "
        f"({bad} of {len(seen)} requests answered 500 by the canary, 0 by stable); "
        f"fast rollback to all traffic on revision 1 {to_fast:.1f}s; "
        f"rolling rollback by hand to all traffic on revision 2 {to_rolling:.1f}s"
    )


def test_tdset_deployment_pods_run_and_flip_at_a_boundary(installed, baseline_ns):
    """A TDSet's pods really run; a window set to open at the next whole minute scales them then.

    The window is added once the first pod is Ready, at least ``margin`` ahead, so however long
    a busy machine takes to start the pod, the state before the boundary is seen before it.
    """
    ns = baseline_ns
    apps = client.AppsV1Api(installed.api)
    co = installed.co
    spec = {
        "container": {"image": installed.images["web"], "port": 8080},
        "schedulingConfig": [],
        "defaultReplica": 1,
    }
    body = {"apiVersion": "schedule.rs/v1", "kind": "TDSet", "metadata": {"name": "flip"}, "spec": spec}
    co.create_namespaced_custom_object("schedule.rs", "v1", ns, "tdsets", body)

    def deployment_ready(n: int) -> bool:
        d = apps.read_namespaced_deployment("flip", ns)
        return d.spec.replicas == n and d.status.ready_replicas == n

    wait_for(lambda: deployment_ready(1), 60, "1 Ready pod from defaultReplica")
    margin = datetime.timedelta(seconds=20)
    boundary = (datetime.datetime.now(datetime.UTC) + margin + datetime.timedelta(minutes=1)).replace(
        second=0, microsecond=0
    )
    window = {
        "startTime": boundary.hour,
        "startMinute": boundary.minute,
        "endTime": (boundary.hour + 8) % 24,
        "replica": 2,
    }
    co.patch_namespaced_custom_object(
        "schedule.rs", "v1", ns, "tdsets", "flip", {"spec": {"schedulingConfig": [window]}}
    )

    def announced() -> bool:
        tds = co.get_namespaced_custom_object("schedule.rs", "v1", ns, "tdsets", "flip")
        st = tds.get("status") or {}
        return (
            st.get("observedGeneration") == tds["metadata"]["generation"]
            and st.get("nextTransitionTime") == rfc3339(boundary)
            and apps.read_namespaced_deployment("flip", ns).spec.replicas == 1
            and datetime.datetime.now(datetime.UTC) < boundary
        )

    wait_for(announced, 30, "the window announced, 1 replica still, before the boundary")
    wait_for(lambda: deployment_ready(2), 150, "2 Ready pods after the boundary")
    assert datetime.datetime.now(datetime.UTC) >= boundary - datetime.timedelta(seconds=1)
    pods = installed.core.list_namespaced_pod(ns).items
    assert all(p.spec.node_name == installed.node.name for p in pods)


def test_tdset_prewarms_a_deployment_the_user_runs_before_its_window_opens(installed, ns):
    """A TDSet pointed at a Deployment the user already runs (the web image, in a restricted
    namespace) scales it ``leadTime`` ahead of a window: the new pods start no earlier than that
    and are Ready at or before the window opens, ``status.preWarm`` says so, and deleting the
    TDSet gives the user's own replica count back.

    The window is set once the user's pod is Ready and at least ``margin`` before pre-warm
    starts, so the state before it is seen however slowly the machine starts pods; the pods'
    own Ready times (the kubelet's) are what is checked against the window start.
    """
    apps = client.AppsV1Api(installed.api)
    co = installed.co
    labels = {"app": "shop"}
    container = {
        "name": "web",
        "image": installed.images["web"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1},
        "securityContext": {**RESTRICTED_CONTAINER, "runAsUser": WEB_UID},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "shop"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    apps.create_namespaced_deployment(ns, deployment)

    def ready(n: int) -> bool:
        d = apps.read_namespaced_deployment("shop", ns)
        return d.spec.replicas == n and d.status.ready_replicas == n and (d.status.replicas or 0) == n

    wait_for(lambda: ready(1), 120, "the user's Deployment with 1 Ready pod")
    users_pods = {p.metadata.name for p in installed.core.list_namespaced_pod(ns).items}

    lead, margin = datetime.timedelta(seconds=60), datetime.timedelta(seconds=20)
    now = datetime.datetime.now(datetime.UTC)
    boundary = (now + lead + margin + datetime.timedelta(minutes=1)).replace(second=0, microsecond=0)
    prewarm_start = boundary - lead
    window = {
        "startTime": boundary.hour,
        "startMinute": boundary.minute,
        "endTime": (boundary.hour + 8) % 24,
        "replica": 3,
        "leadTime": "60s",
    }
    body = {
        "apiVersion": "schedule.rs/v1",
        "kind": "TDSet",
        "metadata": {"name": "shop-hours"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"},
            "schedulingConfig": [window],
            "defaultReplica": 1,
        },
    }
    co.create_namespaced_custom_object("schedule.rs", "v1", ns, "tdsets", body)

    def tds_status() -> dict[str, Any]:
        tds = co.get_namespaced_custom_object("schedule.rs", "v1", ns, "tdsets", "shop-hours")
        return tds.get("status") or {}

    def claimed_before_prewarm() -> bool:
        st = tds_status()
        return (
            st.get("observedGeneration") == 1
            and st.get("scheduledReplicas") == 1
            and apps.read_namespaced_deployment("shop", ns).spec.replicas == 1
            and datetime.datetime.now(datetime.UTC) < prewarm_start
        )

    wait_for(claimed_before_prewarm, 30, "the TDSet claimed the Deployment at 1 replica before pre-warm")
    wait_for(lambda: ready(3), (boundary - now).total_seconds() + 150, "3 Ready pods")

    new = [p for p in installed.core.list_namespaced_pod(ns).items if p.metadata.name not in users_pods]
    assert len(new) == 2
    ready_times = []
    for pod in new:
        ready_at = next(c.last_transition_time for c in pod.status.conditions if c.type == "Ready")
        ready_times.append(ready_at)
        # Created no earlier than pre-warm (1 s for the API server's whole-second timestamps) and
        # Ready by the window start: the kubelet's clock, not the operator's report.
        created = pod.metadata.creation_timestamp
        assert created >= prewarm_start - datetime.timedelta(seconds=1), (pod.metadata.name, created)
        assert ready_at <= boundary, (pod.metadata.name, ready_at, boundary)

    def prewarm_record() -> dict[str, Any] | None:
        record = tds_status().get("preWarm") or {}
        return record if "readyAt" in record else None

    record = wait_for(prewarm_record, 30, "status.preWarm with readyAt")
    assert record["windowStart"] == rfc3339(boundary) and record["replicas"] == 3
    # The target is not watched: the operator polls it while it warms, so its readyAt is when
    # the pods were Ready (to a poll), not the window's start.
    reported = datetime.datetime.fromisoformat(record["readyAt"])
    assert max(ready_times) - datetime.timedelta(seconds=1) <= reported < boundary
    assert record["readySecondsAfterStart"] < 0

    co.delete_namespaced_custom_object("schedule.rs", "v1", ns, "tdsets", "shop-hours")
    wait_for(
        lambda: apps.read_namespaced_deployment("shop", ns).spec.replicas == 1,
        60,
        "the user's own replica count (1) given back after the TDSet's deletion",
    )


# -- Netperf -------------------------------------------------------------------------------------


def netperf(installed: Install, ns: str, name: str, **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "app.example.com/v1alpha1",
        "kind": "Netperf",
        "metadata": {"name": name},
        "spec": {"image": installed.images["netperf"], "placement": "SameNode", **spec},
    }
    installed.co.create_namespaced_custom_object("app.example.com", "v1alpha1", ns, "netperfs", body)

    def finished() -> dict[str, Any] | None:
        obj = installed.co.get_namespaced_custom_object("app.example.com", "v1alpha1", ns, "netperfs", name)
        st = obj.get("status") or {}
        return st if st.get("status") in ("Done", "Error") else None

    st = wait_for(finished, 240, f"Netperf {name} finished")
    assert st["status"] == "Done", st
    return st


class ReferencePair:
    """Two plain pods from the same netperf image on the same node: netserver, and a client to
    exec netperf in. A direct run between them is what the operator's result is compared with.

    ``host_network``: both pods on the node's network (the host path's reference), netserver on
    ``port`` (not the operator's 12865, which its host-network server binds on the same node)
    and the data port pinned to ``data_port`` (+ stream). ``via_service``: the client goes
    through a ClusterIP Service in front of the server instead (the service path's reference)."""

    def __init__(
        self,
        installed: Install,
        ns: str,
        *,
        host_network: bool = False,
        port: int = 12865,
        data_port: int = 0,
    ) -> None:
        self.installed, self.ns = installed, ns
        self.port, self.data_port = port, data_port
        image = installed.images["netperf"]
        server_command = ["netserver", "-D", "-p", str(port)] if port != 12865 else None
        for name, command in (("ref-server", server_command), ("ref-client", ["sleep", "infinity"])):
            # The operator's pods' resources (operators/netperf/desired.py): on a busy node the
            # kernel's CPU shares decide request/response rates, and a BestEffort pair gets
            # the least of them, which skews the comparison.
            container: dict[str, Any] = {
                "name": "c",
                "image": image,
                "securityContext": RESTRICTED_CONTAINER,
                "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
            }
            if command:
                container["command"] = command
            pod_spec: dict[str, Any] = {"containers": [container]}
            if host_network:
                pod_spec.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
            installed.core.create_namespaced_pod(
                ns, {"metadata": {"name": name, "labels": {"ref": name}}, "spec": pod_spec}
            )
        for name in ("ref-server", "ref-client"):
            wait_for(
                lambda name=name: installed.core.read_namespaced_pod(name, ns).status.phase == "Running",
                120,
                f"{name} Running",
            )
        self.server_ip = installed.core.read_namespaced_pod("ref-server", ns).status.pod_ip
        self.target = self.server_ip

    def via_service(self, protocol: str = "TCP") -> str:
        """Direct runs through a ClusterIP Service in front of the server from now on, its data
        port pinned (12866, ``protocol``) as the operator's service path does; its ClusterIP."""
        self.data_port = 12866
        ports = [
            {"name": "control", "port": self.port, "protocol": "TCP"},
            {"name": "data-0", "port": self.data_port, "protocol": protocol},
        ]
        svc = self.installed.core.create_namespaced_service(
            self.ns,
            {"metadata": {"name": "ref-svc"}, "spec": {"selector": {"ref": "ref-server"}, "ports": ports}},
        )
        self.target = svc.spec.cluster_ip
        return str(self.target)

    def _options(self, stream: str = "0") -> str:
        """The test-specific option pinning the data port (stream ``stream``, a shell expression)."""
        return f" -P ,$(({self.data_port} + {stream}))" if self.data_port else ""

    def run(self, seconds: int) -> float:
        """One direct TCP_STREAM run, in bits/s."""
        return self.run_parallel(seconds, 1)

    def run_parallel(self, seconds: int, streams: int) -> float:
        """``streams`` direct TCP_STREAM runs started together (a shell loop, as super-netperf
        does): the sum of their throughputs, in bits/s."""
        netperf = (
            f"netperf -P 0 -H {self.target} -p {self.port} -l {seconds} -t TCP_STREAM "
            f"-- -k THROUGHPUT,THROUGHPUT_UNITS{self._options('i - 1')}"
        )
        script = f"for i in $(seq {streams}); do {netperf} & done; wait"
        out = self.installed.kubectl("-n", self.ns, "exec", "ref-client", "--", "sh", "-c", script)
        lines = [line.split("=", 1) for line in out.split() if "=" in line]
        assert [v for k, v in lines if k == "THROUGHPUT_UNITS"] == ["10^6bits/s"] * streams, out
        return sum(float(v) * 1e6 for k, v in lines if k == "THROUGHPUT")

    def run_rr(self, test_type: str, seconds: int) -> dict[str, float]:
        """One direct request/response run: TRANSACTION_RATE and the latencies in seconds."""
        netperf = (
            f"netperf -P 0 -H {self.target} -p {self.port} -l {seconds} -t {test_type} "
            f"-- -k TRANSACTION_RATE,MEAN_LATENCY,P99_LATENCY,PROTOCOL{self._options()}"
        )
        out = self.installed.kubectl("-n", self.ns, "exec", "ref-client", "--", "sh", "-c", netperf)
        values = dict(line.split("=", 1) for line in out.split() if "=" in line)
        assert values["PROTOCOL"] == ("UDP" if test_type == "UDP_RR" else "TCP"), out
        return {
            "rate": float(values["TRANSACTION_RATE"]),
            "mean": float(values["MEAN_LATENCY"]) / 1e6,
            "p99": float(values["P99_LATENCY"]) / 1e6,
        }


def test_netperf_runs_on_the_real_node_and_agrees_with_a_direct_run(installed, ns):
    pair = ReferencePair(installed, ns)
    duration, samples = 3, 3
    before = [pair.run(duration) for _ in range(2)]
    st = netperf(installed, ns, "np", testType="TCP_STREAM", duration=duration, samples=samples)
    after = [pair.run(duration) for _ in range(2)]
    direct = statistics.mean(before + after)
    measured = st["speedBitsPerSec"]
    assert len(st["throughputBitsPerSec"]["samples"]) == samples
    gbit = [round(v / 1e9, 3) for v in before + after]
    print(f"netperf TCP_STREAM: operator {measured / 1e9:.3f} Gbit/s, direct runs {gbit} Gbit/s")
    assert abs(measured - direct) / direct <= 0.10, (measured, before, after)
    assert 1e9 < measured < 2.1e9  # the node's pod links are shaped to 2 Gbit/s
    # The pods ran here, and are gone once the result is recorded.
    assert st["serverPod"] and st["clientPod"]
    wait_for(
        lambda: (
            not installed.core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/name=netperf").items
        ),
        60,
        "the Netperf's pods deleted",
    )

    rr = netperf(installed, ns, "rr", testType="TCP_RR", duration=2, samples=2)
    latency = rr["latencySeconds"]
    assert rr["transactionsPerSec"]["mean"] > 0
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"], latency


def test_netperf_parallel_streams_agree_with_direct_parallel_runs(installed, ns):
    """Parallel: 4 on the real node. The sum of 4 concurrent streams against 4 direct
    netperf processes started together between two plain pods of the same image on the same
    node (before and after), within 10% as for one stream; each stream's own figure is there."""
    pair = ReferencePair(installed, ns)
    duration, samples, streams = 3, 3, 4
    before = [pair.run_parallel(duration, streams) for _ in range(2)]
    st = netperf(
        installed, ns, "par", testType="TCP_STREAM", duration=duration, samples=samples, parallel=streams
    )
    after = [pair.run_parallel(duration, streams) for _ in range(2)]
    direct = statistics.mean(before + after)
    measured = st["speedBitsPerSec"]
    gbit = [round(v / 1e9, 3) for v in before + after]
    print(f"netperf TCP_STREAM x{streams}: operator {measured / 1e9:.3f} Gbit/s, direct runs {gbit} Gbit/s")
    assert abs(measured - direct) / direct <= 0.10, (measured, before, after)
    assert len(st["streams"]) == streams and all(len(s["samples"]) == samples for s in st["streams"])
    assert sum(s["mean"] for s in st["streams"]) == pytest.approx(measured)
    assert st["headline"].endswith(f"({streams} streams)")


@pytest.mark.parametrize("test_type", ["TCP_CRR", "UDP_RR"])
def test_netperf_crr_and_udp_rr_agree_with_direct_runs(installed, ns, test_type):
    """TCP_CRR's rate (connections/s) and UDP_RR's latency on the real node against direct
    runs between two plain pods of the same image on the same node (before and after), within a
    factor of 2 of their spread: request/response rates on this 2-core VM are CPU-bound (an
    unshaped path: the bandwidth shaping does not limit small transactions), so they swing far
    more than a shaped stream; the figures are printed for the benchmark notes."""
    pair = ReferencePair(installed, ns)
    duration, samples = 3, 3
    before = [pair.run_rr(test_type, duration) for _ in range(2)]
    st = netperf(installed, ns, "rr", testType=test_type, duration=duration, samples=samples)
    after = [pair.run_rr(test_type, duration) for _ in range(2)]
    direct = before + after
    rate = st["transactionsPerSec"]["mean"]
    direct_rate = statistics.mean(r["rate"] for r in direct)
    latency = st["latencySeconds"]
    direct_latency = statistics.mean(r["mean"] for r in direct)
    print(
        f"netperf {test_type}: operator {rate:.0f}/s mean latency {latency['mean'] * 1e6:.0f}us, "
        f"direct {[round(r['rate']) for r in direct]}/s {[round(r['mean'] * 1e6) for r in direct]}us"
    )
    assert len(st["transactionsPerSec"]["samples"]) == samples
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] < 1, latency
    # Within a factor of 2 of the direct runs' own spread: request/response figures are CPU-bound
    # on 2 cores and swing with whatever else runs (seen in four direct runs: 2948-4584 conn/s;
    # UDP_RR 25-46 us; the operator's 3-sample mean 23-41 us across suites). A wrong unit, test
    # type or parse is off by far more; agreement to a few percent is the idle benchmark's job.
    if test_type == "TCP_CRR":
        rates = [r["rate"] for r in direct]
        assert min(rates) / 2 <= rate <= max(rates) * 2, (rate, direct_rate, direct)
        assert st["headline"].startswith(f"{rate:.0f} conn/s")
    else:
        means = [r["mean"] for r in direct]
        assert min(means) / 2 <= latency["mean"] <= max(means) * 2, (latency, direct_latency, direct)
        assert "retransmits" not in st


def test_a_scheduled_netperf_sees_a_slower_pod_link_as_a_regression_and_clears(installed, ns):
    """A Netperf every minute. After its first run, its samples are pinned as the baseline
    (a loose pValue: one run's three samples are little to judge by) and the node's pod links
    are shaped from 2 Gbit/s down to 500 Mbit/s (the CNI bandwidth plugin, for the pods started
    from then on: the next run's): the second run is Regressed=True with the figures, a Warning
    Event and netperf_regressed 1. Back at 2 Gbit/s, the third run clears it. Three runs on
    minute boundaries: this test takes 2-3 minutes."""
    node = installed.node
    full = node.pod_ingress_rate
    assert full == 2_000_000_000
    body = {
        "apiVersion": "app.example.com/v1alpha1",
        "kind": "Netperf",
        "metadata": {"name": "trend"},
        "spec": {
            "image": installed.images["netperf"],
            "placement": "SameNode",
            "testType": "TCP_STREAM",
            "duration": 2,
            "samples": 3,
            "schedule": "* * * * *",
            "regression": {"pValue": 0.5},
        },
    }
    installed.co.create_namespaced_custom_object("app.example.com", "v1alpha1", ns, "netperfs", body)

    def after_run(n: int) -> Callable[[], dict[str, Any] | None]:
        def check() -> dict[str, Any] | None:
            obj = installed.co.get_namespaced_custom_object(
                "app.example.com", "v1alpha1", ns, "netperfs", "trend"
            )
            st = obj.get("status") or {}
            return st if len(st.get("history") or []) >= n else None

        return check

    def regressed(st: dict[str, Any]) -> tuple[str, str]:
        cond = next(c for c in st["conditions"] if c["type"] == "Regressed")
        return cond["status"], cond["reason"]

    try:
        first = wait_for(after_run(1), 150, "the first scheduled run")
        pinned = {"spec": {"regression": {"pValue": 0.5, "baseline": first["history"][0]["samples"]}}}
        installed.co.patch_namespaced_custom_object(
            "app.example.com", "v1alpha1", ns, "netperfs", "trend", pinned
        )
        node.shape_pods(500_000_000)
        second = wait_for(after_run(2), 150, "the second scheduled run, on the slower link")
    finally:
        node.shape_pods(full)
    third = wait_for(after_run(3), 150, "the third scheduled run, the link back at 2 Gbit/s")

    means = [h["mean"] for h in third["history"]]
    print(f"scheduled TCP_STREAM means: {[round(m / 1e9, 3) for m in means]} Gbit/s (2, 0.5, 2 Gbit/s links)")
    assert [h["result"] for h in third["history"]] == ["Done"] * 3
    assert 1e9 < first["history"][0]["mean"] < 2.1e9
    assert second["history"][1]["mean"] < 0.55e9
    assert regressed(second) == ("True", "Regressed")
    figures = second["regression"]
    assert figures["run"] == second["history"][1]["run"] and figures["regressed"] is True
    assert figures["changePercent"] < -50 and figures["pValue"] < 0.05
    assert figures["baselineMean"] == pytest.approx(first["history"][0]["mean"])
    wait_for_one_warning(installed, ns, "trend", "Regressed")
    assert regressed(third) == ("False", "WithinBaseline")
    # Judged against the pinned first run again: back near it, far above the shaped run.
    assert third["regression"]["regressed"] is False and third["regression"]["changePercent"] > -50
    series = [
        line.rsplit(" ", 1)[1]
        for line in installed.metrics(installed.operator_pod("netperf")).splitlines()
        if line.startswith("netperf_regressed{") and 'name="trend"' in line and f'namespace="{ns}"' in line
    ]
    assert series == ["0.0"]


def _wait_for_the_service(pair: ReferencePair) -> None:
    """kube-proxy programs a new Service within moments; the first direct run waits for it."""

    def reachable() -> bool:
        try:
            return pair.run(1) > 0
        except AssertionError:  # kubectl exec failed: connection refused until the rules are in place
            return False

    wait_for(reachable, 60, "the reference Service reachable through kube-proxy")


def test_netperf_service_path_agrees_with_a_direct_run_through_a_service(installed, ns):
    """Path service on the real node (kube-proxy, iptables mode) against direct runs between
    two plain pods of the same image through a ClusterIP Service of the same kind (control port
    and the data port pinned with -P ,12866), before and after; within 10% as for the pod path."""
    pair = ReferencePair(installed, ns)
    pair.via_service()
    _wait_for_the_service(pair)
    duration, samples = 3, 3
    before = [pair.run(duration) for _ in range(2)]
    st = netperf(
        installed, ns, "svc", path="service", testType="TCP_STREAM", duration=duration, samples=samples
    )
    after = [pair.run(duration) for _ in range(2)]
    direct = statistics.mean(before + after)
    measured = st["speedBitsPerSec"]
    gbit = [round(v / 1e9, 3) for v in before + after]
    print(
        f"netperf TCP_STREAM via a Service: operator {measured / 1e9:.3f} Gbit/s, direct runs {gbit} Gbit/s"
    )
    assert st["path"] == "service" and st["serviceIP"] and st["serviceIP"] != st["serverIP"]
    assert abs(measured - direct) / direct <= 0.10, (measured, before, after)
    wait_for(
        lambda: (
            not installed.core.list_namespaced_service(
                ns, label_selector="app.kubernetes.io/name=netperf"
            ).items
        ),
        60,
        "the run's Service deleted",
    )


def test_netperf_service_path_carries_udp_rr_through_the_services_udp_port(installed, ns):
    """UDP_RR through the Service (its data port is UDP): against direct runs through a
    Service of the same kind, within a factor of 2 of their spread (request/response rates are
    CPU-bound on this VM, as test_netperf_crr_and_udp_rr_agree_with_direct_runs says)."""
    pair = ReferencePair(installed, ns)
    pair.via_service("UDP")
    wait_for(lambda: _quietly_rr(pair), 60, "the reference Service reachable through kube-proxy")
    before = [pair.run_rr("UDP_RR", 3) for _ in range(2)]
    st = netperf(installed, ns, "svc-rr", path="service", testType="UDP_RR", duration=3, samples=3)
    after = [pair.run_rr("UDP_RR", 3) for _ in range(2)]
    rates = [r["rate"] for r in before + after]
    rate = st["transactionsPerSec"]["mean"]
    print(f"netperf UDP_RR via a Service: operator {rate:.0f}/s, direct {[round(r) for r in rates]}/s")
    assert min(rates) / 2 <= rate <= max(rates) * 2, (rate, rates)


def _quietly_rr(pair: ReferencePair) -> bool:
    try:
        return pair.run_rr("UDP_RR", 1)["rate"] > 0
    except (AssertionError, KeyError):  # netperf failed: not reachable until kube-proxy has the rules
        return False


def test_netperf_host_path_agrees_with_a_direct_run_between_host_network_pods(installed, baseline_ns):
    """Path host on the real node against direct runs between two plain hostNetwork pods of
    the same image on the same node (netserver on port 13865, data port pinned, so they never
    collide with the operator's host-network server on 12865). The host network is not shaped
    (the CNI's 2 Gbit/s is the pod links'): a stream there is CPU-bound like the RR tests, so the
    tolerance is theirs, a factor of 2 of the direct runs' spread. In a namespace without Pod
    Security enforcement (hostNetwork is refused by baseline and restricted)."""
    ns = baseline_ns
    pair = ReferencePair(installed, ns, host_network=True, port=13865, data_port=13866)
    duration, samples = 3, 3
    before = [pair.run(duration) for _ in range(2)]
    st = netperf(
        installed, ns, "host", path="host", testType="TCP_STREAM", duration=duration, samples=samples
    )
    after = [pair.run(duration) for _ in range(2)]
    direct = before + after
    measured = st["speedBitsPerSec"]
    print(
        f"netperf TCP_STREAM host network: operator {measured / 1e9:.3f} Gbit/s, "
        f"direct runs {[round(v / 1e9, 3) for v in direct]} Gbit/s"
    )
    assert st["path"] == "host"
    assert min(direct) / 2 <= measured <= max(direct) * 2, (measured, direct)
    assert measured > 2.1e9  # not the pod links' 2 Gbit/s shaping: it really was the host's network


def test_netperf_compare_pod_and_host_on_the_real_node(installed, baseline_ns):
    """Compare [pod, host] in one Netperf: each path once, in order, and the ratio; the pod
    links are shaped to 2 Gbit/s, the host network is not, so pod/host is well below 1."""
    st = netperf(
        installed, baseline_ns, "cmp", compare=["pod", "host"], testType="TCP_STREAM", duration=3, samples=3
    )
    assert [p["path"] for p in st["paths"]] == ["pod", "host"]
    ratio = st["ratios"]["podToHost"]
    pod, host = (p["headline"] for p in st["paths"])
    print(f"netperf compare: pod {pod}, host {host}, pod/host {ratio}")
    assert st["speedBitsPerSec"] == pytest.approx(st["paths"][0]["mean"])  # the first path's figure
    assert 0 < ratio < 1
