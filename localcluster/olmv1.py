"""OLM v1 on the local cluster: cert-manager, catalogd and operator-controller, as upstream's install.sh.

``OLMv1`` installs, on a ``LocalCluster`` with a real node, in install.sh's order and with its
waits: cert-manager's static release manifest (rendered from its Helm chart at the pinned tag
as its release does), then operator-controller's release manifest (``manifests/standard.yaml``
of the pinned module, with the release's substitutions) into ``olmv1-system``. Images are the
release tags, built here (``localcluster.images.OLMV1_IMAGES``) and imported into containerd;
the node is labelled control-plane for the manifest's nodeSelector.

Differences from a cluster with DNS and a registry: a ``hostAliases`` stand-in for cluster DNS
(``catalogd-service.olmv1-system.svc`` and the registry's Service), and the ConfigMap
``olmv1-pull-config`` giving catalogd and operator-controller (which pull images themselves,
through containers/image) ``registries.conf``, the registry's CA (``--pull-cas-dir``) and, when
given, ``/etc/containers/policy.json`` (the signature policy; without one they accept anything).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from kubernetes import client
from kubernetes import config as kconfig
from kubernetes.client.exceptions import ApiException

from localcluster import signing
from localcluster.kube import kubectl
from localcluster.process import log

if TYPE_CHECKING:
    from localcluster.cluster import LocalCluster

NAMESPACE = "olmv1-system"
CERT_MANAGER_NAMESPACE = "cert-manager"
CATALOGD = "catalogd-controller-manager"
OPERATOR_CONTROLLER = "operator-controller-controller-manager"
CATALOGD_SERVICE = "catalogd-service"
CERT_MANAGER_DEPLOYMENTS = ("cert-manager-webhook", "cert-manager-cainjector", "cert-manager")
PULL_CONFIG = "olmv1-pull-config"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
DNS_STAND_IN_NOTE = "localcluster: stand-in for cluster DNS (no DNS server on this machine)"
OLM_GROUP = "olm.operatorframework.io"


def cert_manager_manifest() -> str:
    """cert-manager's ``cert-manager.yaml`` for the pinned tag (``make static-manifests``' recipe)."""
    from localcluster import gotools

    source = gotools.git_checkout("cert-manager")
    version = gotools.GIT_SOURCES["cert-manager"].tag
    with tempfile.TemporaryDirectory(prefix="cert-manager-chart-") as tmp:
        chart = Path(tmp) / "cert-manager"
        shutil.copytree(source / "deploy" / "charts" / "cert-manager", chart)
        template = (chart / "Chart.template.yaml").read_text().replace("{{IS_PRERELEASE}}", "false")
        meta = yaml.safe_load(template)
        meta["version"] = meta["appVersion"] = version
        (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
        crds = sorted((source / "deploy" / "crds").glob("*.yaml"))
        (chart / "templates" / "crds.yaml").write_text("\n---\n".join(p.read_text() for p in crds))
        rendered = _olmv1_tool(
            "helm-template",
            "--name=cert-manager",
            f"--namespace={CERT_MANAGER_NAMESPACE}",
            "--set=crds.enabled=true",
            "--set=creator=static",
            "--set=startupapicheck.enabled=false",
            str(chart),
        )
    namespace = (source / "deploy" / "manifests" / "namespace.yaml").read_text()
    return f"{namespace}\n---\n{rendered}"


def olmv1_manifest() -> str:
    """operator-controller's standard release manifest, as its release publishes it."""
    from localcluster import gotools, images

    text = gotools.module_file("olmv1", "standard.yaml").read_text()
    # What upstream's release does to the tree's manifest (Makefile: IMAGE_TAG, cert-$(VERSION)).
    return text.replace(":devel", f":{images.OLMV1_VERSION}").replace(
        "cert-git-version", f"cert-{images.OLMV1_VERSION}"
    )


def _olmv1_tool(*args: str) -> str:
    import subprocess

    from localcluster import gotools

    tool = gotools.ensure("olmv1").parent / "olmv1-tool"
    return subprocess.run([str(tool), *args], check=True, capture_output=True, text=True).stdout


