"""Pure desired-state logic of the WebServer operator: no API calls, no clock reads.

Given the WebServer (spec, metadata) and the pods it controls, decide which pods to create and
which to delete, ranked like the ReplicaSet controller.

**No duplicates, by deterministic names.** Pods are named ``<webserver>-<template hash>-<slot>``;
a pass creates the lowest slots not taken by any existing pod of that template. When the view
is stale (our own creates not yet seen, or a restart in the middle of a scale-up) the same
names are computed again and the API server answers ``AlreadyExists``: a pod can never be
created twice. Deletes are the other direction: a stale view still shows a pod we deleted, so
the controller remembers its own deletes (expectations, see ``.api``) and this module treats
those pods as already gone.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from operators.webserver.schema import APP, DEFAULT_IMAGE, DEFAULT_PORT, RESTARTED_AT
from shared.api import budgets, ownership, podsecurity, services

CONTAINER = "web"
# A pod being deleted leaves the Service's endpoints at once, but kube-proxy on every node needs
# a moment to stop sending it connections; a server that exits on SIGTERM (nginx does) would
# refuse those. The kubelet sends SIGTERM only after this sleep. Not part of the template hash:
# existing pods are not rolled for it.
GRACEFUL_STOP = {"preStop": {"sleep": {"seconds": 5}}}
HASH_LABEL = "demo.k8s.io/template-hash"
SLOT_LABEL = "demo.k8s.io/slot"
# Soft spread (the scheduler prefers, never refuses) over nodes, then zones.
SPREAD_KEYS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone")


@dataclass(frozen=True)
class PodView:
    """What the controller needs to know about one pod (kept in the kopf index)."""

    name: str
    template_hash: str
    created: str  # RFC 3339 creationTimestamp: sorts chronologically as a string
    phase: str = "Pending"
    scheduled: bool = False
    ready: bool = False
    deleting: bool = False
    uid: str = ""  # deletes carry it as a precondition
    ready_since: str = ""  # RFC 3339 lastTransitionTime of a True Ready condition
    # The kubelet's message when it cannot start the container with its configuration (e.g. a
    # Secret named by env or envFrom that does not exist: CreateContainerConfigError).
    config_error: str = ""
    ip: str = ""  # status.podIP: what a canary analysis probes

    @property
    def active(self) -> bool:
        """Counted like the ReplicaSet controller: not terminating, not finished."""
        return not self.deleting and self.phase not in ("Succeeded", "Failed")


def pod_view(body: Mapping[str, Any]) -> PodView:
    meta, status = body.get("metadata", {}), body.get("status") or {}
    conditions = status.get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready" and c.get("status") == "True"), None)
    config_error = ""
    for cs in status.get("containerStatuses") or ():
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") == "CreateContainerConfigError":
            config_error = waiting.get("message") or waiting["reason"]
    return PodView(
        name=meta["name"],
        template_hash=(meta.get("labels") or {}).get(HASH_LABEL, ""),
        created=meta.get("creationTimestamp") or "",
        phase=status.get("phase") or "Pending",
        scheduled=bool((body.get("spec") or {}).get("nodeName")),
        ready=ready is not None,
        deleting=bool(meta.get("deletionTimestamp")),
        uid=meta.get("uid") or "",
        ready_since=(ready or {}).get("lastTransitionTime") or "",
        config_error=config_error,
        ip=status.get("podIP") or "",
    )


def _parse_time(value: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def min_ready_seconds(spec: Mapping[str, Any]) -> int:
    return int(spec.get("minReadySeconds") or 0)


def available_at(pod: PodView, min_ready: int) -> datetime.datetime | None:
    """When a ready pod becomes available; None when it is not ready (or has no transition time)."""
    if not pod.ready:
        return None
    since = _parse_time(pod.ready_since)
    if since is None:
        return None
    return since + datetime.timedelta(seconds=min_ready)


def is_available(pod: PodView, min_ready: int, now: datetime.datetime | None) -> bool:
    """Ready for at least ``min_ready`` seconds at ``now`` (ready, when either is 0/None)."""
    if not pod.ready or not min_ready or now is None:
        return pod.ready
    at = available_at(pod, min_ready)
    return at is not None and at <= now


def next_available_in(
    spec: Mapping[str, Any], pods: Sequence[PodView], now: datetime.datetime
) -> float | None:
    """Seconds until the next ready pod becomes available (the pass to run then), or None."""
    min_ready = min_ready_seconds(spec)
    if not min_ready:
        return None
    waits = [
        (at - now).total_seconds()
        for p in pods
        if p.active and (at := available_at(p, min_ready)) is not None and at > now
    ]
    return max(0.0, min(waits)) if waits else None


def config_refs(spec: Mapping[str, Any]) -> dict[str, set[str]]:
    """The ConfigMaps the spec references, each with the keys it needs (none: the whole map)."""
    refs: dict[str, set[str]] = {}
    for env in spec.get("env") or ():
        ref = (env.get("valueFrom") or {}).get("configMapKeyRef")
        if ref:
            refs.setdefault(ref["name"], set()).add(ref["key"])
    for source in spec.get("envFrom") or ():
        if source.get("configMapRef"):
            refs.setdefault(source["configMapRef"]["name"], set())
    for volume in spec.get("volumes") or ():
        if volume.get("configMap"):
            refs.setdefault(volume["configMap"]["name"], set())
    return refs


# Configuration and health fields, copied into the template as they are, and only when set.
TEMPLATE_FIELDS = (
    "env",
    "envFrom",
    "volumes",
    "command",
    "args",
    "podMetadata",
    "restartedAt",
    "readinessPath",
    "liveness",
)


def template(spec: Mapping[str, Any], config_hash: str = "") -> dict[str, Any]:
    """The parts of the spec that define a pod; a change to them rolls the pods.

    ``config_hash``: the digest of the referenced ConfigMaps' content (see ``plan``'s docstring)."""
    tpl: dict[str, Any] = {
        "image": spec.get("image") or DEFAULT_IMAGE,
        "port": int(spec.get("port") or DEFAULT_PORT),
        "resources": spec.get("resources") or {},
        # Anything but an explicit true (a schema bypassed included) mounts no token.
        "automountServiceAccountToken": spec.get("automountServiceAccountToken") is True,
    }
    # Only when set: WebServers without it keep their template hash (no roll on upgrade).
    if spec.get("runAsUser") is not None:
        tpl["runAsUser"] = int(spec["runAsUser"])
    for key in TEMPLATE_FIELDS:
        if spec.get(key) not in (None, "", [], {}):
            tpl[key] = spec[key]
    if config_hash:
        tpl["configHash"] = config_hash
    # The spread is on unless switched off, and only "off" is in the template: the release that
    # added it rolled no pod (a running pod is never rescheduled, so a pod created without the
    # hint behaves exactly as one with it); switching it off or on again rolls the pods.
    if (spec.get("topologySpread") or {}).get("enabled") is False:
        tpl["topologySpread"] = False
    return tpl


def hash_of(tpl: Mapping[str, Any]) -> str:
    """The hash of a template (a pod label: 10 hex digits)."""
    canonical = json.dumps(tpl, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


def template_hash(spec: Mapping[str, Any], config_hash: str = "") -> str:
    return hash_of(template(spec, config_hash))


def selector_labels(name: str) -> dict[str, str]:
    """Labels that select exactly this WebServer's pods (also ``status.selector``)."""
    return {ownership.NAME: APP, ownership.INSTANCE: name}


