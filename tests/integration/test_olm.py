"""Install from the catalog with OLM, for real, and upgrade: the way most users get the operators.

On the session's ``real_cluster`` (a real node: containerd, kubelet, kube-proxy) this module
starts two things (``olm`` fixture):

- ``localcluster.registry.Registry``, the distribution registry over TLS (the cluster's
  CA), with every image ``make images`` built and the opm and OLM stand-ins pushed to it; the
  node's containerd mirrors ``ghcr.io``/``quay.io`` to it. OLM sets ``imagePullPolicy: Always``
  on the catalog and bundle pods, so kubelet really pulls them (the tests check the registry's
  access log for those pulls).
- OLM v0 (``localcluster.olm.OLM``): its CRDs from the pinned module, olm-operator and
  catalog-operator as host processes (catalog-operator reaches registry pods by
  ``<name>.<namespace>.svc`` through a hosts-file stand-in for cluster DNS).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from localcluster import cluster as localcluster
from localcluster import olm as olm_install
from localcluster import signing
from localcluster.registry import Registry
from tests.framework.install import DIRECT, Install, exactly_ready, web_pods, webserver
from tests.framework.namespaces import delete_namespace, fresh_namespace
from tests.framework.waits import wait_for
from tools.generate import release
from tools.generate.bundle import OPERATOR_REPLICAS

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "k8s-operators-py"
REGISTRY = "ghcr.io/k8s-operators-py"
OPERATORS = ("netperf", "tdset", "webserver")
RELEASED = "0.1.0"
NEXT = "0.1.1"
GROUP = "operators.coreos.com"
RESTRICTED = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "warn")}
CRDS = ("netperfs.app.example.com", "tdsets.schedule.rs", "webservers.demo.k8s.io")


@dataclass
class Olm(Install):
    """The real cluster with OLM and the registry (and test_e2e's view of an install).

    Every install is "Install with OLM" (docs/operations/install.md): a CatalogSource whose ``spec.image`` is
    the catalog image (OLM runs it as a registry pod, probed with grpc_health_probe), an OperatorGroup
    and a Subscription. OLM resolves the package, unpacks the bundle image with its own Job (util
    image, bundle image, opm image) and creates what the CSV describes: Deployments, ServiceAccounts,
    Roles. The tests cover the three install modes, the examples end to end, uninstall, and an upgrade
    to a release (0.1.1, ``replaces`` 0.1.0) the test renders and builds itself (nothing committed).
    Timings are printed (``pytest -s``) and reported in docs/benchmarks.md.
    """

    registry: Registry
    releases: dict[str, release.Release]  # version -> the release built and pushed

    @property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api)

    def get(self, plural: str, ns: str, name: str, version: str = "v1alpha1") -> dict[str, Any]:
        return self.co.get_namespaced_custom_object(GROUP, version, ns, plural, name)

    def create(self, plural: str, ns: str, body: dict[str, Any], version: str = "v1alpha1") -> None:
        self.co.create_namespaced_custom_object(GROUP, version, ns, plural, body)

    def pulled(self, ref: str) -> bool:
        """Whether some client (kubelet through containerd) fetched ``ref``'s manifest."""
        return any(what == ref for _, what in self.registry.pulls())


@pytest.fixture(scope="module")
def olm(real_cluster: localcluster.LocalCluster, images: dict[str, str]) -> Iterator[Olm]:
    from localcluster import images as image_tools

    node = real_cluster.node
    assert node is not None
    registry = Registry(real_cluster.workdir / "registry", ca=real_cluster.ca).start()
    hosts_dir = node.registry_hosts_dir
    manager = olm_install.OLM(real_cluster)
    try:
        t0 = time.monotonic()
        # What `make images` built (no rebuild): the release pinned by digest, as users get it.
        pinned = release.build(RELEASED, REGISTRY, real_cluster.workdir / "release")
        print(f"OLM: release {RELEASED} pinned by digest in {time.monotonic() - t0:.1f}s")
        t0 = time.monotonic()
        for ref, archive in pinned.archives.items():
            assert registry.push(archive, ref) == pinned.digests[ref]
        # Signed as a release is (the kubelet does not check: for admins and OLM v1).
        signed = signing.sign_pushed(registry, pinned.archives, pinned.digests)
        catalog_image = next(r for r in signed if "-catalog@" in r)
        signing.verify(catalog_image, public_key=signing.ensure_key_pair()[1], ca_file=registry.ca_file)
        third = image_tools.third_party_archives([image_tools.OPM_BASE, image_tools.OLM_IMAGE])
        for ref, archive in third.items():
            registry.push(archive, ref)
        registry.push(third[image_tools.OPM_BASE], olm_install.OPM_IMAGE)  # catalog-operator's default
        print(f"OLM: images pushed to the registry in {time.monotonic() - t0:.1f}s")
        registry.write_hosts_config(hosts_dir)
        manager.install()
        yield Olm(
            real_cluster.kubeconfig,
            config.new_client_from_config(config_file=str(real_cluster.kubeconfig)),
            node,
            images,
            registry,
            {RELEASED: pinned},
        )
    finally:
        manager.stop()
        # OLM's namespaces hold its finished unpack Jobs' pods: leave the node as it was found.
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(real_cluster.kubeconfig)))
        for ns in (olm_install.OLM_NAMESPACE, olm_install.OPERATORS_NAMESPACE):
            delete_namespace(core, ns)
        wait_for(
            lambda: (
                not {n.metadata.name for n in core.list_namespace().items}
                & {olm_install.OLM_NAMESPACE, olm_install.OPERATORS_NAMESPACE}
            ),
            180,
            "OLM's namespaces deleted",
        )
        registry.stop()
        for mirrored in hosts_dir.iterdir() if hosts_dir.exists() else []:
            shutil.rmtree(mirrored)


