"""Desired children of a TDSet as plain dicts, and the small views kept of observed ones (pure).

A TDSet owns one Deployment and, when ``spec.service`` is set, one Service; both are named
like the TDSet (deterministic names: a restarted operator finds them instead of creating
more). The Deployment's selector is fixed at creation (``app.kubernetes.io/name=tdset``,
``app.kubernetes.io/instance=<name>``); image and port changes replace the pod template's
container, replica changes set ``spec.replicas``. The pods mount no ServiceAccount token
unless ``container.automountServiceAccountToken`` asks for it; the value is part of
the template, so the release that made this the default rolls every TDSet's Deployment once
(docs/operations/upgrades.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from operators.tdset.schedule import Bounds
from operators.tdset.schema import APP
from shared.api import ownership, podsecurity, services

CONTAINER = "app"
PORT_NAME = "http"
# On the Deployment: the hash of the pod template the TDSet last asked for (template_hash).
APPLIED = "schedule.rs/applied-template"


def selector_labels(name: str) -> dict[str, str]:
    return {ownership.NAME: APP, ownership.INSTANCE: name}


def container(spec: Mapping[str, Any]) -> dict[str, Any]:
    c = spec["container"]
    out: dict[str, Any] = {
        "name": CONTAINER,
        "image": str(c["image"]),
        "ports": [{"name": PORT_NAME, "containerPort": int(c["port"]), "protocol": "TCP"}],
        # Without it a pod is Ready as soon as its container starts, even on a port the image
        # does not serve: a port change would complete its rollout and take the Service down.
        "readinessProbe": {"tcpSocket": {"port": PORT_NAME}, "periodSeconds": 5, "failureThreshold": 3},
        # SIGTERM only once kube-proxy has stopped sending the pod connections (see WebServer).
        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
    }
    if c.get("runAsUser") is not None:
        out["securityContext"] = podsecurity.restricted_container()
    return out


def run_as_user(spec: Mapping[str, Any]) -> int | None:
    uid = spec["container"].get("runAsUser")
    return None if uid is None else int(uid)


def pod_security(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod-level security context: restricted when ``container.runAsUser`` is set.

    Only then: TDSets without it keep their pod template (no rollout on upgrade), and images
    that run as root (nginx) keep working where the namespace allows it.
    """
    uid = run_as_user(spec)
    return None if uid is None else podsecurity.restricted_pod(uid)


def automount_token(spec: Mapping[str, Any]) -> bool:
    """Whether the pods get a ServiceAccount token: only when asked (a schema bypassed
    included: anything but an explicit true mounts none)."""
    return spec["container"].get("automountServiceAccountToken") is True


def template_hash(spec: Mapping[str, Any]) -> str:
    """What the TDSet asks of the pod template (container, pod security, token), hashed."""
    wanted = {
        "container": container(spec),
        "securityContext": pod_security(spec),
        "automountServiceAccountToken": automount_token(spec),
    }
    return hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()[:16]


def deployment_manifest(owner: Mapping[str, Any], spec: Mapping[str, Any], replicas: int) -> dict[str, Any]:
    """The container's port is named ``http`` and the Service targets that name once every pod has
    it (``service_target_port``), so a port change never sends traffic to a port the old pods
    do not listen on. A template write records the hash of what was asked for in an annotation
    (``APPLIED``): a mutating admission policy that rewrites the image (digest pinning) or the
    security context then does not make every pass write the template again
    (``deployment_patch``).

    When a HorizontalPodAutoscaler targets the Deployment, the TDSet leaves ``spec.replicas`` to
    the autoscaler and moves the HPA's ``minReplicas`` to the scheduled value instead
    (``autoscaler_floor``), so the schedule sets a floor and the HPA still scales above it.
    The entry that decides may set the floor and a cap itself (``minReplicas``/``maxReplicas``,
    ``.schedule.Bounds``, ``autoscaler_bounds``); the HPA's own values are remembered in
    annotations on it and given back (``restore_patch``): its maxReplicas when no cap is in
    force any more, both when the TDSet is gone or scales something else.
    """
    name = owner["metadata"]["name"]
    labels = ownership.standard_labels(APP, name, "workload")
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": {APPLIED: template_hash(spec)}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector_labels(name)},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [container(spec)],
                    **pod_security_field(spec),
                    "automountServiceAccountToken": automount_token(spec),
                },
            },
        },
    }
    return ownership.adopt(body, owner, APP, "workload")


def pod_security_field(spec: Mapping[str, Any]) -> dict[str, Any]:
    ctx = pod_security(spec)
    return {"securityContext": ctx} if ctx is not None else {}


