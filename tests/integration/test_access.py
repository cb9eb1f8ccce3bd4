"""A tenant obtains through our kinds nothing they could not do directly: the admission
policies of deploy/admission-policies.yaml (applied by the suite's cluster fixture, as users
apply them) refuse a spec naming what its author lacks the right to, say which right, and admit
it once granted; the operators' own status writes and every update that leaves spec alone pass;
the editor/viewer roles reach namespace users through edit/view aggregation.

Every request here is made as an impersonated user (``Impersonate-User``), whose rights come
from Roles made by the test, on the real API server. Refusals and most admissions are dry runs
(``dryRun=All`` goes through admission and stores nothing).
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.framework import netperfs, tdsets, webservers
from tests.framework.cluster import ADMISSION_POLICIES, REPO, Cluster
from tests.framework.properties import examples
from tests.framework.waits import wait_for

PROJECT = "k8s-operators-py"
KINDS = {
    "webserver": (webservers.GROUP, webservers.VERSION, webservers.PLURAL, "WebServer"),
    "tdset": (tdsets.GROUP, tdsets.VERSION, tdsets.PLURAL, "TDSet"),
    "netperf": (netperfs.GROUP, netperfs.VERSION, netperfs.PLURAL, "Netperf"),
}
ROLES = REPO / "bundle" / "manifests"


def as_user(cluster: Cluster, user: str) -> client.ApiClient:
    """A client whose every request is made as ``user`` (``kubectl --as``)."""
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    api.set_default_header("Impersonate-User", user)
    return api


def role(cluster: Cluster, namespace: str, user: str, name: str, rules: list[dict[str, Any]]) -> None:
    """A Role of ``rules`` bound to ``user`` in ``namespace``."""
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    bind(cluster, namespace, user, "Role", name)


def bind(cluster: Cluster, namespace: str, user: str, kind: str, name: str) -> None:
    client.RbacAuthorizationV1Api(cluster.api).create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": f"{name}-{user}"[:63]},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )


def allowed(cluster: Cluster, user: str, namespace: str, verb: str, resource: str, **attrs: str) -> bool:
    """Whether the API server's authorizer (the one the policies ask) lets ``user`` do it yet."""
    review = client.AuthorizationV1Api(cluster.api).create_subject_access_review(
        {
            "spec": {
                "user": user,
                "resourceAttributes": {"namespace": namespace, "verb": verb, "resource": resource, **attrs},
            }
        }
    )
    return bool(review.status.allowed)


def editor(cluster: Cluster, namespace: str, user: str, kind: str) -> None:
    """``user`` holds the kind's shipped editor ClusterRole in ``namespace``, nothing else."""
    name = f"{PROJECT}-{kind}-editor-role"
    path = ROLES / f"{name}_rbac.authorization.k8s.io_v1_clusterrole.yaml"
    try:
        client.RbacAuthorizationV1Api(cluster.api).create_cluster_role(yaml.safe_load(path.read_text()))
    except ApiException as exc:
        if exc.status != 409:
            raise
    bind(cluster, namespace, user, "ClusterRole", name)
    plural = KINDS[kind][2]
    wait_for(lambda: allowed(cluster, user, namespace, "create", plural, group=KINDS[kind][0]), 30, "editor")