def namespace(env: Olm, prefix: str, labels: dict[str, str] | None = None) -> str:
    return fresh_namespace(env.core, prefix, labels)


def delete_and_wait(env: Olm, *names: str) -> None:
    """Delete namespaces and wait until they are gone: an OperatorGroup still terminating would
    make the next install's OperatorGroup overlap it (OLM then refuses the CSV)."""
    for name in names:
        delete_namespace(env.core, name)

    def gone() -> bool:
        left = {ns.metadata.name for ns in env.core.list_namespace().items}
        return not left.intersection(names)

    wait_for(gone, 180, f"namespaces {names} deleted")


@pytest.fixture
def namespaces(olm: Olm) -> Iterator[Callable[..., str]]:
    """``make(prefix, labels)`` -> a fresh namespace, all deleted (and waited for) afterwards."""
    made: list[str] = []

    def make(prefix: str, labels: dict[str, str] | None = None) -> str:
        made.append(namespace(olm, prefix, labels))
        return made[-1]

    yield make
    delete_and_wait(olm, *made)


# -- installing ---------------------------------------------------------------------------------


@dataclass
class Installed:
    namespace: str
    catalog_source: str
    csv: str
    seconds: float  # Subscription created -> CSV Succeeded


def catalog_ref(version: str) -> str:
    return f"{REGISTRY}/{PACKAGE}-catalog:{version}"


def explain(env: Olm, ns: str) -> str:
    """What an admin would look at when an install does not finish."""
    parts = []
    for args in (
        ("-n", ns, "get", "subscriptions,installplans,csv,deploy,pods", "-o", "wide"),
        ("-n", ns, "get", "subscriptions,installplans,csv", "-o", "yaml"),
        ("-n", olm_install.OLM_NAMESPACE, "get", "catalogsources,pods,jobs", "-o", "wide"),
        ("-n", ns, "get", "events", "--sort-by=.lastTimestamp"),
        ("-n", olm_install.OLM_NAMESPACE, "get", "events", "--sort-by=.lastTimestamp"),
    ):
        parts.append(env.kubectl(*args, check=False)[-5000:])
    return "\n".join(parts)