@dataclass(frozen=True)
class DeploymentView:
    """What a pass needs of the Deployment (kept in the owner cache instead of whole bodies)."""

    name: str
    replicas: int
    image: str | None
    port: int | None
    status_replicas: int
    ready: int
    updated: int
    available: bool
    rolled_out: bool  # the Deployment controller has seen the latest spec
    run_as_user: int | None = None
    uid: str = ""
    port_name: str | None = None
    applied: str | None = None  # the APPLIED annotation
    automount_token: bool | None = None  # None: the template leaves it to the ServiceAccount

    def fields(self) -> dict[str, Any]:
        return {"replicas": self.replicas, **self.template_fields()}

    def template_fields(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "port": self.port,
            "runAsUser": self.run_as_user,
            "automountServiceAccountToken": self.automount_token,
        }

    @property
    def settled(self) -> bool:
        """Every pod is on the current template: the rollout (if any) is complete."""
        return self.rolled_out and self.updated == self.status_replicas == self.replicas


def deployment_view(body: Mapping[str, Any]) -> DeploymentView:
    meta, spec, st = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    ours: Mapping[str, Any] = next((c for c in containers if c.get("name") == CONTAINER), {})
    ports = ours.get("ports") or [{}]
    conditions = st.get("conditions") or []
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    pod_ctx = pod_spec.get("securityContext") or {}
    return DeploymentView(
        name=meta["name"],
        replicas=int(spec.get("replicas", 1)),
        image=ours.get("image"),
        port=ports[0].get("containerPort"),
        status_replicas=int(st.get("replicas") or 0),
        ready=int(st.get("readyReplicas") or 0),
        updated=int(st.get("updatedReplicas") or 0),
        available=any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions),
        rolled_out=int(st.get("observedGeneration") or 0) >= int(meta.get("generation") or 0),
        run_as_user=pod_ctx.get("runAsUser"),
        uid=meta.get("uid") or "",
        port_name=ports[0].get("name"),
        applied=(meta.get("annotations") or {}).get(APPLIED),
        automount_token=pod_spec.get("automountServiceAccountToken"),
    )


def template_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The ``DeploymentView.template_fields`` the TDSet asks for."""
    want = container(spec)
    return {
        "image": want["image"],
        "port": want["ports"][0]["containerPort"],
        "runAsUser": run_as_user(spec),
        "automountServiceAccountToken": automount_token(spec),
    }


def template_current(
    observed: DeploymentView, spec: Mapping[str, Any], stored: Mapping[str, Any] | None = None
) -> bool:
    """Whether the Deployment's template is what ``spec`` asks for.

    Once the TDSet wrote the template for this spec (the ``APPLIED`` annotation), the
    fields are compared with ``stored`` — what the API server answered that write with, after
    admission — not with the spec: an image rewritten to a digest by a mutating policy is not
    drift, a hand edit after our write is. Without a stored answer (a restart) the annotation is
    trusted. A Deployment without the annotation (written before it existed) is compared
    field by field, as it always was.
    """
    if observed.applied is None:
        return observed.template_fields() == template_fields(spec)
    if observed.applied != template_hash(spec):
        return False
    return stored is None or observed.template_fields() == dict(stored)


def deployment_patch(
    observed: DeploymentView,
    spec: Mapping[str, Any],
    replicas: int | None,
    stored: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Merge patch bringing the Deployment to ``spec`` (and ``replicas`` unless None), or None.

    The container list is replaced whole (merge patches replace lists) and only when the
    template is not current (``template_current``), so server-side defaults and admission
    mutations never cause a rollout. Carries the Deployment's UID as a precondition.
    """
    patch: dict[str, Any] = {}
    meta: dict[str, Any] = {"uid": observed.uid} if observed.uid else {}
    if replicas is not None and observed.replicas != replicas:
        patch["replicas"] = replicas
    if not template_current(observed, spec, stored):
        # null removes the pod's security context (merge patch) when runAsUser is unset.
        template: dict[str, Any] = {
            "containers": [container(spec)],
            "securityContext": pod_security(spec),
            "automountServiceAccountToken": automount_token(spec),
        }
        patch["template"] = {"spec": template}
        meta["annotations"] = {APPLIED: template_hash(spec)}
    if not patch:
        return None
    return {"metadata": meta, "spec": patch} if meta else {"spec": patch}


