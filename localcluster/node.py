"""A real worker node for the local cluster: containerd, kubelet and kube-proxy as plain processes.

kwok nodes only pretend to run pods. :class:`RealNode` joins this machine to the local control
plane as one real node, so pods run for real (runc containers from images made on the machine),
get IPs from the CNI bridge plugin and reach each other, the host and the API server through
Services (kube-proxy, iptables mode). It needs root and is started by
``LocalCluster(real_node=True)`` / ``start(real_node=True)`` /
``python -m localcluster up --real-node``.

What a node needs on a machine without systemd, registry or ``CAP_SYS_RESOURCE`` (see
``shared/reference/real-node.md`` for how each was found):

- containerd runs with its own config, root, state and socket under the cluster's work dir,
  ``restrict_oom_score_adj`` (kubelet's -998 for the sandbox would otherwise fail every pod),
  and a sandbox image made here (:mod:`localcluster.ociimage`), since none can be pulled;
- the node IP sits on an otherwise empty bridge (kubelet refuses loopback, and this kernel has
  no ``dummy`` links); the API server advertises that IP so the ``kubernetes`` Service leads
  to it from pods;
- CNI: bridge + host-local IPAM, the bridge is the pods' gateway, and pods get a route for the
  service range only (no default route: nothing leaves the machine).

Host changes are undone: :func:`host_state` captures what a node can change (sysctls,
iptables/ip6tables filter/nat/mangle, nft tables, links, routes, mounts, kube cgroups, a few
paths outside the work dir, node processes) as plain data; :meth:`RealNode.start` records it,
:meth:`RealNode.stop` kills every container, runs ``kube-proxy --cleanup`` and then reverts
whatever still differs (only things a node creates: KUBE-/CNI- chains, its bridges, mounts
under its dirs, kube cgroups, ...). ``stop()`` then ``start()`` again works within one cluster
(pods of the node are recreated, like after a reboot). Only one real node can run on a host:
kube-proxy's iptables chains are global, so an abstract-socket lock guards it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml
from kubernetes import client
from kubernetes import config as kconfig

from localcluster import ociimage
from localcluster.process import Component, ComponentError, free_port, log

if TYPE_CHECKING:
    from localcluster.binaries import Binaries
    from localcluster.pki import CertificateAuthority

NODE_NAME = "localcluster-node"
NODE_IP = "10.99.0.1"
NODE_BRIDGE = "lcnode0"
# Not podman/netavark's default 10.88.0.0/16 (buildah runs may create that bridge on the same
# host) and not kwok's fake 10.244.0.0/16.
POD_CIDR = "10.123.0.0/16"
CNI_BRIDGE = "lccni0"
PAUSE_IMAGE = "localcluster.dev/pause:1"
BUSYBOX_IMAGE = "localcluster.dev/busybox:1"
# kwok manages nodes carrying localcluster.dev/node; the real node must never carry that label.
REAL_NODE_LABEL = "localcluster.dev/real-node"
CRI_NAMESPACE = "k8s.io"
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "bandwidth")
HOST_TOOLS = (
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "iptables",
    "iptables-save",
    "ip6tables-save",
    "ip",
    "umount",
)
# Abstract unix socket: released by the kernel when the holder dies, leaves no file behind.
LOCK_ADDRESS = "\0localcluster-real-node"

# What kubelet (kernel tunables), kube-proxy (conntrack, route_localnet) and the CNI bridge
# plugin (forwarding) may change. kube-proxy is configured to leave conntrack alone; they are
# still recorded so a change would show.
SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_tcp_timeout_established",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
    "net.netfilter.nf_conntrack_tcp_be_liberal",
    "net.netfilter.nf_conntrack_udp_timeout",
    "net.netfilter.nf_conntrack_udp_timeout_stream",
)
IPTABLES_TABLES = ("filter", "nat", "mangle")
# Paths outside the work dir that kubelet, containerd or CNI write to whatever they are told:
# /var/lib/kubelet (kubelet), /var/log/containers (kubelet's hard-coded log links),
# /var/lib/cni (libcni's result cache), /run/containerd (shim sockets, always there).
HOST_PATHS = (
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/var/lib/cni",
    "/run/containerd",
    "/etc/cni/net.d",
    "/opt/cni",
    "/opt/containerd",
    "/var/lib/containerd",
    "/usr/libexec/kubernetes",
    "/etc/kubernetes",
    "/run/kubernetes",
    "/var/lib/kube-proxy",
)
NODE_PROCESSES = ("kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "containerd-shim")
OWN_CHAIN = re.compile(r"^(KUBE-|CNI-)")
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Other container tools on the same host (buildah/podman image builds, netavark) create and
# remove their own mounts, chains and bridges at any time: not ours, so not part of the state.
# Nor is /run/netns (``ip netns``, e.g. the netperf pod runner): the node keeps its pods'
# network namespaces under containerd's state dir.
FOREIGN = re.compile(r"NETAVARK|podman|/var/lib/containers/|/run/containers/|/var/tmp/buildah|^/run/netns")


class RealNodeUnavailableError(RuntimeError):
    """This machine cannot run a real node; the message says why."""


def unavailable_reason() -> str | None:
    """Why this machine cannot run a real node, or None when it can."""
    if os.geteuid() != 0:
        return "not running as root (kubelet and containerd need root: cgroups, mounts, iptables)"
    path = f"{os.environ.get('PATH', '')}:{PATH_ENV}"
    missing = [t for t in HOST_TOOLS if shutil.which(t, path=path) is None]
    missing += [f"{CNI_BIN_DIR}/{p}" for p in CNI_PLUGINS if not os.access(CNI_BIN_DIR / p, os.X_OK)]
    if not ociimage.busybox_is_static(ociimage.BUSYBOX):
        missing.append(f"static {ociimage.BUSYBOX} (busybox-static)")
    if missing:
        return f"missing {', '.join(missing)} (make system-deps installs them)"
    cg = Path("/sys/fs/cgroup")
    if not (cg / "memory").is_dir() and not (cg / "cgroup.controllers").exists():
        return "no memory cgroup hierarchy under /sys/fs/cgroup"
    return None


# -- host state -------------------------------------------------------------------------------


def _run(argv: Sequence[str], check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:{PATH_ENV}"}
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=timeout, env=env)


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def _sysctls() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in SYSCTLS:
        try:
            out[name] = _sysctl_path(name).read_text().strip()
        except OSError:
            out[name] = None
    return out


def _iptables(save: str, table: str) -> dict[str, Any]:
    """One table as {"chains": sorted "NAME POLICY", "rules": {chain: [rule, ...]}} (no counters)."""
    proc = _run([save, "-t", table], check=False)
    chains: list[str] = []
    rules: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        if FOREIGN.search(line):
            continue
        if line.startswith(":"):
            name, policy = line[1:].split()[:2]
            chains.append(f"{name} {policy}")
        elif line.startswith("-A "):
            chain = line.split()[1]
            rules.setdefault(chain, []).append(line)
    return {"chains": sorted(chains), "rules": rules}


def _nft_tables() -> list[str]:
    if shutil.which("nft", path=f"{os.environ.get('PATH', '')}:{PATH_ENV}") is None:
        return []
    return sorted(_run(["nft", "list", "tables"], check=False).stdout.splitlines())


def _links() -> dict[str, dict[str, Any]]:
    links = json.loads(_run(["ip", "-j", "-d", "addr", "show"]).stdout or "[]")
    return {
        link["ifname"]: {
            "kind": (link.get("linkinfo") or {}).get("info_kind", ""),
            "master": link.get("master", ""),
            "addrs": sorted(f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])),
        }
        for link in links
        if not FOREIGN.search(link["ifname"]) and not FOREIGN.search(link.get("master", ""))
    }


def _routes() -> list[str]:
    lines = []
    for family in ("-4", "-6"):
        out = _run(["ip", family, "route", "show", "table", "all"], check=False).stdout
        # Router-advertised IPv6 routes count down their lifetime: not a change of ours.
        lines += [
            re.sub(r"\s+expires \S+", "", line).strip()
            for line in out.splitlines()
            if not FOREIGN.search(line)
        ]
    return sorted(lines)


def _mountinfo() -> list[tuple[str, str]]:
    """(mount point, fs type) of every mount, in mount order."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        point = left.split()[4].encode().decode("unicode_escape")
        out.append((point, right.split()[0]))
    return out