def csv_phase(env: Olm, ns: str, name: str) -> str | None:
    try:
        return (env.get("clusterserviceversions", ns, name).get("status") or {}).get("phase")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def wait_csv_succeeded(env: Olm, ns: str, name: str, timeout: float = 300) -> None:
    def succeeded() -> bool:
        phase = csv_phase(env, ns, name)
        if phase == "Failed":
            raise AssertionError(f"CSV {name} Failed:\n{explain(env, ns)}")
        return phase == "Succeeded"

    try:
        wait_for(succeeded, timeout, f"CSV {name} Succeeded")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(env, ns)}") from None


def install(env: Olm, ns: str, targets: list[str] | None, version: str = RELEASED) -> Installed:
    """OperatorGroup (``targets``; None: all namespaces), CatalogSource, Subscription; wait."""
    og_spec = {"targetNamespaces": targets} if targets is not None else {}
    env.co.create_namespaced_custom_object(
        GROUP,
        "v1",
        ns,
        "operatorgroups",
        {"apiVersion": f"{GROUP}/v1", "kind": "OperatorGroup", "metadata": {"name": "og"}, "spec": og_spec},
    )
    source = f"catalog-{ns}"  # where catalogs live on a user's cluster: OLM's namespace
    env.create(
        "catalogsources",
        olm_install.OLM_NAMESPACE,
        {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "CatalogSource",
            "metadata": {"name": source},
            "spec": {"sourceType": "grpc", "image": catalog_ref(version), "displayName": "k8s-operators-py"},
        },
    )
    t0 = time.monotonic()
    env.create(
        "subscriptions",
        ns,
        {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": PACKAGE},
            "spec": {
                "channel": "stable",
                "name": PACKAGE,
                "source": source,
                "sourceNamespace": olm_install.OLM_NAMESPACE,
                "installPlanApproval": "Automatic",
            },
        },
    )
    csv = f"{PACKAGE}.v{version}"
    wait_csv_succeeded(env, ns, csv)
    seconds = time.monotonic() - t0
    print(f"OLM: Subscription -> CSV {csv} Succeeded in {seconds:.1f}s (targets {targets})")
    return Installed(ns, source, csv, seconds)


def uninstall(env: Olm, inst: Installed) -> None:
    """What OLM documents: delete the Subscription and the CSV (CRDs and custom resources stay)."""
    env.co.delete_namespaced_custom_object(GROUP, "v1alpha1", inst.namespace, "subscriptions", PACKAGE)
    env.co.delete_namespaced_custom_object(
        GROUP, "v1alpha1", inst.namespace, "clusterserviceversions", inst.csv
    )
    wait_for(
        lambda: (
            not {d.metadata.name for d in env.apps.list_namespaced_deployment(inst.namespace).items}
            & {f"{op}-operator" for op in OPERATORS}
            and not any(operator_pods(env, inst.namespace, op) for op in OPERATORS)
        ),
        180,
        "the operator Deployments and pods removed",
    )
    env.co.delete_namespaced_custom_object(
        GROUP, "v1alpha1", olm_install.OLM_NAMESPACE, "catalogsources", inst.catalog_source
    )


