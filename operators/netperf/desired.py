"""The pods of one Netperf run as plain dicts, and the view kept of observed pods (pure).

A run is identified by the Netperf's UID and generation (a scheduled Netperf's runs by their
number instead, ``r<n>``, since a spec edit there does not start a run; :mod:`.schedule`): its
pods are ``<name>-server-<gen>`` and ``<name>-client-<gen>`` (``<name>-server-r3``;
deterministic, so a restarted operator finds them instead of creating more; a spec change starts
a new run whose pods cannot be confused with the old) and carry both in labels. The name alone
is not enough: a Netperf deleted and re-created under the same name starts again at generation
1, and a pod of its predecessor's run (an orphan it adopted to delete, still Terminating) has
the very names of its own run (:func:`of_run`).

The server runs ``netserver -D -p 12865`` (``-D``: stay in the foreground) with a TCP
readiness probe on the control port. The client runs netperf ``samples`` times through a
small POSIX sh loop (so any image with ``sh`` and ``netperf`` works) and writes every run's
keyval output to its termination message (``NETPERF_RESULT``, the container's
``terminationMessagePath``): the operator reads results from the pod status and needs no
``pods/log`` permission.

Both pods run as non-root (65534) with the ``restricted`` Pod Security profile, CPU/memory
requests, no service-account token and no service links.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.netperf.parse import KEYS, RR_TYPES
from operators.netperf.schema import APP, DEFAULTS
from shared.api import ownership, podsecurity

CONTROL_PORT = 12865
RUN_LABEL = "netperf.app.example.com/run"  # the run a pod belongs to: generation, or r<n> when scheduled
UID_LABEL = "netperf.app.example.com/uid"  # the UID of the Netperf whose run created the pod
TERMINATION_LOG = "/dev/termination-log"
NON_ROOT = 65534
# Runs netperf "$1" times with the remaining arguments, each time as $NETPERF_STREAMS processes
# started together (as super-netperf does; their outputs go to files in /tmp, the emptyDir),
# appending each process's output (at most 600 characters of it) to $NETPERF_RESULT, with a
# STREAM= line when there are several; stops after the first sample with a failing process,
# with its exit code. One stream writes exactly what the single-process loop wrote before.
CLIENT_SCRIPT = """\
n="$1"; shift
out="${NETPERF_RESULT:-/dev/termination-log}"
streams="${NETPERF_STREAMS:-1}"
: > "$out"
i=0
while [ "$i" -lt "$n" ]; do
  j=0; pids=""
  while [ "$j" -lt "$streams" ]; do
    "$@" > "/tmp/netperf-$j" 2>&1 &
    pids="$pids $!"; j=$((j + 1))
  done
  j=0; failed=0
  for pid in $pids; do
    wait "$pid"; rc=$?
    printf 'SAMPLE=%s\\n' "$i" >> "$out"
    [ "$streams" -eq 1 ] || printf 'STREAM=%s\\n' "$j" >> "$out"
    printf 'EXIT=%s\\n%.600s\\n' "$rc" "$(cat "/tmp/netperf-$j")" >> "$out"
    [ "$rc" -eq 0 ] || failed="$rc"
    j=$((j + 1))
  done
  [ "$failed" -eq 0 ] || exit "$failed"
  i=$((i + 1))
done
"""


def effective(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with the schema's defaults (the API server applies them too; old objects may lack them)."""
    return {**DEFAULTS, **{k: v for k, v in spec.items() if v is not None}}


def timeout_seconds(spec: Mapping[str, Any]) -> int:
    spec = effective(spec)
    if spec.get("timeoutSeconds"):
        return int(spec["timeoutSeconds"])
    return 60 + int(spec["samples"]) * (int(spec["duration"]) + 15)


@dataclass(frozen=True)
class PodNames:
    server: str
    client: str


def pod_names(name: str, run: int | str) -> PodNames:
    """The pods of run ``run``: the generation, or ``r<n>`` for a scheduled Netperf's n-th run."""
    return PodNames(f"{name}-server-{run}", f"{name}-client-{run}")


def run_key(owner: Mapping[str, Any], run: str | None = None) -> str:
    return run if run is not None else str(owner["metadata"].get("generation", 0))


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
    container = {
        "name": "netserver",
        "image": spec["image"],
        "command": ["netserver", "-D", "-p", str(CONTROL_PORT)],
        "ports": [{"name": "control", "containerPort": CONTROL_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": CONTROL_PORT}, "periodSeconds": 2},
    }
    affinity = _node_affinity(spec["serverNode"]) if spec.get("serverNode") else {}
    return _pod(owner, names.server, "server", container, affinity, run=run)


def client_pod(
    owner: Mapping[str, Any], spec: Mapping[str, Any], server_ip: str, run: str | None = None
) -> dict[str, Any]:
    spec = effective(spec)
    meta = owner["metadata"]
    run = run_key(owner, run)
    names = pod_names(meta["name"], run)
    container = {
        "name": "netperf",
        "image": spec["image"],
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
    return _pod(owner, names.client, "client", container, affinity, run=run)


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


def of_run(pod: PodView, owner_uid: str, run: int | str) -> bool:
    """Whether ``pod`` was created for this run of this Netperf (not only named like it).

    Controlled by the Netperf is not enough: an adopted orphan of a predecessor of the same name
    is controlled by it too, until it is gone. Pods without the UID label (made by an operator
    from before it) count by generation, so an upgrade mid-run continues the run.
    """
    return pod.run == str(run) and pod.created_for in ("", owner_uid)