def _cgroup_hierarchies() -> dict[str, Path]:
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        return {"unified": root}  # pure cgroup v2
    return {p.name: p for p in sorted(root.iterdir()) if p.is_dir() and not p.is_symlink()}


def _kube_cgroups() -> dict[str, list[str]]:
    """Every cgroup under a top-level ``kube*`` cgroup (kubepods, ...), per hierarchy."""
    out: dict[str, list[str]] = {}
    for name, root in _cgroup_hierarchies().items():
        found = []
        for top in sorted(root.iterdir()):
            if top.is_dir() and top.name.startswith("kube"):
                found.append(top.name)
                for dirpath, dirnames, _ in os.walk(top):
                    found += [os.path.relpath(os.path.join(dirpath, d), root) for d in dirnames]
        out[name] = sorted(found)
    return out


def _listing(path: Path, limit: int = 5000) -> list[str] | None:
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_dir():
        return []
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(path):
        found += [os.path.relpath(os.path.join(dirpath, n), path) for n in (*dirnames, *filenames)]
        if len(found) > limit:
            break
    return sorted(found)


def _node_pids() -> list[int]:
    """PIDs of the processes :func:`_node_processes` names."""
    return [pid for pid, _ in _node_process_table()]


def _node_processes() -> list[str]:
    return sorted(name for _, name in _node_process_table())


