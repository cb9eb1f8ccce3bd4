"""The pods of one Netperf run as plain dicts, and the view kept of observed pods (pure).

A run is identified by the Netperf's UID and generation (a scheduled Netperf's runs by their
number instead, ``r<n>``, since a spec edit there does not start a run; ``.schedule``): its
pods are ``<name>-server-<gen>`` and ``<name>-client-<gen>`` (``<name>-server-r3``;
deterministic, so a restarted operator finds them instead of creating more; a spec change starts
a new run whose pods cannot be confused with the old) and carry both in labels. The name alone
is not enough: a Netperf deleted and re-created under the same name starts again at generation
1, and a pod of its predecessor's run (an orphan it adopted to delete, still Terminating) has
the very names of its own run (``of_run``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.netperf.parse import KEYS, RR_TYPES
from operators.netperf.schema import APP, DEFAULT_IMAGE, DEFAULT_PATH, DEFAULTS, samples
from shared.api import ownership, podsecurity

CONTROL_PORT = 12865
# The first fixed data port (service and host paths): stream j uses DATA_PORT + j. One port per
# stream: two UDP_STREAM processes given the same remote port collide silently (THROUGHPUT=0.00).
DATA_PORT = 12866
# Attempts, 0.2 s apart (30 s in all), a client makes at a control connection its first sample
# could not establish. The client pod is created once the server's container runs, not once a
# readiness probe has seen netserver listen (that probe's period was most of a run's overhead),
# so the first attempt may come before netserver has bound its port; and on the service path
# kube-proxy adds the endpoint only once the server pod is Ready.
CONNECT_RETRIES = 150
MAX_SERVICE_NAME = 63  # a Service's name is a DNS-1035 label
RUN_LABEL = "netperf.app.example.com/run"  # the run a pod belongs to: generation, or r<n> when scheduled
UID_LABEL = "netperf.app.example.com/uid"  # the UID of the Netperf whose run created the pod
TERMINATION_LOG = "/dev/termination-log"
NON_ROOT = 65534
# Runs netperf "$1" times with the remaining arguments, each time as $NETPERF_STREAMS processes
# started together (as super-netperf does; their outputs go to files in /tmp, the emptyDir, or $TMPDIR),
# appending each process's output (at most 600 characters of it) to $NETPERF_RESULT, with a
# STREAM= line when there are several; stops after the first sample with a failing process,
# with its exit code. One stream writes exactly what the single-process loop wrote before.
# With $NETPERF_DATA_PORT, stream j pins the server's data port to it + j (-P ,port: the
# test-specific options come last in the arguments). With $NETPERF_CONNECT_RETRIES, a first
# sample whose first stream could not establish the control connection starts again after
# 0.2 s, that many times at most (its output is discarded).
CLIENT_SCRIPT = """\
n="$1"; shift
out="${NETPERF_RESULT:-/dev/termination-log}"
streams="${NETPERF_STREAMS:-1}"
retries="${NETPERF_CONNECT_RETRIES:-0}"
tmp="${TMPDIR:-/tmp}"
: > "$out"
i=0
while [ "$i" -lt "$n" ]; do
  j=0; pids=""
  while [ "$j" -lt "$streams" ]; do
    if [ -n "${NETPERF_DATA_PORT:-}" ]; then
      "$@" -P ",$((NETPERF_DATA_PORT + j))" > "$tmp/netperf-$j" 2>&1 &
    else
      "$@" > "$tmp/netperf-$j" 2>&1 &
    fi
    pids="$pids $!"; j=$((j + 1))
  done
  j=0; failed=0
  for pid in $pids; do
    wait "$pid"; rc=$?
    printf 'SAMPLE=%s\\n' "$i" >> "$out"
    [ "$streams" -eq 1 ] || printf 'STREAM=%s\\n' "$j" >> "$out"
    printf 'EXIT=%s\\n%.600s\\n' "$rc" "$(cat "$tmp/netperf-$j")" >> "$out"
    [ "$rc" -eq 0 ] || failed="$rc"
    j=$((j + 1))
  done
  if [ "$failed" -ne 0 ] && [ "$i" -eq 0 ] && [ "$retries" -gt 0 ]; then
    case "$(cat "$tmp/netperf-0")" in
      *"establish control"*) retries=$((retries - 1)); : > "$out"; sleep 0.2; continue ;;
    esac
  fi
  [ "$failed" -eq 0 ] || exit "$failed"
  i=$((i + 1))
done
"""


def effective(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with the schema's defaults (the API server applies them too; old objects may lack
    them) and its samples (``schema.samples``: no schema default, it depends on the schedule)."""
    full = {**DEFAULTS, **{k: v for k, v in spec.items() if v is not None}}
    return {**full, "samples": samples(full)}