def service_target_port(dep: DeploymentView | None, current: int | str | None) -> int | str:
    """The Service's target port: the pods' port name once every pod has it.

    Deployments written before the port was named keep their numbered target until a rollout
    (any template change names the port) has replaced every pod; switching earlier would leave
    the old pods, which have no port of that name, without traffic. During a rollout the
    Service's target stays what it is, so the pods that serve keep serving.
    """
    if dep is None or (dep.port_name == PORT_NAME and (dep.settled or current is None)):
        return PORT_NAME
    if current is not None:
        return current
    return dep.port if dep.port is not None else PORT_NAME


def service_manifest(
    owner: Mapping[str, Any], spec: Mapping[str, Any], target_port: int | str = PORT_NAME
) -> dict[str, Any] | None:
    svc = spec.get("service")
    if not svc:
        return None
    return services.manifest(
        owner,
        APP,
        selector=selector_labels(owner["metadata"]["name"]),
        port=int(svc["port"]),
        target_port=target_port,
    )


@dataclass(frozen=True)
class AutoscalerView:
    namespace: str
    name: str
    target: str | None  # name of the Deployment it scales (None for other kinds)
    min_replicas: int
    max_replicas: int
    floor_owner: str | None = None  # UID of the TDSet that raised minReplicas (annotation)
    original_min: int | None = None  # minReplicas before any TDSet raised it
    uid: str = ""  # patches carry it as a precondition
    # (group, kind, name) of whatever it scales: a TDSet's own Deployment or its scaleTargetRef
    scales: tuple[str, str, str] | None = None
    original_max: int | None = None  # maxReplicas before a TDSet capped it (only while capped)


# On an HPA whose minReplicas a TDSet raised: which TDSet, and the value to give back when it
# goes (the HPA is the user's; only what the TDSet changed is undone).
FLOOR_OWNER = "schedule.rs/floor-owner"
ORIGINAL_MIN = "schedule.rs/original-min-replicas"
# Present only while a TDSet caps maxReplicas (an entry's or the spec's maxReplicas decides):
# without a cap the HPA's maxReplicas is the user's, and a hand edit of it is left alone.
ORIGINAL_MAX = "schedule.rs/original-max-replicas"


def floor_patch(hpa: AutoscalerView, owner_uid: str, floor: int, cap: int | None = None) -> dict[str, Any]:
    """Set minReplicas to ``floor`` and maxReplicas to ``cap`` (None: the HPA's own, given back
    if a cap was in force), remembering the user's own values the first time. Both in one
    patch: the API server checks ``minReplicas <= maxReplicas`` on the result."""
    original = hpa.original_min if hpa.original_min is not None else hpa.min_replicas
    annotations: dict[str, str | None] = {FLOOR_OWNER: owner_uid, ORIGINAL_MIN: str(original)}
    spec: dict[str, Any] = {"minReplicas": floor}
    if cap is not None:
        own_max = hpa.original_max if hpa.original_max is not None else hpa.max_replicas
        annotations[ORIGINAL_MAX] = str(own_max)
        spec["maxReplicas"] = cap
    elif hpa.original_max is not None:
        annotations[ORIGINAL_MAX] = None
        spec["maxReplicas"] = hpa.original_max
    return {"metadata": {**_uid(hpa), "annotations": annotations}, "spec": spec}


def bounds_current(hpa: AutoscalerView, owner_uid: str, floor: int, cap: int | None) -> bool:
    """Whether the HPA already has ``floor`` and ``cap`` (None: no cap of ours in force)."""
    if hpa.floor_owner not in (None, owner_uid) or hpa.min_replicas != floor:
        return False
    if cap is None:
        return hpa.original_max is None
    return hpa.max_replicas == cap and (hpa.original_max is not None or hpa.floor_owner is None)


def _uid(hpa: AutoscalerView) -> dict[str, str]:
    return {"uid": hpa.uid} if hpa.uid else {}


def restore_patch(hpa: AutoscalerView) -> dict[str, Any]:
    """Give the HPA its own minReplicas (and maxReplicas, if capped) back and drop our
    annotations (null deletes a key)."""
    spec = {"minReplicas": hpa.original_min} if hpa.original_min is not None else {}
    if hpa.original_max is not None:
        spec["maxReplicas"] = hpa.original_max
    annotations = {FLOOR_OWNER: None, ORIGINAL_MIN: None, ORIGINAL_MAX: None}
    return {"metadata": {**_uid(hpa), "annotations": annotations}, "spec": spec}


