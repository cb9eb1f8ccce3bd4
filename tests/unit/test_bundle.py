"""The OLM bundle: what scorecard's static OLM checks, OperatorHub users and a restricted cluster expect.

These mirror scorecard's ``olm-spec-descriptors``, ``olm-status-descriptors``,
``olm-crds-have-resources`` and ``olm-bundle-validation`` (example keys exist in the CRD
schemas), plus the deployment and RBAC rules of our own standards.
"""

import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from operators import PACKAGES
from operators.netperf import desired as netperf_desired
from operators.tdset import desired as tdset_desired
from operators.webserver import desired as webserver_desired
from shared.api.validation import SchemaValidator, openapi_schema
from tests.framework.cluster import bundle_crds
from tools.generate import bundle

REPO = Path(__file__).resolve().parents[2]
# libyaml's loader where PyYAML has it (its wheels do): the same documents, ten times faster.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    return yaml.load(text, Loader=LOADER)


def load_all(text: str) -> Iterator[Any]:
    return yaml.load_all(text, Loader=LOADER)


MANIFESTS = REPO / "bundle" / "manifests"
CSV = load((MANIFESTS / f"{bundle.PACKAGE}.clusterserviceversion.yaml").read_text())
OWNED = {c["kind"]: c for c in CSV["spec"]["customresourcedefinitions"]["owned"]}
EXAMPLES = json.loads(CSV["metadata"]["annotations"]["alm-examples"])
CRDS = {
    doc["spec"]["names"]["kind"]: doc
    for path in MANIFESTS.glob("*.yaml")
    for doc in load_all(path.read_text())
    if doc and doc.get("kind") == "CustomResourceDefinition"
}
DEPLOYMENTS = {d["name"]: d for d in CSV["spec"]["install"]["spec"]["deployments"]}


@functools.cache
def _manifests() -> tuple[Any, ...]:
    """Every committed manifest, parsed once per process (each test gets its own copies)."""
    return tuple(load(p.read_text()) for p in MANIFESTS.glob("*.yaml"))


def manifests_of(kind: str) -> list[dict]:
    return [copy.deepcopy(d) for d in _manifests() if d and d.get("kind") == kind]


@pytest.mark.slow  # renders the whole bundle
def test_committed_bundle_is_what_make_bundle_renders():
    assert bundle.main(["--check"]) == 0


def test_one_example_per_owned_kind_and_the_examples_are_valid():
    assert sorted(e["kind"] for e in EXAMPLES) == sorted(OWNED) == sorted(CRDS)
    for example in EXAMPLES:
        schema = openapi_schema(CRDS[example["kind"]])
        errors = SchemaValidator(schema).errors(example["spec"])
        assert errors == [], (example["kind"], errors)
        assert set(example["spec"]) <= set(schema["properties"]["spec"]["properties"])


def test_every_example_spec_key_has_a_spec_descriptor():
    for example in EXAMPLES:
        paths = {d["path"] for d in OWNED[example["kind"]]["specDescriptors"]}
        assert set(example["spec"]) <= paths, example["kind"]


def test_descriptors_cover_every_top_level_field_and_crds_list_resources():
    for kind, owned in OWNED.items():
        schema = openapi_schema(CRDS[kind])
        assert {d["path"] for d in owned["specDescriptors"]} == set(
            schema["properties"]["spec"]["properties"]
        )
        assert {d["path"] for d in owned["statusDescriptors"]} == set(
            schema["properties"]["status"]["properties"]
        )
        assert owned["resources"], kind
        assert owned["description"] and owned["displayName"]
        assert owned["version"] == CRDS[kind]["spec"]["versions"][0]["name"]


def test_csv_metadata_a_catalog_user_expects():
    spec, annotations = CSV["spec"], CSV["metadata"]["annotations"]
    assert CSV["metadata"]["name"] == f"{bundle.PACKAGE}.v{spec['version']}"
    for key in ("displayName", "description", "keywords", "maintainers", "provider", "links", "maturity"):
        assert spec[key], key
    assert len(spec["icon"]) == 1 and spec["icon"][0]["mediatype"] == "image/svg+xml"
    assert spec["minKubeVersion"]
    assert annotations["capabilities"] == bundle.CAPABILITY and annotations["categories"]
    images = {i["image"] for i in spec["relatedImages"]}
    assert {
        c["image"] for d in DEPLOYMENTS.values() for c in d["spec"]["template"]["spec"]["containers"]
    } <= images
    assert any("/netperf:" in i for i in images)  # the benchmark image the Netperf pods use
    assert {m["type"] for m in spec["installModes"] if m["supported"]} == {
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        "AllNamespaces",
    }


