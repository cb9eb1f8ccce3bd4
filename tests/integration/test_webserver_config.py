"""WebServer configuration, HTTP health and minReadySeconds against the real API server.

Admission is tested at its edges both ways: what the CRD rejects is rejected with the field's
message, and what it admits renders into a pod the API server accepts (a server-side dry run
of exactly the pod the operator would create), so a spec can never pass admission and then
fail at every pod create.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.webserver import desired, schema
from tests.framework.cluster import Cluster
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for
from tests.framework.webservers import (
    active_pods,
    conditions,
    converged,
    create,
    get,
    largest_spec,
    patch_spec,
)


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("webserver-config") / "operator.log"
    op = OperatorProcess("operators.webserver", cluster.operator_kubeconfig("webserver"), log).start()
    yield op
    op.stop()


def configmap(
    cluster: Cluster, namespace: str, name: str, data: dict[str, str], labels: dict[str, str] | None = None
) -> None:
    """A ConfigMap as any user makes one: no label is needed for a WebServer to read it."""
    client.CoreV1Api(cluster.api).create_namespaced_config_map(
        namespace, {"metadata": {"name": name, "labels": labels or {}}, "data": data}
    )


def pod_names(cluster: Cluster, namespace: str, name: str = "web") -> set[str]:
    return {p.metadata.name for p in active_pods(cluster, namespace, name)}


VOLUME = {"name": "v", "mountPath": "/etc/v", "configMap": {"name": "c"}}


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ({"env": [{"name": "1A=", "value": "x"}]}, ["spec.env[0].name", "should match"]),
        (
            {"env": [{"name": "A", "value": "x"}, {"name": "A", "value": "y"}]},
            ["spec.env[1]", "Duplicate value"],
        ),
        (
            {"env": [{"name": "A", "value": "x", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
            ["spec.env[0]", "an environment variable has a value or a valueFrom, not both"],
        ),
        (
            {"env": [{"name": "A", "valueFrom": {}}]},
            ["spec.env[0].valueFrom", "valueFrom needs exactly one of configMapKeyRef and secretKeyRef"],
        ),
        (
            {"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "Bad_Name", "key": "k"}}}]},
            ["spec.env[0].valueFrom.configMapKeyRef.name", "should match"],
        ),
        ({"envFrom": [{"prefix": "P_"}]}, ["spec.envFrom[0]", "exactly one of configMapRef and secretRef"]),
        (
            {"volumes": [{"name": "v", "mountPath": "/etc/v"}]},
            ["spec.volumes[0]", "exactly one of configMap"],
        ),
        ({"volumes": [{**VOLUME, "name": "V"}]}, ["spec.volumes[0].name", "should match"]),
        ({"volumes": [{**VOLUME, "name": "kube-api-access-abc"}]}, ["spec.volumes[0].name", "API token"]),
        ({"volumes": [{**VOLUME, "mountPath": "/etc/v/"}]}, ["spec.volumes[0].mountPath", "should match"]),
        ({"volumes": [{**VOLUME, "mountPath": "etc"}]}, ["spec.volumes[0].mountPath", "should match"]),
        (
            {"volumes": [VOLUME, {**VOLUME, "name": "w"}]},
            ["spec.volumes", "volumes must have different mountPaths"],
        ),
        ({"volumes": [VOLUME, {**VOLUME, "mountPath": "/x"}]}, ["spec.volumes[1]", "Duplicate value"]),
        ({"podMetadata": {"labels": {"app": "x"}}}, ["spec.podMetadata.labels", "must not set app"]),
        (
            {"podMetadata": {"labels": {"app.kubernetes.io/instance": "other"}}},
            ["spec.podMetadata.labels", "must not set app"],
        ),
        (
            {"podMetadata": {"labels": {"demo.k8s.io/template-hash": "x"}}},
            ["spec.podMetadata.labels", "must not"],
        ),
        ({"podMetadata": {"labels": {"b" * 64: "v"}}}, ["spec.podMetadata.labels", "qualified names"]),
        (
            {"podMetadata": {"labels": {"a" * 254 + "/b": "v"}}},
            ["spec.podMetadata.labels", "qualified names"],
        ),
        ({"podMetadata": {"labels": {"Ex.com/a": "v"}}}, ["spec.podMetadata.labels", "qualified names"]),
        ({"podMetadata": {"labels": {"a": "v" * 64}}}, ["spec.podMetadata.labels.a", "Too long"]),
        ({"podMetadata": {"labels": {"a": "-v"}}}, ["spec.podMetadata.labels.a", "should match"]),
        (
            {"podMetadata": {"annotations": {"a/b/c": "v"}}},
            ["spec.podMetadata.annotations", "qualified names"],
        ),
        (
            {"podMetadata": {"annotations": {schema.RESTARTED_AT: "now"}}},
            ["spec.podMetadata.annotations", "is set from spec.restartedAt"],
        ),
        ({"readinessPath": "healthz"}, ["spec.readinessPath", "should match"]),
        ({"readinessPath": "/a b"}, ["spec.readinessPath", "should match"]),
        ({"liveness": {"periodSeconds": 5}}, ["spec.liveness.path", "Required value"]),
        (
            {"liveness": {"path": "/", "periodSeconds": 0}},
            ["spec.liveness.periodSeconds", "greater than or equal"],
        ),
        ({"minReadySeconds": 3601}, ["spec.minReadySeconds", "less than or equal to 3600"]),
        ({"command": ["x"] * 65}, ["spec.command", "must have at most 64 items"]),
        # The character budgets (schema.MAX_PART_CHARS): 2 x 4096 fit, one character more does not.
        ({"command": ["x" * 4096] * 2 + ["y"]}, ["spec.command", "at most 8192 characters in all"]),
        ({"args": ["x" * 4096] * 2 + ["y"]}, ["spec.args", "at most 8192 characters in all"]),
        (
            {"env": [{"name": "E0", "value": "x" * 8190}, {"name": "E1", "value": "y"}]},
            ["spec.env", "at most 8192 characters in all"],
        ),
        (
            {"podMetadata": {"annotations": {"k0": "v" * 4096, "k1": "v" * 4095}}},
            ["spec.podMetadata.annotations", "at most 8192 characters in all"],
        ),
    ],
)
def test_invalid_configuration_rejected_with_field_messages(cluster, namespace, spec, fragments):
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "bad", {"replicas": 1, **spec})
    assert err.value.status == 422
    for fragment in fragments:
        assert fragment in err.value.body


LONGEST_KEY = "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61 + "/" + "e" * 63  # 253 + / + 63

ADMISSIBLE_EDGES = {
    "env": [
        {"name": "a-b.c_D", "value": ""},
        {"name": "_X", "valueFrom": {"configMapKeyRef": {"name": "c.d", "key": "k-1.x_y"}}},
        {"name": "." * 1, "valueFrom": {"secretKeyRef": {"name": "s", "key": "K"}}},
    ],
    "envFrom": [{"configMapRef": {"name": "c"}, "prefix": "-P."}, {"secretRef": {"name": "s"}}],
    "volumes": [
        {"name": "a" * 63, "mountPath": "/etc/a", "configMap": {"name": "c" * 253}},
        {"name": "b", "mountPath": "/etc/a/b", "secret": {"name": "s"}},  # nested in another mount
        *({"name": f"v{i}", "mountPath": f"/v/{i}", "configMap": {"name": "c"}} for i in range(14)),
    ],
    "command": ["sh", "-c", "exec nginx"],
    "args": ["", "x" * 4096],
    "podMetadata": {
        "labels": {LONGEST_KEY: "v" * 63, "k8s.io/x": "", "x": "A-b_c.D", "apps": "y"},
        "annotations": {LONGEST_KEY: "v" * 4096, "kubernetes.io/description": "any text: / ?"},
    },
    "restartedAt": "2026-11-26T00:00:00Z",
    "readinessPath": "/healthz?full=1&x=%20",
    "liveness": {"path": "/", "initialDelaySeconds": 3600, "periodSeconds": 3600, "failureThreshold": 100},
    "minReadySeconds": 3600,
}


@pytest.mark.parametrize("field", sorted(ADMISSIBLE_EDGES))
def test_admitted_edges_make_pods_the_api_server_accepts(cluster, namespace, field):
    """No operator needed: the exact pod it would create, sent as a server-side dry run."""
    ws = create(cluster, namespace, "edge", {"replicas": 1, field: ADMISSIBLE_EDGES[field]})
    for automount in (False, True):  # with the token, its volume joins the user's volumes
        spec = {**ws["spec"], "automountServiceAccountToken": automount}
        pod = desired.pod_manifest(ws, spec, 0, "0123456789abcdef")
        client.CoreV1Api(cluster.api).create_namespaced_pod(namespace, pod, dry_run="All")


def test_the_largest_spec_is_admitted_and_makes_an_accepted_pod(cluster, namespace):
    """The worst case of the sizing page is what admission lets through (every budget full)."""
    ws = create(cluster, namespace, "largest", largest_spec(replicas=1))
    assert ws["spec"]["command"] == largest_spec()["command"]
    pod = desired.pod_manifest(ws, ws["spec"], 0, "0123456789abcdef")
    client.CoreV1Api(cluster.api).create_namespaced_pod(namespace, pod, dry_run="All")


def test_all_edges_together_make_an_accepted_pod(cluster, namespace):
    ws = create(cluster, namespace, "edge", {"replicas": 1, "runAsUser": 101, **ADMISSIBLE_EDGES})
    pod = desired.pod_manifest(ws, ws["spec"], 0, "0123456789abcdef")
    client.CoreV1Api(cluster.api).create_namespaced_pod(namespace, pod, dry_run="All")


def test_configuration_from_an_unlabelled_configmap_reaches_the_pods_and_its_edit_rolls_them(
    cluster, namespace, operator
):
    configmap(cluster, namespace, "site", {"greeting": "hello", "index.html": "<p>hi</p>"})
    # Large ConfigMaps no WebServer references, labelled or not: never read (not asserted here:
    # tests/unit/test_configmaps.py asserts what is kept), and nothing in the way of the others.
    for i, labels in enumerate(({}, {"webserver.k8s-operators-py.dev/config": "true"})):
        configmap(cluster, namespace, f"unread-{i}", {f"k{j}": "x" * 64 for j in range(5000)}, labels)
    spec = {
        "replicas": 2,
        "env": [
            {"name": "MODE", "value": "prod"},
            {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "site", "key": "greeting"}}},
        ],
        "envFrom": [{"configMapRef": {"name": "site"}, "prefix": "SITE_"}],
        "volumes": [{"name": "html", "mountPath": "/usr/share/nginx/html", "configMap": {"name": "site"}}],
        "command": ["nginx"],
        "args": ["-g", "daemon off;"],
        "podMetadata": {"labels": {"team": "web"}, "annotations": {"example.com/owner": "me"}},
        "readinessPath": "/healthz",
        "liveness": {"path": "/livez"},
    }
    create(cluster, namespace, "web", spec)
    converged(cluster, namespace, "web", 2)
    pod = active_pods(cluster, namespace, "web")[0]
    c = pod.spec.containers[0]
    assert [(e.name, e.value) for e in c.env][:1] == [("MODE", "prod")]
    assert c.env[1].value_from.config_map_key_ref.name == "site"
    assert c.env_from[0].config_map_ref.name == "site" and c.env_from[0].prefix == "SITE_"
    assert (c.volume_mounts[0].mount_path, c.volume_mounts[0].read_only) == ("/usr/share/nginx/html", True)
    assert c.command == ["nginx"] and c.args == ["-g", "daemon off;"]
    assert c.readiness_probe.http_get.path == "/healthz" and c.readiness_probe.http_get.port == "http"
    assert c.liveness_probe.http_get.path == "/livez" and c.liveness_probe.period_seconds == 10
    assert pod.metadata.labels["team"] == "web" and pod.metadata.annotations["example.com/owner"] == "me"
    first = pod_names(cluster, namespace)

    core = client.CoreV1Api(cluster.api)
    core.patch_namespaced_config_map("site", namespace, {"metadata": {"annotations": {"note": "x"}}})
    core.patch_namespaced_config_map("site", namespace, {"data": {"greeting": "bonjour"}})
    wait_for(
        lambda: len(pod_names(cluster, namespace)) == 2 and not pod_names(cluster, namespace) & first,
        120,
        "every pod replaced after the ConfigMap's content changed",
    )
    converged(cluster, namespace, "web", 2)


def test_a_metadata_only_configmap_change_rolls_nothing(cluster, namespace, operator):
    configmap(cluster, namespace, "site", {"k": "v"}, {"team": "web"})
    create(cluster, namespace, "web", {"replicas": 1, "envFrom": [{"configMapRef": {"name": "site"}}]})
    converged(cluster, namespace, "web", 1)
    before = pod_names(cluster, namespace)
    core = client.CoreV1Api(cluster.api)
    core.patch_namespaced_config_map("site", namespace, {"metadata": {"annotations": {"note": "x"}}})
    # A later spec change is seen after the ConfigMap event (one watch stream per kind, in order
    # within the operator): once it is applied, the annotation was seen and rolled nothing.
    patch_spec(cluster, namespace, "web", {"replicas": 2})
    converged(cluster, namespace, "web", 2)
    assert before <= pod_names(cluster, namespace)


def test_a_missing_configmap_is_a_replica_failure_until_it_exists(cluster, namespace, operator):
    create(
        cluster,
        namespace,
        "web",
        {
            "replicas": 2,
            "env": [{"name": "G", "valueFrom": {"configMapKeyRef": {"name": "site", "key": "g"}}}],
        },
    )

    def failure() -> dict | None:
        ws = get(cluster, namespace, "web")
        cond = conditions(ws).get("ReplicaFailure") if ws.get("status") else None
        return cond if cond and cond["status"] == "True" else None

    cond = wait_for(failure, 60, "ReplicaFailure=True")
    assert cond["reason"] == "ConfigMapNotFound" and "ConfigMap site not found" in cond["message"]
    assert not active_pods(cluster, namespace, "web")  # no pod that could not start

    configmap(cluster, namespace, "site", {"other": "x"})
    cond = wait_for(
        lambda: (c := failure()) and "no key g" in c["message"] and c, 60, "the missing key named"
    )
    assert not active_pods(cluster, namespace, "web")
    client.CoreV1Api(cluster.api).patch_namespaced_config_map("site", namespace, {"data": {"g": "1"}})
    ws = converged(cluster, namespace, "web", 2)
    assert conditions(ws)["ReplicaFailure"]["status"] == "False"


def test_restarted_at_rolls_the_pods(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 2})
    converged(cluster, namespace, "web", 2)
    before = pod_names(cluster, namespace)
    patch_spec(cluster, namespace, "web", {"restartedAt": "2026-11-26T01:00:00Z"})
    wait_for(
        lambda: len(pod_names(cluster, namespace)) == 2 and not pod_names(cluster, namespace) & before,
        120,
        "every pod replaced",
    )
    converged(cluster, namespace, "web", 2)
    pod = active_pods(cluster, namespace, "web")[0]
    assert pod.metadata.annotations[schema.RESTARTED_AT] == "2026-11-26T01:00:00Z"


def test_min_ready_seconds_holds_availability_and_the_rollout(cluster, namespace, operator):
    spec = {"replicas": 2, "minReadySeconds": 3600, "rollout": {"maxSurge": 1, "maxUnavailable": 0}}
    create(cluster, namespace, "web", spec)
    ws = converged(cluster, namespace, "web", 2)
    assert ws["status"]["availableReplicas"] == 0
    assert conditions(ws)["Available"]["status"] == "False"
    assert conditions(ws)["Progressing"]["reason"] == "WaitingForReady"

    # A new ready pod within its minReadySeconds lets no old pod go (maxUnavailable 0).
    before = pod_names(cluster, namespace)
    patch_spec(cluster, namespace, "web", {"image": "nginx:1.28"})

    def surged() -> bool:
        pods = active_pods(cluster, namespace, "web")
        new = [p for p in pods if p.spec.containers[0].image == "nginx:1.28"]
        return len(new) == 1 and all(
            any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []) for p in new
        )

    wait_for(surged, 120, "one new pod ready")
    assert before <= pod_names(cluster, namespace)

    # Lowered: the pods ready for longer become available, and the rollout goes on.
    patch_spec(cluster, namespace, "web", {"minReadySeconds": 1})
    wait_for(lambda: not pod_names(cluster, namespace) & before, 180, "every old pod replaced")
    converged(cluster, namespace, "web", 2)
    ws = wait_for(
        lambda: (w := get(cluster, namespace, "web"))["status"].get("availableReplicas") == 2 and w,
        60,
        "both pods available",
    )
    assert conditions(ws)["Available"]["status"] == "True"


def test_min_ready_seconds_makes_pods_available_without_another_event(cluster, namespace, operator):
    """Nothing changes once the pods are ready: the operator looks again when they are due."""
    create(cluster, namespace, "web", {"replicas": 2, "minReadySeconds": 2})
    converged(cluster, namespace, "web", 2)
    ws = wait_for(
        lambda: (w := get(cluster, namespace, "web"))["status"].get("availableReplicas") == 2 and w,
        60,
        "both pods available",
    )
    assert conditions(ws)["Progressing"]["reason"] == "ReplicasReady"
