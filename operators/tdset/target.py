"""A TDSet's scale target (``spec.scaleTargetRef``): which object it names, the claim a TDSet
puts on it and the patches that make and undo it (pure: no I/O).

A TDSet scales a workload it did not create through its ``/scale`` subresource and never owns
it (no owner reference: deleting the TDSet must not delete the user's workload). What it changed
is remembered on the target itself, as py-kube-downscaler remembers ``downscaler/original-replicas``:

- the label :data:`HOLDER` carries the UID of the TDSet holding the target: one holder at a
  time, so a second TDSet naming the same object sees it is taken and reports a conflict
  instead of scaling against the first (the claim is written with the target's
  ``resourceVersion`` as a precondition: two first claims cannot both succeed). A label, not an
  annotation, so the operator finds every claim with one server-side selector when it starts
  (claims of TDSets deleted while it was down: `operators.tdset.sweeps.TargetSweeps`);
- the annotation :data:`ORIGINAL` the replicas the target had when first claimed (kept when a
  claim passes from a TDSet that is gone to another), and :data:`HOLDER_NAME` the holder's name
  for people reading the object.

The give-back (:func:`give_back_replicas`, :func:`release_patch`) sets ``/scale`` to the
original replicas, then drops the label and annotations, each write with the UID and the
resourceVersion it read as preconditions: a TDSet re-created under the same name that claims
the target meanwhile keeps the claim and the user's original replicas it carries (the
give-back reads the target again and finds a new holder), instead of having them dropped and
recording its own scaled replicas as the original.

Which kinds can be targets is decided by discovery, as the HPA and KEDA decide it
(:func:`scale_resource`): the kind's resource in its group-version must list a ``<plural>/scale``
subresource.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.api.validation import FieldError

HOLDER = "schedule.rs/scaled-by"  # label: UID of the TDSet holding the target
HOLDER_NAME = "schedule.rs/scaled-by-name"  # annotation: its name
ORIGINAL = "schedule.rs/original-replicas"  # annotation: the replicas before the first claim


@dataclass(frozen=True)
class Ref:
    """``spec.scaleTargetRef``."""

    api_version: str
    kind: str
    name: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies the object whatever version names it: (group, kind, name)."""
        return (self.group, self.kind, self.name)

    def __str__(self) -> str:
        return f"{self.kind} {self.name} ({self.api_version})"


def ref_of(spec: Mapping[str, Any]) -> Ref | None:
    ref = spec.get("scaleTargetRef")
    if not isinstance(ref, Mapping):
        return None
    return Ref(str(ref.get("apiVersion", "")), str(ref.get("kind", "")), str(ref.get("name", "")))


def spec_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """The CRD's CEL rules on ``container`` and ``scaleTargetRef``, checked again by the
    controller (objects stored before the rules, or a CRD applied without them)."""
    errors = []
    if ("container" in spec) == ("scaleTargetRef" in spec):
        errors.append(
            FieldError(
                "spec", "set exactly one of container (a Deployment of the TDSet's own) and scaleTargetRef"
            )
        )
    if spec.get("service") and "container" not in spec:
        errors.append(
            FieldError("spec.service", "exposes the TDSet's own pods: it needs container, not scaleTargetRef")
        )
    return errors


def scale_resource(resources: Mapping[str, Any] | None, ref: Ref) -> tuple[str | None, str]:
    """From the group-version's discovery document (an ``APIResourceList``, None when the API
    server does not serve the group-version), the plural of ``ref``'s kind if it has a
    ``/scale`` subresource; else None and why (client-go's ``DiscoveryScaleKindResolver``)."""
    if resources is None:
        return None, f"the API server serves no {ref.api_version}"
    entries = resources.get("resources") or []
    plural = next(
        (r.get("name") for r in entries if r.get("kind") == ref.kind and "/" not in str(r.get("name"))),
        None,
    )
    if plural is None:
        return None, f"the API server serves no kind {ref.kind} in {ref.api_version}"
    if not any(r.get("name") == f"{plural}/scale" for r in entries):
        return None, f"{ref.kind} ({plural}.{ref.group or 'core'}) has no scale subresource"
    return str(plural), ""


@dataclass(frozen=True)
class Claim:
    """The claim on a target object, as its metadata holds it."""

    uid: str  # the target's UID (a precondition of every patch)
    resource_version: str
    holder: str | None  # UID of the TDSet holding it
    holder_name: str | None
    original: int | None