def body(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    group, version, _, kind_name = KINDS[kind]
    return {"apiVersion": f"{group}/{version}", "kind": kind_name, "metadata": {"name": name}, "spec": spec}


def create(
    api: client.ApiClient, namespace: str, kind: str, name: str, spec: dict[str, Any], *, dry: bool = True
):
    group, version, plural, _ = KINDS[kind]
    return client.CustomObjectsApi(api).create_namespaced_custom_object(
        group, version, namespace, plural, body(kind, name, spec), **({"dry_run": "All"} if dry else {})
    )


def refusal(api: client.ApiClient, namespace: str, kind: str, spec: dict[str, Any]) -> str:
    """The message of the refused (dry-run) create of ``spec``; fails if it is admitted."""
    with pytest.raises(ApiException) as err:
        create(api, namespace, kind, "x", spec)
    assert err.value.status in (403, 422), err.value.body
    return str(json.loads(err.value.body)["message"])


def admitted(api: client.ApiClient, namespace: str, kind: str, spec: dict[str, Any]) -> None:
    create(api, namespace, kind, "x", spec)


@pytest.fixture(scope="module")
def enforced(cluster: Cluster) -> None:
    """The policies the cluster fixture applied, once the API server enforces them: a create by
    a user without any right on Secrets, naming one, is refused (dry run, so nothing is kept)."""
    core = client.CoreV1Api(cluster.api)
    namespace = f"access-probe-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        editor(cluster, namespace, "probe", "webserver")
        api = as_user(cluster, "probe")
        spec = {"replicas": 0, "envFrom": [{"secretRef": {"name": "s"}}]}

        def refused() -> bool:
            try:
                create(api, namespace, "webserver", "probe", spec)
            except ApiException as exc:
                return exc.status in (403, 422) and "secrets" in str(exc.body)
            return False

        wait_for(refused, 60, "the admission policies enforced")
    finally:
        core.delete_namespace(namespace)


@pytest.fixture
def tenant(cluster: Cluster, namespace: str, enforced: None) -> Iterator[client.ApiClient]:
    """A user allowed to create and edit all three of our kinds in ``namespace``, and nothing
    else (no Secrets, ConfigMaps, pods, Deployments)."""
    for kind in KINDS:
        editor(cluster, namespace, "alice", kind)
    yield as_user(cluster, "alice")


def test_every_policy_in_the_deploy_file_type_checks_against_our_crds(cluster, enforced):
    """The API server type-checks each expression against the CRD's schema in the background;
    a misspelt field would show as a warning there (and fail at admission)."""
    adm = client.AdmissionregistrationV1Api(cluster.api)
    names = [
        d["metadata"]["name"]
        for d in yaml.safe_load_all(ADMISSION_POLICIES.read_text())
        if d and d["kind"] == "ValidatingAdmissionPolicy"
    ]
    assert len(names) == 5

    def checked(name: str) -> Any:
        policy = adm.read_validating_admission_policy(name)
        status = policy.status
        if status is None or status.observed_generation != policy.metadata.generation:
            return None
        return status

    for name in names:
        status = wait_for(lambda name=name: checked(name), 30, f"{name} type-checked")
        warnings = status.type_checking.expression_warnings if status.type_checking else None
        assert not warnings, (name, warnings)


# The fields of a WebServer naming a Secret or a ConfigMap: (kind of object, spec fragment).
def _web_refs(kind: str, name: str) -> dict[str, dict[str, Any]]:
    secret = kind == "Secret"
    return {
        "volume": {
            "volumes": [
                {"name": "v", "mountPath": "/v", ("secret" if secret else "configMap"): {"name": name}}
            ]
        },
        "env": {
            "env": [
                {
                    "name": "E",
                    "valueFrom": {
                        ("secretKeyRef" if secret else "configMapKeyRef"): {"name": name, "key": "k"}
                    },
                }
            ]
        },
        "envFrom": {"envFrom": [{("secretRef" if secret else "configMapRef"): {"name": name}}]},
    }


WEB_CASES = [(kind, field) for kind in ("Secret", "ConfigMap") for field in ("volume", "env", "envFrom")]


@pytest.mark.parametrize(("kind", "field"), WEB_CASES)
def test_a_webserver_naming_an_object_its_author_may_not_get_is_refused_until_granted(
    cluster, namespace, tenant, kind, field
):
    resource = "secrets" if kind == "Secret" else "configmaps"
    spec = {"replicas": 1, **_web_refs(kind, "db")[field]}
    message = refusal(tenant, namespace, "webserver", spec)
    assert f'get on {resource} "db" in namespace "{namespace}", which "alice" lacks' in message, message
    # Another object of the kind is no help; get on that one is.
    role(
        cluster,
        namespace,
        "alice",
        "other",
        [{"apiGroups": [""], "resources": [resource], "verbs": ["get"], "resourceNames": ["other"]}],
    )
    role(
        cluster,
        namespace,
        "alice",
        "db",
        [{"apiGroups": [""], "resources": [resource], "verbs": ["get"], "resourceNames": ["db"]}],
    )
    wait_for(lambda: allowed(cluster, "alice", namespace, "get", resource, name="db"), 30, "get granted")
    admitted(tenant, namespace, "webserver", spec)


POOL = [f"s{i}" for i in range(6)]
READABLE = set(POOL[:3])


@pytest.fixture(scope="module")
def pool(cluster: Cluster, enforced: None) -> Iterator[tuple[str, client.ApiClient]]:
    """A namespace where ``bob`` edits WebServers and may get the Secrets and ConfigMaps of
    ``READABLE`` only."""
    core = client.CoreV1Api(cluster.api)
    namespace = f"access-pool-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        editor(cluster, namespace, "bob", "webserver")
        rules = [
            {
                "apiGroups": [""],
                "resources": ["secrets", "configmaps"],
                "verbs": ["get"],
                "resourceNames": sorted(READABLE),
            }
        ]
        role(cluster, namespace, "bob", "readable", rules)
        for name in READABLE:
            wait_for(
                lambda name=name: allowed(cluster, "bob", namespace, "get", "secrets", name=name),
                30,
                "granted",
            )
        yield namespace, as_user(cluster, "bob")
    finally:
        core.delete_namespace(namespace)


REF = st.tuples(
    st.sampled_from(["Secret", "ConfigMap"]),
    st.sampled_from(["volume", "env", "envFrom"]),
    st.sampled_from(POOL),
)


def _spec(refs: list[tuple[str, str, str]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 0}
    for i, (kind, field, name) in enumerate(refs):
        fragment = _web_refs(kind, name)[field]
        (key, (item,)) = next(iter(fragment.items()))
        if field == "volume":
            item = {**item, "name": f"v{i}", "mountPath": f"/v{i}"}
        elif field == "env":
            item = {**item, "name": f"E{i}"}
        spec.setdefault(key, []).append(item)
    return spec


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(refs=st.lists(REF, max_size=12))
def test_a_webserver_naming_any_objects_is_refused_iff_one_is_unreadable_naming_each(pool, refs):
    namespace, api = pool
    spec = _spec(refs)
    unreadable = {(kind, name) for kind, _, name in refs if name not in READABLE}
    if not unreadable:
        admitted(api, namespace, "webserver", spec)
        return
    message = refusal(api, namespace, "webserver", spec)
    # The first failed check is named (the API server reports one): one of the unreadable.
    named = {
        (kind, name)
        for kind, resource in (("Secret", "secrets"), ("ConfigMap", "configmaps"))
        for name in POOL
        if f'needs get on {resource} "{name}" in namespace "{namespace}", which "bob" lacks' in message
    }
    assert len(named) == 1 and named <= unreadable, (named, unreadable, message)


def test_more_distinct_names_than_the_policy_can_check_are_refused_with_the_reason(cluster, namespace):
    """Even for a cluster admin: 25 distinct Secrets, past what one policy may check."""
    spec = {"replicas": 0, "envFrom": [{"secretRef": {"name": f"s{i}"}} for i in range(16)]}
    spec["env"] = [
        {"name": f"E{i}", "valueFrom": {"secretKeyRef": {"name": f"t{i}", "key": "k"}}} for i in range(9)
    ]
    message = refusal(cluster.api, namespace, "webserver", spec)
    assert "at most 24 distinct secrets" in message, message
    spec["env"] = spec["env"][:8]
    admitted(cluster.api, namespace, "webserver", spec)


def test_an_update_is_checked_when_it_changes_spec_and_only_then(cluster, namespace, tenant):
    """An admin's WebServer mounting a Secret alice may not read: she may label it, scale it
    through /scale, and the operator may write its status; changing its spec (which would let her
    serve the Secret with an image of hers) is refused naming the Secret."""
    group, version, plural, _ = KINDS["webserver"]
    spec = {"replicas": 1, **_web_refs("Secret", "db")["envFrom"]}
    create(cluster.api, namespace, "webserver", "web", spec, dry=False)
    mine = client.CustomObjectsApi(tenant)
    mine.patch_namespaced_custom_object(
        group, version, namespace, plural, "web", {"metadata": {"labels": {"team": "a"}}}
    )
    mine.patch_namespaced_custom_object_scale(
        group, version, namespace, plural, "web", {"spec": {"replicas": 2}}
    )
    with pytest.raises(ApiException) as err:
        mine.patch_namespaced_custom_object(
            group, version, namespace, plural, "web", {"spec": {"image": "evil"}}
        )
    assert err.value.status == 403 and 'get on secrets "db"' in json.loads(err.value.body)["message"]
    # Editing a reference in is refused the same way.
    role(
        cluster,
        namespace,
        "alice",
        "mine",
        [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["mine"]}],
    )
    wait_for(lambda: allowed(cluster, "alice", namespace, "get", "secrets", name="mine"), 30, "get granted")
    create(
        tenant,
        namespace,
        "webserver",
        "own",
        {"replicas": 1, **_web_refs("Secret", "mine")["volume"]},
        dry=False,
    )
    with pytest.raises(ApiException) as err:
        mine.patch_namespaced_custom_object(
            group, version, namespace, plural, "own", {"spec": {"envFrom": [{"secretRef": {"name": "db"}}]}}
        )
    assert 'get on secrets "db"' in json.loads(err.value.body)["message"], err.value.body


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_operators_status_writes_are_never_checked(cluster, namespace, enforced, kind):
    """The operator's ServiceAccount (exactly the CSV's rules: no Secrets, no scale of anyone's
    Deployments) patches the status of objects naming what it may not read."""
    specs = {
        "webserver": {"replicas": 1, **_web_refs("Secret", "db")["volume"]},
        "netperf": {"path": "host", "image": "busybox:1.36"},
        "tdset": _target_spec("apps/v1", "Deployment"),
    }
    create(cluster.api, namespace, kind, "o", specs[kind], dry=False)
    operator = config.new_client_from_config(config_file=str(cluster.operator_kubeconfig(kind)))
    group, version, plural, _ = KINDS[kind]
    status = {"status": {"observedGeneration": 1}}
    client.CustomObjectsApi(operator).patch_namespaced_custom_object_status(
        group, version, namespace, plural, "o", status
    )
    got = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        group, version, namespace, plural, "o"
    )
    assert got["status"]["observedGeneration"] == 1