def _node_process_table() -> list[tuple[int, str]]:
    """kubelet/kube-proxy processes, and containerd/shims of a real node's layout.

    A system containerd (Docker's, say) and its shims are not ours and come and go: only those
    whose command line names a ``.../node/containerd/`` path (our config and socket) count.
    """
    found: list[tuple[int, str]] = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe")).removesuffix(" (deleted)")
            if exe not in NODE_PROCESSES:
                continue
            if (
                exe.startswith("containerd")
                and b"/node/containerd/" not in Path(f"/proc/{pid}/cmdline").read_bytes()
            ):
                continue
            found.append((int(pid), exe))
    return found


def host_state() -> dict[str, Any]:
    """What a real node may change on this host, as comparable data (see the module docstring)."""
    return {
        "sysctls": _sysctls(),
        "iptables": {
            family: {table: _iptables(save, table) for table in IPTABLES_TABLES}
            for family, save in (("ipv4", "iptables-save"), ("ipv6", "ip6tables-save"))
        },
        "nft_tables": _nft_tables(),
        "links": _links(),
        "routes": _routes(),
        "mounts": sorted(f"{point} {fstype}" for point, fstype in _mountinfo() if not FOREIGN.search(point)),
        "cgroups": _kube_cgroups(),
        "paths": {p: _listing(Path(p)) for p in HOST_PATHS},
        "processes": _node_processes(),
    }


