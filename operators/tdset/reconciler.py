"""The TDSet reconciler: one level-based pass that keeps a TDSet's Deployment on its schedule.

A TDSet scales either a Deployment of its own (``spec.container``) or a workload the user runs
(``spec.scaleTargetRef``: written through ``/scale`` and read through it, or for the apps kinds
from the object whose fields their ``/scale`` serves; claimed but never owned, given
back by ``.sweeps``; ``.target``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from operators.tdset import desired, schedule, status
from operators.tdset import target as scaletarget
from operators.tdset.api import StoredTemplates, TDSetAPI
from operators.tdset.description import DESCRIPTION, SCALER_LABEL
from operators.tdset.desired import AutoscalerView, DeploymentView
from operators.tdset.schema import APP, CRD
from operators.tdset.sweeps import Autoscalers, FloorSweeps, Held, TargetKey, TargetSweeps, target_key
from operators.tdset.targets import (
    CONFLICT_RECHECK,
    UID_CHECKED,
    FoundTarget,
    KnownTarget,
    TargetConflictError,
    TargetError,
)
from shared.api import conditions, ownership
from shared.api.errors import (
    ApiError,
    Conflict,
    ConflictError,
    Failure,
    Forbidden,
    NotFound,
    ReconcileError,
    SupersededError,
    TerminalError,
)
from shared.api.services import view as service_view
from shared.api.validation import FieldError, SchemaValidator, name_errors
from shared.client.kube import KubeClient, reason_of
from shared.client.services import converge as converge_service
from shared.controller import caches
from shared.controller.configmaps import ReferencedConfigMaps
from shared.controller.expectations import PatchExpectations
from shared.controller.reconciler import Context, Generations, Reconciler, Store
from shared.controller.watches import Watch

logger = logging.getLogger("operators.tdset")
DEPLOYMENT, SERVICE, AUTOSCALER, CONFIGMAP = map(
    DESCRIPTION.resource, ("deployments", "services", "horizontalpodautoscalers", "configmaps")
)
VALIDATOR = SchemaValidator(CRD.openapi_schema())


class DeploymentConflictError(ConflictError):
    """A Deployment with the TDSet's name exists and belongs to someone else."""

    reason = "DeploymentConflict"


def _same_degraded(previous: Mapping[str, Any], failure: Failure) -> bool:
    """Whether the last status already says ``Degraded`` for ``failure`` (its Event is out)."""
    before = conditions.get(previous.get("conditions"), conditions.DEGRADED) or {}
    return (before.get("status"), before.get("reason"), before.get("message")) == ("True", *failure)


Holidays = tuple[frozenset[datetime.date], list[str]]


def holiday_summary(body: Mapping[str, Any], want: frozenset[str]) -> Holidays:
    """What is kept of a holiday ConfigMap: its dates, parsed (at most
    ``.schedule.MAX_CONFIGMAP_DATES``), and what could not be read; never its data."""
    return schedule.parse_holiday_data(body.get("data"))


class HolidayMaps:
    """The holiday ConfigMaps the TDSets reference (any of their namespace, labelled or not),
    read by reference and parsed off the event loop once per change
    (``ReferencedConfigMaps``), and which TDSet reads which,
    so a change wakes exactly those."""

    def __init__(self, kube: KubeClient, kick: Callable[[str, str], None]) -> None:
        self.maps = ReferencedConfigMaps(kube, kick, holiday_summary)

    def watch(self) -> Watch:
        return self.maps.watch(CONFIGMAP.group, CONFIGMAP.version, CONFIGMAP.plural)

    def changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        self.maps.changed(event_type, body)

    def forget(self, namespace: str, name: str) -> None:
        self.maps.refer(namespace, name, ())

    async def dates(
        self, namespace: str, name: str, spec: Mapping[str, Any]
    ) -> tuple[frozenset[datetime.date], str | None]:
        """The dates of the TDSet's holiday ConfigMap (none without one), and what is wrong."""
        ref = ((spec.get("holidays") or {}).get("configMapRef") or {}).get("name")
        self.maps.refer(namespace, name, [str(ref)] if ref else [])
        if not ref:
            return frozenset(), None
        try:
            parsed = await self.maps.read(namespace, str(ref))
        except ApiError as exc:
            return frozenset(), (
                f"spec.holidays.configMapRef: ConfigMap {ref} could not be read ({reason_of(exc)}); "
                "its dates are not applied"
            )
        if parsed is None:
            return frozenset(), (
                f"spec.holidays.configMapRef: no ConfigMap {ref} in namespace {namespace}; "
                "its dates are not applied"
            )
        found, problems = parsed
        if problems:
            return found, f"ConfigMap {ref}: " + "; ".join(problems)
        return found, None


@dataclass
class Converged:
    """What a pass did to the children: the Deployment seen, the replicas aimed at, whether it
    scaled, and the failure to report."""

    deployment: DeploymentView | None
    target: int
    scaled: bool = False
    failure: Failure | None = None