NETPERF_REFUSED = {
    "path-host": ({"path": "host"}, "spec.path host"),
    "compare-with-host": ({"compare": ["pod", "host"]}, "spec.path host"),
    "custom-image": ({"image": "busybox:1.36"}, "spec.image"),
    "look-alike-image": ({"image": "ghcr.io/k8s-operators-py/netperf-evil:1"}, "spec.image"),
}


@pytest.mark.parametrize("case", sorted(NETPERF_REFUSED))
def test_a_netperf_running_more_than_our_pods_needs_create_on_pods(cluster, namespace, tenant, case):
    spec, field = NETPERF_REFUSED[case]
    message = refusal(tenant, namespace, "netperf", spec)
    assert field in message and "create on pods" in message and namespace in message, message
    role(
        cluster, namespace, "alice", "pods", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]
    )
    wait_for(lambda: allowed(cluster, "alice", namespace, "create", "pods"), 30, "pods granted")
    admitted(tenant, namespace, "netperf", spec)


def test_a_netperf_of_our_image_on_chosen_nodes_needs_no_more_than_the_editor_role(namespace, tenant):
    for spec in (
        {},
        {"serverNode": "n1", "clientNode": "n2", "path": "service"},
        {"image": "ghcr.io/k8s-operators-py/netperf:9.9.9", "compare": ["pod", "service"]},
        {"image": "ghcr.io/k8s-operators-py/netperf@sha256:" + "0" * 64},
    ):
        admitted(tenant, namespace, "netperf", spec)


