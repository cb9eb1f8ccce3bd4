"""OLM v0 on the local cluster: its CRDs and both managers, the way OLM's quickstart installs it.

:class:`OLM` installs, on a :class:`~localcluster.cluster.LocalCluster` with a real node:

- OLM's CRDs from the pinned module (``localcluster/go/olm``, :mod:`localcluster.gotools`
  copies them next to the binaries), applied server-side, plus the ``OLMConfig`` CRD and its
  ``cluster`` object, which the quickstart file lacks;
- prometheus-operator's ``ServiceMonitor`` and ``PrometheusRule`` CRDs (module
  :data:`PROMETHEUS_OPERATOR_MODULE`): an InstallPlan fails on any kind a bundle ships whose CRD
  is missing, and this project's bundle ships both;
- the namespaces ``olm`` and ``operators`` with upstream's ``global-operators`` OperatorGroup;
- ``olm`` (olm-operator) and ``catalog`` (catalog-operator) as **host processes** with the
  cluster-admin kubeconfig and the flags of upstream's Deployments (``--namespace olm``,
  ``--writeStatusName ""``). Upstream runs them as pods with a cluster-admin ClusterRole; the
  difference is where the process runs, not what it may do.

A stand-in, because this machine has no cluster DNS:

- **Cluster DNS for catalog-operator.** A CatalogSource with ``spec.image`` gets a registry pod
  and a Service, and catalog-operator dials ``<name>.<namespace>.svc:50051``. catalog-operator
  runs in a mount namespace of its own whose ``/etc/hosts`` is a file :class:`ServiceHosts`
  keeps listing every Service's ClusterIP under ``<name>.<namespace>.svc`` (Go re-reads the
  file when it changes). The connection then goes to the ClusterIP through kube-proxy's rules,
  as from a pod. The host's own ``/etc/hosts`` is not touched.
OLM pulls catalog and bundle images with ``imagePullPolicy: Always``, so kubelet must really
pull them: the images built here are pushed to :class:`localcluster.registry.Registry` and the
node's containerd mirrors ``ghcr.io``/``quay.io``/``docker.io`` to it. OLM's util image and opm
image are the local stand-ins of :mod:`localcluster.images`.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kubernetes import client
from kubernetes import config as kconfig
from kubernetes.client.exceptions import ApiException

from localcluster.kube import kubectl
from localcluster.process import Component, log

if TYPE_CHECKING:
    from localcluster.cluster import LocalCluster

OLM_NAMESPACE = "olm"
OPERATORS_NAMESPACE = "operators"
GLOBAL_OPERATOR_GROUP = "global-operators"
# Images OLM's pods run, as upstream's manifests name them, where this install differs: the
# quickstart pins the util image by digest, which no local build can have (localcluster.images
# makes a stand-in of the release tag instead). opm is catalog-operator's default (`:latest`).
UTIL_IMAGE = "quay.io/operator-framework/olm:v0.46.0"
OPM_IMAGE = "quay.io/operator-framework/opm:latest"
PROMETHEUS_OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
MONITORING_CRDS = ("monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml")
HEALTH_URL = "http://127.0.0.1:8080/healthz"  # both managers hard-code :8080; olm-operator gets it


def monitoring_crds() -> list[Path]:
    """prometheus-operator's ServiceMonitor and PrometheusRule CRDs, from its pinned Go module."""
    from localcluster.binaries import _go_env

    proc = subprocess.run(
        ["go", "mod", "download", "-json", PROMETHEUS_OPERATOR_MODULE],
        env=_go_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    info = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or "Dir" not in info:
        raise RuntimeError(
            f"go mod download {PROMETHEUS_OPERATOR_MODULE}: {info.get('Error') or proc.stderr}"
        )
    crds = Path(info["Dir"]) / "example" / "prometheus-operator-crd"
    return [crds / name for name in MONITORING_CRDS]


class ServiceHosts:
    """A hosts file naming every Service ``<name>.<namespace>.svc``: cluster DNS for one process.

    A thread rewrites :attr:`path` in place (a bind mount follows the inode) whenever the set of
    Services changes; the host's own entries come first.
    """

    def __init__(self, api: client.ApiClient, path: Path, interval: float = 0.5) -> None:
        self.core = client.CoreV1Api(api)
        self.path = path
        self.interval = interval
        self._base = Path("/etc/hosts").read_text()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.path.write_text(self._base)

    def entries(self) -> str:
        lines = []
        for svc in self.core.list_service_for_all_namespaces().items:
            ip = svc.spec.cluster_ip
            if ip and ip != "None":
                name, ns = svc.metadata.name, svc.metadata.namespace
                lines.append(f"{ip}\t{name}.{ns}.svc {name}.{ns}.svc.cluster.local")
        return "".join(f"{line}\n" for line in sorted(lines))

    def refresh(self) -> None:
        text = self._base.rstrip("\n") + "\n# Services (localcluster.olm.ServiceHosts)\n" + self.entries()
        if self.path.read_text() != text:
            with self.path.open("r+") as f:  # same inode: the bind mount sees it
                f.write(text)
                f.truncate()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
            except Exception as exc:  # an API-server restart must not end the thread
                log(f"olm: service hosts not refreshed: {exc}")

    def start(self) -> ServiceHosts:
        self.refresh()
        self._thread = threading.Thread(target=self._run, name="service-hosts", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


@dataclass
class OLM:
    """OLM v0 on ``cluster``: :meth:`install` once, :meth:`stop` the managers at the end."""

    cluster: LocalCluster
    components: list[Component] = field(default_factory=list)
    hosts: ServiceHosts | None = None

    @property
    def api(self) -> client.ApiClient:
        return kconfig.new_client_from_config(config_file=str(self.cluster.kubeconfig))

    def kubectl(self, *args: str) -> str:
        return kubectl(self.cluster.kubeconfig, *args)

    def install(self, timeout: float = 180.0) -> OLM:
        """Apply the CRDs and objects (idempotent), then start both managers and wait for them."""
        try:
            return self._install(timeout)
        except BaseException:
            self.stop()
            raise

    def _install(self, timeout: float) -> OLM:
        from localcluster import gotools

        t0 = time.monotonic()
        binaries = gotools.ensure("olm").parent
        crds = [binaries / "crds" / "crds.yaml", binaries / "crds" / "0000_50_olm_00-olmconfigs.crd.yaml"]
        self._apply_crds([*crds, *monitoring_crds()], timeout)
        self._apply_objects()
        log(f"olm: CRDs and namespaces in {time.monotonic() - t0:.1f}s")
        env = {"KUBECONFIG": str(self.cluster.kubeconfig), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        olm = self._start(
            "olm-operator",
            [str(binaries / "olm"), "--namespace", OLM_NAMESPACE, "--writeStatusName", ""],
            env,
        )
        self.cluster.wait_component(olm, "/healthz on :8080", lambda: _http_ok(HEALTH_URL), timeout)
        hosts_file = self.cluster.workdir / "olm" / "catalog-operator.hosts"
        hosts_file.parent.mkdir(parents=True, exist_ok=True)
        self.hosts = ServiceHosts(self.api, hosts_file).start()
        catalog = self._start(
            "catalog-operator",
            [
                # A private mount namespace whose /etc/hosts is the ServiceHosts file.
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                'mount --bind "$0" /etc/hosts && exec "$@"',
                str(hosts_file),
                str(binaries / "catalog"),
                "--namespace",
                OLM_NAMESPACE,
                "--kubeconfig",
                str(self.cluster.kubeconfig),
                "--writeStatusName",
                "",
                "--configmapServerImage=quay.io/operator-framework/configmap-operator-registry:latest",
                "--util-image",
                UTIL_IMAGE,
            ],
            env,
        )
        # Its health port is olm-operator's (:8080 is hard-coded): ready is when its informers
        # have synced and it logs "starting workers...".
        log_path = catalog.log_path
        self.cluster.wait_component(
            catalog,
            "informers synced",
            lambda: "starting workers" in log_path.read_text(errors="replace"),
            timeout,
        )
        log(f"olm: olm-operator and catalog-operator running in {time.monotonic() - t0:.1f}s")
        return self

    def _start(self, name: str, argv: list[str], env: dict[str, str]) -> Component:
        comp = Component(name, argv, self.cluster.workdir / "logs" / f"{name}.log", env=env)
        log(f"starting {name}")
        comp.start()
        self.components.append(comp)
        return comp

    def _apply_crds(self, paths: Iterable[Path], timeout: float) -> None:
        files = [f"--filename={p}" for p in paths]
        self.kubectl("apply", "--server-side", "--force-conflicts", *files)
        self.kubectl("wait", "--for=condition=Established", f"--timeout={timeout:.0f}s", *files)

    def _apply_objects(self) -> None:
        core = client.CoreV1Api(self.api)
        for ns in (OLM_NAMESPACE, OPERATORS_NAMESPACE):
            _create(lambda ns=ns: core.create_namespace({"metadata": {"name": ns}}))
        co = client.CustomObjectsApi(self.api)
        _create(
            lambda: co.create_cluster_custom_object(
                "operators.coreos.com",
                "v1",
                "olmconfigs",
                {
                    "apiVersion": "operators.coreos.com/v1",
                    "kind": "OLMConfig",
                    "metadata": {"name": "cluster"},
                },
            )
        )
        _create(
            lambda: co.create_namespaced_custom_object(
                "operators.coreos.com",
                "v1",
                OPERATORS_NAMESPACE,
                "operatorgroups",
                {
                    "apiVersion": "operators.coreos.com/v1",
                    "kind": "OperatorGroup",
                    "metadata": {"name": GLOBAL_OPERATOR_GROUP},
                },
            )
        )

    def stop(self) -> None:
        for comp in reversed(self.components):
            if comp.alive():
                log(f"stopping {comp.name} (pid {comp.proc.pid if comp.proc else '?'})")
            comp.stop()
        self.components.clear()
        if self.hosts is not None:
            self.hosts.stop()
            self.hosts = None


def _create(create: Callable[[], object]) -> None:
    try:
        create()
    except ApiException as exc:
        if exc.status != 409:
            raise


def _http_ok(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=2) as resp:
        return bool(resp.status == 200)


__all__ = ["OLM", "ServiceHosts", "monitoring_crds"]