def operator_pods(env: Olm, ns: str, op: str) -> list[client.V1Pod]:
    pods = env.core.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/name={op}-operator").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def assert_installed(env: Olm, inst: Installed, targets: list[str] | None, version: str = RELEASED) -> None:
    """InstallPlan Complete, and the operators run from their images as the CSV's accounts."""
    sub = env.get("subscriptions", inst.namespace, PACKAGE)
    assert sub["status"]["installedCSV"] == inst.csv
    plan_name = sub["status"]["installPlanRef"]["name"]
    # The catalog-operator writes Complete after its last step; olm-operator may have taken the
    # CSV to Succeeded before that (seen on upgrades): Complete is a state to reach, not a race.
    try:
        wait_for(
            lambda: env.get("installplans", inst.namespace, plan_name)["status"]["phase"] == "Complete",
            120,
            f"InstallPlan {plan_name} Complete",
        )
    except AssertionError as exc:
        status = env.get("installplans", inst.namespace, plan_name)["status"]
        raise AssertionError(f"{exc}\n{status}") from None
    # The bundle came from its image, unpacked by OLM's Job: kubelet pulled it (Always), by the
    # digest the catalog names.
    pinned = env.releases[version]
    assert env.pulled(pinned.pinned(f"{REGISTRY}/{PACKAGE}-bundle:{version}")), env.registry.pulls()[-20:]
    assert env.pulled(catalog_ref(version)) or version != RELEASED, env.registry.pulls()[-20:]
    expected_targets = ",".join(sorted(targets)) if targets is not None else ""
    for op in OPERATORS:
        pods = operator_pods(env, inst.namespace, op)
        assert len(pods) == OPERATOR_REPLICAS, (op, [p.metadata.name for p in pods])
        for pod in pods:
            status = pod.status.container_statuses[0]
            # By digest, the digest of the image built for this release.
            operator_ref = f"{REGISTRY}/{op}-operator:{version}"
            assert pod.spec.containers[0].image == pinned.pinned(operator_ref)
            assert status.image_id.endswith(pinned.digests[operator_ref]), status.image_id
            assert pod.spec.service_account_name == f"{op}-operator"
            assert status.ready and status.restart_count == 0, (op, status)
            # What the operator watches: OLM's annotation, mapped onto WATCH_NAMESPACE by the CSV.
            assert pod.metadata.annotations["olm.targetNamespaces"] == expected_targets
            assert pod.metadata.annotations["olm.operatorGroup"] == "og"
        # One of them leads, on a Lease in the operators' own namespace (POD_NAMESPACE): the
        # CSV's permissions reach it there in every install mode.
        names = {p.metadata.name for p in pods}
        wait_for(
            lambda op=op, names=names: lease_holder(env, inst.namespace, op).split("_")[0] in names,
            60,
            f"{op}'s Lease held by one of its pods",
        )


def lease_holder(env: Olm, ns: str, op: str) -> str:
    lease = client.CoordinationV1Api(env.api).read_namespaced_lease(f"{op}-leader", ns)
    return lease.spec.holder_identity or ""


CSV_FILE = REPO / "bundle" / "manifests" / f"{PACKAGE}.clusterserviceversion.yaml"


def csv_rules(op: str, kind: str = "permissions") -> list[dict[str, Any]]:
    spec = yaml.safe_load(CSV_FILE.read_text())["spec"]["install"]["spec"]
    (perm,) = [p for p in spec[kind] if p["serviceAccountName"] == f"{op}-operator"]
    return list(perm["rules"])


def allowed(env: Olm, inst: Installed, op: str, rule: dict[str, Any], *, verb: str, ns: str) -> bool:
    """A SubjectAccessReview: may ``op``'s ServiceAccount do ``verb`` on the rule's first resource?"""
    attrs = {
        **({"namespace": ns} if ns else {}),
        "verb": verb,
        "group": rule["apiGroups"][0],
        "resource": rule["resources"][0].split("/")[0],
    }
    if "/" in rule["resources"][0]:
        attrs["subresource"] = rule["resources"][0].split("/", 1)[1]
    if rule.get("resourceNames"):
        attrs["name"] = rule["resourceNames"][0]
    review = client.AuthorizationV1Api(env.api).create_subject_access_review(
        {
            "spec": {
                "user": f"system:serviceaccount:{inst.namespace}:{op}-operator",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{inst.namespace}"],
                "resourceAttributes": attrs,
            }
        }
    )
    return bool(review.status.allowed)


def assert_rbac(env: Olm, inst: Installed, granted_in: list[str], refused_in: list[str]) -> None:
    """Every rule of the CSV holds where OLM was told to grant it, and nowhere else."""
    for op in OPERATORS:
        for rule in csv_rules(op):
            for verb in rule["verbs"]:
                for ns in granted_in:
                    assert allowed(env, inst, op, rule, verb=verb, ns=ns), (op, rule, verb, ns)
                for ns in refused_in:
                    assert not allowed(env, inst, op, rule, verb=verb, ns=ns), (op, rule, verb, ns)
        # Cluster-wide in every install mode: the reviews of the /metrics filter.
        for rule in csv_rules(op, "clusterPermissions"):
            for verb in rule["verbs"]:
                assert allowed(env, inst, op, rule, verb=verb, ns=""), (op, rule, verb)


# -- custom resources ---------------------------------------------------------------------------


