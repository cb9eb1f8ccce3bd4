"""The WebServer reconciler: one level-based pass that keeps a WebServer's pods, its Service and
its PodDisruptionBudget.

Every WebServer gets one reconcile loop (``shared.controller.workqueue.Controller``, made by
``shared.controller.builder.Operator``). It is woken by changes of the WebServer itself and by
events of the pods it controls (watched through a server-side label selector, indexed by owner),
so a pod deleted by someone else is replaced at once, not at a resync. Each pass reads the
WebServer and its pods from the watch caches, finds where its rollout stands with
``.rollout`` (from the status alone: revisions, the deadline, an automatic rollback, which
it announces once, after the status recording it is written, with a Warning Event and
``webserver_rollbacks_total``), plans with ``.desired`` (or a fast rollback's
all-at-once, ``.fastrollback``, or a canary step's split, ``.canary``, judged by probes that run
beside the passes, ``.analysis``), acts through ``.api`` and writes the status from ``.status``
only when it differs from what is there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from operators.webserver import analysis, canary, desired, fastrollback, rollout, status
from operators.webserver.api import WebServerAPI
from operators.webserver.description import DESCRIPTION
from operators.webserver.schema import APP, CRD, rule_errors
from shared.api import ownership
from shared.api.errors import (
    ApiError,
    Conflict,
    ConflictError,
    Failure,
    Invalid,
    NotFound,
    ReconcileError,
    TerminalError,
)
from shared.api.lru import LRU
from shared.api.validation import FieldError, SchemaValidator, name_errors
from shared.client.budgets import converge as converge_budget
from shared.client.kube import KubeClient, reason_of
from shared.client.services import converge as converge_service
from shared.controller import caches
from shared.controller.configmaps import ReferencedConfigMaps
from shared.controller.expectations import DeleteExpectations
from shared.controller.reconciler import Context, Generations, Reconciler
from shared.controller.watches import Watch

POD, SERVICE, CONFIGMAP, BUDGET = map(
    DESCRIPTION.resource, ("pods", "services", "configmaps", "poddisruptionbudgets")
)
VALIDATOR = SchemaValidator(CRD.openapi_schema())
# ConfigMap states whose digests are kept: more than the referenced ConfigMaps read at once.
DIGESTS = 256


def content_digest(body: Mapping[str, Any]) -> str:
    """A digest of a ConfigMap's content (data and binaryData), what the pods see of it."""
    content = {"data": body.get("data") or {}, "binaryData": body.get("binaryData") or {}}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def spec_check(spec: Mapping[str, Any]) -> list[FieldError]:
    """The CRD schema's errors of a spec, then its CEL rules' (once the types are right)."""
    return VALIDATOR.errors(spec) or rule_errors(spec)