TARGETS = {
    "deployment": ("apps/v1", "Deployment", "deployments", "apps"),
    "statefulset": ("apps/v1", "StatefulSet", "statefulsets", "apps"),
    "webserver": ("demo.k8s.io/v1alpha1", "WebServer", "webservers", "demo.k8s.io"),
    "custom-kind": ("widgets.example.com/v2", "Widget", "widgets", "widgets.example.com"),
}


def _target_spec(api_version: str, kind: str) -> dict[str, Any]:
    spec = {k: v for k, v in tdsets.steady(1).items() if k != "container"}
    return {**spec, "scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": "t"}}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_tdset_scaling_a_target_needs_update_on_its_scale(cluster, namespace, enforced, target):
    """As carol, who may edit TDSets only (alice's WebServer editor role would let her scale
    WebServers directly)."""
    editor(cluster, namespace, "carol", "tdset")
    tenant = as_user(cluster, "carol")
    api_version, kind, resource, group = TARGETS[target]
    spec = _target_spec(api_version, kind)
    message = refusal(tenant, namespace, "tdset", spec)
    assert f'update on {resource}/scale "t" in namespace "{namespace}"' in message, message
    # update on another object's scale, or on the object itself, is no help.
    role(
        cluster,
        namespace,
        "carol",
        "other",
        [
            {
                "apiGroups": [group],
                "resources": [f"{resource}/scale"],
                "verbs": ["update"],
                "resourceNames": ["u"],
            }
        ],
    )
    role(
        cluster,
        namespace,
        "carol",
        "itself",
        [{"apiGroups": [group], "resources": [resource], "verbs": ["update"], "resourceNames": ["t"]}],
    )
    wait_for(
        lambda: allowed(cluster, "carol", namespace, "update", resource, group=group, name="t"), 30, "granted"
    )
    refusal(tenant, namespace, "tdset", spec)
    role(
        cluster,
        namespace,
        "carol",
        "scale",
        [
            {
                "apiGroups": [group],
                "resources": [f"{resource}/scale"],
                "verbs": ["update"],
                "resourceNames": ["t"],
            }
        ],
    )
    wait_for(
        lambda: allowed(
            cluster, "carol", namespace, "update", resource, group=group, subresource="scale", name="t"
        ),
        30,
        "scale granted",
    )
    admitted(tenant, namespace, "tdset", spec)