def create_webserver(env: Olm, ns: str, name: str, replicas: int) -> None:
    env.co.create_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", ns, "webservers", webserver(env, name, replicas)
    )


def assert_watches_exactly(env: Olm, watched: list[str], ignored: list[str]) -> None:
    """A WebServer in each watched namespace converges; meanwhile none outside is touched."""
    for ns in watched + ignored:
        create_webserver(env, ns, "probe", 1)
    for ns in watched:
        wait_for(lambda ns=ns: exactly_ready(env, ns, "probe", 1), 180, f"the WebServer in {ns} Ready")
    for ns in ignored:
        obj = env.co.get_namespaced_custom_object("demo.k8s.io", "v1alpha1", ns, "webservers", "probe")
        assert not obj.get("status"), (ns, obj.get("status"))
        assert not web_pods(env, ns, "probe"), ns


def assert_uninstall_keeps_data(env: Olm, inst: Installed, ns: str) -> None:
    pods_before = {p.metadata.uid for p in web_pods(env, ns, "probe")}
    uninstall(env, inst)
    ext = client.ApiextensionsV1Api(env.api)
    for crd in CRDS:
        assert ext.read_custom_resource_definition(crd).metadata.deletion_timestamp is None
    assert env.co.get_namespaced_custom_object("demo.k8s.io", "v1alpha1", ns, "webservers", "probe")
    assert {p.metadata.uid for p in web_pods(env, ns, "probe")} == pods_before


# -- the install modes ----------------------------------------------------------------------------


def test_own_namespace_install_from_the_catalog(olm, namespaces):
    ns = namespaces("olm-own", RESTRICTED)
    elsewhere = namespaces("olm-not-watched", RESTRICTED)
    inst = install(olm, ns, targets=[ns])
    assert_installed(olm, inst, [ns])
    assert_rbac(olm, inst, granted_in=[ns], refused_in=[elsewhere])
    assert_watches_exactly(olm, watched=[ns], ignored=[elsewhere])
    assert_uninstall_keeps_data(olm, inst, ns)


def test_multi_namespace_install_from_the_catalog(olm, namespaces):
    ns = namespaces("olm-multi", RESTRICTED)
    a, b = namespaces("olm-a", RESTRICTED), namespaces("olm-b", RESTRICTED)
    elsewhere = namespaces("olm-not-watched", RESTRICTED)
    inst = install(olm, ns, targets=[a, b])
    assert_installed(olm, inst, [a, b])
    # OLM grants a CSV's namespaced permissions in the operators' own namespace too, always.
    assert_rbac(olm, inst, granted_in=[a, b, ns], refused_in=[elsewhere])
    # But the operators' own namespace is not a target, so they do not watch it.
    assert_watches_exactly(olm, watched=[a, b], ignored=[ns, elsewhere])
    assert_uninstall_keeps_data(olm, inst, a)


def test_all_namespaces_install_runs_the_examples_end_to_end(olm, namespaces):
    ns = namespaces("olm-all", RESTRICTED)
    # TDSet pods carry no restricted security context yet (known gap): baseline for the examples.
    work = namespaces("olm-examples")
    inst = install(olm, ns, targets=None)
    assert_installed(olm, inst, None)
    assert_rbac(olm, inst, granted_in=[ns, work, "default"], refused_in=[])

    olm.kubectl(
        "-n", work, "apply", *(f"-f={REPO / 'examples' / f}" for f in ("webserver.yaml", "tdset.yaml"))
    )
    olm.kubectl("-n", work, "apply", f"-f={REPO / 'examples' / 'netperf.yaml'}")
    wait_for(
        lambda: exactly_ready(olm, work, "webserver-sample", 3), 180, "the example WebServer's 3 pods Ready"
    )
    svc = olm.core.read_namespaced_service("webserver-sample", work)

    def answers() -> bool:
        with DIRECT.open(f"http://{svc.spec.cluster_ip}/", timeout=5) as resp:
            return bool(resp.status == 200)

    # kube-proxy programs the Service's endpoints shortly after the pods turn Ready.
    wait_for(answers, 60, "the example WebServer answering through its Service")

    def tdset_converged() -> bool:
        d = olm.apps.read_namespaced_deployment("tdset-sample", work)
        st = olm.co.get_namespaced_custom_object("schedule.rs", "v1", work, "tdsets", "tdset-sample").get(
            "status"
        )
        return bool(st) and d.spec.replicas >= 1 and d.status.ready_replicas == d.spec.replicas

    wait_for(tdset_converged, 180, "the example TDSet's Deployment Ready")

    def netperf_done() -> dict[str, Any] | None:
        obj = olm.co.get_namespaced_custom_object(
            "app.example.com", "v1alpha1", work, "netperfs", "netperf-sample"
        )
        st = obj.get("status") or {}
        return st if st.get("status") in ("Done", "Error") else None

    st = wait_for(netperf_done, 300, "the example Netperf finished")
    assert st["status"] == "Done" and st["speedBitsPerSec"] > 0, st
    assert_uninstall_keeps_data_all(olm, inst, work)