class ConfigMaps:
    """The ConfigMaps the WebServers reference (any of their namespace, labelled or not), read
    by reference (``ReferencedConfigMaps``): a digest of
    each and which of the keys asked for it has, and which WebServer reads which, so a change
    wakes exactly those.

    WebServers asking for different keys of one ConfigMap make it read again for the keys not
    yet known; its digest is computed once per state (UID and resourceVersion) all the same,
    as hashing a ConfigMap of 1 MiB is most of what such a read costs."""

    def __init__(self, kube: KubeClient, kick: Callable[[str, str], None]) -> None:
        self.maps = ReferencedConfigMaps(kube, kick, self.summarize)
        self._digests: LRU[tuple[str, str], str] = LRU(DIGESTS)
        self._lock = threading.Lock()  # summaries are made in threads

    def summarize(self, body: Mapping[str, Any], want: frozenset[str]) -> tuple[str, frozenset[str]]:
        """What is kept of a referenced ConfigMap: the digest of its content and which of the
        keys ``want`` it has (not every key: a ConfigMap may hold a hundred thousand)."""
        meta = body.get("metadata") or {}
        state = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
        with self._lock:
            digest = self._digests.get(state) if all(state) else None
        if digest is None:
            digest = content_digest(body)
            with self._lock:
                self._digests.put(state, digest)
        data, binary = body.get("data") or {}, body.get("binaryData") or {}
        return digest, frozenset(k for k in want if k in data or k in binary)

    def watch(self) -> Watch:
        return self.maps.watch(CONFIGMAP.group, CONFIGMAP.version, CONFIGMAP.plural)

    def changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        self.maps.changed(event_type, body)

    def forget(self, namespace: str, name: str) -> None:
        self.maps.refer(namespace, name, ())

    async def lookup(self, namespace: str, name: str, refs: Mapping[str, set[str]]) -> tuple[str, str | None]:
        """The digest of the referenced ConfigMaps' content ("" for none) and what is missing."""
        self.maps.refer(namespace, name, refs)
        if not refs:
            return "", None
        digests: dict[str, str] = {}
        missing: list[str] = []
        for cm, keys in sorted(refs.items()):
            try:
                seen = await self.maps.read(namespace, cm, frozenset(keys))
            except ApiError as exc:
                missing.append(f"ConfigMap {cm} could not be read: {reason_of(exc)}")
                continue
            if seen is None:
                missing.append(f"ConfigMap {cm} not found")
                continue
            absent = sorted(keys - seen[1])
            if absent:
                missing.append(f"ConfigMap {cm} has no key {', '.join(absent)}")
            digests[cm] = seen[0]
        config_hash = hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()[:16]
        return config_hash, "; ".join(missing) or None