def claim_of(obj: Mapping[str, Any]) -> Claim:
    meta = obj.get("metadata") or {}
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    original = str(annotations.get(ORIGINAL, ""))
    return Claim(
        uid=meta.get("uid") or "",
        resource_version=str(meta.get("resourceVersion") or ""),
        holder=labels.get(HOLDER) or None,
        holder_name=annotations.get(HOLDER_NAME),
        original=int(original) if original.isdigit() else None,
    )


def claim_patch(claim: Claim, owner: Mapping[str, Any], found: int) -> dict[str, Any]:
    """Take the target for ``owner``: its UID in the label, the replicas ``found`` (unless an
    earlier holder already remembered the user's own) in the annotation. The resourceVersion
    makes it fail (409) if anyone changed the object since it was read: another TDSet's claim."""
    meta = owner["metadata"]
    original = claim.original if claim.original is not None else found
    return {
        "metadata": {
            "uid": claim.uid,
            "resourceVersion": claim.resource_version,
            "labels": {HOLDER: meta["uid"]},
            "annotations": {HOLDER_NAME: meta["name"], ORIGINAL: str(original)},
        }
    }


def release_patch(claim: Claim, resource_version: str | None = None) -> dict[str, Any]:
    """Drop the claim (null deletes a key); the UID is a precondition, and the resourceVersion
    (the claim's as read, or the one the give-back's scale write answered): a claim taken
    meanwhile (a TDSet re-created under the same name) is never dropped."""
    return {
        "metadata": {
            "uid": claim.uid,
            "resourceVersion": resource_version if resource_version is not None else claim.resource_version,
            "labels": {HOLDER: None},
            "annotations": {HOLDER_NAME: None, ORIGINAL: None},
        }
    }


def give_back_replicas(claim: Claim) -> int | None:
    """The replicas to give back: the ones found when the target was first claimed."""
    return claim.original


def scale_patch(replicas: int) -> dict[str, Any]:
    return {"spec": {"replicas": replicas}}


@dataclass(frozen=True)
class ScaleView:
    """An ``autoscaling/v1`` Scale."""

    replicas: int  # spec.replicas (omitted when 0)
    status_replicas: int
    selector: str


def scale_view(scale: Mapping[str, Any]) -> ScaleView:
    spec, st = scale.get("spec") or {}, scale.get("status") or {}
    return ScaleView(
        replicas=int(spec.get("replicas") or 0),
        status_replicas=int(st.get("replicas") or 0),
        selector=str(st.get("selector") or ""),
    )


# The kinds whose /scale is their own object's fields, as the apps registry serves it (spec.replicas,
# status.replicas, spec.selector): read from the object, the Scale costs no request of its own.
# (group, kind)
OWN_FIELDS_SCALE = frozenset({("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet")})


def scale_of_object(obj: Mapping[str, Any]) -> ScaleView:
    """The Scale of a Deployment, StatefulSet or ReplicaSet (:data:`OWN_FIELDS_SCALE`) from the
    object itself: what its ``/scale`` answers, read in the same request as the object."""
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    selector = spec.get("selector") or {}
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for e in selector.get("matchExpressions") or ():
        key, op, values = e.get("key", ""), e.get("operator", ""), ",".join(sorted(e.get("values") or ()))
        terms.append(
            {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key}.get(
                op, f"!{key}"
            )
        )
    return ScaleView(
        replicas=int(spec.get("replicas") or 0),
        status_replicas=int(st.get("replicas") or 0),
        selector=",".join(terms),
    )


def readiness(obj: Mapping[str, Any], scale: ScaleView) -> tuple[int, int, bool, bool]:
    """(ready, updated, available, rolled out) of a target, from the status fields workloads
    commonly have (``readyReplicas``, ``updatedReplicas``, an ``Available`` condition,
    ``observedGeneration``); a kind without them counts its ``/scale`` status replicas."""
    meta, st = obj.get("metadata") or {}, obj.get("status") or {}
    ready = int(st.get("readyReplicas", scale.status_replicas) or 0)
    updated = int(st.get("updatedReplicas", scale.status_replicas) or 0)
    conds = st.get("conditions") or []
    available_cond = next((c for c in conds if c.get("type") == "Available"), None)
    available = (
        available_cond.get("status") == "True" if available_cond is not None else ready >= scale.replicas
    )
    observed = st.get("observedGeneration")
    rolled_out = observed is None or int(observed) >= int(meta.get("generation") or 0)
    return ready, updated, available, rolled_out