def validate_bundles(*bundle_dirs: Path, watch_namespace: str = "") -> str:
    """Run OLM v1's bundle validators and renderer on ``bundle_dirs`` (raises with their report)."""
    import subprocess

    from localcluster import gotools

    tool = gotools.ensure("olmv1").parent / "olmv1-tool"
    proc = subprocess.run(
        [str(tool), "validate", f"--watch-namespace={watch_namespace}", *map(str, bundle_dirs)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"OLM v1 refuses the bundle:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def render_bundle(bundle_dir: Path, install_namespace: str) -> list[dict[str, Any]]:
    """The objects operator-controller creates for ``bundle_dir`` installed in ``install_namespace``."""
    out = _olmv1_tool("render", f"--install-namespace={install_namespace}", str(bundle_dir))
    return [d for d in yaml.safe_load_all(out) if d]


def registries_conf(mirrors: dict[str, str], *, insecure: bool = False) -> str:
    """containers-registries.conf(5) sending pulls of each registry (key) to a mirror (value)."""
    lines = ["# localcluster: images of these registries are pulled from the local registry", ""]
    for prefix, location in sorted(mirrors.items()):
        lines += [
            "[[registry]]",
            f"prefix = {json.dumps(prefix)}",
            f"location = {json.dumps(prefix)}",
            "[[registry.mirror]]",
            f"location = {json.dumps(location)}",
            f"insecure = {json.dumps(insecure)}",
            "",
        ]
    return "\n".join(lines)


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


@dataclass
class OLMv1:
    """OLM v1 on ``cluster``: ``install`` once, ``uninstall`` at the end.

    ``registries_conf``, ``registry_ca`` and ``policy`` are what catalogd and operator-controller
    read for their pulls (``/etc/containers/registries.conf``, a CA added to ``--pull-cas-dir``,
    the signature policy); each is left out when None. ``policy`` is a directory as
    ``signing.write_policy_files`` writes it (with ``key_path=signing.CONTAINER_KEY_PATH``): its
    ``policy.json``, ``registries.d`` file and ``cosign.pub`` are mounted where containers/image
    reads them, and both controllers then refuse what the policy refuses.
    """

    cluster: LocalCluster
    registries_conf: str | None = None
    registry_ca: Path | None = None
    policy: Path | None = None
    # name -> IP in both pods' /etc/hosts (the registry's Service name: a DNS stand-in).
    host_aliases: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def api(self) -> client.ApiClient:
        return kconfig.new_client_from_config(config_file=str(self.cluster.kubeconfig))

    def kubectl(self, *args: str, check: bool = True, timeout: float = 300) -> str:
        return kubectl(self.cluster.kubeconfig, *args, check=check, timeout=timeout)

    def install(self, timeout: float = 300.0) -> OLMv1:
        """Build or reuse the images, then cert-manager, then catalogd and operator-controller."""
        from localcluster import images

        node = self.cluster.node
        if node is None:
            raise RuntimeError("OLM v1 runs its controllers as pods: the cluster needs a real node")
        t0 = time.monotonic()
        archives = images.third_party_archives(images.OLMV1_IMAGES)
        node.import_images(archives.values())
        self.timings["images"] = time.monotonic() - t0
        self.kubectl("label", "node", "--all", "--overwrite", f"{CONTROL_PLANE_LABEL}=")

        t0 = time.monotonic()
        self.apply(cert_manager_manifest(), timeout)
        for name in CERT_MANAGER_DEPLOYMENTS:
            self._wait_available(CERT_MANAGER_NAMESPACE, name, timeout)
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            self._wait(
                lambda kind=kind: bool(
                    self.kubectl(
                        "get",
                        kind,
                        "cert-manager-webhook",
                        "-o",
                        "jsonpath={.webhooks[0].clientConfig.caBundle}",
                    )
                ),
                timeout,
                f"{kind}/cert-manager-webhook has a CA bundle",
            )
        self.timings["cert-manager"] = time.monotonic() - t0

        t0 = time.monotonic()
        docs = _docs(olmv1_manifest())
        deployments = [d for d in docs if d["kind"] == "Deployment"]
        self.apply(yaml.safe_dump_all([d for d in docs if d["kind"] != "Deployment"]), timeout)
        self._apply_pull_config()
        service_ip = (
            client.CoreV1Api(self.api).read_namespaced_service(CATALOGD_SERVICE, NAMESPACE).spec.cluster_ip
        )
        for deployment in deployments:
            self._patch_deployment(deployment, service_ip)
        self.apply(yaml.safe_dump_all(deployments), timeout)
        for name in (CATALOGD, OPERATOR_CONTROLLER):
            self._wait_available(NAMESPACE, name, timeout)
        self.timings["olmv1"] = time.monotonic() - t0
        log("olmv1: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()))
        return self

    def uninstall(self, timeout: float = 300.0) -> None:
        """Delete every ClusterExtension and ClusterCatalog, then what ``install`` applied."""
        for kind in ("clusterextensions", "clustercatalogs"):
            self.kubectl(
                "delete", kind, "--all", "--ignore-not-found", f"--timeout={timeout:.0f}s", check=False
            )
        for text in (olmv1_manifest(), cert_manager_manifest()):
            with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
                f.write(text)
                f.flush()
                self.kubectl(
                    "delete",
                    "--ignore-not-found",
                    "--wait",
                    f"--timeout={timeout:.0f}s",
                    "-f",
                    f.name,
                    check=False,
                )
        self.kubectl("label", "node", "--all", f"{CONTROL_PLANE_LABEL}-", check=False)

    # -- helpers ----------------------------------------------------------------------------------

    def apply(self, text: str, timeout: float = 60) -> None:
        """``kubectl apply --server-side`` of the YAML ``text``."""
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(text)
            f.flush()
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", f.name, timeout=timeout)

    def _apply_pull_config(self) -> None:
        data: dict[str, str] = {}
        if self.registries_conf is not None:
            data["registries.conf"] = self.registries_conf
        if self.registry_ca is not None:
            data["registry-ca.crt"] = self.registry_ca.read_text()
        if self.policy is not None:
            data["policy.json"] = (self.policy / "policy.json").read_text()
            data[signing.REGISTRIES_D_FILE] = (
                self.policy / "registries.d" / signing.REGISTRIES_D_FILE
            ).read_text()
            data["cosign.pub"] = (self.policy / "cosign.pub").read_text()
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": PULL_CONFIG, "namespace": NAMESPACE},
        }
        self.apply(yaml.safe_dump({**body, "data": data}), 60)

    def _patch_deployment(self, deployment: dict[str, Any], catalogd_ip: str) -> None:
        """Mount the pull configuration; give operator-controller the catalogd name (DNS stand-in)."""
        pod = deployment["spec"]["template"]["spec"]
        container = next(c for c in pod["containers"] if c["name"] == "manager")
        mounts = container.setdefault("volumeMounts", [])
        volumes = pod.setdefault("volumes", [])
        files: list[tuple[str, str]] = []
        if self.registries_conf is not None:
            files.append(("registries.conf", "/etc/containers/registries.conf"))
        if self.policy is not None:
            files += [
                ("policy.json", signing.POLICY_PATH),
                (signing.REGISTRIES_D_FILE, f"{signing.REGISTRIES_D}/{signing.REGISTRIES_D_FILE}"),
                ("cosign.pub", signing.CONTAINER_KEY_PATH),
            ]
        for name, path in files:
            mounts.append({"name": PULL_CONFIG, "mountPath": path, "subPath": name, "readOnly": True})
        if self.registry_ca is not None:
            # --pull-cas-dir is the ca-certs volume: project the registry's CA beside the manifest's.
            ca = next(v for v in volumes if v["name"] == "ca-certs")
            secret = ca.pop("secret")
            ca["projected"] = {
                "sources": [
                    {"secret": {"name": secret["secretName"], "items": secret["items"]}},
                    {
                        "configMap": {
                            "name": PULL_CONFIG,
                            "items": [{"key": "registry-ca.crt", "path": "registry-ca.crt"}],
                        }
                    },
                ]
            }
        volumes.append({"name": PULL_CONFIG, "configMap": {"name": PULL_CONFIG}})
        aliases = dict(self.host_aliases)
        if deployment["metadata"]["name"] == OPERATOR_CONTROLLER:
            aliases[f"{CATALOGD_SERVICE}.{NAMESPACE}.svc"] = catalogd_ip
        if aliases:
            pod["hostAliases"] = [{"ip": ip, "hostnames": [name]} for name, ip in sorted(aliases.items())]
            deployment["metadata"].setdefault("annotations", {})["localcluster/host-aliases"] = (
                DNS_STAND_IN_NOTE
            )

    def _wait_available(self, namespace: str, name: str, timeout: float) -> None:
        apps = client.AppsV1Api(self.api)

        def available() -> bool:
            try:
                status = apps.read_namespaced_deployment(name, namespace).status
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            return any(c.type == "Available" and c.status == "True" for c in status.conditions or [])

        self._wait(available, timeout, f"deployment {namespace}/{name} Available")

    def _wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"olmv1: timed out after {timeout:.0f}s waiting for {what}\n{self.diagnose()}"
                )
            time.sleep(1)

    def diagnose(self) -> str:
        parts = []
        for ns in (CERT_MANAGER_NAMESPACE, NAMESPACE):
            for args in (("get", "deploy,pods", "-o", "wide"), ("get", "events", "--sort-by=.lastTimestamp")):
                parts.append(self.kubectl("-n", ns, *args, check=False)[-4000:])
        return "\n".join(parts)


CLUSTER_SCOPED = {"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace"}
MANAGE = ["get", "list", "watch", "create", "update", "patch", "delete"]
RBAC_GROUP = "rbac.authorization.k8s.io"


def _plural(kind: str) -> str:
    lower = kind.lower()
    return lower[:-1] + "ies" if lower.endswith("y") else lower + "s"


def installer_rbac(
    extension: str, namespace: str, service_account: str, rendered: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The ServiceAccount and RBAC that OLM <= 1.10 (and OpenShift's) install ``rendered`` with.

    Those versions apply a bundle's objects as ``spec.serviceAccount``, so it needs: the
    ClusterExtension's finalizers; every verb on each kind the bundle ships (cluster-wide for
    cluster-scoped kinds, in ``namespace`` for the rest); ``bind`` and ``escalate`` on the role
    kinds; and every rule of the Roles and ClusterRoles the bundle creates (what they grant is
    then held, not only escalated to). operator-controller 1.11 ignores the field.
    """
    cluster_kinds: dict[str, set[str]] = {}
    namespaced_kinds: dict[str, set[str]] = {}
    granted_cluster: list[dict[str, Any]] = []
    granted_namespaced: list[dict[str, Any]] = []
    for obj in rendered:
        group = obj["apiVersion"].rpartition("/")[0]
        scoped = cluster_kinds if obj["kind"] in CLUSTER_SCOPED else namespaced_kinds
        scoped.setdefault(group, set()).add(_plural(obj["kind"]))
        if obj["kind"] == "ClusterRole":
            granted_cluster += obj.get("rules") or []
        elif obj["kind"] == "Role":
            granted_namespaced += obj.get("rules") or []
    name = f"{extension}-installer"
    finalizers = {
        "apiGroups": [OLM_GROUP],
        "resources": ["clusterextensions/finalizers"],
        "verbs": ["update"],
        "resourceNames": [extension],
    }

    def rules(kinds: dict[str, set[str]]) -> list[dict[str, Any]]:
        out = [{"apiGroups": [g], "resources": sorted(r), "verbs": MANAGE} for g, r in sorted(kinds.items())]
        # Binding a role needs `bind` on it (else the API server checks the role's rules, which a
        # role created in the same install may not have yet); `escalate` lets it write the roles.
        if roles := sorted(kinds.get(RBAC_GROUP, set()) & {"clusterroles", "roles"}):
            out.append({"apiGroups": [RBAC_GROUP], "resources": roles, "verbs": ["bind", "escalate"]})
        return out

    meta = {"name": name, "namespace": namespace}
    subject = [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": service_account, "namespace": namespace},
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [finalizers, *rules(cluster_kinds), *granted_cluster],
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subject,
        },
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": meta,
            "rules": [*rules(namespaced_kinds), *granted_namespaced],
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subject,
        },
    ]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="OLM v1 helpers for this project's bundle")
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser("validate", help="run OLM v1's bundle validators and renderer")
    validate.add_argument("bundles", nargs="*", type=Path, default=[Path("bundle")])
    rbac = sub.add_parser("installer-rbac", help="print the ServiceAccount and RBAC for OLM <= 1.10")
    rbac.add_argument("--namespace", required=True, help="the ClusterExtension's spec.namespace")
    rbac.add_argument("--extension", default="k8s-operators-py")
    rbac.add_argument("--service-account", default="k8s-operators-py-installer")
    rbac.add_argument("--bundle", type=Path, default=Path("bundle"))
    args = parser.parse_args(argv)
    if args.command == "validate":
        print(validate_bundles(*args.bundles), end="")
    else:
        rendered = render_bundle(args.bundle, args.namespace)
        print(
            yaml.safe_dump_all(
                installer_rbac(args.extension, args.namespace, args.service_account, rendered)
            ),
            end="",
        )
    return 0


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def cluster_objects(api: client.ApiClient, plural: str) -> Iterable[dict[str, Any]]:
    return client.CustomObjectsApi(api).list_cluster_custom_object(OLM_GROUP, "v1", plural)["items"]


if __name__ == "__main__":
    raise SystemExit(main())
