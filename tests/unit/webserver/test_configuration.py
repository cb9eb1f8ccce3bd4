"""Configuration, HTTP health and minReadySeconds, without a cluster."""

import datetime

import pytest

from operators.webserver import desired, schema, status
from operators.webserver.desired import Plan, PodView, plan
from operators.webserver.reconciler import VALIDATOR, ConfigMaps, content_digest
from tests.framework.fakekube import FakeKube

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
SPEC = {"replicas": 2, "image": "nginx:1", "port": 8080}
H = desired.template_hash(SPEC)
OWNER = {
    "apiVersion": "demo.k8s.io/v1alpha1",
    "kind": "WebServer",
    "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
}
CONFIG = {
    "env": [
        {"name": "MODE", "value": "prod"},
        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "site", "key": "greeting"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
    ],
    "envFrom": [{"configMapRef": {"name": "common"}, "prefix": "C_"}, {"secretRef": {"name": "creds"}}],
    "volumes": [
        {"name": "html", "mountPath": "/usr/share/nginx/html", "configMap": {"name": "site"}},
        {"name": "tls", "mountPath": "/etc/tls", "secret": {"name": "tls"}},
    ],
    "command": ["nginx"],
    "args": ["-g", "daemon off;"],
    "podMetadata": {"labels": {"team": "web"}, "annotations": {"example.com/owner": "me"}},
    "restartedAt": "2026-01-01T00:00:00Z",
    "readinessPath": "/healthz",
    "liveness": {"path": "/livez", "periodSeconds": 10, "failureThreshold": 3, "initialDelaySeconds": 5},
}