def assert_uninstall_keeps_data_all(env: Olm, inst: Installed, work: str) -> None:
    uninstall(env, inst)
    for plural, group, version, name in (
        ("webservers", "demo.k8s.io", "v1alpha1", "webserver-sample"),
        ("tdsets", "schedule.rs", "v1", "tdset-sample"),
        ("netperfs", "app.example.com", "v1alpha1", "netperf-sample"),
    ):
        assert env.co.get_namespaced_custom_object(group, version, work, plural, name)
    assert len(web_pods(env, work, "webserver-sample")) == 3


# -- upgrade --------------------------------------------------------------------------------------


def publish_release(env: Olm, version: str, root: Path) -> None:
    """Build release ``version`` pinned by digest (bundle replacing 0.1.0, operator images, a
    catalog holding the published bundle and the new one), as a release would, into ``root``;
    push its images."""
    from tools.generate import catalog

    # What `make catalog VERSION=...` does: the published catalog's bundles kept, the new one added.
    published = env.releases[RELEASED].root / "catalog-context" / "catalog" / PACKAGE / "catalog.yaml"
    earlier = catalog.released(published, version)
    assert [b["name"] for b in earlier.bundles] == [f"{PACKAGE}.v{RELEASED}"]
    t0 = time.monotonic()
    built = release.build(version, REGISTRY, root / "release", earlier=earlier)
    for ref, archive in built.archives.items():
        assert env.registry.push(archive, ref) == built.digests[ref]
    signing.sign_pushed(env.registry, built.archives, built.digests)
    env.releases[version] = built
    print(f"OLM: release {version} rendered, built, pushed and signed in {time.monotonic() - t0:.1f}s")