def autoscaler_view(body: Mapping[str, Any]) -> AutoscalerView:
    meta, spec = body["metadata"], body.get("spec") or {}
    annotations = meta.get("annotations") or {}
    original = annotations.get(ORIGINAL_MIN)
    original_max = annotations.get(ORIGINAL_MAX)
    ref = spec.get("scaleTargetRef") or {}
    is_deployment = ref.get("kind") == "Deployment" and str(ref.get("apiVersion", "apps/v1")).startswith(
        "apps/"
    )
    group = str(ref.get("apiVersion", "apps/v1")).rpartition("/")[0]
    return AutoscalerView(
        namespace=meta.get("namespace") or "",
        name=meta["name"],
        target=ref.get("name") if is_deployment else None,
        min_replicas=int(spec.get("minReplicas") or 1),
        max_replicas=int(spec.get("maxReplicas") or 1),
        floor_owner=annotations.get(FLOOR_OWNER),
        original_min=int(original) if original and original.isdigit() else None,
        uid=meta.get("uid") or "",
        scales=(group, str(ref["kind"]), str(ref["name"])) if ref.get("kind") and ref.get("name") else None,
        original_max=int(original_max) if original_max and original_max.isdigit() else None,
    )


def autoscaler_for(
    autoscalers: Iterable[AutoscalerView], name: str, kind: str = "Deployment", group: str = "apps"
) -> AutoscalerView | None:
    """The HPA scaling the ``kind`` of ``group`` named ``name`` (a TDSet's own Deployment by
    default; its scaleTargetRef's kind otherwise), matched as the HPA resolves its own
    scaleTargetRef: by group, kind and name, whatever the version. The first by name when
    several do, as HPAs would fight anyway."""
    wanted = (group, kind, name)
    return next((a for a in sorted(autoscalers, key=lambda a: a.name) if scaled_by(a) == wanted), None)


def scaled_by(hpa: AutoscalerView) -> tuple[str, str, str] | None:
    """(group, kind, name) of what ``hpa`` scales."""
    if hpa.scales is None and hpa.target is not None:
        return ("apps", "Deployment", hpa.target)
    return hpa.scales


def autoscaler_floor(scheduled: int, hpa: AutoscalerView) -> tuple[int, str | None]:
    """The ``minReplicas`` to set for a scheduled count, and why it differs when it must.

    The API server requires ``1 <= minReplicas <= maxReplicas`` (scale to zero is an alpha
    feature gate), so the floor is clamped and the clamp is reported.
    """
    floor = min(max(scheduled, 1), hpa.max_replicas)
    if floor == scheduled:
        return floor, None
    if scheduled < 1:
        why = f"HPA {hpa.name} cannot go below 1 replica; schedule asks for {scheduled}, minReplicas set to 1"
    else:
        why = (
            f"HPA {hpa.name} has maxReplicas {hpa.max_replicas}; schedule asks for {scheduled}, "
            f"minReplicas set to {floor}"
        )
    return floor, why


@dataclass(frozen=True)
class HeldBounds:
    """What a TDSet holds an HPA to: ``floor`` (minReplicas), ``cap`` (maxReplicas, None: the
    HPA's own), where each comes from, and why the floor differs from what was asked, if it does."""

    floor: int
    cap: int | None
    floor_from: str
    cap_from: str
    clamp: str | None = None

    def status(self, hpa: AutoscalerView) -> dict[str, Any]:
        """``status.autoscalerBounds``."""
        return {
            "minReplicas": self.floor,
            "maxReplicas": self.cap if self.cap is not None else own_max(hpa),
            "minFrom": self.floor_from,
            "maxFrom": self.cap_from,
        }


def own_max(hpa: AutoscalerView) -> int:
    """The HPA's own maxReplicas: remembered while a TDSet caps it, else what it has."""
    return hpa.original_max if hpa.original_max is not None else hpa.max_replicas


def autoscaler_bounds(scheduled: int, bounds: Bounds, hpa: AutoscalerView) -> HeldBounds:
    """The floor and cap to hold ``hpa`` to: the deciding entry's (or the spec's)
    ``minReplicas``, else the scheduled replicas, clamped by ``autoscaler_floor`` to the cap
    in force (the entry's or spec's ``maxReplicas``, else the HPA's own). Admission already
    refuses an explicit minReplicas above an explicit maxReplicas, so only the scheduled
    replicas or the HPA's own maxReplicas can need the clamp (reported)."""
    cap = bounds.max_replicas
    limit = cap if cap is not None else own_max(hpa)
    asked = bounds.min_replicas if bounds.min_replicas is not None else scheduled
    floor, clamp = autoscaler_floor(asked, dataclasses.replace(hpa, max_replicas=limit))
    return HeldBounds(
        floor,
        cap,
        bounds.min_from or "schedule",
        bounds.max_from or "autoscaler",
        clamp,
    )