def since(seconds_ago):
    return (NOW - datetime.timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z")


def pod(slot, thash=H, *, ready=True, ready_for=3600, config_error=""):
    return PodView(
        name=desired.pod_name("web", thash, slot),
        template_hash=thash,
        created=f"2026-01-01T00:00:{slot:02d}Z",
        phase="Running",
        scheduled=True,
        ready=ready,
        ready_since=since(ready_for) if ready else "",
        config_error=config_error,
    )


def test_the_new_fields_are_absent_from_the_template_unless_set():
    """An existing WebServer keeps its hash (no rollout on the upgrade that adds them)."""
    assert desired.template(SPEC) == desired.template({**SPEC, "env": [], "minReadySeconds": 0})
    assert desired.template_hash({**SPEC, "minReadySeconds": 30}) == H  # a Deployment does not roll either


@pytest.mark.parametrize("field", sorted(CONFIG))
def test_each_configuration_and_health_field_rolls_the_pods(field):
    assert desired.template_hash({**SPEC, field: CONFIG[field]}) != H


def test_a_configmap_content_change_rolls_the_pods():
    assert desired.template_hash(SPEC, "abc") != H
    assert desired.template_hash(SPEC, "abc") != desired.template_hash(SPEC, "abd")
    assert desired.template_hash(SPEC, "") == H


def test_pod_manifest_carries_the_configuration():
    p = desired.pod_manifest(OWNER, {**SPEC, **CONFIG}, 0, "abc")
    c = p["spec"]["containers"][0]
    assert c["env"] == [
        {"name": "MODE", "value": "prod"},
        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "site", "key": "greeting"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
    ]
    assert c["envFrom"] == [
        {"configMapRef": {"name": "common"}, "prefix": "C_"},
        {"secretRef": {"name": "creds"}},
    ]
    assert c["volumeMounts"] == [
        {"name": "html", "mountPath": "/usr/share/nginx/html", "readOnly": True},
        {"name": "tls", "mountPath": "/etc/tls", "readOnly": True},
    ]
    assert p["spec"]["volumes"] == [
        {"name": "html", "configMap": {"name": "site"}},
        {"name": "tls", "secret": {"secretName": "tls"}},
    ]
    assert c["command"] == ["nginx"] and c["args"] == ["-g", "daemon off;"]
    assert c["readinessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "http"},
        "periodSeconds": 1,
        "failureThreshold": 15,
    }
    assert c["livenessProbe"] == {
        "httpGet": {"path": "/livez", "port": "http"},
        "periodSeconds": 10,
        "failureThreshold": 3,
        "initialDelaySeconds": 5,
    }
    meta = p["metadata"]
    assert meta["labels"]["team"] == "web"
    assert meta["annotations"] == {"example.com/owner": "me", schema.RESTARTED_AT: "2026-01-01T00:00:00Z"}
    assert meta["name"] == desired.pod_name("web", desired.template_hash({**SPEC, **CONFIG}, "abc"), 0)


def test_pod_manifest_without_configuration_is_as_before():
    c = desired.pod_manifest(OWNER, SPEC, 0)["spec"]["containers"][0]
    assert c["readinessProbe"]["tcpSocket"] == {"port": 8080}
    assert not {"env", "envFrom", "volumeMounts", "command", "args", "livenessProbe"} & set(c)


def test_user_labels_never_replace_the_operators_own():
    """The schema rejects them; a spec that bypassed it still cannot move a pod out of the selector."""
    spec = {**SPEC, "podMetadata": {"labels": {"app": "other", "app.kubernetes.io/instance": "x"}}}
    labels = desired.pod_manifest(OWNER, spec, 0)["metadata"]["labels"]
    assert labels["app"] == "web" and labels["app.kubernetes.io/instance"] == "web"
    assert {f.path for f in schema.rule_errors(spec)} == {"spec.podMetadata.labels"}


def test_config_refs_name_every_configmap_and_the_keys_it_needs():
    assert desired.config_refs(CONFIG) == {"site": {"greeting"}, "common": set()}
    assert desired.config_refs(SPEC) == {}


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        (
            {"env": [{"name": "A", "value": "x", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
            "spec.env[0]",
            "not both",
        ),
        ({"env": [{"name": "A", "valueFrom": {}}]}, "spec.env[0].valueFrom", "exactly one"),
        ({"envFrom": [{"prefix": "P"}]}, "spec.envFrom[0]", "exactly one"),
        ({"volumes": [{"name": "v", "mountPath": "/a"}]}, "spec.volumes[0]", "exactly one"),
        (
            {"volumes": [{"name": "kube-api-access-x", "mountPath": "/a", "configMap": {"name": "c"}}]},
            "spec.volumes[0].name",
            "API token",
        ),
        (
            {
                "volumes": [
                    {"name": "a", "mountPath": "/a", "configMap": {"name": "c"}},
                    {"name": "b", "mountPath": "/a", "secret": {"name": "s"}},
                ]
            },
            "spec.volumes",
            "different mountPaths",
        ),
        ({"podMetadata": {"labels": {"demo.k8s.io/slot": "1"}}}, "spec.podMetadata.labels", "must not set"),
        ({"podMetadata": {"labels": {"-bad": "1"}}}, "spec.podMetadata.labels", "qualified names"),
        ({"podMetadata": {"annotations": {"a/b/c": "1"}}}, "spec.podMetadata.annotations", "qualified"),
        (
            {"podMetadata": {"annotations": {schema.RESTARTED_AT: "now"}}},
            "spec.podMetadata.annotations",
            "spec.restartedAt",
        ),
    ],
)
def test_rule_errors_twin_the_cel_rules(spec, path, fragment):
    errors = schema.rule_errors({**SPEC, **spec})
    assert [e.path for e in errors] == [path]
    assert fragment in errors[0].message


def test_a_full_valid_configuration_passes_schema_and_rules():
    spec = {**SPEC, **CONFIG, "minReadySeconds": 10}
    assert VALIDATOR.errors(spec) == [] and schema.rule_errors(spec) == []
    long_key = "a" * 253 + "/" + "b" * 63
    assert schema.rule_errors({**SPEC, "podMetadata": {"labels": {long_key: "v"}}}) == []
    assert schema.rule_errors({**SPEC, "podMetadata": {"labels": {"a" * 254 + "/b": "v"}}})
    assert schema.rule_errors({**SPEC, "podMetadata": {"labels": {"b" * 64: "v"}}})


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"env": [{"name": "1=A"}]}, "spec.env[0].name"),
        (
            {"volumes": [{"name": "Html", "mountPath": "/a", "configMap": {"name": "c"}}]},
            "spec.volumes[0].name",
        ),
        (
            {"volumes": [{"name": "h", "mountPath": "/a/", "configMap": {"name": "c"}}]},
            "spec.volumes[0].mountPath",
        ),
        (
            {"volumes": [{"name": "h", "mountPath": "rel", "configMap": {"name": "c"}}]},
            "spec.volumes[0].mountPath",
        ),
        ({"podMetadata": {"labels": {"a": "-x"}}}, "spec.podMetadata.labels.a"),
        ({"readinessPath": "healthz"}, "spec.readinessPath"),
        ({"minReadySeconds": -1}, "spec.minReadySeconds"),
    ],
)
def test_schema_rejects_what_the_pod_api_would(spec, path):
    assert [e.path for e in VALIDATOR.errors({**SPEC, **spec})] == [path]


