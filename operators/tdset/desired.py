"""Desired children of a TDSet as plain dicts, and the small views kept of observed ones (pure).

A TDSet owns one Deployment and, when ``spec.service`` is set, one Service; both are named
like the TDSet (deterministic names: a restarted operator finds them instead of creating
more). The Deployment's selector is fixed at creation (``app.kubernetes.io/name=tdset``,
``app.kubernetes.io/instance=<name>``); image and port changes replace the pod template's
container, replica changes set ``spec.replicas``.

When a HorizontalPodAutoscaler targets the Deployment, the TDSet leaves ``spec.replicas`` to
the autoscaler and moves the HPA's ``minReplicas`` to the scheduled value instead
(:func:`autoscaler_floor`), so the schedule sets a floor and the HPA still scales above it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from operators.tdset.schema import APP
from shared import ownership, podsecurity, services

CONTAINER = "app"


def selector_labels(name: str) -> dict[str, str]:
    return {ownership.NAME: APP, ownership.INSTANCE: name}


def container(spec: Mapping[str, Any]) -> dict[str, Any]:
    c = spec["container"]
    out: dict[str, Any] = {
        "name": CONTAINER,
        "image": str(c["image"]),
        "ports": [{"containerPort": int(c["port"]), "protocol": "TCP"}],
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


def deployment_manifest(owner: Mapping[str, Any], spec: Mapping[str, Any], replicas: int) -> dict[str, Any]:
    name = owner["metadata"]["name"]
    labels = ownership.standard_labels(APP, name, "workload")
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector_labels(name)},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container(spec)], **pod_security_field(spec)},
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

    def fields(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "image": self.image,
            "port": self.port,
            "runAsUser": self.run_as_user,
        }


def deployment_view(body: Mapping[str, Any]) -> DeploymentView:
    meta, spec, st = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    ours = next((c for c in containers if c.get("name") == CONTAINER), {})
    ports = ours.get("ports") or [{}]
    conditions = st.get("conditions") or []
    pod_ctx = ((spec.get("template") or {}).get("spec") or {}).get("securityContext") or {}
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
    )


def deployment_patch(
    observed: DeploymentView, spec: Mapping[str, Any], replicas: int | None
) -> dict[str, Any] | None:
    """Merge patch bringing the Deployment to ``spec`` (and ``replicas`` unless None), or None.

    The container list is replaced whole (merge patches replace lists) and only when image or
    port differ, so server-side defaults in it never cause a rollout.
    """
    patch: dict[str, Any] = {}
    if replicas is not None and observed.replicas != replicas:
        patch["replicas"] = replicas
    want = container(spec)
    if (
        observed.image != want["image"]
        or observed.port != want["ports"][0]["containerPort"]
        or observed.run_as_user != run_as_user(spec)
    ):
        template: dict[str, Any] = {"containers": [want]}
        if observed.run_as_user != run_as_user(spec):
            # null removes the pod's security context (merge patch) when runAsUser was unset.
            template["securityContext"] = pod_security(spec)
        patch["template"] = {"spec": template}
    return {"spec": patch} if patch else None


def expected_fields(
    spec: Mapping[str, Any], replicas: int | None, observed: DeploymentView
) -> dict[str, Any]:
    """The :meth:`DeploymentView.fields` the Deployment will show once a patch is applied."""
    want = container(spec)
    return {
        "replicas": observed.replicas if replicas is None else replicas,
        "image": want["image"],
        "port": want["ports"][0]["containerPort"],
        "runAsUser": run_as_user(spec),
    }


def service_manifest(owner: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any] | None:
    svc = spec.get("service")
    if not svc:
        return None
    return services.manifest(
        owner,
        APP,
        selector=selector_labels(owner["metadata"]["name"]),
        port=int(svc["port"]),
        target_port=int(spec["container"]["port"]),
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


# On an HPA whose minReplicas a TDSet raised: which TDSet, and the value to give back when it
# goes (the HPA is the user's; only what the TDSet changed is undone).
FLOOR_OWNER = "schedule.rs/floor-owner"
ORIGINAL_MIN = "schedule.rs/original-min-replicas"


def floor_patch(hpa: AutoscalerView, owner_uid: str, floor: int) -> dict[str, Any]:
    """Raise minReplicas to ``floor``, remembering the user's own value the first time."""
    original = hpa.original_min if hpa.original_min is not None else hpa.min_replicas
    annotations = {FLOOR_OWNER: owner_uid, ORIGINAL_MIN: str(original)}
    return {"metadata": {"annotations": annotations}, "spec": {"minReplicas": floor}}


def restore_patch(hpa: AutoscalerView) -> dict[str, Any]:
    """Give the HPA its own minReplicas back and drop our annotations (null deletes a key)."""
    spec = {"minReplicas": hpa.original_min} if hpa.original_min is not None else {}
    return {"metadata": {"annotations": {FLOOR_OWNER: None, ORIGINAL_MIN: None}}, "spec": spec}


def autoscaler_view(body: Mapping[str, Any]) -> AutoscalerView:
    meta, spec = body["metadata"], body.get("spec") or {}
    annotations = meta.get("annotations") or {}
    original = annotations.get(ORIGINAL_MIN)
    ref = spec.get("scaleTargetRef") or {}
    is_deployment = ref.get("kind") == "Deployment" and str(ref.get("apiVersion", "apps/v1")).startswith(
        "apps/"
    )
    return AutoscalerView(
        namespace=meta.get("namespace") or "",
        name=meta["name"],
        target=ref.get("name") if is_deployment else None,
        min_replicas=int(spec.get("minReplicas") or 1),
        max_replicas=int(spec.get("maxReplicas") or 1),
        floor_owner=annotations.get(FLOOR_OWNER),
        original_min=int(original) if original and original.isdigit() else None,
    )


def autoscaler_for(autoscalers: Iterable[AutoscalerView], deployment: str) -> AutoscalerView | None:
    """The HPA scaling ``deployment`` (first by name when several do, as HPAs would fight anyway)."""
    return next((a for a in sorted(autoscalers, key=lambda a: a.name) if a.target == deployment), None)


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