def selector_string(name: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(name).items()))


def pod_name(owner: str, thash: str, slot: int) -> str:
    return f"{owner}-{thash}-{slot}"


def _env(tpl: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for env in tpl.get("env") or ():
        item: dict[str, Any] = {"name": env["name"]}
        source = env.get("valueFrom")
        if source:
            kind = "configMapKeyRef" if "configMapKeyRef" in source else "secretKeyRef"
            item["valueFrom"] = {kind: {"name": source[kind]["name"], "key": source[kind]["key"]}}
        else:
            item["value"] = env.get("value", "")
        out.append(item)
    return out


def _env_from(tpl: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for source in tpl.get("envFrom") or ():
        kind = "configMapRef" if "configMapRef" in source else "secretRef"
        item: dict[str, Any] = {kind: {"name": source[kind]["name"]}}
        if source.get("prefix"):
            item["prefix"] = source["prefix"]
        out.append(item)
    return out


def _volumes(tpl: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod's volumes and the container's read-only mounts."""
    volumes, mounts = [], []
    for volume in tpl.get("volumes") or ():
        if "configMap" in volume:
            source = {"configMap": {"name": volume["configMap"]["name"]}}
        else:
            source = {"secret": {"secretName": volume["secret"]["name"]}}
        volumes.append({"name": volume["name"], **source})
        mounts.append({"name": volume["name"], "mountPath": volume["mountPath"], "readOnly": True})
    return volumes, mounts


# Ready within a second of the port opening. The kubelet probes a new container's readiness at once
# when it starts (a started container with no readiness result triggers its probe on each status
# update, kubelet 1.34 pkg/kubelet/prober), and when that first probe comes before the server
# listens, the next comes a period later: at 5 s that wait was most of a WebServer's 0 -> N time. A
# readiness probe every second bounds it, and 15 failures in a row keep the 15 s a failing pod gets
# by Kubernetes' defaults (3 x 5 s) before it leaves the Service's endpoints. A startup probe every
# second did the same for the first probe but, ticking on its own clock, made every pod wait half a
# second on average even when it listened at once: the last of 20 pods about a second. The period is
# not part of the template hash: running pods are not rolled for it, pods created after the upgrade
# carry it.
READINESS_PERIOD_SECONDS = 1
READINESS_FAILURE_THRESHOLD = 15


def _http_probe(path: str, period: int, failures: int, delay: int = 0) -> dict[str, Any]:
    probe: dict[str, Any] = {
        # The named port: during a rollout changing spec.port each pod is probed on its own.
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "failureThreshold": failures,
    }
    if delay:
        probe["initialDelaySeconds"] = delay
    return probe


def pod_manifest(
    owner: Mapping[str, Any],
    spec: Mapping[str, Any],
    slot: int,
    config_hash: str = "",
    tpl: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The full pod for ``slot`` of the current template (``tpl``: a revision's stored template,
    during an automatic rollback; by default the spec's)."""
    if tpl is None:
        tpl = template(spec, config_hash)
    thash = hash_of(tpl)
    name = owner["metadata"]["name"]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": tpl["image"],
        "ports": [{"name": "http", "containerPort": tpl["port"], "protocol": "TCP"}],
        "readinessProbe": (
            _http_probe(tpl["readinessPath"], READINESS_PERIOD_SECONDS, READINESS_FAILURE_THRESHOLD)
            if tpl.get("readinessPath")
            else {
                "tcpSocket": {"port": tpl["port"]},
                "periodSeconds": READINESS_PERIOD_SECONDS,
                "failureThreshold": READINESS_FAILURE_THRESHOLD,
            }
        ),
        "lifecycle": GRACEFUL_STOP,
    }
    if tpl.get("liveness"):
        live = tpl["liveness"]
        container["livenessProbe"] = _http_probe(
            live["path"],
            int(live.get("periodSeconds") or 10),
            int(live.get("failureThreshold") or 3),
            int(live.get("initialDelaySeconds") or 0),
        )
    for key in ("command", "args"):
        if tpl.get(key):
            container[key] = list(tpl[key])
    if tpl.get("env"):
        container["env"] = _env(tpl)
    if tpl.get("envFrom"):
        container["envFrom"] = _env_from(tpl)
    volumes, mounts = _volumes(tpl)
    if mounts:
        container["volumeMounts"] = mounts
    if tpl["resources"]:
        # Quantities as strings, as every Kubernetes client writes them: the schema admits
        # `cpu: 1`, which the API server takes but typed clients (and tools reading the pod with
        # one) refuse. The template hash keeps what the user wrote (no rollout on upgrade).
        container["resources"] = {
            part: {name: str(value) for name, value in (amounts or {}).items()}
            for part, amounts in tpl["resources"].items()
        }
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Always",
        "automountServiceAccountToken": tpl["automountServiceAccountToken"],
        **({"volumes": volumes} if volumes else {}),
        **(
            {"topologySpreadConstraints": spread_constraints(name)}
            if tpl.get("topologySpread") is not False
            else {}
        ),
    }
    if "runAsUser" in tpl:
        # The restricted Pod Security Standard: admitted in namespaces that enforce it.
        pod_spec["securityContext"] = podsecurity.restricted_pod(tpl["runAsUser"])
        container["securityContext"] = podsecurity.restricted_container()
    user = tpl.get("podMetadata") or {}
    # The user's labels first: the operator's own are written over them (the schema rejects
    # those keys anyway; a spec that bypassed it still cannot move a pod out of the selector).
    labels = {**(user.get("labels") or {}), "app": name, HASH_LABEL: thash, SLOT_LABEL: str(slot)}
    metadata: dict[str, Any] = {"name": pod_name(name, thash, slot), "labels": labels}
    annotations = dict(user.get("annotations") or {})
    if tpl.get("restartedAt"):
        annotations[RESTARTED_AT] = tpl["restartedAt"]
    if annotations:
        metadata["annotations"] = annotations
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
    # adopt() writes the app.kubernetes.io/* labels last: a user label of those keys never wins.
    return ownership.adopt(pod, owner, APP, "web-server")


def spread_constraints(name: str) -> list[dict[str, Any]]:
    """Soft topology spread of one template's pods over nodes and zones (``matchLabelKeys``:
    during a rollout the new pods spread among themselves, not around the old ones)."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector_labels(name)},
            "matchLabelKeys": [HASH_LABEL],
        }
        for key in SPREAD_KEYS
    ]


def deletion_rank(pod: PodView) -> tuple[int, int, int, str]:
    """Sort key: the first pods are the first to delete (ReplicaSet controller's order).

    Unscheduled before scheduled, Pending before Running, not-ready before ready, then newest
    first. The creation timestamp is inverted by sorting on its negated characters.
    """
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(pod.phase, 1)
    newest_first = "".join(chr(0x10FFFF - ord(c)) for c in pod.created)
    return (int(pod.scheduled), phase_rank, int(pod.ready), newest_first)


def rank_for_deletion(pods: Iterable[PodView]) -> list[PodView]:
    return sorted(pods, key=deletion_rank)


def slow_start_batches(count: int, first: int = 1) -> list[int]:
    """Batch sizes 1, 2, 4, ... summing to ``count`` (the ReplicaSet controller's slow start)."""
    sizes, size = [], first
    while count > 0:
        sizes.append(min(size, count))
        count -= sizes[-1]
        size *= 2
    return sizes


def free_slots(taken: Iterable[str], owner: str, thash: str, count: int) -> list[int]:
    prefix = f"{owner}-{thash}-"
    used = {int(n[len(prefix) :]) for n in taken if n.startswith(prefix) and n[len(prefix) :].isdigit()}
    slots: list[int] = []
    slot = 0
    while len(slots) < count:
        if slot not in used:
            slots.append(slot)
        slot += 1
    return slots


@dataclass(frozen=True)
class Plan:
    create_slots: list[int] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.create_slots and not self.delete


@dataclass(frozen=True)
class RolloutLimits:
    max_surge: int
    max_unavailable: int


def rollout_limits(spec: Mapping[str, Any]) -> RolloutLimits:
    """``spec.rollout``, with a Deployment's defaults for what is unset (see ``plan``'s docstring)."""
    replicas = int(spec.get("replicas", 0))
    rollout = spec.get("rollout") or {}
    surge, unavailable = rollout.get("maxSurge"), rollout.get("maxUnavailable")
    max_surge = int(surge) if surge is not None else -(-replicas // 4)
    max_unavailable = int(unavailable) if unavailable is not None else replicas // 4
    if max_surge == 0 and max_unavailable == 0:
        # Neither bound lets a pod be replaced: relax the one the user did not ask to be 0.
        if surge is None:
            max_surge = 1
        else:
            max_unavailable = 1
    return RolloutLimits(max_surge, max_unavailable)


def plan(
    owner_name: str,
    spec: Mapping[str, Any],
    pods: Sequence[PodView],
    config_hash: str = "",
    now: datetime.datetime | None = None,
    *,
    thash: str | None = None,
    paused: bool = False,
) -> Plan:
    """What to create and delete now, from the pods the WebServer controls (``now``: for
    minReadySeconds; without it a ready pod counts as available; ``thash``: the template to
    run, the spec's by default; ``paused``: while pods of another template run, nothing moves,
    as for a paused Deployment).

    **Rollouts.** Changing ``image``, ``port``, ``resources``, ``runAsUser`` or
    ``automountServiceAccountToken`` changes the template hash, and the old pods are replaced the
    way a Deployment's RollingUpdate replaces them: never more than ``replicas + maxSurge`` active
    pods, and a ready old pod is deleted only if at least ``replicas - maxUnavailable`` pods are
    still ready after the delete. A not-ready old pod serves
    nothing, so it always goes. Both bounds come from ``spec.rollout`` and default to the
    Deployment's 25% (maxUnavailable rounded down, maxSurge rounded up), which for 1 to 3 replicas
    means surge one pod and delete an old one only once a new one is ready, so a single-replica
    WebServer never drops to no ready pod. Both 0 would never replace a pod, so the schema rejects
    that. Where they still
    come out 0 (an explicit 0 next to an unset field whose default rounds to 0, or a schema
    bypassed), the unset one becomes 1, or maxUnavailable when both were set (the Deployment
    controller's fallback): a rollout can always move.

    **No API credentials unless asked.** A web server needs no token of the namespace's
    ServiceAccount, so pods set ``automountServiceAccountToken: false`` unless the spec asks for
    it. The value is always part of the template, so the release that made this the
    default rolls the pods of every existing WebServer once: a pod's token mount cannot change
    while it runs, and leaving it in running pods until some later change would leave pods of one
    template hash with and without a token (docs/operations/upgrades.md).

    **Configuration** (``env``, ``envFrom``, ``volumes``, ``command``, ``args``, ``podMetadata``,
    ``restartedAt``) and **HTTP health** (``readinessPath``, ``liveness``) are part of the template
    only when set, so WebServers that use none of them keep their hash across the upgrade that
    introduced them. The readiness probe runs once a second, so a pod is Ready within a second of
    listening (outside the template: see ``READINESS_PERIOD_SECONDS``). The content of the
    ConfigMaps the spec references is in the template too, as one digest (``config_hash``,
    computed by the reconciler from the labelled ConfigMaps it watches): editing such a ConfigMap
    rolls the pods. Secrets are not read (the operator has no access to them); ``restartedAt``
    rolls the pods when one changed.

    **Revisions, rollback, pause** are ``.rollout``'s: ``plan`` runs the template hash it
    is given (an automatic rollback's, kept in the status) and moves nothing while paused with old
    pods. **Spread and budget**: a soft topology spread is in every pod unless switched off (only
    "off" enters the template, so its arrival rolled no pod), and ``budget_manifest`` is the
    PodDisruptionBudget kept while replicas >= 2.

    **minReadySeconds.** A ready pod counts as available only once it has been ready that long
    (the Ready condition's ``lastTransitionTime``), for ``status.availableReplicas`` and for the
    rollout: an old ready pod is deleted only if enough *available* pods remain, as a Deployment's
    maxUnavailable counts them. A pod whose Ready condition has no transition time is not available
    while minReadySeconds is above 0 (the Deployment controller's rule). The clock is an argument.
    """
    replicas = int(spec.get("replicas", 0))
    if thash is None:
        thash = template_hash(spec, config_hash)
    min_ready = min_ready_seconds(spec)
    active = [p for p in pods if p.active]
    new = [p for p in active if p.template_hash == thash]
    old = [p for p in active if p.template_hash != thash]
    taken = [p.name for p in pods]  # terminating pods still hold their names

    if len(new) > replicas:
        # Too many current pods: remove the surplus and every not-ready old pod at once.
        surplus = [p.name for p in rank_for_deletion(new)[: len(new) - replicas]]
        return Plan(delete=surplus + [p.name for p in old if not p.ready])
    if not old:
        return Plan(create_slots=free_slots(taken, owner_name, thash, replicas - len(new)))
    if paused:
        return Plan()

    limits = rollout_limits(spec)
    # Counted over old and new pods alike: a ready new pod is what lets an old one go.
    # Available, not just ready: a new pod within its minReadySeconds lets no old pod go.
    deletable_ready = sum(is_available(p, min_ready, now) for p in active) - (
        replicas - limits.max_unavailable
    )
    plan_delete: list[str] = []
    for p in rank_for_deletion(old):
        if not p.ready:
            plan_delete.append(p.name)  # serves nothing: its delete never costs readiness
        elif deletable_ready > 0:
            plan_delete.append(p.name)
            deletable_ready -= 1
    # This pass's deletes free room for its creates: the handler creates only after every
    # delete succeeded, and a terminating pod is not active (as for the ReplicaSet controller).
    room = replicas + limits.max_surge - (len(active) - len(plan_delete))
    create = max(0, min(replicas - len(new), room))
    return Plan(create_slots=free_slots(taken, owner_name, thash, create), delete=plan_delete)


def service_manifest(owner: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Service selecting the pods, or None when ``spec.service.enabled`` is not true."""
    svc = spec.get("service") or {}
    if not svc.get("enabled"):
        return None
    return services.manifest(
        owner,
        APP,
        selector=selector_labels(owner["metadata"]["name"]),
        port=int(svc.get("port") or 80),
        # The pods' named port, not its number: during a rollout that changes spec.port each pod
        # is reached on its own port (old pods on the old one), so traffic never goes to a port
        # nothing listens on.
        target_port="http",
        service_type=svc.get("type") or "ClusterIP",
        node_port=int(svc["nodePort"]) if svc.get("nodePort") else None,
    )


def budget_manifest(owner: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The PodDisruptionBudget (``maxUnavailable: 1``) over the pods, or None: switched off
    (``spec.disruptionBudget.enabled: false``), or fewer than 2 replicas, where a budget of one
    unavailable pod would be all of them and the only safe one (0) blocks every node drain
    (kubernetes #66811)."""
    if (spec.get("disruptionBudget") or {}).get("enabled") is False or int(spec.get("replicas", 0)) < 2:
        return None
    return budgets.manifest(owner, APP, selector=selector_labels(owner["metadata"]["name"]))


budget_view = budgets.view
service_view = services.view
service_differs = services.differs
