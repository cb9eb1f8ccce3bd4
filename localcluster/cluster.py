"""Start and stop a local Kubernetes control plane as plain processes.

Order: etcd -> kube-apiserver (RBAC, client-certificate admin, service-account keys) -> CRDs ->
kube-controller-manager -> kube-scheduler -> kwok, then a few fake Nodes that kwok makes Ready,
and, with ``real_node=True`` (root only), one real node: containerd, kubelet and kube-proxy on
this machine (``localcluster.node``). CRDs go in before the controller manager starts so its
garbage collector discovers them on its first pass instead of ~30 s later.

Every wait has a deadline; when a component dies or never becomes healthy the error names it
and includes the tail of its log. Teardown stops only the processes this object started, by
PID, in reverse order (SIGTERM, then SIGKILL after a grace period). Children also get
``PR_SET_PDEATHSIG`` so a crashed parent never leaves an API server behind.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import ssl
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from localcluster import pki
from localcluster.binaries import Binaries, ensure_binaries
from localcluster.process import Component, ComponentError, free_port, log

if TYPE_CHECKING:
    from localcluster.node import RealNode

STAGES_FILE = Path(__file__).with_name("kwok-stages.yaml")

# Labels every fake node carries, so tests can address them (nodeSelector, affinity).
NODE_LABEL = "localcluster.dev/node"
NODE_POOL_LABEL = "localcluster.dev/pool"
DEFAULT_NODES = 3
SERVICE_CIDR = "10.96.0.0/16"
# The operators under test run as ServiceAccounts of this namespace; the API server records
# what they call (verb, resource, outcome) so tests can compare it with what RBAC grants them.
AUDITED_NAMESPACE = "k8s-operators-py"
AUDIT_POLICY = f"""\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:{AUDITED_NAMESPACE}"]
- level: None
"""


@dataclass
class LocalCluster:
    """A running control plane. Use ``start`` or ``up``; call ``down`` to stop."""

    workdir: Path
    binaries: Binaries
    nodes: int = DEFAULT_NODES
    crds: list[Path] = field(default_factory=list)
    keep_workdir: bool = False
    components: list[Component] = field(default_factory=list)
    api_port: int = 0
    etcd_port: int = 0
    ca: pki.CertificateAuthority = field(default_factory=pki.CertificateAuthority)
    # One real worker node on this machine (root only; see localcluster.node). The API server
    # then binds 0.0.0.0 and advertises the node's IP so pods reach it via `kubernetes`.
    real_node: bool = False
    # Shape traffic into every pod of the real node to this many bits/s (CNI bandwidth plugin):
    # a link-bound path gives repeatable throughput where an unshaped veth is CPU-bound.
    pod_ingress_rate: int | None = None
    # More flags for kube-controller-manager (a benchmark raising its client limits, so that
    # thousands of Deployments do not wait on its QPS 20 to get their pods).
    controller_manager_args: tuple[str, ...] = ()
    node: RealNode | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def pki_dir(self) -> Path:
        return self.workdir / "pki"

    @property
    def service_cidr(self) -> str:
        """The Services' addresses (``--service-cluster-ip-range``); a real node routes them."""
        return SERVICE_CIDR

    @property
    def audit_log(self) -> Path:
        """JSON lines: every request made by a ServiceAccount of ``AUDITED_NAMESPACE``."""
        return self.workdir / "logs" / "audit.log"

    # -- lifecycle -------------------------------------------------------------------------

    def up(self, timeout: float = 180.0) -> LocalCluster:
        t0 = time.monotonic()
        self.pki_dir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        if self.real_node:
            from localcluster import node

            # Refuse before starting anything: a half-wanted cluster helps nobody.
            if reason := node.unavailable_reason():
                raise node.RealNodeUnavailableError(f"real node requested but {reason}")
            if missing := self.binaries.missing(("kubelet", "kube-proxy")):
                raise node.RealNodeUnavailableError(
                    f"real node requested but {', '.join(missing)} not in {self.binaries.directory} "
                    "(ensure_binaries(node=True))"
                )
        try:
            self.api_port = free_port()  # the kubeconfig written with the PKI names it
            self._write_pki()
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._install_crds(timeout)
            self._start_controller_manager(timeout)
            self._start_scheduler(timeout)
            self._start_kwok(timeout)
            self._create_nodes(timeout)
            if self.real_node:
                from localcluster.node import RealNode

                self.node = RealNode(self, start_timeout=timeout, pod_ingress_rate=self.pod_ingress_rate)
                self.node.start()
        except BaseException:
            self.down()
            raise
        log(f"control plane ready in {time.monotonic() - t0:.1f}s; export KUBECONFIG={self.kubeconfig}")
        return self

    def down(self) -> None:
        if self.node is not None:
            self.node.stop()  # first: it restores the host, and needs nothing else running
            self.node = None
        for comp in reversed(self.components):
            if comp.alive():
                log(f"stopping {comp.name} (pid {comp.proc.pid if comp.proc else '?'})")
            comp.stop()
        self.components.clear()
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- pieces ----------------------------------------------------------------------------

    def _write_pki(self) -> None:
        from localcluster.node import NODE_IP

        d = self.pki_dir
        pki.write(self.ca.pair, d, "ca")
        pki.write(
            self.ca.serving(
                ["kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost"],
                # NODE_IP: pods of a real node reach the API server there via `kubernetes`.
                ["127.0.0.1", "10.96.0.1", NODE_IP],
            ),
            d,
            "apiserver",
        )
        # The API server's identity towards kubelets (kubectl logs/exec/port-forward).
        pki.write(self.ca.client("kube-apiserver-kubelet-client", ("system:masters",)), d, "kubelet-client")
        pki.write(pki.service_account_keys(), d, "sa")
        probe = self.ca.client("localcluster-probe", ("system:masters",))
        (d / "probe.pem").write_bytes(probe.cert_pem + probe.key_pem)
        (d / "probe.pem").chmod(0o600)
        self.write_kubeconfig(self.kubeconfig, "admin", ("system:masters",))

    def write_kubeconfig(self, path: Path, user: str, groups: tuple[str, ...] = ()) -> Path:
        """Write a kubeconfig for ``user`` authenticated by a fresh client certificate."""
        pair = self.ca.client(user, groups)
        b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "localcluster",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64(self.ca.pair.cert_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": b64(pair.cert_pem),
                        "client-key-data": b64(pair.key_pem),
                    },
                }
            ],
            "contexts": [{"name": "localcluster", "context": {"cluster": "localcluster", "user": user}}],
            "current-context": "localcluster",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def _component(self, name: str, argv: list[str]) -> Component:
        comp = Component(name, argv, self.workdir / "logs" / f"{name}.log")
        log(f"starting {name}")
        comp.start()
        self.components.append(comp)
        return comp

    def wait_component(self, comp: Component, what: str, check: Callable[[], bool], timeout: float) -> None:
        """Poll ``check`` until true; fail with ``comp``'s log tail if it dies or time runs out."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        last_err = ""
        while time.monotonic() < deadline:
            if not comp.alive():
                code = comp.proc.returncode if comp.proc else None
                raise ComponentError(
                    f"{comp.name} exited with code {code} while waiting for {what}; "
                    f"last log lines ({comp.log_path}):\n{comp.log_tail()}"
                )
            try:
                if check():
                    log(f"{comp.name} ready ({what}) after {time.monotonic() - t0:.1f}s")
                    return
            except Exception as exc:
                last_err = f"{type(exc).__name__}: {exc}"
            time.sleep(0.25)
        raise ComponentError(
            f"{comp.name} not ready ({what}) within {timeout:.0f}s; last error: {last_err or 'none'}; "
            f"last log lines ({comp.log_path}):\n{comp.log_tail()}"
        )

    def _https_ok(self, url: str, client: bool = True) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        if client:
            ctx.load_cert_chain(str(self.pki_dir / "probe.pem"))
        else:
            # kube-controller-manager/scheduler serve self-signed certificates on /healthz.
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        with urllib.request.urlopen(url, context=ctx, timeout=5) as resp:
            return bool(resp.status == 200)

    def _start_etcd(self, timeout: float) -> None:
        self.etcd_port, peer = free_port(), free_port()
        comp = self._component(
            "etcd",
            [
                str(self.binaries.path("etcd")),
                "--name=localcluster",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=localcluster=http://127.0.0.1:{peer}",
                # Test data is throwaway: skipping fsync makes every write much cheaper.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            url = f"http://127.0.0.1:{self.etcd_port}/health"
            with urllib.request.urlopen(url, timeout=5) as resp:
                return b'"health":"true"' in resp.read()

        self.wait_component(comp, "GET /health", healthy, timeout)

    def _start_apiserver(self, timeout: float) -> None:
        d = self.pki_dir
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        node_flags: list[str] = []
        if self.real_node:
            from localcluster.node import NODE_IP

            # Pods reach the API server through the `kubernetes` Service, whose endpoint is the
            # advertised address: the node's IP (on its bridge), so bind all addresses.
            bind, advertise = "0.0.0.0", NODE_IP
            node_flags = [
                # Else kubectl logs/exec resolve the node name by DNS, which knows no nodes.
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={d / 'kubelet-client.crt'}",
                f"--kubelet-client-key={d / 'kubelet-client.key'}",
                f"--kubelet-certificate-authority={d / 'ca.crt'}",
            ]
        else:
            # Without a default route the API server cannot pick an address and dies.
            bind, advertise = "127.0.0.1", "127.0.0.1"
        comp = self._component(
            "kube-apiserver",
            [
                str(self.binaries.path("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--secure-port={self.api_port}",
                f"--bind-address={bind}",
                f"--advertise-address={advertise}",
                *node_flags,
                f"--tls-cert-file={d / 'apiserver.crt'}",
                f"--tls-private-key-file={d / 'apiserver.key'}",
                f"--client-ca-file={d / 'ca.crt'}",
                "--authorization-mode=Node,RBAC",
                # On in OpenShift (OLM's main home): an owner reference with blockOwnerDeletion
                # needs update on the owner's finalizers. Tests see what OpenShift users see.
                "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={d / 'sa.crt'}",
                f"--service-account-signing-key-file={d / 'sa.key'}",
                "--allow-privileged=true",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=200",
                "--profiling=false",
                "--v=1",
            ],
        )
        self.wait_component(comp, "GET /readyz", lambda: self._https_ok(f"{self.server}/readyz"), timeout)

    def restart_apiserver(self, down_for: float = 0.0, timeout: float = 120.0) -> None:
        """Stop kube-apiserver, wait ``down_for`` seconds, start it again with the same flags.

        What an API-server upgrade or crash does to clients: every watch breaks, and the new
        watch cache starts at the current revision, so a watch resumed from an older
        resourceVersion gets 410 Gone and its client must list again (fault tests).
        """
        (comp,) = [c for c in self.components if c.name == "kube-apiserver"]
        t0 = time.monotonic()
        log("stopping kube-apiserver (restart)")
        comp.stop()
        time.sleep(down_for)  # the outage itself: nothing to wait for but time
        comp.start()
        self.wait_component(comp, "GET /readyz", lambda: self._https_ok(f"{self.server}/readyz"), timeout)
        log(f"kube-apiserver back after {time.monotonic() - t0:.1f}s")
        self._wait_controllers(timeout)

    def _wait_controllers(self, timeout: float) -> None:
        """Until kube-controller-manager acts again: its watches back off for up to ~30 s
        after an outage, and a test that comes next needs a namespace's default
        ServiceAccount (made by it) like any other."""
        from kubernetes import client
        from kubernetes import config as kconfig
        from kubernetes.client.exceptions import ApiException

        t0 = time.monotonic()
        core = client.CoreV1Api(kconfig.new_client_from_config(config_file=str(self.kubeconfig)))
        name = f"settle-{os.urandom(4).hex()}"
        core.create_namespace({"metadata": {"name": name}})
        try:
            while True:
                try:
                    core.read_namespaced_service_account("default", name)
                    break
                except ApiException as exc:
                    if exc.status != 404 or time.monotonic() - t0 > timeout:
                        raise
                time.sleep(0.5)
        finally:
            core.delete_namespace(name)
        log(f"controllers acting again after {time.monotonic() - t0:.1f}s")

    def _install_crds(self, timeout: float) -> None:
        if not self.crds:
            return
        from localcluster import kube

        api = kube.Client(self.kubeconfig)
        names = [name for path in self.crds for name in api.apply_crd_file(path)]
        log(f"installed CRDs {', '.join(names)}")
        api.wait_crd_established(names, timeout)

    def _start_kube_component(self, name: str, extra: list[str], timeout: float) -> None:
        """kube-controller-manager and kube-scheduler: admin kubeconfig, own serving port."""
        port = free_port()
        kc = str(self.kubeconfig)
        comp = self._component(
            name,
            [
                str(self.binaries.path(name)),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / (name + '-certs')}",
                "--profiling=false",
                *extra,
            ],
        )
        self.wait_component(
            comp, "GET /healthz", lambda: self._https_ok(f"https://127.0.0.1:{port}/healthz", False), timeout
        )

    def _start_controller_manager(self, timeout: float) -> None:
        d = self.pki_dir
        extra = [
            f"--service-account-private-key-file={d / 'sa.key'}",
            f"--root-ca-file={d / 'ca.crt'}",
            f"--cluster-signing-cert-file={d / 'ca.crt'}",
            f"--cluster-signing-key-file={d / 'ca.key'}",
            "--use-service-account-credentials=true",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Its default, /usr/libexec/kubernetes/..., is created (and re-created) on the host.
            f"--flex-volume-plugin-dir={self.workdir / 'flexvolume'}",
            *self.controller_manager_args,
        ]
        self._start_kube_component("kube-controller-manager", extra, timeout)

    def _start_scheduler(self, timeout: float) -> None:
        self._start_kube_component("kube-scheduler", [], timeout)

    def _start_kwok(self, timeout: float) -> None:
        port = free_port()
        comp = self._component(
            "kwok",
            [
                str(self.binaries.path("kwok")),
                f"--kubeconfig={self.kubeconfig}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-label-selector={NODE_LABEL}",
                f"--config={STAGES_FILE}",
                f"--server-address=127.0.0.1:{port}",
                "--node-lease-duration-seconds=40",
                "--cidr=10.244.0.0/16",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
                return bool(resp.status == 200)

        self.wait_component(comp, "GET /healthz", healthy, timeout)

    def node_names(self) -> list[str]:
        return [f"kwok-node-{i}" for i in range(self.nodes)]

    def _create_nodes(self, timeout: float) -> None:
        from localcluster import kube

        api = kube.Client(self.kubeconfig)
        for i, name in enumerate(self.node_names()):
            api.ensure_node(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": {
                            NODE_LABEL: name,
                            NODE_POOL_LABEL: "a" if i % 2 == 0 else "b",
                            "kubernetes.io/hostname": name,
                            "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64",
                            "topology.kubernetes.io/zone": f"zone-{i}",
                            "type": "kwok",
                        },
                        "annotations": {"kwok.x-k8s.io/node": "fake"},
                    },
                },
            )
        kwok = next(c for c in self.components if c.name == "kwok")

        def all_ready() -> bool:
            ready = api.ready_nodes()
            return all(n in ready for n in self.node_names())

        self.wait_component(kwok, f"{self.nodes} Ready nodes", all_ready, timeout)


def start(
    workdir: Path | None = None,
    nodes: int = DEFAULT_NODES,
    crds: Iterable[Path] = (),
    binaries: Binaries | None = None,
    timeout: float = 180.0,
    *,
    real_node: bool = False,
    pod_ingress_rate: int | None = None,
    controller_manager_args: Iterable[str] = (),
) -> LocalCluster:
    """Build (or reuse) the binaries and start a control plane in ``workdir`` (a temp dir).

    ``real_node=True`` adds this machine as a real worker node (root only; raises
    ``localcluster.node.RealNodeUnavailableError`` with the reason otherwise).
    """
    keep = workdir is not None
    wd = workdir or Path(tempfile.mkdtemp(prefix="localcluster-"))
    wd.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(
        workdir=wd,
        binaries=binaries or ensure_binaries(node=real_node),
        nodes=nodes,
        crds=list(crds),
        keep_workdir=keep,
        real_node=real_node,
        pod_ingress_rate=pod_ingress_rate,
        controller_manager_args=tuple(controller_manager_args),
    )
    return cluster.up(timeout)


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[LocalCluster]:
    cluster = start(**kwargs)
    try:
        yield cluster
    finally:
        cluster.down()


def in_use_kubeconfig() -> str | None:
    """The kubeconfig path kubectl would use, for the opt-in existing-cluster mode."""
    env = os.environ.get("KUBECONFIG")
    if env:
        return env.split(os.pathsep)[0]
    default = Path.home() / ".kube" / "config"
    return str(default) if default.exists() else None


__all__ = ["ComponentError", "LocalCluster", "free_port", "in_use_kubeconfig", "running", "start"]