def test_pod_view_reads_ready_since_and_the_kubelets_config_error():
    body = {
        "metadata": {"name": "p", "labels": {desired.HASH_LABEL: "h"}},
        "spec": {"nodeName": "n"},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T11:59:00Z"}],
            "containerStatuses": [
                {
                    "state": {
                        "waiting": {
                            "reason": "CreateContainerConfigError",
                            "message": 'secret "creds" not found',
                        }
                    }
                }
            ],
        },
    }
    view = desired.pod_view(body)
    assert view.ready_since == "2026-01-01T11:59:00Z" and view.config_error == 'secret "creds" not found'


def test_available_only_after_min_ready_seconds():
    assert desired.is_available(pod(0, ready_for=10), 0, NOW)
    assert not desired.is_available(pod(0, ready_for=10), 30, NOW)
    assert desired.is_available(pod(0, ready_for=30), 30, NOW)
    assert not desired.is_available(pod(0, ready=False), 0, NOW)
    no_time = PodView("p", H, "t", "Running", True, True)
    assert not desired.is_available(no_time, 30, NOW)  # the Deployment controller's rule
    spec = {**SPEC, "minReadySeconds": 30}
    assert desired.next_available_in(spec, [pod(0, ready_for=10), pod(1, ready_for=25)], NOW) == 5
    assert desired.next_available_in(spec, [pod(0, ready_for=40)], NOW) is None
    assert desired.next_available_in(SPEC, [pod(0, ready_for=1)], NOW) is None


def test_a_new_pod_within_min_ready_seconds_lets_no_old_pod_go():
    spec = {**SPEC, "replicas": 1, "minReadySeconds": 30, "rollout": {"maxSurge": 1, "maxUnavailable": 0}}
    thash = desired.template_hash(spec)
    old = pod(0, "oldhash")
    fresh = pod(0, thash, ready_for=10)
    assert plan("web", spec, [old, fresh], now=NOW).delete == []
    settled = pod(0, thash, ready_for=30)
    assert plan("web", spec, [old, settled], now=NOW).delete == [old.name]


def test_status_counts_available_pods_after_min_ready_seconds():
    spec = {**SPEC, "minReadySeconds": 30}
    thash = desired.template_hash(spec)
    st = status.compute(
        name="web",
        spec=spec,
        generation=1,
        pods=[pod(0, thash, ready_for=40), pod(1, thash, ready_for=5)],
        plan=Plan(),
        failure=None,
        current=None,
        now=NOW,
    )
    assert st["readyReplicas"] == 2 and st["availableReplicas"] == 1
    cond = {c["type"]: c for c in st["conditions"]}
    assert (cond["Progressing"]["status"], cond["Progressing"]["reason"]) == ("True", "WaitingForReady")
    assert "1/2 pods available" in cond["Progressing"]["message"]
    # maxUnavailable defaults to 0 for 2 replicas: both must be available.
    assert (cond["Available"]["status"], cond["Available"]["message"]) == ("False", "1 available, 2 required")


def test_a_pod_that_cannot_start_for_its_configuration_is_a_replica_failure():
    st = status.compute(
        name="web",
        spec=SPEC,
        generation=1,
        pods=[pod(0, ready=False, config_error='secret "creds" not found')],
        plan=Plan(),
        failure=None,
        current=None,
        now=NOW,
    )
    cond = {c["type"]: c for c in st["conditions"]}["ReplicaFailure"]
    assert (cond["status"], cond["reason"]) == ("True", "CreateContainerConfigError")
    assert 'secret "creds" not found' in cond["message"] and pod(0).name in cond["message"]