def test_upgrade_keeps_custom_resources_and_their_children(olm, namespaces, tmp_path):
    ns = namespaces("olm-upgrade")  # baseline: the TDSet's pods
    inst = install(olm, ns, targets=[ns])
    create_webserver(olm, ns, "web", 2)
    hour = time.gmtime().tm_hour
    tdset = {
        "apiVersion": "schedule.rs/v1",
        "kind": "TDSet",
        "metadata": {"name": "shop"},
        "spec": {
            "container": {"image": olm.images["web"], "port": 8080},
            "schedulingConfig": [{"startTime": hour, "endTime": (hour + 1) % 24, "replica": 1}],
            "defaultReplica": 1,
        },
    }
    olm.co.create_namespaced_custom_object("schedule.rs", "v1", ns, "tdsets", tdset)
    netperf = {
        "apiVersion": "app.example.com/v1alpha1",
        "kind": "Netperf",
        "metadata": {"name": "np"},
        "spec": {"image": olm.images["netperf"], "placement": "SameNode", "duration": 1, "samples": 1},
    }
    olm.co.create_namespaced_custom_object("app.example.com", "v1alpha1", ns, "netperfs", netperf)

    def deployment_ready(n: int) -> bool:
        d = olm.apps.read_namespaced_deployment("shop", ns)
        return d.spec.replicas == n and d.status.ready_replicas == n

    def netperf_status() -> dict[str, Any]:
        obj = olm.co.get_namespaced_custom_object("app.example.com", "v1alpha1", ns, "netperfs", "np")
        return obj.get("status") or {}

    wait_for(lambda: exactly_ready(olm, ns, "web", 2), 180, "2 WebServer pods Ready")
    wait_for(lambda: deployment_ready(1), 180, "the TDSet's Deployment Ready")
    wait_for(lambda: netperf_status().get("status") == "Done", 180, "the Netperf Done")
    web_before = {p.metadata.uid for p in web_pods(olm, ns, "web")}
    shop = olm.apps.read_namespaced_deployment("shop", ns)
    np_before = netperf_status()
    ext = client.ApiextensionsV1Api(olm.api)
    stored_before = {c: ext.read_custom_resource_definition(c).status.stored_versions for c in CRDS}

    publish_release(olm, NEXT, tmp_path)
    t0 = time.monotonic()
    olm.co.patch_namespaced_custom_object(
        GROUP,
        "v1alpha1",
        olm_install.OLM_NAMESPACE,
        "catalogsources",
        inst.catalog_source,
        {"spec": {"image": catalog_ref(NEXT)}},
    )
    new_csv = f"{PACKAGE}.v{NEXT}"
    wait_for(
        lambda: olm.get("subscriptions", ns, PACKAGE)["status"].get("installedCSV") == new_csv,
        300,
        f"the Subscription moved to {new_csv}",
    )
    wait_csv_succeeded(olm, ns, new_csv)
    seconds = time.monotonic() - t0
    print(f"OLM: upgrade {RELEASED} -> {NEXT}: catalog image changed -> CSV Succeeded in {seconds:.1f}s")
    wait_for(lambda: csv_phase(olm, ns, inst.csv) is None, 120, "the old CSV removed")
    csv = olm.get("clusterserviceversions", ns, new_csv)
    assert csv["spec"]["replaces"] == inst.csv
    upgraded = Installed(ns, inst.catalog_source, new_csv, seconds)
    wait_for(
        lambda: all(
            len(pods := operator_pods(olm, ns, op)) == OPERATOR_REPLICAS
            and all(p.status.container_statuses[0].ready for p in pods)
            for op in OPERATORS
        ),
        180,
        "two Ready pods per operator after the rollout",
    )
    assert_installed(olm, upgraded, [ns], version=NEXT)

    # Nothing the old operators made was recreated or changed by the upgrade.
    assert {p.metadata.uid for p in web_pods(olm, ns, "web")} == web_before
    after = olm.apps.read_namespaced_deployment("shop", ns)
    assert (after.metadata.uid, after.metadata.generation) == (shop.metadata.uid, shop.metadata.generation)
    assert netperf_status() == np_before

    # CRD compatibility: the same versions stored, and objects written under 0.1.0 still pass the
    # new schema (a no-op replace is validated against it).
    assert {c: ext.read_custom_resource_definition(c).status.stored_versions for c in CRDS} == stored_before
    for group, version, plural, name in (
        ("demo.k8s.io", "v1alpha1", "webservers", "web"),
        ("schedule.rs", "v1", "tdsets", "shop"),
        ("app.example.com", "v1alpha1", "netperfs", "np"),
    ):
        obj = olm.co.get_namespaced_custom_object(group, version, ns, plural, name)
        olm.co.replace_namespaced_custom_object(group, version, ns, plural, name, obj)

    # And the new operators reconcile them.
    olm.kubectl("-n", ns, "scale", "webserver/web", "--replicas=3")
    wait_for(lambda: exactly_ready(olm, ns, "web", 3), 180, "the upgraded operator scaled the WebServer to 3")
    assert web_before < {p.metadata.uid for p in web_pods(olm, ns, "web")}
    olm.co.patch_namespaced_custom_object(
        "schedule.rs",
        "v1",
        ns,
        "tdsets",
        "shop",
        {
            "spec": {
                "defaultReplica": 2,
                "schedulingConfig": [{"startTime": hour, "endTime": (hour + 1) % 24, "replica": 2}],
            }
        },
    )
    wait_for(lambda: deployment_ready(2), 180, "the upgraded operator scaled the TDSet's Deployment to 2")
    uninstall(olm, upgraded)
