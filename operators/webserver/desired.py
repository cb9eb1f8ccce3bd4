"""Pure desired-state logic of the WebServer operator: no API calls, no clock reads.

Given the WebServer (spec, metadata) and the pods it controls, decide which pods to create and
which to delete, ranked like the ReplicaSet controller.

**No duplicates, by deterministic names.** Pods are named ``<webserver>-<template hash>-<slot>``;
a pass creates the lowest slots not taken by any existing pod of that template. When the view
is stale (our own creates not yet seen, or a restart in the middle of a scale-up) the same
names are computed again and the API server answers ``AlreadyExists``: a pod can never be
created twice. Deletes are the other direction: a stale view still shows a pod we deleted, so
the controller remembers its own deletes (expectations, see :mod:`.api`) and this module treats
those pods as already gone.

**Rollouts.** Changing ``image``, ``port``, ``resources``, ``runAsUser`` or
``automountServiceAccountToken`` changes the template hash, and the old pods are replaced the
way a Deployment's RollingUpdate replaces them: never more than ``replicas + maxSurge`` active
pods, and a ready old pod is deleted only if at least ``replicas - maxUnavailable`` pods are
still ready after the delete. A not-ready old pod serves
nothing, so it always goes. Both bounds come from ``spec.rollout`` and default to the
Deployment's 25% (maxUnavailable rounded down, maxSurge rounded up), which for 1 to 3 replicas
means surge one pod and delete an old one only once a new one is ready: keeping ``replicas - 1``
ready, as this module once did, let a single-replica WebServer drop to no ready pod at all
(issue #15). Both 0 would never replace a pod, so the schema rejects that. Where they still
come out 0 (an explicit 0 next to an unset field whose default rounds to 0, or a schema
bypassed), the unset one becomes 1, or maxUnavailable when both were set (the Deployment
controller's fallback): a rollout can always move.

**No API credentials unless asked.** A web server needs no token of the namespace's
ServiceAccount, so pods set ``automountServiceAccountToken: false`` unless the spec asks for
it (issue #25). The value is always part of the template, so the release that made this the
default rolls the pods of every existing WebServer once: a pod's token mount cannot change
while it runs, and leaving it in running pods until some later change would leave pods of one
template hash with and without a token (docs/operations/upgrades.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from operators.webserver.schema import APP, DEFAULT_IMAGE, DEFAULT_PORT
from shared.api import ownership, podsecurity, services

CONTAINER = "web"
# A pod being deleted leaves the Service's endpoints at once, but kube-proxy on every node needs
# a moment to stop sending it connections; a server that exits on SIGTERM (nginx does) would
# refuse those. The kubelet sends SIGTERM only after this sleep. Not part of the template hash:
# existing pods are not rolled for it.
GRACEFUL_STOP = {"preStop": {"sleep": {"seconds": 5}}}
HASH_LABEL = "demo.k8s.io/template-hash"
SLOT_LABEL = "demo.k8s.io/slot"


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

    @property
    def active(self) -> bool:
        """Counted like the ReplicaSet controller: not terminating, not finished."""
        return not self.deleting and self.phase not in ("Succeeded", "Failed")


def pod_view(body: Mapping[str, Any]) -> PodView:
    meta, status = body.get("metadata", {}), body.get("status") or {}
    conditions = status.get("conditions") or []
    return PodView(
        name=meta["name"],
        template_hash=(meta.get("labels") or {}).get(HASH_LABEL, ""),
        created=meta.get("creationTimestamp") or "",
        phase=status.get("phase") or "Pending",
        scheduled=bool((body.get("spec") or {}).get("nodeName")),
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        deleting=bool(meta.get("deletionTimestamp")),
        uid=meta.get("uid") or "",
    )


def template(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of the spec that define a pod; a change to them rolls the pods."""
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
    return tpl


def template_hash(spec: Mapping[str, Any]) -> str:
    canonical = json.dumps(template(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


def selector_labels(name: str) -> dict[str, str]:
    """Labels that select exactly this WebServer's pods (also ``status.selector``)."""
    return {ownership.NAME: APP, ownership.INSTANCE: name}


def selector_string(name: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(name).items()))


def pod_name(owner: str, thash: str, slot: int) -> str:
    return f"{owner}-{thash}-{slot}"


def pod_manifest(owner: Mapping[str, Any], spec: Mapping[str, Any], slot: int) -> dict[str, Any]:
    """The full pod for ``slot`` of the current template."""
    tpl, thash = template(spec), template_hash(spec)
    name = owner["metadata"]["name"]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": tpl["image"],
        "ports": [{"name": "http", "containerPort": tpl["port"], "protocol": "TCP"}],
        "readinessProbe": {
            "tcpSocket": {"port": tpl["port"]},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "lifecycle": GRACEFUL_STOP,
    }
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
    }
    if "runAsUser" in tpl:
        # The restricted Pod Security Standard: admitted in namespaces that enforce it.
        pod_spec["securityContext"] = podsecurity.restricted_pod(tpl["runAsUser"])
        container["securityContext"] = podsecurity.restricted_container()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(name, thash, slot),
            # app=<name> is what the original operator labelled its pods with.
            "labels": {"app": name, HASH_LABEL: thash, SLOT_LABEL: str(slot)},
        },
        "spec": pod_spec,
    }
    return ownership.adopt(pod, owner, APP, "web-server")


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
    """``spec.rollout``, with a Deployment's defaults for what is unset (see the module doc)."""
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


def plan(owner_name: str, spec: Mapping[str, Any], pods: Sequence[PodView]) -> Plan:
    """What to create and delete now, from the pods the WebServer controls."""
    replicas = int(spec.get("replicas", 0))
    thash = template_hash(spec)
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

    limits = rollout_limits(spec)
    # Counted over old and new pods alike: a ready new pod is what lets an old one go.
    deletable_ready = sum(p.ready for p in active) - (replicas - limits.max_unavailable)
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
        # nothing listens on (issue #22).
        target_port="http",
        service_type=svc.get("type") or "ClusterIP",
        node_port=int(svc["nodePort"]) if svc.get("nodePort") else None,
    )


service_view = services.view
service_differs = services.differs