class TDSetReconciler(Reconciler):
    """The pass: the module docstring, then below. Its dependencies come in ``ctx``.

    Every TDSet gets one reconcile loop (``shared.controller.workqueue.Controller``, made by
    ``shared.controller.builder.Operator``), woken by changes of the TDSet, of the Deployment and
    Service it controls (server-side label selectors, indexed by owner), of any
    HorizontalPodAutoscaler in the watched namespaces (an HPA is the user's, not ours, so it is
    indexed by the Deployment it targets), of the holiday ConfigMaps it reads (any of its namespace,
    watched as metadata only and read by reference, ``HolidayMaps``) and by time: each pass
    returns the delay to the calendar's next transition of any layer (capped by ``intervalMint``),
    so a boundary is acted on when it is reached, not at the next poll.

    Each pass is level-based: desired replicas come from ``.schedule.decide`` with the
    operator's clock (``shared.api.clock.Clock``) and the TDSet's override annotation (the
    layered calendar: overrides, holidays, windows, default, pre-warm); children from the watch
    caches; the status is written whole and only when it changed.
    """

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.clock = ctx.clock
        self.api = TDSetAPI(ctx.kube, ctx.statuses)
        self.expectations = PatchExpectations()
        self.stored_templates = StoredTemplates()
        self.deployments = caches.OwnerCache(desired.deployment_view)
        self.services = caches.OwnerCache(service_view)
        # An HPA's events wake the TDSet of its target's name.
        self.autoscalers: Autoscalers = {}
        # What each TDSet points at now, from its latest body: uid -> (namespace, name, target).
        self.wanted: Store[tuple[str, str, TargetKey | None]] = ctx.store()
        # What each TDSet's last pass found of its scale target (uid -> KnownTarget).
        self.known_targets: Store[KnownTarget] = ctx.store()
        # The spec's errors by TDSet, for the generation checked (uid -> (generation, errors)).
        self.checked_specs: Generations[tuple[FieldError, ...]] = ctx.generations()
        # The notes on overlapping windows by TDSet, for the generation (uid -> (generation, notes)).
        self.overlap_notes: Generations[tuple[str, ...]] = ctx.generations()
        # The Event of a flip, posted by the pass that follows it (uid -> (reason, message)).
        self.flip_events: Store[tuple[str, str]] = ctx.store()
        self.floor_sweeps = FloorSweeps(
            self.api, self.autoscalers, ctx.controller.uids, ctx.active, self.scales
        )
        self.target_sweeps = TargetSweeps(
            self.api.targets,
            self.wants,
            ctx.active,
            ctx.namespaces,
            ctx.event,
            autoscaled=self.autoscaled,
            released=self.target_released,
        )
        self.holidays = HolidayMaps(ctx.kube, ctx.controller.kick)
        self.desired_gauge = ctx.metrics.gauge("tdset_desired_replicas")
        self.scheduled_gauge = ctx.metrics.gauge("tdset_scheduled_replicas")
        self.degraded_gauge = ctx.metrics.gauge("tdset_degraded")

    def watches(self) -> Sequence[Watch]:
        hpa = AUTOSCALER
        return [
            self.ctx.owns(DEPLOYMENT, self.deployments),
            self.ctx.owns(SERVICE, self.services),
            Watch(hpa.group, hpa.version, hpa.plural, self.autoscaler_changed),
            # Metadata only: a holiday ConfigMap's data is read when a TDSet references it.
            self.holidays.watch(),
        ]

    def autoscaler_changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        view = desired.autoscaler_view(body)
        key = (view.namespace, view.name)
        old = self.autoscalers.pop(key, None)
        if event_type != "DELETED":
            self.autoscalers[key] = view
        for name in {old.target if old else None, view.target} - {None}:
            self.ctx.controller.kick(view.namespace, str(name))  # the TDSet of the Deployment's name
        scaled = {old.scales if old else None, view.scales} - {None}
        for namespace, tdset, wanted in list(self.wanted.values()):
            if wanted is not None and namespace == view.namespace and wanted[1:] in scaled:
                self.ctx.controller.kick(namespace, tdset)  # the TDSets whose scaleTargetRef it scales
        if event_type != "DELETED" and view.floor_owner is not None:
            self.floor_sweeps.request()

    def primary_changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Keep what each TDSet points at; a reference changed or dropped starts a give-back."""
        meta = body.get("metadata") or {}
        uid, namespace = meta.get("uid"), meta.get("namespace") or ""
        if event_type == "DELETED":
            self.holidays.forget(namespace, meta.get("name") or "")
        if not uid or event_type == "DELETED":
            return  # forget() follows
        ref = scaletarget.ref_of(body.get("spec") or {})
        wanted = target_key(namespace, ref) if ref is not None else None
        before = self.wanted.get(uid)
        self.wanted[uid] = (namespace, meta.get("name") or "", wanted)
        if before is not None and before[2] != wanted:
            if before[2] is not None:
                self.target_sweeps.request()
            self.floor_sweeps.request()  # an HPA floor on what it scaled before goes back

    def target_released(self, key: TargetKey) -> None:
        """Wake the TDSets pointing at ``key``, now free."""
        for namespace, name, wanted in list(self.wanted.values()):
            if wanted == key:
                self.ctx.controller.kick(namespace, name)

    def autoscaled(self, key: TargetKey) -> bool:
        """Whether an HPA scales the target ``key``."""
        namespace, group, kind, name = key
        in_namespace = (a for (ns, _), a in self.autoscalers.items() if ns == namespace)
        return desired.autoscaler_for(in_namespace, name, kind, group) is not None

    def scales(self, uid: str) -> TargetKey | None:
        """What the TDSet ``uid`` scales now: its scaleTargetRef, else its own Deployment (None:
        not known)."""
        found = self.wanted.get(uid)
        if found is None:
            return None
        namespace, name, wanted = found
        return wanted if wanted is not None else (namespace, "apps", "Deployment", name)

    def started(self) -> None:
        """At start-up (the builder calls it): the sweep that lists the claims left behind."""
        self.target_sweeps.request()

    def wants(self, uid: str) -> TargetKey | None:
        """The target the live TDSet ``uid`` points at now (None: none, or no such TDSet)."""
        found = self.wanted.get(uid)
        return found[2] if found is not None and uid in self.ctx.controller.uids() else None

    def forget(self, uid: str) -> None:
        """A TDSet deleted, or replaced under its name: its status and expectations go, and an HPA
        floor it raised and a target it scaled are given back (the sweeps find it no longer in the
        controller's store)."""
        self.expectations.forget(uid)
        self.stored_templates.forget(uid)
        self.floor_sweeps.request()
        self.target_sweeps.request()

    async def ensure_deployment(
        self, body: Mapping[str, Any], spec: Mapping[str, Any], replicas: int, why: str
    ) -> DeploymentView:
        """The Deployment from the cache, created when missing; raises when a stranger has the name."""
        meta = body["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        found = next((d for d in self.deployments.children(namespace, uid) if d.name == name), None)
        if found is not None:
            return found
        created = await self.api.create_deployment(
            namespace, desired.deployment_manifest(body, spec, replicas)
        )
        if created is not None:
            # Write-through: no older event of a new object can arrive after this one.
            self.deployments.observe("ADDED", created)
            self.ctx.event(
                body, "CreatedDeployment", f"Created deployment {name} with {replicas} replicas: {why}"
            )
            return desired.deployment_view(created)
        existing = await self.api.get_deployment(namespace, name)
        holder = ownership.classify(existing, body, APP)
        if holder is ownership.Holder.ORPHAN:
            # Orphaned by `kubectl delete tds --cascade=orphan`: adopt it, as the ReplicaSet
            # controller adopts its orphans (the UID in the patch is its precondition).
            existing = await self.api.patch_deployment(
                namespace, name, ownership.adoption_patch(existing, body)
            )
            self.ctx.event(body, "AdoptedDeployment", f"Adopted orphaned deployment {name}")
            holder = ownership.classify(existing, body, APP)
        if holder is not ownership.Holder.OURS:
            if existing["metadata"].get("deletionTimestamp"):
                # A deleted predecessor's (delete && apply): its deletion wakes this TDSet by name.
                raise DeploymentConflictError(
                    f"the Deployment named {name} is being deleted (controller: "
                    f"{ownership.holder(existing)}); it will be created again once it is gone"
                )
            raise DeploymentConflictError(
                f"a Deployment named {name} exists and is not controlled by this TDSet; delete or rename it"
            )
        self.deployments.observe("MODIFIED", existing)
        return desired.deployment_view(existing)

    async def scale(
        self,
        body: Mapping[str, Any],
        spec: Mapping[str, Any],
        dep: DeploymentView,
        replicas: int | None,
        *,
        previous: Mapping[str, Any],
        why: str,
    ) -> bool:
        """Patch the Deployment to the spec (and ``replicas`` unless None) and say what was done;
        whether it was patched."""
        meta = body["metadata"]
        key = (meta["uid"], "deployment")
        if self.expectations.in_flight(key, dep.fields()):
            return False
        patch = desired.deployment_patch(
            dep, spec, replicas, self.stored_templates.get(meta["uid"], dep.applied)
        )
        if patch is None:
            return False
        answer = desired.deployment_view(await self.api.patch_deployment(meta["namespace"], dep.name, patch))
        # What the API server stored, after admission: that is what the watch will show.
        self.expectations.expect(key, answer.fields())
        if "template" in patch["spec"]:
            self.stored_templates.remember(meta["uid"], desired.template_hash(spec), answer.template_fields())
            c = desired.container(spec)
            self.ctx.event(
                body,
                "UpdatedDeployment",
                f"Updated deployment {dep.name}: image {c['image']}, port {c['ports'][0]['containerPort']}, "
                f"ServiceAccount token {'mounted' if desired.automount_token(spec) else 'not mounted'}",
            )
        if "replicas" in patch["spec"]:
            before, after = dep.replicas, patch["spec"]["replicas"]
            if previous.get("autoscaler"):
                self.ctx.event(
                    body,
                    "ScaledDeployment",
                    f"Scaled deployment {dep.name} from {before} to {after}: HPA {previous['autoscaler']} "
                    f"no longer targets it; {why}",
                )
            elif previous.get("desiredReplicas") not in (None, before):
                self.ctx.event(
                    body,
                    "RevertedManualScale",
                    f"Deployment {dep.name} was scaled to {before} outside the schedule; scaled back to "
                    f"{after} ({why}). Set spec.suspend to scale by hand.",
                )
            else:
                self.ctx.event(
                    body, "ScaledDeployment", f"Scaled deployment {dep.name} from {before} to {after}: {why}"
                )
        return True

    async def set_floor(
        self,
        body: Mapping[str, Any],
        hpa: AutoscalerView,
        floor: int,
        why: str,
        *,
        held: desired.HeldBounds | None = None,
        previous: Mapping[str, Any] | None = None,
    ) -> None:
        """Hold the HPA to ``floor`` and to ``held.cap`` (or give its own maxReplicas back).

        A maxReplicas changed by hand while a cap is in force is set back (the TDSet's entry
        decides, as for replicas; its own value from before the cap comes back when the cap
        ends), with a Warning: the cap is changed in the TDSet, or the TDSet suspended.
        """
        uid = body["metadata"]["uid"]
        cap = held.cap if held is not None else None
        key = (uid, "hpa", hpa.name)
        if self.expectations.in_flight(
            key, {"min": hpa.min_replicas, "max": hpa.max_replicas}
        ) or desired.bounds_current(hpa, uid, floor, cap):
            return
        patch = desired.floor_patch(hpa, uid, floor, cap)
        await self.api.patch_autoscaler(hpa.namespace, hpa.name, patch)
        max_after = int(patch["spec"].get("maxReplicas", hpa.max_replicas))
        self.expectations.expect(key, {"min": floor, "max": max_after})
        was = ((previous or {}).get("autoscalerBounds") or {}).get("maxReplicas")
        if (
            held is not None
            and cap is not None
            and hpa.original_max is not None
            and was == cap != hpa.max_replicas
        ):
            self.ctx.event(
                body,
                "RevertedAutoscalerEdit",
                f"HPA {hpa.name} had maxReplicas set to {hpa.max_replicas} while {held.cap_from} caps it at "
                f"{cap}; set back to {cap}. Its own maxReplicas ({hpa.original_max}) comes back when "
                f"{held.cap_from} stops deciding; change the cap in the TDSet, or set spec.suspend.",
                "Warning",
            )
            return
        changed = f"minReplicas of HPA {hpa.name} from {hpa.min_replicas} to {floor}"
        if max_after != hpa.max_replicas:
            changed += f", maxReplicas from {hpa.max_replicas} to {max_after}"
        self.ctx.event(body, "SetAutoscalerFloor", f"Set {changed}: {why}")

    def _announce(
        self,
        body: Mapping[str, Any],
        previous: Mapping[str, Any],
        warnings: list[str],
        suspended: bool,
        why: str,
    ) -> None:
        """Events for what changed since the last status: new schedule warnings, suspend/resume."""
        if warnings and warnings != previous.get("warnings"):
            self.ctx.event(body, "ScheduleWarning", "; ".join(warnings), "Warning")
        was_suspended = (conditions.get(previous.get("conditions"), conditions.PROGRESSING) or {}).get(
            "reason"
        ) == "Suspended"
        if suspended != was_suspended and previous:
            self.ctx.event(
                body,
                "Suspended" if suspended else "Resumed",
                "scheduling paused: replicas are left as they are"
                if suspended
                else f"scheduling resumed: {why}",
            )

    def _announce_calendar(
        self, body: Mapping[str, Any], previous: Mapping[str, Any], decision: schedule.Decision
    ) -> None:
        """A Warning when the override annotation or the holidays' ConfigMap becomes unreadable,
        once per change of it."""
        degraded = conditions.get(previous.get("conditions"), conditions.DEGRADED) or {}
        for reason, error, then in (
            (status.INVALID_ANNOTATION, decision.annotation_error, "the override is ignored"),
            (status.HOLIDAYS_UNAVAILABLE, decision.holidays_error, "the calendar runs without them"),
        ):
            if error is not None and (degraded.get("reason"), degraded.get("message")) != (reason, error):
                self.ctx.event(body, reason, f"{error}; {then}", "Warning")

    async def converge_children(
        self,
        body: Mapping[str, Any],
        spec: Mapping[str, Any],
        target: int,
        hpa: AutoscalerView | None,
        *,
        previous: Mapping[str, Any],
        why: str,
        bound: float,
        held: desired.HeldBounds | None = None,
    ) -> Converged:
        """Deployment, HPA floor and Service, every write done within ``bound`` seconds (the next
        boundary): no throttled or retried request may hold the pass past it."""
        meta = body["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        suspended = bool(spec.get("suspend"))
        out = Converged(deployment=None, target=target)
        try:
            async with asyncio.timeout(max(bound, 1.0)):
                out.deployment = dep = await self.ensure_deployment(body, spec, target, why)
                if suspended:
                    out.target = dep.replicas
                replicas = None if suspended or hpa is not None else out.target
                out.scaled = await self.scale(body, spec, dep, replicas, previous=previous, why=why)
                if hpa is not None and not suspended:
                    await self.set_floor(body, hpa, out.target, why, held=held, previous=previous)
                observed = self.services.children(namespace, uid)
                current_target = next((s["targetPort"] for s in observed if s["name"] == name), None)
                wanted = desired.service_manifest(
                    body, spec, desired.service_target_port(dep, current_target)
                )
                for reason, message in await converge_service(
                    self.api.kube, namespace, observed, wanted, owner=body
                ):
                    self.ctx.event(body, reason, message)
        except SupersededError:
            raise
        except ConflictError as exc:
            out.failure = Failure(exc.reason, str(exc))
        except TimeoutError:
            out.failure = Failure(
                "FailedUpdate",
                f"the API server did not answer before the next boundary ({bound:.0f}s)",
            )
        except Exception as exc:
            out.failure = Failure("FailedUpdate", reason_of(exc))
        return out

    async def converge_target(
        self,
        body: Mapping[str, Any],
        spec: Mapping[str, Any],
        ref: scaletarget.Ref,
        replicas: int,
        hpa: AutoscalerView | None,
        *,
        previous: Mapping[str, Any],
        why: str,
        bound: float,
        held: desired.HeldBounds | None = None,
    ) -> Converged:
        """The scale target (``spec.scaleTargetRef``): found by discovery, claimed (or a conflict
        when another live TDSet holds it), scaled through ``/scale`` (or its HPA given the
        floor), every write done within ``bound`` seconds.

        Read live in every pass, not watched: a pass notices a target scaled by hand when it
        runs (each boundary, each ``intervalMint``, each change of the TDSet or of an HPA), and
        a watch of every Deployment, StatefulSet and ReplicaSet would hold the whole cluster's
        workloads in memory for the few a TDSet names (docs/operators/tdset-targets.md).
        """
        suspended = bool(spec.get("suspend"))
        out = Converged(deployment=None, target=replicas)
        uid = body["metadata"]["uid"]
        try:
            async with asyncio.timeout(max(bound, 1.0)):
                flipped = not suspended and hpa is None and await self.flip_target(body, ref, replicas, why)
                # Known again only once this pass (or the next, after a flip) has read the target.
                self.known_targets.pop(uid, None)
                if flipped:
                    out.scaled = True
                    return out
                await self.drop_own_children(body)
                found = await self.claim_target(body, ref)
                before = found.scale.replicas
                if suspended:
                    out.target = before
                elif hpa is not None:
                    await self.set_floor(body, hpa, out.target, why, held=held, previous=previous)
                elif before != out.target:
                    out.scaled = True
                    found.scale = await self.scale_target(
                        body, ref, found, out.target, previous=previous, why=why
                    )
                ready, updated, available, rolled_out = scaletarget.readiness(found.obj, found.scale)
                out.deployment = DeploymentView(
                    name=ref.name,
                    replicas=found.scale.replicas,
                    image=None,
                    port=None,
                    status_replicas=found.scale.status_replicas,
                    ready=ready,
                    updated=updated,
                    available=available,
                    rolled_out=rolled_out,
                    uid=found.claim.uid,
                )
                self.known_targets[uid] = KnownTarget(
                    ref, found.plural, found.claim.uid, found.scale.replicas
                )
        except SupersededError:
            raise
        except ConflictError as exc:
            out.failure = Failure(exc.reason, str(exc))
        except TargetError as exc:
            out.failure = Failure(exc.reason, str(exc))
        except TimeoutError:
            out.failure = Failure(
                "FailedUpdate",
                f"the API server did not answer before the next boundary ({bound:.0f}s)",
            )
        except ApiError as exc:
            if isinstance(exc, Forbidden):
                out.failure = Failure(
                    "TargetForbidden",
                    f"{reason_of(exc)}. Out of the box the operator scales Deployments, StatefulSets, "
                    "ReplicaSets and WebServers; a cluster admin allows another kind with a ClusterRole "
                    f'labelled {SCALER_LABEL}: "true" (docs/operators/tdset-targets.md)',
                )
            else:
                out.failure = Failure("FailedUpdate", reason_of(exc))
        except Exception as exc:
            out.failure = Failure("FailedUpdate", reason_of(exc))
        return out

    async def flip_target(
        self, body: Mapping[str, Any], ref: scaletarget.Ref, replicas: int, why: str
    ) -> bool:
        """A boundary's write in one request: when the TDSet's last pass held ``ref`` and left
        it at other replicas than the schedule's now, ``/scale`` is patched at once with the
        target's UID as the precondition (the API server refuses it if a Deployment, StatefulSet
        or ReplicaSet was replaced; a custom resource's ``/scale`` ignores it, so those are
        read first as before: ``UID_CHECKED``),
        without reading the object and its Scale first; whether it was.

        At a boundary shared by many TDSets the reads came first, three requests per flip
        through the client's rate limit instead of one (docs/benchmarks.md, "TDSet
        boundaries"). What they checked is checked by the pass that follows (the status comes
        from a pass of its own anyway): the claim, a target scaled by hand meanwhile (the
        schedule's replicas win either way, though the Event then names the replicas the last pass
        left rather than the hand-set ones). On a refusal (404, 409) the pass reads the target as
        usual.

        Its Event is posted by the pass that follows (``reconcile``): queued behind the
        boundary's other flips, so the API server takes the boundary's writes before the
        Events that report them."""
        known = self.known_targets.get(body["metadata"]["uid"])
        if known is None or known.ref != ref or known.replicas == replicas or ref.key[:2] not in UID_CHECKED:
            return False
        try:
            await self.api.targets.patch_scale(
                body["metadata"]["namespace"],
                known.plural,
                ref.name,
                ref.api_version,
                replicas,
                uid=known.uid,
            )
        except ApiError as exc:
            if isinstance(exc, (NotFound, Conflict)):
                return False
            raise
        self.flip_events[body["metadata"]["uid"]] = (
            "ScaledTarget",
            f"Scaled {ref} from {known.replicas} to {replicas}: {why}",
        )
        return True

    async def claim_target(self, body: Mapping[str, Any], ref: scaletarget.Ref) -> FoundTarget:
        """The target, resolved by discovery, read with its ``/scale`` and claimed for ``body``
        (unless it already is); raises when it cannot be scaled or another live TDSet holds it."""
        meta = body["metadata"]
        namespace, uid = meta["namespace"], meta["uid"]
        api = self.api.targets
        plural, unscalable = scaletarget.scale_resource(await api.discover(ref.api_version), ref)
        if plural is None:
            raise TargetError("TargetNotScalable", f"spec.scaleTargetRef: {unscalable}")
        # The claim carries the resourceVersion read: a 409 means the object changed since (its
        # controller's status write, or another TDSet's claim): read it again, once.
        for attempt in (1, 2):
            obj = await api.get(namespace, plural, ref.name, ref.api_version)
            if obj is None:
                raise TargetError("TargetNotFound", f"spec.scaleTargetRef: {ref} not found in {namespace}")
            claim = scaletarget.claim_of(obj)
            if claim.holder not in (None, uid) and claim.holder in self.ctx.controller.uids():
                raise TargetConflictError(
                    f"{ref} is scaled by TDSet {claim.holder_name} (uid {claim.holder}); one TDSet "
                    "at a time scales an object: this one leaves it alone until that one lets go"
                )
            controller = ownership.controller_of(obj)
            if controller is not None:
                what = f"{controller.get('kind')} {controller.get('name')}"
                raise TargetConflictError(
                    f"{ref} is controlled by {ownership.holder(obj)}, which sets its replicas: scaling "
                    "it too would fight that controller. This TDSet leaves it alone; point "
                    f"spec.scaleTargetRef at what controls it ({what}) instead"
                )
            if ref.key[:2] in scaletarget.OWN_FIELDS_SCALE:
                # One GET where two were (a pass polling a target that catches up reads it each time).
                scale = scaletarget.scale_of_object(obj)
            else:
                scale = scaletarget.scale_view(
                    await api.get_scale(namespace, plural, ref.name, ref.api_version)
                )
            found = FoundTarget(plural, obj, claim, scale, claimed_now=claim.holder != uid)
            if not found.claimed_now:
                break
            patch = scaletarget.claim_patch(claim, body, scale.replicas)
            try:
                found.claim = scaletarget.claim_of(
                    await api.patch(namespace, plural, ref.name, ref.api_version, patch)
                )
            except ApiError as exc:
                if isinstance(exc, Conflict) and attempt == 1:
                    continue
                raise
            taken = f"; taken over from TDSet {claim.holder_name}, which is gone" if claim.holder else ""
            self.ctx.event(
                body,
                "ClaimedTarget",
                f"Scaling {ref} from now on; its replicas ({found.claim.original}) are given back when "
                f"this TDSet is deleted or points elsewhere{taken}",
            )
            break
        self.target_sweeps.claimed(target_key(namespace, ref), Held(uid, ref.api_version, plural))
        return found

    async def scale_target(
        self,
        body: Mapping[str, Any],
        ref: scaletarget.Ref,
        found: FoundTarget,
        replicas: int,
        *,
        previous: Mapping[str, Any],
        why: str,
    ) -> scaletarget.ScaleView:
        """Write ``replicas`` through ``/scale`` and say so; the Scale the API server answered."""
        namespace = body["metadata"]["namespace"]
        before = found.scale.replicas
        answer = await self.api.targets.patch_scale(
            namespace, found.plural, ref.name, ref.api_version, replicas
        )
        if not found.claimed_now and previous.get("desiredReplicas") not in (None, before):
            self.ctx.event(
                body,
                "RevertedManualScale",
                f"{ref} was scaled to {before} outside the schedule; scaled back to {replicas} ({why}). "
                "Set spec.suspend to scale by hand.",
            )
        else:
            self.ctx.event(body, "ScaledTarget", f"Scaled {ref} from {before} to {replicas}: {why}")
        return scaletarget.scale_view(answer)

    async def drop_own_children(self, body: Mapping[str, Any]) -> None:
        """A TDSet that went from ``container`` to ``scaleTargetRef`` no longer has a Deployment
        or Service of its own: delete them (UID precondition: only the one it controls)."""
        meta = body["metadata"]
        namespace, uid = meta["namespace"], meta["uid"]
        for dep in self.deployments.children(namespace, uid):
            await self.api.delete_deployment(namespace, dep.name, dep.uid)
            self.ctx.event(
                body, "DeletedDeployment", f"Deleted deployment {dep.name}: spec.scaleTargetRef replaces it"
            )
        observed = self.services.children(namespace, uid)
        if observed:
            for reason, message in await converge_service(
                self.api.kube, namespace, observed, None, owner=body
            ):
                self.ctx.event(body, reason, message)

    async def write_status(
        self, body: Mapping[str, Any], new_status: Mapping[str, Any], bound: float
    ) -> None:
        """A throttled (429) or failing status write is retried like any failure of the pass: with
        backoff, but never later than the next boundary (``bound`` seconds)."""
        try:
            async with asyncio.timeout(max(bound, 1.0)):
                await self.api.status.write(body, new_status)
        except SupersededError:
            raise
        except Exception as exc:
            raise ReconcileError(
                "FailedStatusUpdate", f"writing the status: {reason_of(exc) or 'no answer'}", bound
            ) from exc

    def spec_errors(self, uid: str, generation: int, name: str, spec: Mapping[str, Any]) -> list[FieldError]:
        """What is wrong with the spec: a function of the name and the spec alone, so checked
        once per generation: at a boundary shared by many TDSets, every pass would otherwise
        validate a spec that has not changed."""
        checked = self.checked_specs.known(uid, generation)
        if checked is not None:
            return list(checked)
        errors = (
            VALIDATOR.errors(spec) or scaletarget.spec_errors(spec) or schedule.check(spec)
        ) + name_errors(name, service=bool(spec.get("service")))
        return list(self.checked_specs.keep(uid, generation, tuple(errors)))

    def autoscaler_of(self, namespace: str, name: str, ref: scaletarget.Ref | None) -> AutoscalerView | None:
        """The HPA scaling what the TDSet ``name`` scales: its scaleTargetRef, else its own Deployment."""
        in_namespace = (a for (ns, _), a in self.autoscalers.items() if ns == namespace)
        if ref is None:
            return desired.autoscaler_for(in_namespace, name)
        return desired.autoscaler_for(in_namespace, ref.name, ref.kind, ref.group)

    def spec_overlaps(self, uid: str, generation: int, spec: Mapping[str, Any]) -> list[str]:
        """The notes on overlapping windows (``.schedule.overlaps``): a function of the spec
        alone, so worked out once per generation, as ``spec_errors``."""
        noted = self.overlap_notes.known(uid, generation)
        if noted is not None:
            return list(noted)
        return list(self.overlap_notes.keep(uid, generation, tuple(schedule.overlaps(spec))))

    async def plan(
        self,
        body: Mapping[str, Any],
        spec: Mapping[str, Any],
        holidays: frozenset[datetime.date],
        holidays_error: str | None,
        *,
        previous: Mapping[str, Any],
        now: datetime.datetime,
    ) -> tuple[schedule.Lookahead, schedule.Decision, float, str]:
        """The calendar at ``now``, its decision with the next transition only (all a pass that
        just writes the target needs; a pass that writes the status asks for the rest of
        status.upcoming), the bound of the pass's writes (none, however throttled or retried,
        may hold it past the next boundary of any layer) and why: ``calendar_failed`` when
        it raises."""
        meta = body["metadata"]
        try:
            ahead = schedule.Lookahead(spec, now, meta.get("annotations"), holidays)
            decision = dataclasses.replace(ahead.decision(1), holidays_error=holidays_error)
            bound = schedule.recheck_delay(spec, decision, now)
            return ahead, decision, bound, schedule.describe(spec, decision.decided)
        except Exception as exc:
            await self.calendar_failed(body, exc, previous, meta.get("generation", 0), now)

    def failed(
        self, body: Mapping[str, Any], previous: Mapping[str, Any], failure: Failure, bound: float
    ) -> NoReturn:
        """A pass's failure, already in the status: its Warning Event (a ``TargetConflict``'s
        once per change of it, not per retry), then the retry."""
        if failure.reason != TargetConflictError.reason or not _same_degraded(previous, failure):
            self.ctx.event(body, failure.reason, failure.message, "Warning")
        if failure.reason == TargetConflictError.reason:
            # Its holder going (a TDSet letting go kicks this one; a controller's owner
            # reference going wakes nothing): looked at again at least this often, with one
            # read and no write.
            bound = min(bound, CONFLICT_RECHECK)
        raise ReconcileError(failure.reason, failure.message, bound)

    async def calendar_failed(
        self,
        body: Mapping[str, Any],
        exc: Exception,
        previous: Mapping[str, Any],
        generation: int,
        now: datetime.datetime,
    ) -> NoReturn:
        """The calendar raised on a spec that passed its checks (a bug, or an input they did not
        foresee): ``Degraded`` with ``.status.CALENDAR_ERROR`` naming the calendar's fields,
        a Warning Event once per change of it, no write to the target; retried with backoff."""
        meta = body["metadata"]
        message = (
            "the calendar (spec.timeZone, spec.schedulingConfig, spec.overrides, spec.holidays, "
            f"the {schedule.OVERRIDE_ANNOTATION} annotation, the holidays' ConfigMap) cannot be "
            f"worked out: {type(exc).__name__}: {exc}; replicas are left as they are"
        )
        logger.error(f"{meta['namespace']}/{meta['name']}: {message}", exc_info=exc)
        self.degraded_gauge.labels(meta["namespace"], meta["name"]).set(1)
        before = conditions.get(previous.get("conditions"), conditions.DEGRADED) or {}
        await self.write_status(
            body,
            status.calendar_failed(message=message, generation=generation, current=previous, now=now),
            schedule.DEFAULT_RECHECK_MINUTES * 60,
        )
        if (before.get("reason"), before.get("message")) != (status.CALENDAR_ERROR, message):
            self.ctx.event(body, status.CALENDAR_ERROR, message, "Warning")
        raise ReconcileError(status.CALENDAR_ERROR, message) from exc

    async def refuse(
        self,
        body: Mapping[str, Any],
        errors: list[FieldError],
        current: Mapping[str, Any],
        now: datetime.datetime,
    ) -> NoReturn:
        """An invalid spec: ``Degraded`` with the field paths, a Warning when that is new, and a
        ``TerminalError`` (no retry: the spec's next change runs a pass)."""
        meta = body["metadata"]
        self.degraded_gauge.labels(meta["namespace"], meta["name"]).set(1)
        message = "; ".join(map(str, errors))
        generation = meta.get("generation", 0)
        if await self.api.status.write(
            body, status.invalid(errors=errors, generation=generation, current=current, now=now)
        ):
            self.ctx.event(body, "InvalidSpec", message, "Warning")
        raise TerminalError("InvalidSpec", message)

    async def reconcile(self, body: Mapping[str, Any]) -> float | None:
        meta, spec = body["metadata"], dict(body.get("spec") or {})
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        generation = meta.get("generation", 0)
        now = self.clock.now()
        current = previous = self.api.status.current(body)
        if flipped := self.flip_events.pop(uid, None):
            self.ctx.event(body, *flipped)

        errors = self.spec_errors(uid, generation, name, spec)
        if errors:
            await self.refuse(body, errors, current, now)

        holidays, holidays_error = await self.holidays.dates(namespace, name, spec)
        ahead, decision, bound, why = await self.plan(
            body, spec, holidays, holidays_error, previous=previous, now=now
        )
        warnings = list(decision.warnings)
        suspended = bool(spec.get("suspend"))
        ref = scaletarget.ref_of(spec)
        hpa = self.autoscaler_of(namespace, name, ref)
        target = decision.replicas
        held = None
        if hpa is not None and not suspended:
            bounds = decision.decided.bounds if decision.decided is not None else schedule.Bounds()
            held = desired.autoscaler_bounds(decision.replicas, bounds, hpa)
            target = held.floor
            if held.clamp:
                warnings.append(held.clamp)
        if ref is None:
            self.known_targets.pop(uid, None)
            done = await self.converge_children(
                body, spec, target, hpa, previous=previous, why=why, bound=bound, held=held
            )
        else:
            done = await self.converge_target(
                body, spec, ref, target, hpa, previous=previous, why=why, bound=bound, held=held
            )
        dep, target, scaled, failure = done.deployment, done.target, done.scaled, done.failure

        if scaled and failure is None:
            # The schedule's write first, the report after: the status (and the Events compared
            # with it) comes from a pass of its own, queued behind the passes already due. At a
            # boundary shared by 1000 TDSets every Deployment patch then goes out before their
            # status writes, instead of each waiting behind those of the TDSets before it (docs/benchmarks.md:
            # p99 lag 39 s before).
            return 0.0
        try:
            decision = dataclasses.replace(ahead.decision(schedule.UPCOMING), holidays_error=holidays_error)
        except Exception as exc:
            await self.calendar_failed(body, exc, previous, generation, now)
        warnings = self.spec_overlaps(uid, generation, spec) + warnings
        self._announce(body, previous, warnings, suspended, why)
        self._announce_calendar(body, previous, decision)
        new_status = status.compute(
            observed=status.Observed(
                decision=decision,
                desired=target,
                deployment=dep,
                autoscaler=hpa.name if hpa is not None else None,
                autoscaler_bounds=held.status(hpa) if held is not None and hpa is not None else None,
                suspended=suspended,
                workload=ref.kind if ref is not None else "Deployment",
                warnings=warnings,
                failure=failure,
                zone=str(spec.get("timeZone", schedule.DEFAULT_TIME_ZONE)),
            ),
            generation=generation,
            current=previous,
            now=now,
        )
        self.desired_gauge.labels(namespace, name).set(target)
        self.scheduled_gauge.labels(namespace, name).set(decision.replicas)
        self.degraded_gauge.labels(namespace, name).set(1 if failure is not None else 0)
        await self.write_status(body, new_status, bound)
        if failure is not None:
            self.failed(body, previous, failure, bound)
        # A target is not watched: while it catches up (or a pre-warm waits for it), only a poll wakes us.
        poll = status.target_recheck(new_status, decision, now) if ref is not None else None
        pending = self.expectations.next_expiry(uid)
        # The next boundary is ``bound`` seconds from ``now``, the pass's start; the work queue
        # counts the delay from the pass's end: take off what the pass took, so the timer fires
        # at the boundary, not that much after it.
        bound = max(bound - (self.clock.now() - now).total_seconds(), 0.001)
        return min(d for d in (bound, pending, poll) if d is not None)