@pytest.mark.parametrize("name", [f"{op}-operator" for op in PACKAGES])
def test_operator_deployment(name):
    d = DEPLOYMENTS[name]["spec"]
    # A leader and a standby; a rollout surges a Ready standby in before an old pod goes.
    assert d["replicas"] == 2
    assert d["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = d["template"]["spec"]
    # Spread over nodes where there are several, never refused where there is one.
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == d["selector"]["matchLabels"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]
    assert pod["serviceAccountName"] == name
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = pod["containers"]
    assert c["image"].endswith(f"/{name}:{CSV['spec']['version']}")
    assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and {"cpu", "memory"} <= set(
        c["resources"]["limits"]
    )
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {p["name"] for p in c["ports"]} == {"metrics", "probes"}
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    (env,) = [e for e in c["env"] if e["name"] == "WATCH_NAMESPACE"]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['olm.targetNamespaces']"
    # Leader election on, its Lease in the pod's own namespace, held under the pod's name.
    # Metrics over HTTPS with TokenReview + SubjectAccessReview (the default, said explicitly).
    assert c["args"] == ["--leader-elect", "--metrics-secure=true"]
    (metrics_port,) = [p for p in c["ports"] if p["name"] == "metrics"]
    assert metrics_port["containerPort"] == 8443
    # A mounted certificate when its Secret exists, else a self-signed one: the pod starts either way.
    (volume,) = [v for v in pod["volumes"] if v["name"] == "metrics-cert"]
    assert volume["secret"] == {"secretName": f"{name}-metrics-cert", "optional": True}
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "metrics-cert"]
    assert {"name": "METRICS_CERT_DIR", "value": mount["mountPath"]} in c["env"] and mount["readOnly"]
    fields = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c["env"]}
    assert fields["POD_NAMESPACE"] == "metadata.namespace" and fields["POD_NAME"] == "metadata.name"
    assert pod["terminationGracePeriodSeconds"] >= 15  # time to release the Lease on SIGTERM


def test_a_disruption_budget_keeps_one_operator_pod_through_a_drain():
    budgets = {b["metadata"]["name"]: b for b in manifests_of("PodDisruptionBudget")}
    assert set(budgets) == set(DEPLOYMENTS)
    for name, budget in budgets.items():
        assert budget["apiVersion"] == "policy/v1"
        # 1 of 2: a drain evicts one pod at a time (OLM refuses minAvailable 100%).
        assert budget["spec"] == {
            "minAvailable": 1,
            "selector": DEPLOYMENTS[name]["spec"]["selector"],
        }


def test_the_lease_rules_reach_one_named_lease_and_install_yaml_grants_them_in_its_namespace_only():
    install = CSV["spec"]["install"]["spec"]
    docs = [d for d in load_all((REPO / "deploy" / "install.yaml").read_text()) if d]
    for perm in install["permissions"]:
        op = perm["serviceAccountName"].removesuffix("-operator")
        leases = [r for r in perm["rules"] if r["apiGroups"] == ["coordination.k8s.io"]]
        # get/update only on the operator's own Lease: never kube-controller-manager's.
        assert leases == [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": [f"{op}-leader"],
                "verbs": ["get", "update"],
            },
        ]
        (cluster_role,) = [
            d
            for d in docs
            if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith(perm["serviceAccountName"])
        ]
        assert not [r for r in cluster_role["rules"] if "leases" in r["resources"]]
        (role,) = [
            d
            for d in docs
            if d["kind"] == "Role" and d["metadata"]["name"].startswith(perm["serviceAccountName"])
        ]
        assert role["metadata"]["namespace"] == bundle.INSTALL_NAMESPACE and role["rules"] == leases


