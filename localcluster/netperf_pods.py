"""Run netperf pods of the local control plane for real, in network namespaces (a dev aid).

kwok only pretends to run pods. For Netperf pods this module stands in for a kubelet, on this
machine, as root, with iproute2 and Debian's netperf installed:

- a server pod (``app.kubernetes.io/component=server``) that kwok reports Running with an IP
  gets a network namespace and its container's ``command``/``args`` run there, exactly as
  written in the pod spec, as the pod's ``runAsUser``/``runAsGroup`` (``setpriv``);
- a client pod (``component=client``) of the same Netperf run (same ``instance`` and
  ``netperf.app.example.com/run`` labels) gets its own namespace, joined to the server's by a
  veth pair carrying the two pods' IPs; its command runs there with the pod's environment,
  with one substitution a kubelet also makes: the termination-message file
  (``NETPERF_RESULT``, i.e. ``/dev/termination-log``) is a file of ours. When it exits, the
  exit code and that file's content (at most 4096 bytes, as the kubelet keeps) are put on the
  pod as ``localcluster.dev/exit-code`` / ``localcluster.dev/termination-message``, and kwok's
  ``pod-finish`` stage terminates the pod with them.

Used by ``make run`` (when it can: root, ``ip``, ``netperf``, ``netserver``, ``setpriv``) and by
the end-to-end test, which also runs netperf directly over the same veth pair to compare.
Without it Netperfs on the local cluster end in ``Error`` (``ClientTimeout``): never a made-up
number.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, watch

log = logging.getLogger("localcluster.netperf_pods")

SELECTOR = "app.kubernetes.io/name=netperf"
RUN_LABEL = "netperf.app.example.com/run"
RESULT_ENV = "NETPERF_RESULT"
MESSAGE_LIMIT = 4096  # bytes the kubelet keeps of a termination message
TOOLS = ("ip", "tc", "netperf", "netserver", "setpriv")


def unavailable_reason() -> str | None:
    """Why this machine cannot run netperf pods, or None when it can."""
    if os.geteuid() != 0:
        return "not running as root (network namespaces need CAP_NET_ADMIN)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)} (make system-deps installs them)"
    return None


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def add_netns(name: str) -> None:
    """A fresh network namespace with its loopback up (an old one of that name is replaced)."""
    subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)
    sh("ip", "netns", "add", name)
    sh("ip", "-n", name, "link", "set", "lo", "up")


def wire(
    server_ns: str, server_ip: str, client_ns: str, client_ip: str, link_rate: str | None = None
) -> None:
    """A veth pair between two namespaces, each end with its IP (/32 + a route to the other).

    ``link_rate`` (e.g. ``2gbit``) shapes both ends with tc tbf.
    """
    suffix = hashlib.sha256(client_ns.encode()).hexdigest()[:6]
    a, b = f"np{suffix}s", f"np{suffix}c"
    sh(
        *("ip", "link", "add", a, "netns", server_ns),
        *("type", "veth", "peer", "name", b, "netns", client_ns),
    )
    for ns, dev, mine, peer in ((server_ns, a, server_ip, client_ip), (client_ns, b, client_ip, server_ip)):
        sh("ip", "-n", ns, "addr", "add", f"{mine}/32", "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "route", "add", f"{peer}/32", "dev", dev)
        if link_rate:
            shape = ("tbf", "rate", link_rate, "burst", "2mb", "latency", "20ms")
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", *shape)


def netns_name(uid: str) -> str:
    return "lcnp-" + hashlib.sha256(uid.encode()).hexdigest()[:10]


def run_as(pod: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    """``setpriv`` arguments for the user the pod would run as (root when it names none)."""
    ctx = {**(pod["spec"].get("securityContext") or {}), **(container.get("securityContext") or {})}
    uid, gid = ctx.get("runAsUser"), ctx.get("runAsGroup", ctx.get("runAsUser"))
    if uid is None:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]


def container_argv(container: Mapping[str, Any]) -> list[str]:
    return [*(container.get("command") or []), *(container.get("args") or [])]


def container_env(container: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, str]:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp"}
    env.update({e["name"]: str(e.get("value", "")) for e in container.get("env") or [] if "value" in e})
    env.update(overrides)
    return env


@dataclass
class Server:
    netns: str
    ip: str
    process: subprocess.Popen[bytes]


@dataclass
class Executed:
    """What was run for a client pod (the end-to-end test checks it against the pod spec)."""

    pod: str
    argv: list[str]
    exit_code: int
    message: str
    client_netns: str
    server_netns: str
    server_ip: str


@dataclass
class NetperfPodRunner:
    api: client.ApiClient
    namespace: str | None = None  # None: all namespaces
    keep_namespaces: bool = False  # keep namespaces after the pods are gone (for direct runs)
    # Called with (client netns, server IP) once a client's namespace is wired, before its
    # command runs: the end-to-end test measures the same path directly there too.
    before_client: Callable[[str, str], None] | None = None
    # Shape the veth pair to this rate (tc tbf, e.g. "2gbit"): a link-limited path instead of a
    # CPU-limited one, whose throughput on a shared VM swings with the hypervisor's CPU steal.
    link_rate: str | None = None
    servers: dict[tuple[str, str, str], Server] = field(default_factory=dict)
    executed: dict[str, Executed] = field(default_factory=dict)
    _namespaces: list[str] = field(default_factory=list)
    _started: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _watch: watch.Watch | None = None
    _thread: threading.Thread | None = None

    def start(self) -> NetperfPodRunner:
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(f"cannot run netperf pods: {reason}")
        self._thread = threading.Thread(target=self._loop, name="netperf-pods", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        with self._lock:
            for server in self.servers.values():
                _kill(server.process)
            for ns in self._namespaces:
                subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)
            self._namespaces.clear()

    # -- watching ---------------------------------------------------------------------------

    def _loop(self) -> None:
        core = client.CoreV1Api(self.api)
        while not self._stop.is_set():
            self._watch = watch.Watch()
            try:
                if self.namespace:
                    stream = self._watch.stream(
                        core.list_namespaced_pod, self.namespace, label_selector=SELECTOR, timeout_seconds=60
                    )
                else:
                    stream = self._watch.stream(
                        core.list_pod_for_all_namespaces, label_selector=SELECTOR, timeout_seconds=60
                    )
                for event in stream:
                    pod = self.api.sanitize_for_serialization(event["object"])
                    self._handle(event["type"], pod)
            except Exception as exc:  # a dev aid keeps going; the next watch starts over
                if not self._stop.is_set():
                    log.warning(f"netperf pod watch failed: {exc!r}")
                    time.sleep(1)

    def _handle(self, event_type: str, pod: dict[str, Any]) -> None:
        meta, st = pod["metadata"], pod.get("status") or {}
        labels = meta.get("labels") or {}
        key = (meta["namespace"], labels.get("app.kubernetes.io/instance", ""), labels.get(RUN_LABEL, ""))
        component = labels.get("app.kubernetes.io/component")
        if event_type == "DELETED" or meta.get("deletionTimestamp"):
            if component == "server" and not self.keep_namespaces:
                with self._lock:
                    server = self.servers.pop(key, None)
                if server is not None:
                    _kill(server.process)
                    self._delete_netns(server.netns)
            return
        if st.get("phase") != "Running" or not st.get("podIP") or meta["uid"] in self._started:
            return
        if "localcluster.dev/exit-code" in (meta.get("annotations") or {}):
            return
        self._started.add(meta["uid"])
        if component == "server":
            self._start_server(key, pod)
        elif component == "client":
            threading.Thread(target=self._run_client, args=(key, pod), daemon=True).start()

    # -- namespaces ---------------------------------------------------------------------------

    def _add_netns(self, name: str) -> None:
        add_netns(name)
        with self._lock:
            self._namespaces.append(name)

    def _delete_netns(self, name: str) -> None:
        subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)
        with self._lock, contextlib.suppress(ValueError):
            self._namespaces.remove(name)

    def _start_server(self, key: tuple[str, str, str], pod: dict[str, Any]) -> None:
        container = pod["spec"]["containers"][0]
        ns = netns_name(pod["metadata"]["uid"])
        self._add_netns(ns)
        argv = ["ip", "netns", "exec", ns, *run_as(pod, container), *container_argv(container)]
        log.info(f"server {pod['metadata']['name']}: {' '.join(argv)}")
        process = subprocess.Popen(
            argv,
            env=container_env(container, {}),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        with self._lock:
            self.servers[key] = Server(ns, pod["status"]["podIP"], process)

    def _server_for(self, key: tuple[str, str, str], timeout: float = 30) -> Server | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._stop.is_set():
            with self._lock:
                server = self.servers.get(key)
            if server is not None:
                return server
            time.sleep(0.1)
        return None

    def _run_client(self, key: tuple[str, str, str], pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        container = pod["spec"]["containers"][0]
        exit_code, message = 1, ""
        try:
            server = self._server_for(key)
            if server is None:
                raise RuntimeError(f"no server pod of run {key} is running here")
            ns = netns_name(meta["uid"])
            self._add_netns(ns)
            wire(server.netns, server.ip, ns, pod["status"]["podIP"], self.link_rate)
            _wait_listening(server.netns, container_argv(container))
            if self.before_client is not None:
                self.before_client(ns, server.ip)
            fd, result = tempfile.mkstemp(prefix="netperf-result-")
            os.close(fd)
            os.chmod(result, 0o666)  # written by the pod's (non-root) user
            argv = ["ip", "netns", "exec", ns, *run_as(pod, container), *container_argv(container)]
            log.info(f"client {meta['name']}: {' '.join(argv)}")
            proc = subprocess.run(
                argv, env=container_env(container, {RESULT_ENV: result}), capture_output=True, check=False
            )
            exit_code = proc.returncode
            message = Path(result).read_bytes()[:MESSAGE_LIMIT].decode(errors="replace")
            os.unlink(result)
            self.executed[meta["name"]] = Executed(
                meta["name"], argv, exit_code, message, ns, server.netns, server.ip
            )
        except Exception as exc:
            message = f"localcluster netperf runner: {exc}"
            log.warning(message)
        annotations = {
            "localcluster.dev/exit-code": str(exit_code),
            "localcluster.dev/termination-message": message,
        }
        with contextlib.suppress(Exception):  # the pod may be gone (timeout, deletion)
            client.CoreV1Api(self.api).patch_namespaced_pod(
                meta["name"], meta["namespace"], {"metadata": {"annotations": annotations}}
            )


def _wait_listening(netns: str, argv: Sequence[str], timeout: float = 10) -> None:
    """Until the server namespace listens on the control port the client will use."""
    port = argv[argv.index("-p") + 1] if "-p" in argv else "12865"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["ip", "netns", "exec", netns, "ss", "-Hltn", f"sport = :{port}"],
            capture_output=True,
            check=False,
        )
        if out.stdout.strip():
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} in {netns}")


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def direct_netperf(
    client_netns: str, server_ip: str, test_type: str, duration: int, samples: int
) -> list[float]:
    """Throughputs of plain ``netperf`` runs from a client namespace (10^6 bits/s per run)."""
    out = []
    for _ in range(samples):
        proc = subprocess.run(
            [
                *("ip", "netns", "exec", client_netns),
                *("netperf", "-P", "0", "-H", server_ip, "-l", str(duration), "-t", test_type),
                *("--", "-k", "THROUGHPUT"),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        out.append(float(proc.stdout.strip().partition("=")[2]))
    return out