class WebServerReconciler(Reconciler):
    """The pass: the module docstring, then below. Its dependencies come in ``ctx``.

    A WebServer may reference any ConfigMap of its namespace: ConfigMaps are watched as metadata
    only, and the referenced ones read when a pass needs them (``shared.controller.configmaps``);
    the operator keeps a digest of each and which of the keys asked for it has, never the data, and
    a change wakes exactly the WebServers that read it (``ConfigMaps``). A referenced
    ConfigMap that is not there stops the pass from touching the pods and says so in
    ``ReplicaFailure``: a pod created without it would wait in ContainerCreating (a volume) or
    CreateContainerConfigError (an env reference) for as long as it is missing.
    """

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.api = WebServerAPI(ctx.kube, ctx.statuses)
        self.expectations: DeleteExpectations[desired.PodView] = DeleteExpectations()
        self.pods = caches.OwnerCache(desired.pod_view)
        self.services = caches.OwnerCache(desired.service_view)
        self.budgets = caches.OwnerCache(desired.budget_view)
        self.configmaps = ConfigMaps(ctx.kube, ctx.controller.kick)
        # UID -> (generation, the schema's errors of its spec at that generation); a tuple, so
        # the usual none is the one empty tuple, not an empty list per WebServer.
        self.spec_checked: Generations[tuple[FieldError, ...]] = ctx.generations()
        self.desired_gauge = ctx.metrics.gauge("webserver_desired_replicas")
        self.ready_gauge = ctx.metrics.gauge("webserver_ready_replicas")
        self.rollbacks = ctx.metrics.counter("webserver_rollbacks_total")
        self.canary_aborts = ctx.metrics.counter("webserver_canary_aborts_total")
        self.analysis = analysis.Analyzer(ctx.controller.kick)

    def watches(self) -> Sequence[Watch]:
        return [
            self.ctx.owns(POD, self.pods),
            self.ctx.owns(SERVICE, self.services),
            self.ctx.owns(BUDGET, self.budgets),
            # Metadata only: the data of a ConfigMap is read when a WebServer references it.
            self.configmaps.watch(),
        ]

    def primary_changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        if event_type == "DELETED":  # what it read is no more kept for it
            meta = body.get("metadata") or {}
            self.configmaps.forget(meta.get("namespace") or "", meta.get("name") or "")

    def forget(self, uid: str) -> None:
        """A WebServer deleted, or replaced under its name: its pending deletes go."""
        self.expectations.forget(uid)
        self.analysis.stop(uid)

    async def spec_errors(self, uid: str, generation: int, spec: Mapping[str, Any]) -> list[FieldError]:
        """The CRD schema's errors of ``spec``, checked once per generation: the API server
        bumps it on every change of the spec, and every pod or status event of an unchanged
        WebServer runs a pass."""
        checked = self.spec_checked.known(uid, generation)
        if checked is not None:
            return list(checked)
        # The CEL rules' Python twins once the types are known to be right. In a thread: the
        # largest spec takes tens of milliseconds to check, which on the event loop would hold
        # every other namespace's passes (the thread gives the loop its turn every few ms).
        errors = await asyncio.to_thread(spec_check, spec)
        self.spec_checked.keep(uid, generation, tuple(errors))
        return errors

    async def reconcile_service(self, body: Mapping[str, Any], spec: Mapping[str, Any]) -> Failure | None:
        """Converge the optional Service; returns the failure (reason, message) if there is one."""
        meta = body["metadata"]
        try:
            done = await converge_service(
                self.api.kube,
                meta["namespace"],
                self.services.children(meta["namespace"], meta["uid"]),
                desired.service_manifest(body, spec),
                owner=body,
            )
        except ConflictError as exc:
            return Failure(exc.reason, str(exc))
        except Exception as exc:
            return Failure("FailedService", reason_of(exc))
        for reason, message in done:
            self.ctx.event(body, reason, message)
        return None

    async def reconcile_budget(self, body: Mapping[str, Any], spec: Mapping[str, Any]) -> Failure | None:
        """Converge the PodDisruptionBudget; returns the failure (reason, message) if there is one."""
        meta = body["metadata"]
        try:
            done = await converge_budget(
                self.api.kube,
                meta["namespace"],
                self.budgets.children(meta["namespace"], meta["uid"]),
                desired.budget_manifest(body, spec),
                owner=body,
                seen=lambda answer: self.budgets.observe("MODIFIED", answer),
            )
        except ConflictError as exc:
            return Failure(exc.reason, str(exc))
        except Exception as exc:
            return Failure("FailedPodDisruptionBudget", reason_of(exc))
        for reason, message in done:
            self.ctx.event(body, reason, message)
        return None

    async def adopt_orphans(self, body: Mapping[str, Any]) -> Failure | None:
        """Take over the pods a deleted WebServer of this name left without a controller."""
        meta = body["metadata"]
        adopted: list[str] = []
        for orphan in self.pods.orphans(meta["namespace"], meta["name"]):
            if orphan.deleting:
                continue
            try:
                self.pods.observe("MODIFIED", await self.api.adopt_pod(meta["namespace"], orphan, body))
            except ApiError as exc:
                if isinstance(
                    exc, (NotFound, Conflict, Invalid)
                ):  # gone, or re-created under the name: not that orphan
                    continue
                return Failure("FailedAdopt", f"adopting {orphan.name}: {reason_of(exc)}")
            adopted.append(orphan.name)
        if adopted:
            self.ctx.event(body, "AdoptedPods", f"Adopted pods: {', '.join(adopted)}")
        return None

    async def claim(self, body: Mapping[str, Any], pod_name: str) -> str | None:
        """A create of ``pod_name`` answered AlreadyExists: ours (a stale view), an orphan to adopt, or
        someone else's. Returns why the name cannot be used now, or None when it is ours."""
        meta = body["metadata"]
        pod = await self.api.get_pod(meta["namespace"], pod_name)
        if pod is None:
            return f"pod {pod_name} was being deleted; retrying"
        if ownership.classify(pod, body, APP) is ownership.Holder.ORPHAN:
            pod = await self.api.adopt_pod(meta["namespace"], caches.orphan_of(pod), body)
        if ownership.classify(pod, body, APP) is ownership.Holder.OURS:
            self.pods.observe("MODIFIED", pod)  # write-through: the next pass counts it
            return None
        state = "terminating" if pod["metadata"].get("deletionTimestamp") else "not ours"
        # The pod's own events wake this WebServer by name (handlers.pod_changed) when it goes.
        return (
            f"pod {pod_name} exists, {state}, held by {ownership.holder(pod)}; retrying when the name is free"
        )

    async def create_pods(
        self,
        body: Mapping[str, Any],
        spec: Mapping[str, Any],
        create_slots: list[int],
        config_hash: str = "",
        tpl: Mapping[str, Any] | None = None,
    ) -> Failure | None:
        """Create the pods in slow-start batches; returns the failure, if any."""
        namespace = body["metadata"]["namespace"]
        slots = list(create_slots)
        created: list[str] = []
        failure: Failure | None = None
        for size in desired.slow_start_batches(len(slots)):
            batch, slots = slots[:size], slots[size:]
            manifests = [desired.pod_manifest(body, spec, s, config_hash, tpl) for s in batch]
            results = await asyncio.gather(
                *(self.api.create_pod(namespace, m) for m in manifests), return_exceptions=True
            )
            for r in results:
                if isinstance(r, dict):
                    # Write-through: the next pass counts it even if the watch has not shown it
                    # yet (else it would create it again, get AlreadyExists and read it back).
                    self.pods.observe("ADDED", r)
                    created.append(r["metadata"]["name"])
            errs = [reason_of(r) for r in results if isinstance(r, BaseException)]
            for m, r in zip(manifests, results, strict=True):
                if r is None:  # AlreadyExists
                    try:
                        why = await self.claim(body, m["metadata"]["name"])
                    except ApiError as exc:
                        why = f"checking {m['metadata']['name']}: {reason_of(exc)}"
                    if why is not None:
                        errs.append(why)
            if errs:
                # Like the ReplicaSet controller: stop at the first failing batch, skip the rest.
                failure = Failure("FailedCreate", errs[0])
                break
        if created:
            self.ctx.event(body, "SuccessfulCreate", f"Created pods: {', '.join(created)}")
        return failure

    def plan_pods(
        self,
        owner: tuple[str, str, str],
        *,
        spec: Mapping[str, Any],
        current: Mapping[str, Any] | None,
        observed: Sequence[desired.PodView],
        config_hash: str,
        now: Any,
    ) -> tuple[rollout.Rollout, desired.Plan, canary.CanaryState | None, list[int], dict[str, Any] | None]:
        """Where the rollout stands and what to do with the pods: the rolling update's plan, or
        all at once for a fast rollback (``.fastrollback``), or a canary step's split
        (``.canary``: its stable pods, created from the stable template, come apart),
        judged by its analysis (``.analysis``: a failure aborts it). ``owner``: namespace,
        name, UID."""
        uid = owner[2]
        recorded = (current or {}).get("canary")
        hold = canary.holding(spec, recorded)
        abort = self.analysis_failed(uid, recorded)
        track = rollout.track(
            spec, desired.template(spec, config_hash), current, observed, now, hold=hold, abort=abort
        )
        moves = fastrollback.fast_spec(spec) if track.manual else spec
        plan = desired.plan(
            owner[1], moves, observed, config_hash, now, thash=track.hash, paused=track.paused
        )
        opts = analysis.options(spec)
        step = canary.advance(
            spec,
            track.history,
            recorded,
            observed,
            now,
            target_hash=track.hash,
            rollback=track.rollback is not None,
            gate=(lambda revision, at: self.analysis_passed(uid, revision, at)) if opts else None,
        )
        if step is None or step.promoted or track.paused:
            self.analysis.stop(uid)
            return track, plan, step, [], None
        figures = self.analyze(
            owner, spec=spec, step=step, observed=observed, canary_tpl=track.template, opts=opts
        )
        split = canary.plan(owner[1], spec, observed, step, now)
        return (
            track,
            desired.Plan(create_slots=split.canary_slots, delete=split.delete),
            step,
            split.stable_slots,
            figures,
        )

    def analyze(
        self,
        owner: tuple[str, str, str],
        *,
        spec: Mapping[str, Any],
        step: canary.CanaryState,
        observed: Sequence[desired.PodView],
        canary_tpl: Mapping[str, Any],
        opts: dict[str, Any] | None,
    ) -> dict[str, Any] | None:
        """Probe the canary and stable pods during a weight step with analysis; its figures."""
        steps = canary.steps(spec)
        if opts is None or "weight" not in steps[step.step]:
            self.analysis.stop(owner[2])
            return None
        ports = {"canary": int(canary_tpl["port"]), "stable": int(step.stable_template["port"])}
        hashes = {"canary": step.canary_hash, "stable": step.stable_hash}
        targets = {
            group: [
                f"http://{f'[{p.ip}]' if ':' in p.ip else p.ip}:{ports[group]}{opts['path']}"
                for p in observed
                if p.active and p.ready and p.ip and p.template_hash == thash
            ]
            for group, thash in hashes.items()
        }
        got = self.analysis.observe(owner[2], owner[:2], (step.revision, step.step), targets, opts)
        verdict, message = analysis.judge(*got, opts)
        return {
            "step": step.step,
            "canary": got[0].status(),
            "stable": got[1].status(),
            "verdict": {True: "Pass", False: "Fail", None: "Pending"}[verdict],
            "message": message,
        }

    def analysis_passed(self, uid: str, revision: int, step: int) -> bool:
        run = self.analysis.runs.get(uid)
        return (
            run is not None
            and run.key == (revision, step)
            and analysis.judge(*run.figures(), run.opts)[0] is True
        )

    def analysis_failed(self, uid: str, recorded: Mapping[str, Any] | None) -> str | None:
        """The figures of a failed analysis of the step the last pass recorded, or None."""
        run = self.analysis.runs.get(uid)
        if run is None or not recorded or run.key != (recorded.get("revision"), recorded.get("step")):
            return None
        verdict, message = analysis.judge(*run.figures(), run.opts)
        if verdict is not False:
            return None
        self.analysis.stop(uid)
        return message

    async def create_planned(  # noqa: PLR0917 -- the pass's plan, in its parts
        self,
        body: Mapping[str, Any],
        spec: Mapping[str, Any],
        plan: desired.Plan,
        track: rollout.Rollout,
        step: canary.CanaryState | None,
        stable_slots: list[int],
        config_hash: str,
    ) -> Failure | None:
        """Create the planned pods of the template to run, then a canary step's stable pods
        from the stable revision's template; returns the first failure."""
        failure = None
        if plan.create_slots:
            failure = await self.create_pods(body, spec, plan.create_slots, config_hash, track.template)
        if stable_slots and failure is None and step is not None:
            failure = await self.create_pods(body, spec, stable_slots, config_hash, step.stable_template)
        return failure

    def announce(self, body: Mapping[str, Any], track: rollout.Rollout) -> None:
        """The Events of a rollback this pass started, after the status recording it is written."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if track.rolled_back is not None:
            # Said once, after the status that records the rollback is written: a write that
            # fails (a conflict, the API server away) raises, and the next pass, finding no
            # rollback in the status, decides it again and says it then, not twice.
            aborted = "analysis" in (track.rollback or {})
            reason = "CanaryAborted" if aborted else "RolledBack"
            self.ctx.event(body, reason, track.rolled_back, "Warning")
            (self.canary_aborts if aborted else self.rollbacks).labels(namespace, name).inc()
        if track.fast is not None:
            self.ctx.event(body, "FastRollback", track.fast, "Normal")

    async def reconcile(self, body: Mapping[str, Any]) -> float | None:
        meta, spec = body["metadata"], dict(body.get("spec") or {})
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        generation = meta.get("generation", 0)
        now = self.ctx.clock.now()
        current = self.api.status.current(body)

        service = bool((spec.get("service") or {}).get("enabled"))
        errors = await self.spec_errors(uid, generation, spec) + name_errors(name, service=service)
        errors += fastrollback.errors(spec, current)  # a rollbackTo the history cannot run
        if errors:
            message = "; ".join(map(str, errors))
            if await self.api.status.write(
                body, status.invalid(errors=errors, generation=generation, current=current, now=now)
            ):
                self.ctx.event(body, "InvalidSpec", message, "Warning")
            raise TerminalError("InvalidSpec", message)  # the spec's next change runs a pass

        failure = await self.adopt_orphans(body)
        observed = self.expectations.apply(uid, self.pods.children(namespace, uid))
        config_hash, missing = await self.configmaps.lookup(namespace, name, desired.config_refs(spec))
        track, plan, step, stable_slots, figures = self.plan_pods(
            (namespace, name, uid),
            spec=spec,
            current=current,
            observed=observed,
            config_hash=config_hash,
            now=now,
        )
        if missing is not None:
            # Pods of this template could not start: leave every pod as it is until it exists.
            plan = desired.Plan()
            failure = failure or Failure("ConfigMapNotFound", missing)

        if plan.delete:
            self.expectations.expect(uid, plan.delete)
            pod_uids = {p.name: p.uid for p in observed}
            results = await asyncio.gather(
                *(self.api.delete_pod(namespace, n, pod_uids.get(n, "")) for n in plan.delete),
                return_exceptions=True,
            )
            failed = [
                (n, r) for n, r in zip(plan.delete, results, strict=True) if isinstance(r, BaseException)
            ]
            deleted = [n for n, r in zip(plan.delete, results, strict=True) if r is True]
            if deleted:
                self.ctx.event(
                    body,
                    "SuccessfulDelete",
                    f"Deleted pods: {', '.join(deleted)}",
                )
            if failed:
                self.expectations.cancel(uid, [n for n, _ in failed])
                failure = Failure("FailedDelete", f"deleting {failed[0][0]}: {reason_of(failed[0][1])}")

        if failure is None:
            failure = await self.create_planned(body, spec, plan, track, step, stable_slots, config_hash)

        # Whatever happened to the pods: a quota refusing one more pod must not keep the Service
        # from being created, deleted (enabled: false) or changed (a paid LoadBalancer).
        for child_failure in (
            await self.reconcile_service(body, spec),
            await self.reconcile_budget(body, spec),
        ):
            if child_failure is not None and failure is not None:
                self.ctx.event(body, child_failure[0], child_failure[1], "Warning")
            failure = failure or child_failure

        new_status = status.compute(
            name=name,
            spec=spec,
            generation=generation,
            pods=observed,
            plan=plan,
            failure=failure,
            current=current,
            now=now,
            config_hash=config_hash,
            rollout=track,
            canary=step,
            analysis=figures,
        )
        await self.api.status.write(body, new_status)
        self.announce(body, track)
        self.desired_gauge.labels(namespace, name).set(int(spec.get("replicas") or 0))
        self.ready_gauge.labels(namespace, name).set(new_status.get("readyReplicas") or 0)
        # The series exists from the first pass at 0, so increase() and alerts see the first rollback.
        self.rollbacks.labels(namespace, name)
        self.canary_aborts.labels(namespace, name)
        if failure is not None:
            self.ctx.event(body, failure.reason, failure.message, "Warning")
            raise ReconcileError(*failure)
        # minReadySeconds: look again when the next ready pod becomes available; a rollout in
        # progress: when its deadline passes (no pod event may come: a pod that never starts).
        waits = [
            desired.next_available_in(spec, observed, now),
            rollout.deadline_in(track, spec, now),
            step.wake_in if step is not None else None,  # a timed canary pause ends
        ]
        return min((w for w in waits if w is not None), default=None)
