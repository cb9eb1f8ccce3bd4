"""Install, upgrade and uninstall with OLM v1 (catalogd + operator-controller), for real.

The bundles first pass OLM v1's own bundle validators and renderer (``olmv1-tool``). Then, on
the real cluster with a registry and OLM v1 installed from its release manifests
(``localcluster.olmv1.OLMv1``), as a user would: our catalog image as a ``ClusterCatalog``, a
``ClusterExtension`` with the installer ServiceAccount and RBAC that OLM <= 1.10 and OpenShift
require (checked by applying what operator-controller renders as that ServiceAccount, server-side
dry run), the operators reconciling a WebServer; the next release's catalog and the extension
moved to its bundle (custom resources and their children survive); and uninstall. Timings are
printed (``pytest -s``).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from localcluster import cluster as localcluster
from localcluster import node as localnode
from localcluster import olm as olm_v0
from localcluster import olmv1, signing
from localcluster.kube import kubectl
from localcluster.ociimage import ImageFile, layer_tar, write_archive
from localcluster.registry import Registry
from tests.framework.install import Install, exactly_ready, web_pods, webserver
from tests.framework.namespaces import delete_namespace, fresh_namespace
from tests.framework.tcp_proxy import Proxy
from tests.framework.waits import wait_for
from tools.generate import catalog, release

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "k8s-operators-py"
REGISTRY = "ghcr.io/k8s-operators-py"
RELEASED = "0.1.0"
NEXT = "0.1.1"
OPERATORS = ("netperf", "tdset", "webserver")
CATALOG = "k8s-operators-py"
EXTENSION = "k8s-operators-py"
INSTALLER = "k8s-operators-py-installer"
REGISTRY_SERVICE = "olmv1-registry"
REGISTRY_PORT = 5000
# What cluster DNS would call the Service (no DNS here: a hostAliases entry in both pods).
REGISTRY_NAME = f"{REGISTRY_SERVICE}.default.svc"
MIRROR = f"{REGISTRY_NAME}:{REGISTRY_PORT}/{REGISTRY}"
# What containers/image says when the policy refuses an image.
REJECTED = "Source image rejected"


def test_bundles_pass_olm_v1_validators(tmp_path):
    from tools.generate import bundle

    next_bundle = bundle.render_into(tmp_path / "next", NEXT, "ghcr.io/k8s-operators-py")
    report = olmv1.validate_bundles(REPO / "bundle", next_bundle)
    assert report.count("valid for OLM v1") == 2, report
    # And with a watched namespace (spec.config.inline.watchNamespace): SingleNamespace mode.
    assert "valid for OLM v1" in olmv1.validate_bundles(REPO / "bundle", watch_namespace="team-a")


def test_olm_v1_validators_refuse_a_bundle_missing_an_owned_crd(tmp_path):
    broken = tmp_path / "bundle"
    shutil.copytree(REPO / "bundle", broken)
    (broken / "manifests" / "demo.k8s.io_webservers.yaml").unlink()
    with pytest.raises(RuntimeError, match=r"webservers\.demo\.k8s\.io"):
        olmv1.validate_bundles(broken)


def catalog_ref(version: str) -> str:
    return f"{REGISTRY}/{PACKAGE}-catalog:{version}"


@dataclass
class Env(Install):
    manager: olmv1.OLMv1
    registry: Registry
    releases: dict[str, release.Release]  # version -> the release built (pinned by digest) and pushed

    def sign(self, pushed: release.Release) -> None:
        """Sign every image of ``pushed`` by digest, and attach its SBOM, as a release does.

        The signature names the repository pullers ask for (``ghcr.io/…``): behind the
        registries.conf mirror, that is what the policy is matched against.
        """
        signing.sign_pushed(self.registry, pushed.archives, pushed.digests)

    def get(self, plural: str, name: str) -> dict[str, Any]:
        return self.co.get_cluster_custom_object(olmv1.OLM_GROUP, "v1", plural, name)

    def condition(self, plural: str, name: str, kind: str) -> dict[str, Any]:
        try:
            return olmv1.conditions(self.get(plural, name)).get(kind) or {}
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise

    def explain(self, ns: str = "") -> str:
        parts = [self.manager.diagnose()]
        for args in (
            ("get", "clustercatalogs,clusterextensions", "-o", "yaml"),
            ("-n", olmv1.NAMESPACE, "logs", f"deploy/{olmv1.OPERATOR_CONTROLLER}", "--tail=40"),
            ("-n", olmv1.NAMESPACE, "logs", f"deploy/{olmv1.CATALOGD}", "--tail=40"),
            *((("-n", ns, "get", "deploy,pods,events"),) if ns else ()),
        ):
            parts.append(self.kubectl(*args, check=False)[-5000:])
        return "\n".join(parts)

    def wait_condition(self, plural: str, name: str, kind: str, timeout: float = 300, **expect: str) -> None:
        def met() -> bool:
            cond = self.condition(plural, name, kind)
            return cond.get("status") == "True" and all(cond.get(k) == v for k, v in expect.items())

        try:
            wait_for(met, timeout, f"{plural}/{name} {kind}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.explain()}") from None


def _registry_service(core: client.CoreV1Api, ip: str, port: int) -> str:
    """A Service (no selector) with the registry's forwarder on the node IP as its endpoint: pods
    have no route to the node IP itself, only to the service range. Returns its ClusterIP."""
    ns = "default"
    core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": REGISTRY_SERVICE},
            "spec": {"ports": [{"name": "registry", "port": REGISTRY_PORT, "targetPort": port}]},
        },
    )
    core.create_namespaced_endpoints(
        ns,
        {
            "metadata": {"name": REGISTRY_SERVICE},
            "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "registry", "port": port}]}],
        },
    )
    return str(core.read_namespaced_service(REGISTRY_SERVICE, ns).spec.cluster_ip)


def _clear_earlier_installs(api: client.ApiClient, kubeconfig: Path) -> None:
    """Delete the cluster-scoped objects our bundle brings (CRDs, ClusterRoles), as on a cluster
    where no other installer has run: the session's cluster may hold them from an OLM v0 install
    (its uninstall keeps CRDs by design), deploy/install.yaml or a test that bound the
    metrics-reader role, and operator-controller does not take over objects another installer made.
    """
    bundled = [
        o for o in olmv1.render_bundle(REPO / "bundle", "default") if o["kind"] in olmv1.CLUSTER_SCOPED
    ]
    for obj in bundled:
        kubectl(
            kubeconfig,
            "delete",
            obj["kind"].lower(),
            obj["metadata"]["name"],
            "--ignore-not-found",
            "--wait=false",
        )
    ext, rbac = client.ApiextensionsV1Api(api), client.RbacAuthorizationV1Api(api)

    def left() -> set[str]:
        names = {c.metadata.name for c in ext.list_custom_resource_definition().items}
        names |= {r.metadata.name for r in rbac.list_cluster_role().items}
        names |= {b.metadata.name for b in rbac.list_cluster_role_binding().items}
        return names & {o["metadata"]["name"] for o in bundled}

    wait_for(lambda: not left(), 300, "our cluster-scoped objects from earlier installs deleted")


@pytest.fixture(scope="module")
def olmv1_env(real_cluster: localcluster.LocalCluster, images: dict[str, str]) -> Iterator[Env]:
    assert real_cluster.node is not None
    api = config.new_client_from_config(config_file=str(real_cluster.kubeconfig))
    core = client.CoreV1Api(api)
    _clear_earlier_installs(api, real_cluster.kubeconfig)
    registry = Registry(
        real_cluster.workdir / "registry-olmv1", ca=real_cluster.ca, names=(REGISTRY_NAME,)
    ).start()
    # Pods reach the registry (on 127.0.0.1) through a Service whose endpoint forwards from the node IP.
    forwarder = Proxy(registry.port, host=localnode.NODE_IP)
    hosts_dir = real_cluster.node.registry_hosts_dir
    manager: olmv1.OLMv1 | None = None
    try:
        t0 = time.monotonic()
        # What `make images` built (no rebuild): the release pinned by digest, as users get it.
        pinned = release.build(RELEASED, REGISTRY, real_cluster.workdir / "release-olmv1")
        for ref, archive in pinned.archives.items():
            assert registry.push(archive, ref) == pinned.digests[ref]
        print(f"OLM v1: release {RELEASED} pinned and pushed in {time.monotonic() - t0:.1f}s")
        t0 = time.monotonic()
        env = Env(real_cluster.kubeconfig, api, real_cluster.node, images, None, registry, {RELEASED: pinned})  # type: ignore[arg-type]
        env.sign(pinned)
        print(f"OLM v1: release {RELEASED} signed and attested in {time.monotonic() - t0:.1f}s")
        # catalogd and operator-controller pull only what our key signed: the policy matches
        # the name asked for (ghcr.io/…), the signatures are read from the mirror that holds them.
        policy = signing.write_policy_files(
            real_cluster.workdir / "olmv1-policy",
            [REGISTRY],
            signing.ensure_key_pair()[1],
            key_path=signing.CONTAINER_KEY_PATH,
            attachment_scopes=[MIRROR, REGISTRY],
        )
        # The kubelet pulls the next release's operator images through containerd's mirror.
        registry.write_hosts_config(hosts_dir)
        service_ip = _registry_service(core, localnode.NODE_IP, forwarder.port)
        # The catalog and bundles name ghcr.io: catalogd and operator-controller pull them from
        # the registry, trusting its CA (--pull-cas-dir).
        manager = olmv1.OLMv1(
            real_cluster,
            registries_conf=olmv1.registries_conf({"ghcr.io": f"{REGISTRY_NAME}:{REGISTRY_PORT}/ghcr.io"}),
            registry_ca=registry.ca_file,
            policy=policy["policy.json"].parent,
            host_aliases={REGISTRY_NAME: service_ip},
        )
        # The bundle ships a ServiceMonitor and a PrometheusRule: their CRDs must exist.
        crds = [f"--filename={p}" for p in olm_v0.monitoring_crds()]
        manager.kubectl("apply", "--server-side", "--force-conflicts", *crds)
        t0 = time.monotonic()
        manager.install()
        print(f"OLM v1: installed in {time.monotonic() - t0:.1f}s ({manager.timings})")
        env.manager = manager
        yield env
    finally:
        if manager is not None:
            manager.uninstall()
        for delete in (core.delete_namespaced_service, core.delete_namespaced_endpoints):
            try:
                delete(REGISTRY_SERVICE, "default")
            except ApiException as exc:
                if exc.status != 404:
                    raise
        forwarder.close()
        registry.stop()
        for mirrored in hosts_dir.iterdir() if hosts_dir.exists() else []:
            shutil.rmtree(mirrored)


def cluster_catalog(ref: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{olmv1.OLM_GROUP}/v1",
        "kind": "ClusterCatalog",
        "metadata": {"name": CATALOG},
        "spec": {"source": {"type": "Image", "image": {"ref": ref}}},
    }


def cluster_extension(ns: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{olmv1.OLM_GROUP}/v1",
        "kind": "ClusterExtension",
        "metadata": {"name": EXTENSION},
        "spec": {
            "namespace": ns,
            # Required by OLM <= 1.10 and OpenShift, ignored by 1.11: see installer_rbac.
            "serviceAccount": {"name": INSTALLER},
            "source": {
                "sourceType": "Catalog",
                "catalog": {
                    "packageName": PACKAGE,
                    "version": version,
                    "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": CATALOG}},
                },
            },
        },
    }


def resolved_catalog(env: Env, name: str = CATALOG) -> str | None:
    """The digest reference catalogd last unpacked (``status.resolvedSource.image.ref``)."""
    status = env.get("clustercatalogs", name).get("status") or {}
    return ((status.get("resolvedSource") or {}).get("image") or {}).get("ref")


def installed_version(env: Env) -> str | None:
    try:
        status = env.get("clusterextensions", EXTENSION).get("status") or {}
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return ((status.get("install") or {}).get("bundle") or {}).get("version")


def operators_ready(env: Env, ns: str) -> bool:
    apps = client.AppsV1Api(env.api)
    for op in OPERATORS:
        try:
            d = apps.read_namespaced_deployment(f"{op}-operator", ns)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        # Rolled out: the current template everywhere, no old pod left, all Ready.
        st = d.status
        if (st.observed_generation or 0) < d.metadata.generation:
            return False
        if not (st.updated_replicas == st.replicas == st.ready_replicas == d.spec.replicas):
            return False
    return True


def apply_as(env: Env, ns: str, objs: list[dict[str, Any]], user: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(yaml.safe_dump_all(objs))
        f.flush()
        env.kubectl("apply", "--server-side", "--dry-run=server", f"--as={user}", "-f", f.name)


# Its waits, each with the suite's slack, add up past the default: a stuck wait must end in its
# own message with the diagnosis, not in pytest-timeout's stack dump.
@pytest.mark.timeout(2400)
def test_install_upgrade_uninstall_with_a_cluster_extension(olmv1_env, tmp_path):
    env = olmv1_env
    ns = fresh_namespace(env.core, "olmv1-ext")
    work = fresh_namespace(env.core, "olmv1-work")
    try:
        _install_upgrade_uninstall(env, ns, work, tmp_path)
    finally:
        for name in (ns, work):
            delete_namespace(env.core, name)
        for kind in ("clusterrolebinding", "clusterrole"):
            env.kubectl("delete", kind, f"{EXTENSION}-installer", "--ignore-not-found", check=False)


def _install_upgrade_uninstall(env: Env, ns: str, work: str, tmp_path: Path) -> None:
    # The installer ServiceAccount and its RBAC, derived from what operator-controller renders
    # for this bundle, and shown sufficient: the rendered objects apply as that ServiceAccount.
    rendered = olmv1.render_bundle(REPO / "bundle", ns)
    rbac = olmv1.installer_rbac(EXTENSION, ns, INSTALLER, rendered)
    env.manager.apply(yaml.safe_dump_all(rbac))
    apply_as(env, ns, rendered, f"system:serviceaccount:{ns}:{INSTALLER}")

    t0 = time.monotonic()
    env.co.create_cluster_custom_object(
        olmv1.OLM_GROUP, "v1", "clustercatalogs", cluster_catalog(catalog_ref(RELEASED))
    )
    env.wait_condition("clustercatalogs", CATALOG, "Serving")
    catalog_seconds = time.monotonic() - t0
    assert any(what == catalog_ref(RELEASED) for _, what in env.registry.pulls()), env.registry.pulls()[-10:]

    t0 = time.monotonic()
    env.co.create_cluster_custom_object(
        olmv1.OLM_GROUP, "v1", "clusterextensions", cluster_extension(ns, RELEASED)
    )
    env.wait_condition("clusterextensions", EXTENSION, "Installed")
    wait_for(lambda: operators_ready(env, ns), 300, "the three operator Deployments Ready")
    install_seconds = time.monotonic() - t0
    assert installed_version(env) == RELEASED
    print(f"OLM v1: catalog Serving in {catalog_seconds:.1f}s, extension installed in {install_seconds:.1f}s")

    # AllNamespaces: the operators reconcile a WebServer in another namespace.
    env.co.create_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", work, "webservers", webserver(env, "web", 2)
    )
    wait_for(lambda: exactly_ready(env, work, "web", 2), 240, "2 WebServer pods Ready")
    web_before = {p.metadata.uid for p in web_pods(env, work, "web")}

    # Upgrade: the next release's catalog, then the extension moved to its bundle.
    t0 = time.monotonic()
    # What `make catalog VERSION=0.1.1` does: the published catalog's bundle kept, the new one added.
    published = env.releases[RELEASED].root / "catalog-context" / "catalog" / PACKAGE / "catalog.yaml"
    nxt = release.build(NEXT, REGISTRY, tmp_path / "release", earlier=catalog.released(published, NEXT))
    for ref, archive in nxt.archives.items():
        assert env.registry.push(archive, ref) == nxt.digests[ref]
    env.sign(nxt)
    build_seconds = time.monotonic() - t0
    t0 = time.monotonic()
    served = resolved_catalog(env)
    env.co.patch_cluster_custom_object(
        olmv1.OLM_GROUP,
        "v1",
        "clustercatalogs",
        CATALOG,
        {"spec": {"source": {"image": {"ref": catalog_ref(NEXT)}}}},
    )
    wait_for(lambda: resolved_catalog(env) not in (None, served), 300, "catalogd unpacked the next catalog")
    env.wait_condition("clustercatalogs", CATALOG, "Serving")
    env.co.patch_cluster_custom_object(
        olmv1.OLM_GROUP,
        "v1",
        "clusterextensions",
        EXTENSION,
        {"spec": {"source": {"catalog": {"version": NEXT}}}},
    )
    wait_for(lambda: installed_version(env) == NEXT, 300, f"the extension at {NEXT}")
    env.wait_condition("clusterextensions", EXTENSION, "Installed")
    wait_for(lambda: operators_ready(env, ns), 300, "the upgraded operator Deployments Ready")
    upgrade_seconds = time.monotonic() - t0
    print(
        f"OLM v1: release {NEXT} built, pushed and signed in {build_seconds:.1f}s, "
        f"upgrade {RELEASED} -> {NEXT} in {upgrade_seconds:.1f}s"
    )
    apps = client.AppsV1Api(env.api)
    for op in OPERATORS:
        image = apps.read_namespaced_deployment(f"{op}-operator", ns).spec.template.spec.containers[0].image
        assert image == nxt.pinned(f"{REGISTRY}/{op}-operator:{NEXT}"), image
    assert {p.metadata.uid for p in web_pods(env, work, "web")} == web_before
    env.kubectl("-n", work, "scale", "webserver/web", "--replicas=3")
    wait_for(
        lambda: exactly_ready(env, work, "web", 3), 240, "the upgraded operator scaled the WebServer to 3"
    )

    # Uninstall: deleting the extension removes what it installed.
    t0 = time.monotonic()
    env.co.delete_cluster_custom_object(olmv1.OLM_GROUP, "v1", "clusterextensions", EXTENSION)
    wait_for(
        lambda: installed_version(env) is None and not _extension_exists(env), 300, "the extension deleted"
    )
    wait_for(lambda: not _operator_deployments(env, ns), 300, "the operator Deployments deleted")
    print(f"OLM v1: uninstalled in {time.monotonic() - t0:.1f}s")
    env.co.delete_cluster_custom_object(olmv1.OLM_GROUP, "v1", "clustercatalogs", CATALOG)


def _extension_exists(env: Env) -> bool:
    try:
        env.get("clusterextensions", EXTENSION)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _operator_deployments(env: Env, ns: str) -> list[str]:
    apps = client.AppsV1Api(env.api)
    return [
        d.metadata.name
        for d in apps.list_namespaced_deployment(ns).items
        if d.metadata.name.endswith("-operator")
    ]


def test_a_tampered_catalog_is_refused_while_the_signed_one_serves(olmv1_env, tmp_path):
    env = olmv1_env
    signed, tampered = f"{CATALOG}-signed", f"{CATALOG}-tampered"
    # Our catalog with one change (its bundle from somewhere else), pushed under a tag of our
    # catalog repository by someone without our key: no signature covers its digest.
    published = env.releases[RELEASED].root / "catalog-context" / "catalog" / PACKAGE / "catalog.yaml"
    text = published.read_text().replace(f"{REGISTRY}/{PACKAGE}-bundle", "quay.io/attacker/bundle")
    assert text != published.read_text()
    ref = f"{REGISTRY}/{PACKAGE}-catalog:tampered"
    archive = write_archive(
        tmp_path / "tampered.tar",
        ref,
        layer_tar({f"/configs/{PACKAGE}/catalog.yaml": ImageFile(text.encode())}),
        labels={"operators.operatorframework.io.index.configs.v1": "/configs"},
    )
    env.registry.push(archive, ref)
    try:
        for name, image in ((tampered, ref), (signed, catalog_ref(RELEASED))):
            body = cluster_catalog(image)
            body["metadata"]["name"] = name
            env.co.create_cluster_custom_object(olmv1.OLM_GROUP, "v1", "clustercatalogs", body)
        env.wait_condition("clustercatalogs", signed, "Serving")

        def refused() -> str:
            message = str(env.condition("clustercatalogs", tampered, "Progressing").get("message", ""))
            return message if REJECTED in message else ""

        try:
            message = wait_for(refused, 300, "catalogd refuses the tampered catalog")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{env.explain()}") from None
        assert "signature" in message, message
        # Never served: no Serving condition True, nothing unpacked.
        assert env.condition("clustercatalogs", tampered, "Serving").get("status") != "True"
        assert resolved_catalog(env, tampered) is None
        served = resolved_catalog(env, signed) or ""
        assert served.endswith("@" + env.releases[RELEASED].digests[catalog_ref(RELEASED)]), served
    finally:
        for name in (tampered, signed):
            env.kubectl("delete", "clustercatalog", name, "--ignore-not-found", check=False)