def test_rbac_is_namespaced_and_least_privilege():
    install = CSV["spec"]["install"]["spec"]
    # Cluster-wide only the reviews of the /metrics filter, which are cluster-scoped kinds; and
    # the Netperf operator reads a namespace's Pod Security label (get, no list or watch).
    extra = {"netperf-operator": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]}
    assert install["clusterPermissions"] == [
        {
            "serviceAccountName": name,
            "rules": [
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["subjectaccessreviews"],
                    "verbs": ["create"],
                },
                *extra.get(name, []),
            ],
        }
        for name in DEPLOYMENTS
    ]
    assert {p["serviceAccountName"] for p in install["permissions"]} == set(DEPLOYMENTS)
    for perm in install["permissions"]:
        for rule in perm["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (perm["serviceAccountName"], rule)
            assert "customresourcedefinitions" not in rule["resources"]
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
    # No ServiceAccount manifest may shadow a CSV deployment's account (OLM creates those).
    assert not {sa["metadata"]["name"] for sa in manifests_of("ServiceAccount")} & set(DEPLOYMENTS)


def test_service_monitors_select_the_metrics_services_by_label_and_port_name():
    services = manifests_of("Service")
    monitors = manifests_of("ServiceMonitor")
    assert len(services) == len(monitors) == len(DEPLOYMENTS)
    for monitor in monitors:
        selector = monitor["spec"]["selector"]["matchLabels"]
        (svc,) = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
        port_names = {p["name"] for p in svc["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= port_names
        # ... and the Service reaches the operator pods' named metrics port.
        deployment = DEPLOYMENTS[svc["spec"]["selector"]["app.kubernetes.io/name"]]
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert svc["spec"]["selector"].items() <= pod_labels.items()
        (c,) = deployment["spec"]["template"]["spec"]["containers"]
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= {p["name"] for p in c["ports"]}
        # HTTPS with the scraper's token, as the kubebuilder scaffold's ServiceMonitor.
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
        assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
        assert endpoint["tlsConfig"] == {
            "insecureSkipVerify": True,
            "serverName": f"{svc['metadata']['name']}.k8s-operators-py.svc",
        }


def test_a_metrics_reader_cluster_role_ships_in_the_bundle_and_install_yaml_unbound():
    want = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": "k8s-operators-py-metrics-reader",
            "labels": {"app.kubernetes.io/part-of": bundle.PACKAGE},
        },
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }
    assert [r for r in manifests_of("ClusterRole") if r["metadata"]["name"] == want["metadata"]["name"]] == [
        want
    ]
    docs = [d for d in load_all((REPO / "deploy" / "install.yaml").read_text()) if d]
    assert want in docs
    # Who scrapes is the cluster's to say: nothing binds it.
    assert not [
        d
        for d in docs
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and d["roleRef"]["name"] == want["metadata"]["name"]
    ]


INSTALL = [d for d in load_all((REPO / "deploy" / "install.yaml").read_text()) if d]


def test_an_editor_and_a_viewer_role_per_kind_aggregate_to_admin_edit_and_view_in_bundle_and_install():
    """As operator-sdk scaffolds them: a cluster admin grants our kinds the usual way. The editor
    only where pods may be created (admin, edit): each kind makes pods."""
    roles = {r["metadata"]["name"]: r for r in manifests_of("ClusterRole")}
    installed = {d["metadata"]["name"]: d for d in INSTALL if d["kind"] == "ClusterRole"}
    for owned in OWNED.values():
        group, plural = owned["name"].split(".", 1)[1], owned["name"].split(".", 1)[0]
        operator = {"app.example.com": "netperf", "schedule.rs": "tdset", "demo.k8s.io": "webserver"}[group]
        editor, viewer = (roles[f"{bundle.PACKAGE}-{operator}-{r}-role"] for r in ("editor", "viewer"))
        assert (
            installed[editor["metadata"]["name"]] == editor
            and installed[viewer["metadata"]["name"]] == viewer
        )
        aggregation = {k: v for k, v in editor["metadata"]["labels"].items() if "aggregate-to" in k}
        assert aggregation == {
            "rbac.authorization.k8s.io/aggregate-to-admin": "true",
            "rbac.authorization.k8s.io/aggregate-to-edit": "true",
        }
        assert {k: v for k, v in viewer["metadata"]["labels"].items() if "aggregate-to" in k} == {
            "rbac.authorization.k8s.io/aggregate-to-view": "true"
        }
        assert editor["rules"][0] == {
            "apiGroups": [group],
            "resources": [plural],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }
        assert viewer["rules"] == [
            {"apiGroups": [group], "resources": [plural], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [group], "resources": [f"{plural}/status"], "verbs": ["get"]},
        ]
        # Nothing beyond the kind: the roles grant no Secrets, pods or anything to escalate with.
        assert {r.split("/")[0] for rule in editor["rules"] for r in rule["resources"]} == {plural}


def test_olm_users_get_the_admission_policies_in_a_file_of_their_own_and_the_bundle_has_none():
    """OLM v0 installs only a fixed list of kinds: ValidatingAdmissionPolicy is not one."""
    kinds = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    assert not [d for k in kinds for d in manifests_of(k)]
    standalone = [d for d in load_all((REPO / "deploy" / "admission-policies.yaml").read_text()) if d]
    assert standalone == [d for d in INSTALL if d["kind"] in kinds]
    policies = {d["metadata"]["name"] for d in standalone if d["kind"] == kinds[0]}
    bindings = {d["spec"]["policyName"]: d for d in standalone if d["kind"] == kinds[1]}
    assert policies == set(bindings) and len(policies) == 5
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings.values())