# The operand image the operator's Deployment names (OLM's relatedImages convention).
RELATED_IMAGE_ENV = "RELATED_IMAGE_NETPERF_BENCHMARK"


def run_image(spec: Mapping[str, Any], env: Mapping[str, str] | None = None) -> str:
    """The image the pods run: ``spec.image``, the default replaced by ``RELATED_IMAGE_ENV``."""
    image = str(effective(spec)["image"])
    pinned = (os.environ if env is None else env).get(RELATED_IMAGE_ENV, "").strip()
    return pinned if image == DEFAULT_IMAGE and pinned else image


def timeout_seconds(spec: Mapping[str, Any]) -> int:
    spec = effective(spec)
    if spec.get("timeoutSeconds"):
        return int(spec["timeoutSeconds"])
    return 60 + int(spec["samples"]) * (int(spec["duration"]) + 15)


@dataclass(frozen=True)
class PodNames:
    """The server runs ``netserver -D -p 12865`` (``-D``: stay in the foreground) with a TCP
    readiness probe on the control port. The client pod is made once the server's container runs,
    and its first sample retries a refused control connection for a while (``CONNECT_RETRIES``):
    waiting for the readiness probe instead cost up to its period on every run. The client runs
    netperf ``samples`` times through a small POSIX sh loop (so any image with ``sh`` and
    ``netperf`` works) and writes every run's keyval output to its termination message
    (``NETPERF_RESULT``, the container's ``terminationMessagePath``): the operator reads results
    from the pod status and needs no ``pods/log`` permission.

    Both pods run as non-root (65534) with the ``restricted`` Pod Security profile, CPU/memory
    requests, no service-account token and no service links.

    The path (``spec.path``; a compare run passes each path in turn, its run key ``<run>-<path>``):

    - ``pod``: the client targets the server pod's IP; netserver picks the data port (as always).
    - ``service``: a ClusterIP Service of this run (``service``, named like the server pod) in
      front of the server pod, with the control port and fixed data ports (``DATA_PORT`` + stream,
      netperf's test-specific ``-P ,<remote>``: only the remote port pinned, the client's stays
      ephemeral); the data ports' protocol is the test's (UDP for UDP_STREAM/UDP_RR). The client
      targets its ClusterIP.
    - ``host``: both pods ``hostNetwork`` (``dnsPolicy: ClusterFirstWithHostNet``), fixed data ports
      as for ``service``, declared with the control port as host ports on the server.
    """

    server: str
    client: str


def pod_names(name: str, run: int | str) -> PodNames:
    """The pods of run ``run``: the generation, or ``r<n>`` for a scheduled Netperf's n-th run."""
    return PodNames(f"{name}-server-{run}", f"{name}-client-{run}")


def run_key(owner: Mapping[str, Any], run: str | None = None) -> str:
    return run if run is not None else str(owner["metadata"].get("generation", 0))


def path_of(spec: Mapping[str, Any]) -> str:
    """The path of one run's pods (a compare run passes each path in turn as ``path``)."""
    return str(spec.get("path") or DEFAULT_PATH)


def path_run(run: str, path: str, compare: bool) -> str:
    """The run key of one path: the run's own, or ``<run>-<path>`` for a path of a compare run
    (its pods and Service then never share a name with another path's)."""
    return f"{run}-{path}" if compare else run


def data_ports(spec: Mapping[str, Any]) -> list[int]:
    """The fixed data ports of the service and host paths, one per stream (none for pod)."""
    spec = effective(spec)
    if path_of(spec) == "pod":
        return []
    return [DATA_PORT + j for j in range(int(spec["parallel"]))]


def data_protocol(spec: Mapping[str, Any]) -> str:
    return "UDP" if str(effective(spec)["testType"]).startswith("UDP") else "TCP"