def test_a_tdset_reading_a_holidays_configmap_needs_get_on_it(cluster, namespace, tenant):
    spec = {**tdsets.steady(1), "holidays": {"replicas": 0, "configMapRef": {"name": "days"}}}
    message = refusal(tenant, namespace, "tdset", spec)
    assert 'spec.holidays.configMapRef needs get on configmaps "days"' in message, message
    role(
        cluster,
        namespace,
        "alice",
        "days",
        [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["days"]}],
    )
    wait_for(lambda: allowed(cluster, "alice", namespace, "get", "configmaps", name="days"), 30, "granted")
    admitted(tenant, namespace, "tdset", spec)


PLAIN = {
    "webserver": {"replicas": 1},
    "netperf": {},
    "tdset": tdsets.steady(1),
}


def _aggregated(cluster: Cluster, role_name: str, plurals: set[str]) -> bool:
    rules = client.RbacAuthorizationV1Api(cluster.api).read_cluster_role(role_name).rules or []
    return plurals <= {r for rule in rules for r in rule.resources or []}


@pytest.fixture(scope="module")
def kind_roles(cluster: Cluster) -> None:
    """The editor and viewer ClusterRoles of the bundle, aggregated by kube-controller-manager."""
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    for kind, role_kind in itertools.product(KINDS, ("editor", "viewer")):
        path = ROLES / f"{PROJECT}-{kind}-{role_kind}-role_rbac.authorization.k8s.io_v1_clusterrole.yaml"
        try:
            rbac.create_cluster_role(yaml.safe_load(path.read_text()))
        except ApiException as exc:
            if exc.status != 409:
                raise
    plurals = {k[2] for k in KINDS.values()}
    for name in ("admin", "edit", "view"):
        wait_for(lambda name=name: _aggregated(cluster, name, plurals), 60, f"{name} aggregating our kinds")


def _viewer_may_not_write(
    vic: client.CustomObjectsApi, namespace: str, kind: str, spec: dict[str, Any]
) -> None:
    group, version, plural, _ = KINDS[kind]
    for write in (
        lambda: vic.create_namespaced_custom_object(group, version, namespace, plural, body(kind, "b", spec)),
        lambda: vic.patch_namespaced_custom_object(
            group, version, namespace, plural, "a", {"metadata": {"labels": {"x": "z"}}}
        ),
        lambda: vic.delete_namespaced_custom_object(group, version, namespace, plural, "a"),
    ):
        with pytest.raises(ApiException) as err:
            write()
        assert err.value.status == 403


def test_a_namespace_editor_creates_and_updates_our_kinds_and_a_viewer_only_reads(
    cluster, namespace, enforced, kind_roles
):
    bind(cluster, namespace, "eve", "ClusterRole", "edit")
    bind(cluster, namespace, "vic", "ClusterRole", "view")
    wait_for(
        lambda: allowed(cluster, "eve", namespace, "create", "webservers", group="demo.k8s.io"), 30, "edit"
    )
    wait_for(
        lambda: allowed(cluster, "vic", namespace, "list", "webservers", group="demo.k8s.io"), 30, "view"
    )
    eve, vic = (
        client.CustomObjectsApi(as_user(cluster, "eve")),
        client.CustomObjectsApi(as_user(cluster, "vic")),
    )
    for kind, spec in PLAIN.items():
        group, version, plural, _ = KINDS[kind]
        eve.create_namespaced_custom_object(group, version, namespace, plural, body(kind, "a", spec))
        eve.patch_namespaced_custom_object(
            group, version, namespace, plural, "a", {"metadata": {"labels": {"x": "y"}}}
        )
        assert vic.get_namespaced_custom_object(group, version, namespace, plural, "a")["metadata"][
            "labels"
        ] == {"x": "y"}
        assert [
            o["metadata"]["name"]
            for o in vic.list_namespaced_custom_object(group, version, namespace, plural)["items"]
        ] == ["a"]
        _viewer_may_not_write(vic, namespace, kind, spec)
        eve.delete_namespaced_custom_object(group, version, namespace, plural, "a")
    # edit holds get on Secrets and create on pods: the policies refuse it nothing.
    admitted(
        as_user(cluster, "eve"),
        namespace,
        "webserver",
        {"replicas": 1, **_web_refs("Secret", "db")["volume"]},
    )
    admitted(as_user(cluster, "eve"), namespace, "netperf", {"path": "host"})