def state_diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Human-readable differences between two :func:`host_state` results (empty when equal)."""
    diffs: list[str] = []

    def walk(a: Any, b: Any, where: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                walk(a.get(key), b.get(key), f"{where}.{key}" if where else str(key))
        elif isinstance(a, list) and isinstance(b, list) and a != b:
            gone = [x for x in a if x not in b]
            new = [x for x in b if x not in a]
            diffs.append(
                f"{where}: missing {gone[:10]} / new {new[:10]}" if gone or new else f"{where}: order"
            )
        elif a != b:
            diffs.append(f"{where}: {a!r} -> {b!r}")

    walk(before, after, "")
    return diffs


# -- undoing host changes ---------------------------------------------------------------------


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _unmount_new(before_mounts: list[str], roots: Sequence[str]) -> None:
    """Unmount, deepest first, every mount under ``roots`` that was not there before."""
    before = {m.rsplit(" ", 1)[0] for m in before_mounts}
    for _ in range(20):  # stacked mounts (kubelet bind-mounts its root dir onto itself)
        points = [p for p, _ in _mountinfo() if p not in before and _under(p, roots)]
        if not points:
            return
        for point in sorted(set(points), key=lambda p: (-p.count("/"), p)):
            if _run(["umount", point], check=False).returncode != 0:
                _run(["umount", "-l", point], check=False)
    log(f"real node: mounts still present after unmounting: {points}")


def _kill_pids(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _cgroup_pids(relpaths: dict[str, list[str]]) -> set[int]:
    pids: set[int] = set()
    hierarchies = _cgroup_hierarchies()
    for name, rels in relpaths.items():
        for rel in rels:
            with contextlib.suppress(OSError, ValueError):
                text = (hierarchies[name] / rel / "cgroup.procs").read_text()
                pids |= {int(p) for p in text.split()}
    return pids


def _new_cgroups(before: dict[str, list[str]]) -> dict[str, list[str]]:
    now = _kube_cgroups()
    return {h: [c for c in now.get(h, []) if c not in set(before.get(h, []))] for h in now}


def _remove_cgroups(before: dict[str, list[str]], timeout: float = 15) -> None:
    """Kill what still runs in cgroups created since ``before`` and remove them, deepest first."""
    deadline = time.monotonic() + timeout
    hierarchies = _cgroup_hierarchies()
    while True:
        new = _new_cgroups(before)
        if not any(new.values()):
            return
        _kill_pids(_cgroup_pids(new))
        for name, rels in new.items():
            for rel in sorted(rels, key=lambda r: (-r.count("/"), r)):
                with contextlib.suppress(OSError):  # busy until its last task is reaped
                    (hierarchies[name] / rel).rmdir()
        if time.monotonic() > deadline:
            log(f"real node: cgroups not removable within {timeout:.0f}s: {new}")
            return
        time.sleep(0.1)


def _jumps_to_own_chain(rule: str) -> bool:
    args = shlex.split(rule)
    return "-j" in args and bool(OWN_CHAIN.match(args[args.index("-j") + 1]))


def _restore_iptables(before: dict[str, Any]) -> None:
    """Delete KUBE-*/CNI-* chains and rules that jump to them, if they were not there before."""
    for family, save, cmd in (("ipv4", "iptables-save", "iptables"), ("ipv6", "ip6tables-save", "ip6tables")):
        for table in IPTABLES_TABLES:
            old = before["iptables"][family][table]
            now = _iptables(save, table)
            old_rules = {r for rules in old["rules"].values() for r in rules}
            old_chains = {c.split()[0] for c in old["chains"]}
            for rules in now["rules"].values():
                for rule in rules:
                    args = shlex.split(rule)
                    target = args[args.index("-j") + 1] if "-j" in args else ""
                    if rule not in old_rules and (OWN_CHAIN.match(args[1]) or OWN_CHAIN.match(target)):
                        log(f"real node: deleting {cmd} -t {table} rule {rule}")
                        _run([cmd, "-w", "-t", table, "-D", *args[1:]], check=False)
            new_chains = [c.split()[0] for c in now["chains"] if c.split()[0] not in old_chains]
            own = [c for c in new_chains if OWN_CHAIN.match(c)]
            if own:
                log(f"real node: deleting {cmd} -t {table} chains {', '.join(own)}")
            for chain in own:
                _run([cmd, "-w", "-t", table, "-F", chain], check=False)
            for chain in own:
                _run([cmd, "-w", "-t", table, "-X", chain], check=False)
    # iptables-nft creates a table on first use; remove the ones that were absent and are now
    # empty (only iptables' own tables, never anything else in nftables).
    old_tables = set(before["nft_tables"])
    for line in _nft_tables():
        if line in old_tables:
            continue
        parts = line.split()  # "table ip6 mangle"
        iptables_own = len(parts) == 3 and parts[1] in ("ip", "ip6") and parts[2] in IPTABLES_TABLES
        if iptables_own and not _iptables(f"{parts[1]}tables-save", parts[2])["rules"]:
            log(f"real node: deleting the empty nftables {line} that iptables created")
            _run(["nft", "delete", "table", parts[1], parts[2]], check=False)


def _restore_sysctls(before: dict[str, str | None]) -> None:
    for name, value in before.items():
        if value is None:
            continue
        with contextlib.suppress(OSError):
            if _sysctl_path(name).read_text().strip() != value:
                log(f"real node: restoring {name} = {value}")
                _sysctl_path(name).write_text(value + "\n")


def _restore_links(before: dict[str, dict[str, Any]], bridges: Sequence[str]) -> None:
    """Delete links of ours that were not there before: veths on our bridges, then the bridges."""
    now = _links()
    ours = [n for n, link in now.items() if n not in before and link["master"] in bridges]
    ours += [b for b in bridges if b in now and b not in before]
    # Loading the ifb module (the CNI bandwidth plugin does) makes ifb0/ifb1 appear.
    ours += [n for n, link in now.items() if n not in before and link["kind"] == "ifb"]
    for name in ours:
        _run(["ip", "link", "delete", name], check=False)


def _restore_paths(before: dict[str, list[str] | None]) -> None:
    for path, old in before.items():
        p = Path(path)
        if old is None:
            if p.is_symlink() or p.is_file():
                p.unlink()
            elif p.exists():
                shutil.rmtree(p, ignore_errors=True)
            continue
        now = _listing(p) or []
        for rel in sorted(set(now) - set(old), key=lambda r: -r.count("/")):
            target = p / rel
            with contextlib.suppress(OSError):
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                else:
                    target.unlink()


def restore_host(before: dict[str, Any], own_roots: Sequence[Path], bridges: Sequence[str]) -> list[str]:
    """Undo what a node changed since ``before`` (a :func:`host_state`); return what still differs.

    Call after the node's processes are stopped and ``kube-proxy --cleanup`` ran. Touches only
    what a node creates, so a concurrent unrelated change on the host is left alone.
    """
    roots = [str(r) for r in own_roots] + [p for p in HOST_PATHS if p.startswith(("/var/lib", "/run"))]
    _remove_cgroups(before["cgroups"])
    _unmount_new(before["mounts"], roots)
    _restore_links(before["links"], bridges)
    _restore_iptables(before)
    _restore_sysctls(before["sysctls"])
    _restore_paths(before["paths"])
    return state_diff(before, host_state())


# -- the node ---------------------------------------------------------------------------------


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return bool(resp.status == 200)


class ControlPlane(Protocol):
    """What a node needs of the control plane it joins: :class:`localcluster.cluster.LocalCluster`.

    A protocol rather than an import: the cluster starts its node, so this module must not
    import :mod:`localcluster.cluster` back.
    """

    workdir: Path
    binaries: Binaries
    ca: CertificateAuthority

    @property
    def kubeconfig(self) -> Path: ...

    @property
    def pki_dir(self) -> Path: ...

    @property
    def service_cidr(self) -> str: ...

    def write_kubeconfig(self, path: Path, user: str, groups: tuple[str, ...] = ()) -> Path: ...

    def wait_component(
        self, comp: Component, what: str, check: Callable[[], bool], timeout: float
    ) -> None: ...


@dataclass
class RealNode:
    """This machine as a real worker node of ``cluster``; :meth:`start` / :meth:`stop` it.

    The cluster's API server must bind 0.0.0.0 and advertise :data:`NODE_IP`, which
    ``LocalCluster(real_node=True)`` arranges.
    """

    cluster: ControlPlane
    name: str = NODE_NAME
    ip: str = NODE_IP
    pod_cidr: str = POD_CIDR
    start_timeout: float = 120.0
    # bits/s into each pod (tc tbf on the host side of its veth, by the CNI bandwidth plugin).
    pod_ingress_rate: int | None = None
    components: list[Component] = field(default_factory=list)
    # host_state() taken right before the last start(); stop() restores it.
    snapshot: dict[str, Any] | None = None
    _lock: socket.socket | None = None

    # -- paths --------------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self.cluster.workdir / "node"

    @property
    def containerd_socket(self) -> Path:
        return self.directory / "containerd" / "containerd.sock"

    @property
    def containerd_root(self) -> Path:
        return self.directory / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.directory / "containerd" / "state"

    @property
    def registry_hosts_dir(self) -> Path:
        """containerd's registry ``config_path``: ``<host>/hosts.toml`` files, read at every pull.

        Empty unless something (``localcluster.registry.Registry.write_hosts_config``)
        mirrors a registry host there; pulls of other hosts go to the host itself.
        """
        return self.directory / "containerd" / "certs.d"

    @property
    def kubelet_root(self) -> Path:
        return self.directory / "kubelet"

    @property
    def volatile_dirs(self) -> list[Path]:
        """Runtime state wiped at stop (images in containerd's root survive a restart)."""
        d = self.directory
        return [self.containerd_state, self.kubelet_root, d / "runc", d / "cni" / "ipam", d / "pod-logs"]

    def _log_path(self, name: str) -> Path:
        return self.cluster.workdir / "logs" / f"{name}.log"

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> RealNode:
        """Start containerd, kubelet and kube-proxy; return once the node is Ready."""
        timeout = timeout or self.start_timeout
        if reason := unavailable_reason():
            raise RealNodeUnavailableError(f"cannot start a real node: {reason}")
        if missing := self.cluster.binaries.missing(("kubelet", "kube-proxy")):
            raise RealNodeUnavailableError(
                f"cannot start a real node: {', '.join(missing)} not built "
                "(ensure_binaries(node=True) or python -m localcluster build --node)"
            )
        if len(str(self.containerd_socket)) > 100:
            raise RealNodeUnavailableError(
                f"work dir path too long for a unix socket: {self.containerd_socket}"
            )
        self._take_lock()
        t0 = time.monotonic()
        self.snapshot = host_state()
        if leftovers := self._leftovers():
            # The lock is ours, so no live node made these: one that died without stop()
            # (SIGKILL, a CI time-out). Clear its traces rather than refuse every later run.
            log(f"real node: clearing leftovers of a node that died unstopped: {'; '.join(leftovers)}")
            self._clear_dead_node()
            self.snapshot = host_state()
            if leftovers := self._leftovers():
                self._release_lock()
                raise RealNodeUnavailableError(
                    "leftovers of an earlier real node that could not be cleared: "
                    + "; ".join(leftovers)
                    + " (another Kubernetes node on this host?)"
                )
        try:
            log(f"starting real node {self.name} ({self.ip}, pods {self.pod_cidr})")
            dirs = (self.directory / "pki", self.directory / "cni" / "net.d", self.registry_hosts_dir)
            for d in (*dirs, *self.volatile_dirs):
                d.mkdir(parents=True, exist_ok=True)
            self._setup_network()
            self._start_containerd(timeout)
            self._ensure_pause_image()
            self._start_kubelet(timeout)
            self._start_kube_proxy(timeout)
        except BaseException:
            self.stop()
            raise
        log(f"real node {self.name} Ready in {time.monotonic() - t0:.1f}s")
        return self

    @property
    def running(self) -> bool:
        """Between a :meth:`start` and its :meth:`stop` (the host lock is held)."""
        return self._lock is not None

    def stop(self) -> None:
        """Stop the node and put the host back as :attr:`snapshot` recorded it (idempotent)."""
        if not self.running and not self.components:
            return
        t0 = time.monotonic()
        by_name = {c.name: c for c in self.components}
        for name in ("kubelet", "kube-proxy"):
            comp = by_name.get(name)
            if comp is not None and comp.alive():
                log(f"stopping {name} (pid {comp.proc.pid if comp.proc else '?'})")
                comp.stop()
        containerd = by_name.get("containerd")
        if containerd is not None and containerd.alive():
            self._remove_all_containers()
            log(f"stopping containerd (pid {containerd.proc.pid if containerd.proc else '?'})")
            containerd.stop()
        self.components.clear()
        self._kill_shims()
        proxy = self.cluster.binaries.path("kube-proxy")
        if os.access(proxy, os.X_OK):
            # Removes every KUBE-* chain kube-proxy made (iptables, ip6tables, nftables modes).
            _run([str(proxy), "--cleanup", "--v=0"], check=False, timeout=120)
        if self.snapshot is not None:
            remaining = restore_host(self.snapshot, [self.directory], [CNI_BRIDGE, NODE_BRIDGE])
            if remaining:
                log("real node: host state differs from before start: " + "; ".join(remaining))
        _unmount_new([], [str(self.directory)])  # nothing of ours may stay mounted before rmtree
        for d in self.volatile_dirs:
            shutil.rmtree(d, ignore_errors=True)
        self._release_lock()
        log(f"real node {self.name} stopped, host restored in {time.monotonic() - t0:.1f}s")

    def __enter__(self) -> RealNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- images -------------------------------------------------------------------------------

    def ctr(self, *args: str, timeout: float = 120) -> str:
        """Run ``ctr`` against this node's containerd in the CRI namespace; return stdout."""
        proc = _run(
            ["ctr", "--address", str(self.containerd_socket), "--namespace", CRI_NAMESPACE, *args],
            check=False,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc.stdout

    def import_images(self, archives: Iterable[Path]) -> list[str]:
        """Import OCI or docker image archives (e.g. ``buildah push IMG oci-archive:x.tar:IMG``).

        Pods then use the archive's image names with ``imagePullPolicy: IfNotPresent`` or
        ``Never``. Returns the names imported.
        """
        names: list[str] = []
        for archive in archives:
            t0 = time.monotonic()
            out = self.ctr("images", "import", "--snapshotter", "overlayfs", str(archive), timeout=600)
            got = re.findall(r"^unpacking (\S+) \(", out, re.M)
            names += got
            log(f"real node: imported {', '.join(got) or archive} in {time.monotonic() - t0:.1f}s")
        return names

    def images(self) -> list[str]:
        return sorted(self.ctr("images", "ls", "-q").split())

    def busybox_image(self) -> str:
        """Make (once) and import the busybox image (``httpd``, ``wget``, ``sh``); return its name."""
        if BUSYBOX_IMAGE not in self.images():
            archive = ociimage.busybox_image(self.directory / "images" / "busybox.tar", BUSYBOX_IMAGE)
            self.import_images([archive])
        return BUSYBOX_IMAGE

    def container_pid(self, container_id: str) -> int:
        """Host PID of a running container (``status.containerStatuses[].containerID``)."""
        cid = container_id.removeprefix("containerd://")
        for line in self.ctr("tasks", "ls").splitlines()[1:]:
            parts = line.split()
            if parts and parts[0] == cid:
                return int(parts[1])
        raise LookupError(f"no running task {cid} in containerd")

    def _ensure_pause_image(self) -> None:
        t0 = time.monotonic()
        if PAUSE_IMAGE in self.images():
            return
        archive = ociimage.pause_image(self.directory / "images" / "pause.tar", PAUSE_IMAGE)
        self.import_images([archive])
        log(f"real node: sandbox image {PAUSE_IMAGE} ready in {time.monotonic() - t0:.1f}s")

    # -- pieces -------------------------------------------------------------------------------

    def _take_lock(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(LOCK_ADDRESS)
        except OSError as exc:
            sock.close()
            raise RealNodeUnavailableError(
                "another real node runs on this host (kube-proxy's iptables chains are global; "
                "one real node per host)"
            ) from exc
        self._lock = sock

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _leftovers(self) -> list[str]:
        assert self.snapshot is not None
        # Either a node of ours that was never stopped, or another Kubernetes node on this host
        # (its kube-proxy chains would clash with ours): both rule out starting here.
        found = [f"link {b}" for b in (NODE_BRIDGE, CNI_BRIDGE) if b in self.snapshot["links"]]
        found += [f"process {p}" for p in sorted(set(self.snapshot["processes"]))]
        chains = {
            c.split()[0]
            for fam in self.snapshot["iptables"].values()
            for table in fam.values()
            for c in table["chains"]
        }
        found += [f"iptables chain {c}" for c in sorted(chains) if OWN_CHAIN.match(c)][:5]
        return found

    def _clear_dead_node(self) -> None:
        """Kill a dead node's processes and remove its links, chains, cgroups and mounts.

        Its sysctls cannot be put back (their earlier values died with it) and stay as they are,
        like the files it left in shared places outside its work dir (``/run/containerd``,
        ``/var/log/containers``): a system containerd may own some of those.
        """
        for pid in _node_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _node_pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        proxy = self.cluster.binaries.path("kube-proxy")
        _run([str(proxy), "--cleanup"], check=False, timeout=120)
        now = host_state()
        dead = sorted({m.split()[0].split("/node/")[0] + "/node" for m in now["mounts"] if "/node/" in m})
        baseline = {
            **now,
            "links": {
                name: link
                for name, link in now["links"].items()
                if name not in (NODE_BRIDGE, CNI_BRIDGE) and link["master"] != CNI_BRIDGE
            },
            "mounts": [m for m in now["mounts"] if not any(m.startswith(d) for d in dead)],
            "cgroups": {},
            "iptables": {
                fam: {
                    table: {
                        "chains": [c for c in t["chains"] if not OWN_CHAIN.match(c)],
                        "rules": {
                            chain: [r for r in rules if not _jumps_to_own_chain(r)]
                            for chain, rules in t["rules"].items()
                            if not OWN_CHAIN.match(chain)
                        },
                    }
                    for table, t in tables.items()
                }
                for fam, tables in now["iptables"].items()
            },
        }
        for rest in restore_host(baseline, [Path(d) for d in dead], [CNI_BRIDGE, NODE_BRIDGE]):
            log(f"real node: after clearing a dead node, still differs: {rest}")

    def _component(self, name: str, argv: list[str]) -> Component:
        comp = Component(name, argv, self._log_path(name), env={**os.environ, "PATH": PATH_ENV})
        log(f"starting {name}")
        comp.start()
        self.components.append(comp)
        return comp

    def _setup_network(self) -> None:
        t0 = time.monotonic()
        services = self.cluster.service_cidr
        _run(["ip", "link", "add", NODE_BRIDGE, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.ip}/32", "dev", NODE_BRIDGE])
        _run(["ip", "link", "set", NODE_BRIDGE, "up"])
        # The host reaches ClusterIPs even without a default route; kube-proxy DNATs them
        # (and masquerades, the source being outside the pod range) before they leave.
        route = _run(["ip", "route", "add", services, "dev", NODE_BRIDGE, "src", self.ip], check=False)
        if route.returncode != 0:  # the host routes that range already: leave its route alone
            log(f"real node: no route for {services} via {NODE_BRIDGE}: {route.stderr.strip()}")
        net = self.directory / "cni" / "net.d"
        for old in net.glob("*"):
            old.unlink()
        self._write_cni_config()
        log(f"real node: bridge {NODE_BRIDGE} with node IP {self.ip} ({time.monotonic() - t0:.1f}s)")

    def shape_pods(self, rate: int | None) -> None:
        """Shape traffic into each pod started from now on to ``rate`` bits/s (None: unshaped).

        Rewrites the CNI configuration, which containerd reloads on its own (its CRI plugin
        watches the directory): running pods keep the shaping they were set up with."""
        self.pod_ingress_rate = rate
        self._write_cni_config()
        log(
            f"real node: traffic into new pods shaped to {rate} bits/s"
            if rate
            else "real node: new pods unshaped"
        )

    def _write_cni_config(self) -> None:
        services = self.cluster.service_cidr
        net = self.directory / "cni" / "net.d"
        conf = {
            "cniVersion": "0.4.0",
            "name": "localcluster",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": CNI_BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.pod_cidr}]],
                        # Only the service range: pods reach Services (and through the
                        # `kubernetes` one the API server) but nothing off the machine.
                        "routes": [{"dst": services}],
                        "dataDir": str(self.directory / "cni" / "ipam"),
                    },
                }
            ],
        }
        if self.pod_ingress_rate:
            # Burst as tc needs at this rate (2 MB at 2 Gbit/s, as the old netns runner used).
            burst = max(self.pod_ingress_rate // 125, 1_000_000)
            conf["plugins"].append(
                {"type": "bandwidth", "ingressRate": self.pod_ingress_rate, "ingressBurst": burst}
            )
        # Written aside and renamed: containerd never reads half a file.
        tmp = net / ".10-localcluster.conflist.tmp"
        tmp.write_text(json.dumps(conf, indent=2))
        tmp.rename(net / "10-localcluster.conflist")

    def _containerd_config(self) -> str:
        d = self.directory
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return f"""\
version = 2
root = "{self.containerd_root}"
state = "{self.containerd_state}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{self.containerd_socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "containerd" / "opt"}"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  # No CAP_SYS_RESOURCE here: kubelet's oom_score_adj -998 would fail every sandbox.
  restrict_oom_score_adj = true
  # Pod network namespaces under our state dir, not /run/netns.
  netns_mounts_under_state_dir = true
  enable_selinux = false

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{d / "runc"}"

[{cri}.registry]
  # Pulls (kubelet's imagePullPolicy Always included) may go to a local registry mirror.
  config_path = "{self.registry_hosts_dir}"

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{d / "cni" / "net.d"}"
  max_conf_num = 1
"""

    def _start_containerd(self, timeout: float) -> None:
        config = self.directory / "containerd" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(self._containerd_config())
        comp = self._component("containerd", ["containerd", f"--config={config}", "--log-level=info"])

        def cri_ready() -> bool:
            plugins = self.ctr("plugins", "ls", timeout=10)
            cri = [line for line in plugins.splitlines() if re.search(r"\bgrpc\.v1\s+cri\b", line)]
            if cri and not cri[0].rstrip().endswith("ok"):
                raise ComponentError(f"containerd's CRI plugin did not load: {cri[0]}\n{comp.log_tail()}")
            return bool(cri)

        self.cluster.wait_component(comp, "CRI plugin loaded", cri_ready, timeout)

    def _write_kubelet_files(self, port: int, healthz_port: int) -> Path:
        d, ca = self.directory, self.cluster.ca
        from localcluster import pki

        pki.write(ca.serving([self.name, "localhost"], [self.ip, "127.0.0.1"]), d / "pki", "kubelet")
        self.cluster.write_kubeconfig(d / "kubelet.kubeconfig", f"system:node:{self.name}", ("system:nodes",))
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.ip,
            "port": port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": healthz_port,
            "tlsCertFile": str(d / "pki" / "kubelet.crt"),
            "tlsPrivateKeyFile": str(d / "pki" / "kubelet.key"),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.cluster.pki_dir / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "cgroupDriver": "cgroupfs",
            "failSwapOn": False,
            "failCgroupV1": False,
            # No cluster DNS here; an empty resolv.conf keeps the host's out of pods.
            "resolvConf": "",
            "protectKernelDefaults": False,
            "evictionHard": {
                "memory.available": "50Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            # Imported images cannot be pulled again: never garbage-collect them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "podLogsDir": str(d / "pod-logs"),
            "volumePluginDir": str(d / "volume-plugins"),
            "shutdownGracePeriod": "0s",
            "rotateCertificates": False,
            "serverTLSBootstrap": False,
            "maxPods": 110,
        }
        path = d / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _start_kubelet(self, timeout: float) -> None:
        port, healthz = free_port(), free_port()
        config = self._write_kubelet_files(port, healthz)
        started = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        comp = self._component(
            "kubelet",
            [
                str(self.cluster.binaries.path("kubelet")),
                f"--config={config}",
                f"--kubeconfig={self.directory / 'kubelet.kubeconfig'}",
                f"--root-dir={self.kubelet_root}",
                # Otherwise kubelet writes its certificates to /var/lib/kubelet/pki.
                f"--cert-dir={self.directory / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.ip}",
                f"--node-labels={REAL_NODE_LABEL}=true,type=real",
                "--v=1",
            ],
        )
        self.cluster.wait_component(
            comp, "GET /healthz", lambda: _http_ok(f"http://127.0.0.1:{healthz}/healthz"), timeout
        )
        core = client.CoreV1Api(kconfig.new_client_from_config(config_file=str(self.cluster.kubeconfig)))

        def ready() -> bool:
            # A Ready condition from before a restart may linger: wait for a fresh heartbeat.
            node = core.read_node(self.name)
            for cond in node.status.conditions or []:
                if cond.type == "Ready":
                    return bool(cond.status == "True" and cond.last_heartbeat_time >= started)
            return False

        self.cluster.wait_component(comp, f"node {self.name} Ready", ready, timeout)

    def _start_kube_proxy(self, timeout: float) -> None:
        d = self.directory
        healthz, metrics = free_port(), free_port()
        self.cluster.write_kubeconfig(d / "kube-proxy.kubeconfig", "system:kube-proxy")
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "iptables",
            "clientConnection": {"kubeconfig": str(d / "kube-proxy.kubeconfig")},
            "hostnameOverride": self.name,
            "bindAddress": self.ip,
            # Traffic to Services from outside the pod range (the host) is masqueraded, so pods
            # (which have no route back to the host's other addresses) can answer it.
            "clusterCIDR": self.pod_cidr,
            "healthzBindAddress": f"127.0.0.1:{healthz}",
            "metricsBindAddress": f"127.0.0.1:{metrics}",
            "nodePortAddresses": [f"{self.ip}/32"],
            # Zero means "leave the host's value alone": nothing to restore afterwards.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
                "udpTimeout": "0s",
                "udpStreamTimeout": "0s",
            },
            # true would set net.ipv4.conf.all.route_localnet for NodePorts on 127.0.0.1.
            "iptables": {"localhostNodePorts": False, "syncPeriod": "30s", "minSyncPeriod": "0s"},
        }
        path = d / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        comp = self._component(
            "kube-proxy", [str(self.cluster.binaries.path("kube-proxy")), f"--config={path}", "--v=1"]
        )

        def synced() -> bool:
            # The rule for the `kubernetes` Service shows the first full sync went through.
            nat = _run(["iptables-save", "-t", "nat"], check=False).stdout
            return _http_ok(f"http://127.0.0.1:{healthz}/healthz") and "default/kubernetes:https" in nat

        self.cluster.wait_component(comp, "GET /healthz and Service rules", synced, timeout)

    def _remove_all_containers(self) -> None:
        """Kill and delete every container (sandboxes too) while containerd still runs."""
        t0 = time.monotonic()
        try:
            ids = self.ctr("containers", "ls", "-q", timeout=30).split()
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            log(f"real node: cannot list containers: {exc}")
            return
        for cid in ids:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.ctr("tasks", "delete", "--force", cid, timeout=30)
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.ctr("containers", "delete", cid, timeout=30)
        if ids:
            log(f"real node: removed {len(ids)} containers in {time.monotonic() - t0:.1f}s")

    def _kill_shims(self) -> None:
        """Shims outlive containerd by design; ours are those started with our socket."""
        sock = str(self.containerd_socket)
        pids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if argv and b"containerd-shim" in argv[0] and sock.encode() in argv:
                    pids.append(int(pid))
        _kill_pids(pids)
        deadline = time.monotonic() + 10
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _is_zombie(p)]
            time.sleep(0.05)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


__all__ = [
    "BUSYBOX_IMAGE",
    "NODE_IP",
    "NODE_NAME",
    "PAUSE_IMAGE",
    "POD_CIDR",
    "REAL_NODE_LABEL",
    "RealNode",
    "RealNodeUnavailableError",
    "host_state",
    "restore_host",
    "state_diff",
    "unavailable_reason",
]