CHILD_OWNER = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "namespace": "ns", "uid": "u"}}


def _children_pod_labels() -> list[dict[str, str]]:
    """The labels of pods the operators create, in whatever namespace their users choose."""
    return [
        webserver_desired.pod_manifest(CHILD_OWNER, {"replicas": 1}, 0)["metadata"]["labels"],
        tdset_desired.deployment_manifest(CHILD_OWNER, {"container": {"image": "i", "port": 80}}, 1)["spec"][
            "template"
        ]["metadata"]["labels"],
        netperf_desired.server_pod(
            {**CHILD_OWNER, "metadata": {**CHILD_OWNER["metadata"], "generation": 1}}, {}
        )["metadata"]["labels"],
    ]


def test_network_policies_admit_only_metrics_and_probes_to_exactly_the_operator_pods():
    """One NetworkPolicy per operator, in install.yaml; metrics from the monitoring namespace
    only, probes from anywhere (the kubelet); egress open."""
    policies = {d["metadata"]["name"]: d for d in INSTALL if d["kind"] == "NetworkPolicy"}
    deployments = {d["metadata"]["name"]: d for d in INSTALL if d["kind"] == "Deployment"}
    assert set(policies) == set(deployments) == set(DEPLOYMENTS)
    for name, policy in policies.items():
        assert policy["apiVersion"] == "networking.k8s.io/v1"
        assert policy["metadata"]["namespace"] == bundle.INSTALL_NAMESPACE
        spec = policy["spec"]
        assert set(spec["podSelector"]) == {"matchLabels"}
        selector = spec["podSelector"]["matchLabels"]
        # The labels the pods really carry, in install.yaml and in the CSV: this operator's only.
        for source in (deployments, DEPLOYMENTS):
            selected = {
                n
                for n, d in source.items()
                if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
            }
            assert selected == {name}
        assert not [labels for labels in _children_pod_labels() if selector.items() <= labels.items()]
        # Ingress only, to exactly the ports the metrics Service and the probes use: the metrics
        # port from pods of the monitoring namespace (selected by the name label the API server
        # sets), the probe port from anywhere (the kubelet's address is the node's).
        assert spec["policyTypes"] == ["Ingress"]
        metrics_rule, probes_rule = spec["ingress"]
        assert metrics_rule["from"] == [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ]
        assert set(probes_rule) == {"ports"}
        (c,) = DEPLOYMENTS[name]["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: (p["containerPort"], p["protocol"]) for p in c["ports"]}
        assert c["livenessProbe"]["httpGet"]["port"] == c["readinessProbe"]["httpGet"]["port"] == "probes"
        (svc,) = [s for s in manifests_of("Service") if s["metadata"]["name"] == f"{name}-metrics"]
        assert [p["targetPort"] for p in svc["spec"]["ports"]] == ["metrics"]
        assert [(p["port"], p["protocol"]) for p in metrics_rule["ports"]] == [ports["metrics"]]
        assert [(p["port"], p["protocol"]) for p in probes_rule["ports"]] == [ports["probes"]]


@pytest.mark.slow  # renders the whole bundle twice
def test_the_monitoring_namespace_is_a_generator_option_that_changes_only_the_policies():
    """``--monitoring-namespace`` (repeatable), e.g. OpenShift's two monitoring stacks: the
    same files but for the policies' metrics rule, in install.yaml and network-policies.yaml."""
    default = bundle.render("0.1.0", bundle.DEFAULT_REGISTRY)
    openshift = ("openshift-monitoring", "openshift-user-workload-monitoring")
    other = bundle.render("0.1.0", bundle.DEFAULT_REGISTRY, openshift)
    assert {p for p in default if default[p] != other[p]} == {
        REPO / "deploy" / "install.yaml",
        REPO / "deploy" / "network-policies.yaml",
    }
    for path in ("install.yaml", "network-policies.yaml"):
        policies = [d for d in load_all(other[REPO / "deploy" / path]) if d and d["kind"] == "NetworkPolicy"]
        assert len(policies) == len(DEPLOYMENTS)
        for policy in policies:
            assert [
                peer["namespaceSelector"]["matchLabels"] for peer in policy["spec"]["ingress"][0]["from"]
            ] == [{"kubernetes.io/metadata.name": n} for n in openshift]
    with pytest.raises(ValueError, match="at least one monitoring namespace"):
        bundle.network_policy(bundle.descriptions()[0], ())


def test_olm_users_get_the_same_network_policies_in_a_file_of_their_own_and_the_bundle_has_none():
    """OLM before v0.32 fails a whole InstallPlan on a NetworkPolicy and the pinned operator-sdk's
    bundle validate refuses the kind: OLM users apply deploy/network-policies.yaml themselves."""
    assert not manifests_of("NetworkPolicy")
    standalone = [d for d in load_all((REPO / "deploy" / "network-policies.yaml").read_text()) if d]
    assert all("namespace" not in d["metadata"] for d in standalone)  # kubectl apply -n <namespace>
    in_install = [
        {**d, "metadata": {k: v for k, v in d["metadata"].items() if k != "namespace"}}
        for d in INSTALL
        if d["kind"] == "NetworkPolicy"
    ]
    assert standalone == in_install


def test_annotations_and_bundle_dockerfile_agree():
    annotations = load((REPO / "bundle" / "metadata" / "annotations.yaml").read_text())["annotations"]
    dockerfile = (REPO / "bundle" / "bundle.Dockerfile").read_text()
    for key, value in annotations.items():
        assert f"LABEL {key}={value}" in dockerfile
    assert annotations["operators.operatorframework.io.bundle.channel.default.v1"] in annotations[
        "operators.operatorframework.io.bundle.channels.v1"
    ].split(",")


def test_integration_tests_install_the_bundles_crds():
    installed = {
        load(p.read_text())["metadata"]["name"]
        for p in bundle_crds()
        if "CustomResourceDefinition" in p.read_text()
    }
    assert installed == {c["name"] for c in OWNED.values()}


def test_the_first_release_replaces_nothing_and_a_later_one_replaces_the_newest_released():
    assert bundle.RELEASED[0] == CSV["spec"]["version"]
    assert "replaces" not in CSV["spec"]
    assert bundle.replaces("0.1.0") is None
    assert bundle.replaces("0.1.1") == "k8s-operators-py.v0.1.0"
    assert bundle.replaces("1.0.0") == f"k8s-operators-py.v{bundle.RELEASED[-1]}"
    later = bundle.csv("0.1.1", bundle.DEFAULT_REGISTRY)
    assert later["spec"]["replaces"] == "k8s-operators-py.v0.1.0"
    assert later["metadata"]["name"] == "k8s-operators-py.v0.1.1"


@pytest.mark.slow  # renders and writes a whole release
def test_render_into_writes_a_release_elsewhere_and_leaves_the_repo_alone(tmp_path):
    before = {p: p.read_bytes() for p in (REPO / "bundle").rglob("*") if p.is_file()}
    bundle_dir = bundle.render_into(tmp_path, "0.1.1", "quay.io/you")
    csv = load((bundle_dir / "manifests" / f"{bundle.PACKAGE}.clusterserviceversion.yaml").read_text())
    assert csv["spec"]["replaces"] == "k8s-operators-py.v0.1.0"
    images = {c["image"] for d in csv["spec"]["install"]["spec"]["deployments"] for c in _containers(d)}
    assert images == {f"quay.io/you/{op}-operator:0.1.1" for op in PACKAGES}
    assert (bundle_dir / "bundle.Dockerfile").is_file() and (
        bundle_dir / "metadata" / "annotations.yaml"
    ).is_file()
    dockerfile = (tmp_path / "images" / "webserver-operator" / "Dockerfile").read_text()
    assert 'org.opencontainers.image.version="0.1.1"' in dockerfile
    assert {p: p.read_bytes() for p in (REPO / "bundle").rglob("*") if p.is_file()} == before


def _containers(deployment: dict) -> list[dict]:
    return deployment["spec"]["template"]["spec"]["containers"]