@pytest.fixture(scope="module")
def netperf_tenant(cluster: Cluster, enforced: None) -> Iterator[tuple[str, client.ApiClient]]:
    """A namespace where ``dan`` edits Netperfs and may not create pods."""
    core = client.CoreV1Api(cluster.api)
    namespace = f"access-np-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        editor(cluster, namespace, "dan", "netperf")
        yield namespace, as_user(cluster, "dan")
    finally:
        core.delete_namespace(namespace)


OWN = "ghcr.io/k8s-operators-py/netperf"
IMAGES = st.one_of(
    st.none(),
    st.from_regex(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(-rc[0-9])?", fullmatch=True).map(
        lambda t: f"{OWN}:{t}"
    ),
    st.from_regex(r"[0-9a-f]{64}", fullmatch=True).map(lambda d: f"{OWN}@sha256:{d}"),
    st.sampled_from(
        [
            "busybox:1.36",
            f"{OWN}-evil:1",
            f"{OWN}x:1",
            f"evil.example/{OWN}:1",
            "ghcr.io/k8s-operators-py/web:1",
            f"{OWN}/sub:1",
        ]
    ),
)
PATH_CHOICES = st.one_of(
    st.fixed_dictionaries({}),
    st.sampled_from(["pod", "service", "host"]).map(lambda p: {"path": p}),
    st.permutations(["pod", "service", "host"])
    .flatmap(lambda ps: st.integers(2, 3).map(lambda n: ps[:n]))
    .map(lambda ps: {"compare": list(ps)}),
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(paths=PATH_CHOICES, image=IMAGES, nodes=st.booleans())
def test_any_netperf_is_refused_iff_it_runs_hostnetwork_or_a_foreign_image(
    netperf_tenant, paths, image, nodes
):
    namespace, api = netperf_tenant
    spec: dict[str, Any] = {**paths, **({"image": image} if image else {})}
    if nodes:
        spec |= {"serverNode": "n1", "clientNode": "n2"}
    host = paths.get("path") == "host" or "host" in paths.get("compare", [])
    foreign = image is not None and not image.startswith((f"{OWN}:", f"{OWN}@"))
    if not (host or foreign):
        admitted(api, namespace, "netperf", spec)
        return
    message = refusal(api, namespace, "netperf", spec)
    assert f'needs create on pods in namespace "{namespace}", which "dan" lacks' in message, message
    # The first failed check is named: host before image.
    assert ("spec.path host" if host else "spec.image other than") in message, message


UPDATED = {
    # kind: (what an admin made, what the tenant then changes in spec, the right the refusal names)
    "webserver": (
        {"replicas": 1, **_web_refs("ConfigMap", "conf")["volume"]},
        {"replicas": 3},
        'get on configmaps "conf"',
    ),
    "netperf": ({"path": "host"}, {"duration": 5}, "create on pods"),
    "tdset": (
        _target_spec("apps/v1", "Deployment"),
        {"defaultReplica": 2},
        'update on deployments/scale "t"',
    ),
}


@pytest.mark.parametrize("kind", sorted(UPDATED))
def test_a_tenant_editing_an_admins_object_is_refused_only_when_she_changes_its_spec(
    cluster, namespace, tenant, kind
):
    """A user on a bad day: the object works, her label lands, her spec change is refused with
    the right she lacks, which the admin can then grant."""
    made, change, right = UPDATED[kind]
    group, version, plural, _ = KINDS[kind]
    create(cluster.api, namespace, kind, "o", made, dry=False)
    mine = client.CustomObjectsApi(tenant)
    mine.patch_namespaced_custom_object(
        group, version, namespace, plural, "o", {"metadata": {"labels": {"a": "b"}}}
    )
    with pytest.raises(ApiException) as err:
        mine.patch_namespaced_custom_object(group, version, namespace, plural, "o", {"spec": change})
    message = json.loads(err.value.body)["message"]
    assert err.value.status == 403 and right in message and '"alice" lacks' in message, message