def configmap(kube, name, data, labels=None, namespace="ns"):
    """Store ConfigMap ``name``; returns what the metadata-only watch delivers of it."""
    meta = {"name": name, "namespace": namespace, "labels": labels or {}}
    stored = kube.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    return {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": stored["metadata"]}


async def test_configmaps_hash_content_name_what_is_missing_and_wake_only_readers():
    kicked = []
    kube = FakeKube()
    maps = ConfigMaps(kube, lambda ns, name: kicked.append((ns, name)))
    refs = {"site": {"greeting"}}
    _, missing = await maps.lookup("ns", "web", refs)
    assert missing == "ConfigMap site not found"

    maps.changed("ADDED", configmap(kube, "site", {"index.html": "hi"}))  # unlabelled
    assert kicked == [("ns", "web")]
    _, missing = await maps.lookup("ns", "web", refs)
    assert missing == "ConfigMap site has no key greeting"

    maps.changed("MODIFIED", configmap(kube, "site", {"greeting": "hello"}))
    first, missing = await maps.lookup("ns", "web", refs)
    assert missing is None and first
    assert first == (await maps.lookup("ns", "web", refs))[0]  # the same content, the same digest

    kicked.clear()
    maps.changed("MODIFIED", configmap(kube, "other", {"a": "b"}))  # nobody reads it
    assert kicked == []
    maps.changed("MODIFIED", configmap(kube, "site", {"greeting": "hello"}, {"x": "y"}))  # labels only
    assert (await maps.lookup("ns", "web", refs))[0] == first  # read again: nothing the pods see
    maps.changed("MODIFIED", configmap(kube, "site", {"greeting": "bonjour"}))
    assert kicked == [("ns", "web"), ("ns", "web")]
    assert (await maps.lookup("ns", "web", refs))[0] != first

    await maps.lookup("ns", "web", {})  # the WebServer stopped reading it
    kicked.clear()
    maps.changed("DELETED", configmap(kube, "site", {}))
    assert kicked == []
    assert maps.maps.held() == {}


def test_content_digest_covers_binary_data():
    assert content_digest({"data": {"a": "1"}}) != content_digest(
        {"data": {"a": "1"}, "binaryData": {"b": "AA=="}}
    )


def test_readiness_is_probed_every_second_outside_the_template():
    """Ready within a second of listening, a failing pod still out of the endpoints only after
    15 s; no startup probe (which made every pod wait for its own tick); the period outside the
    template hash, so an upgrade rolls no running pod for it."""
    c = desired.pod_manifest(OWNER, SPEC, 0)["spec"]["containers"][0]
    tcp = {"tcpSocket": {"port": SPEC["port"]}, "periodSeconds": 1, "failureThreshold": 15}
    assert c["readinessProbe"] == tcp
    assert "startupProbe" not in c
    assert "periodSeconds" not in repr(desired.template(SPEC))
    with_path = desired.pod_manifest(OWNER, {**SPEC, "readinessPath": "/healthz"}, 0)
    probe = with_path["spec"]["containers"][0]["readinessProbe"]
    assert (probe["periodSeconds"], probe["failureThreshold"]) == (1, 15)


def test_the_largest_spec_passes_the_schema_with_every_budget_full():
    """The sizing page's worst case (tests.framework.webservers.largest_spec) is a valid spec,
    each budgeted part at exactly schema.MAX_PART_CHARS."""
    from tests.framework.webservers import largest_spec

    spec = largest_spec()
    assert VALIDATOR.errors(spec) == [] and schema.rule_errors(spec) == []
    assert sum(len(e["name"]) + len(e.get("value", "")) for e in spec["env"]) == schema.MAX_PART_CHARS
    assert sum(map(len, spec["command"])) == sum(map(len, spec["args"])) == schema.MAX_PART_CHARS
    annotations = spec["podMetadata"]["annotations"]
    assert (
        schema.MAX_PART_CHARS - 32
        < sum(len(k) + len(v) for k, v in annotations.items())
        <= schema.MAX_PART_CHARS
    )
    assert len(spec["env"]) == 64 and len(spec["volumes"]) == 16 and len(spec["podMetadata"]["labels"]) == 32