def _ports(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The server's ports: control (TCP), and the data ports of the service and host paths."""
    protocol = data_protocol(spec)
    ports: list[dict[str, Any]] = [{"name": "control", "containerPort": CONTROL_PORT, "protocol": "TCP"}]
    ports += [
        {"name": f"data-{j}", "containerPort": port, "protocol": protocol}
        for j, port in enumerate(data_ports(spec))
    ]
    return ports


def netperf_argv(spec: Mapping[str, Any], server_ip: str) -> list[str]:
    """One netperf run in keyval form, asking for exactly the keys the parser requires."""
    spec = effective(spec)
    test = spec["testType"]
    argv = ["netperf", "-P", "0", "-H", server_ip, "-p", str(CONTROL_PORT)]
    argv += ["-l", str(spec["duration"]), "-t", test, "--", "-k", ",".join(KEYS[test])]
    if spec.get("messageSize"):
        size = str(spec["messageSize"])
        argv += ["-r", f"{size},{size}"] if test in RR_TYPES else ["-m", size]
    return argv


def _node_affinity(node: str) -> dict[str, Any]:
    # matchFields on the node's name, as DaemonSets do: node names and hostname labels may differ.
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _pod(
    owner: Mapping[str, Any],
    name: str,
    component: str,
    container: dict[str, Any],
    affinity: dict[str, Any],
    *,
    run: str,
) -> dict[str, Any]:
    meta = owner["metadata"]
    labels = {
        **ownership.standard_labels(APP, meta["name"], component),
        RUN_LABEL: run,
        UID_LABEL: str(meta.get("uid") or ""),
    }
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 5,
            "securityContext": podsecurity.restricted_pod(NON_ROOT),
            "containers": [
                {
                    **container,
                    "imagePullPolicy": "IfNotPresent",
                    "securityContext": podsecurity.restricted_container(read_only_root=True),
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "64Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}],
        },
    }
    if affinity:
        body["spec"]["affinity"] = affinity
    return ownership.adopt(body, owner, APP, component)


def server_pod(owner: Mapping[str, Any], spec: Mapping[str, Any], run: str | None = None) -> dict[str, Any]:
    spec = effective(spec)
    run = run_key(owner, run)
    names = pod_names(owner["metadata"]["name"], run)
    ports = _ports(spec)
    if path_of(spec) == "host":
        # hostNetwork: the ports are the node's. Declared as host ports, the scheduler's NodePorts
        # filter never puts two host-network netservers (of two Netperfs) on one node, where the
        # second could not bind its control or data port.
        ports = [{**p, "hostPort": p["containerPort"]} for p in ports]
    container = {
        "name": "netserver",
        "image": run_image(spec),
        "command": ["netserver", "-D", "-p", str(CONTROL_PORT)],
        "ports": ports,
        # Once a second: the client does not wait for it (it retries its connection), but the
        # service path's endpoint does, and the pod lives only for one test.
        "readinessProbe": {"tcpSocket": {"port": CONTROL_PORT}, "periodSeconds": 1},
    }
    affinity = _node_affinity(spec["serverNode"]) if spec.get("serverNode") else {}
    return _host_network(_pod(owner, names.server, "server", container, affinity, run=run), spec)


def _host_network(pod: dict[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    if path_of(spec) == "host":
        # ClusterFirstWithHostNet: cluster DNS as for other pods (plain ClusterFirst falls back
        # to the node's resolver with hostNetwork).
        pod["spec"].update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    return pod


def client_pod(
    owner: Mapping[str, Any], spec: Mapping[str, Any], server_ip: str, run: str | None = None
) -> dict[str, Any]:
    spec = effective(spec)
    meta = owner["metadata"]
    run = run_key(owner, run)
    names = pod_names(meta["name"], run)
    container = {
        "name": "netperf",
        "image": run_image(spec),
        "command": [
            "sh",
            "-c",
            CLIENT_SCRIPT,
            "netperf-samples",
            str(spec["samples"]),
            *netperf_argv(spec, server_ip),
        ],
        "env": [
            {"name": "NETPERF_RESULT", "value": TERMINATION_LOG},
            {"name": "NETPERF_STREAMS", "value": str(spec["parallel"])},
            *([{"name": "NETPERF_DATA_PORT", "value": str(DATA_PORT)}] if path_of(spec) != "pod" else []),
            {"name": "NETPERF_CONNECT_RETRIES", "value": str(CONNECT_RETRIES)},
        ],
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
    }
    if spec.get("clientNode"):
        affinity = _node_affinity(spec["clientNode"])
    else:
        server_selector = {
            "matchLabels": {
                ownership.INSTANCE: meta["name"],
                ownership.COMPONENT: "server",
                RUN_LABEL: run,
                # This run's server, not a predecessor's of the same name still terminating.
                UID_LABEL: str(meta.get("uid") or ""),
            }
        }
        term = {"labelSelector": server_selector, "topologyKey": "kubernetes.io/hostname"}
        kind = "podAffinity" if spec["placement"] == "SameNode" else "podAntiAffinity"
        affinity = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return _host_network(_pod(owner, names.client, "client", container, affinity, run=run), spec)


def service_name(name: str, run: str) -> str:
    """The run's Service: named like its server pod, shortened with a hash past 63 characters
    (a Service name is a DNS-1035 label; a pod's may be longer)."""
    full = f"{name}-server-{run}"
    if len(full) <= MAX_SERVICE_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    keep = MAX_SERVICE_NAME - len(digest) - len(run) - 2
    return f"{name[:keep].rstrip('-')}-{digest}-{run}"


def service(owner: Mapping[str, Any], spec: Mapping[str, Any], run: str | None = None) -> dict[str, Any]:
    """The service path's ClusterIP Service in front of this run's server pod (by its labels,
    the Netperf's UID included: never a predecessor's server of the same name)."""
    spec = effective(spec)
    meta = owner["metadata"]
    run = run_key(owner, run)
    selector = {
        ownership.INSTANCE: meta["name"],
        ownership.COMPONENT: "server",
        RUN_LABEL: run,
        UID_LABEL: str(meta.get("uid") or ""),
    }
    labels = {
        **ownership.standard_labels(APP, meta["name"], "service"),
        RUN_LABEL: run,
        UID_LABEL: str(meta.get("uid") or ""),
    }
    ports = [{**p, "port": p["containerPort"], "targetPort": p["containerPort"]} for p in _ports(spec)]
    for p in ports:
        del p["containerPort"]
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service_name(meta["name"], run), "labels": labels},
        "spec": {"type": "ClusterIP", "selector": selector, "ports": ports},
    }
    return ownership.adopt(body, owner, APP, "service")


@dataclass(frozen=True)
class ServiceView:
    """What a pass needs of a run's Service."""

    name: str
    run: str
    cluster_ip: str | None
    deleting: bool
    uid: str = ""
    created_for: str = ""

    @property
    def component(self) -> str:
        return "service"


def service_view(body: Mapping[str, Any]) -> ServiceView:
    meta = body["metadata"]
    labels = meta.get("labels") or {}
    ip = (body.get("spec") or {}).get("clusterIP")
    return ServiceView(
        name=meta["name"],
        run=labels.get(RUN_LABEL, ""),
        cluster_ip=ip if ip and ip != "None" else None,
        deleting=meta.get("deletionTimestamp") is not None,
        uid=meta.get("uid") or "",
        created_for=labels.get(UID_LABEL, ""),
    )


@dataclass(frozen=True)
class PodView:
    """What a pass needs of a pod (kept in the owner cache instead of whole bodies)."""

    name: str
    component: str
    run: str
    phase: str
    ip: str | None
    ready: bool
    deleting: bool
    unschedulable: str | None  # the scheduler's message
    waiting: str | None  # a container's waiting reason and message (e.g. ImagePullBackOff)
    exit_code: int | None
    message: str  # the terminated container's termination message
    uid: str = ""  # deletes carry it as a precondition
    created_for: str = ""  # UID_LABEL: the Netperf whose run made it ("" before the label existed)

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    # The run's pods have one container and restartPolicy Never, so its terminated state is the
    # pod's outcome, and the kubelet reports it about a second before the phase it then sets
    # (a run's overhead waited for that phase).
    @property
    def succeeded(self) -> bool:
        """Ran to the end with exit code 0 (the phase may still say Running)."""
        return self.phase == "Succeeded" or (self.exit_code == 0 and self.phase != "Failed")

    @property
    def failed(self) -> bool:
        """Ended with a non-zero exit code, or the phase says Failed."""
        return self.phase == "Failed" or self.exit_code not in (None, 0)


def pod_view(body: Mapping[str, Any]) -> PodView:
    meta, st = body["metadata"], body.get("status") or {}
    labels = meta.get("labels") or {}
    unschedulable = next(
        (
            c.get("message") or "unschedulable"
            for c in st.get("conditions") or []
            if c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ),
        None,
    )
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
    waiting = None
    exit_code, message = None, ""
    for cs in st.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            w = state["waiting"]
            waiting = f"{w['reason']}: {w.get('message', '')}".rstrip(": ")
        if "terminated" in state:
            exit_code = state["terminated"].get("exitCode")
            message = state["terminated"].get("message") or ""
    return PodView(
        name=meta["name"],
        component=labels.get(ownership.COMPONENT, ""),
        run=labels.get(RUN_LABEL, ""),
        phase=st.get("phase") or "Pending",
        ip=st.get("podIP") or None,
        ready=ready,
        deleting=meta.get("deletionTimestamp") is not None,
        unschedulable=unschedulable,
        waiting=waiting,
        exit_code=exit_code,
        message=message,
        uid=meta.get("uid") or "",
        created_for=labels.get(UID_LABEL, ""),
    )


def of_run(pod: PodView | ServiceView, owner_uid: str, run: int | str) -> bool:
    """Whether ``pod`` was created for this run of this Netperf (not only named like it).

    Controlled by the Netperf is not enough: an adopted orphan of a predecessor of the same name
    is controlled by it too, until it is gone. Pods without the UID label (made by an operator
    from before it) count by generation, so an upgrade mid-run continues the run.
    """
    return pod.run == str(run) and pod.created_for in ("", owner_uid)
