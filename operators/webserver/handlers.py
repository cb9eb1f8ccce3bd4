"""kopf wiring of the WebServer operator: thin handlers around one reconcile pass.

Every WebServer gets one reconcile loop (:class:`shared.workqueue.Controller`). It is woken
by changes of the WebServer itself and by events of the pods it controls (watched through a
server-side label selector, indexed by owner), so a pod deleted by someone else is replaced at
once, not at a resync. Each pass is level-based: it reads the WebServer and its pods from the
watch caches, plans with :mod:`.desired`, acts through :mod:`.api` and writes the status from
:mod:`.status` only when it differs from what is there.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping
from typing import Any

import kopf

from operators.webserver import desired, status
from operators.webserver.api import DeleteExpectations, WebServerAPI
from operators.webserver.schema import APP, CRD, GROUP, PLURAL, VERSION
from shared import caches
from shared.kube import KubeClient, reason_of
from shared.runtime import Runtime
from shared.services import converge as converge_service
from shared.validation import SchemaValidator
from shared.workqueue import Controller

CONTROLLER = "webserver"
runtime = Runtime(app=APP, controllers=(CONTROLLER,), child_resources=("pods", "services"))
desired_gauge = runtime.metrics.gauge("webserver_desired_replicas")
ready_gauge = runtime.metrics.gauge("webserver_ready_replicas")
expectations = DeleteExpectations()
validator = SchemaValidator(CRD.openapi_schema())
api = WebServerAPI(KubeClient(observer=runtime.metrics.observe_request))

pods = caches.OwnerCache(desired.pod_view)
services = caches.OwnerCache(desired.service_view)
MANAGED = caches.managed_labels(APP)


class ReconcileError(Exception):
    """Some creates or deletes failed; the loop retries with backoff."""


async def reconcile_webserver(body: Mapping[str, Any]) -> float | None:
    return await reconcile(body)


# Passes start only once every watch has listed, so no pass plans from a half-filled cache.
controller = Controller(
    CONTROLLER, reconcile_webserver, metrics=runtime.metrics, gate=runtime.readiness.is_ready
)
runtime.manage(controller, api.kube)


@kopf.on.event("pods", labels=MANAGED)
def pod_changed(type: str | None, body: kopf.Body, **_: Any) -> None:
    owner = pods.observe(type, body)
    if owner is not None:
        controller.kick(owner)


@kopf.on.event("services", labels=MANAGED)
def service_changed(type: str | None, body: kopf.Body, **_: Any) -> None:
    owner = services.observe(type, body)
    if owner is not None:
        controller.kick(owner)


@kopf.on.event(GROUP, VERSION, PLURAL)
async def webserver_changed(type: str | None, body: kopf.Body, **_: Any) -> None:
    controller.observe(type, body)
    if type == "DELETED":
        uid = body["metadata"]["uid"]
        expectations.forget(uid)
        api.status.forget(uid)
        runtime.metrics.forget_object(body["metadata"]["namespace"], body["metadata"]["name"])


async def reconcile_service(body: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    done = await converge_service(
        api.kube,
        meta["namespace"],
        services.children(meta["namespace"], meta["uid"]),
        desired.service_manifest(body, spec),
    )
    for reason, message in done:
        kopf.event(body, type="Normal", reason=reason, message=message)


async def reconcile(body: Mapping[str, Any]) -> float | None:
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    namespace, name, uid, generation = meta["namespace"], meta["name"], meta["uid"], meta.get("generation", 0)
    now = datetime.datetime.now(datetime.UTC)
    current = body.get("status") or {}

    errors = validator.errors(spec)
    if errors:
        if await api.status.write(
            body, status.invalid(errors=errors, generation=generation, current=current, now=now)
        ):
            kopf.event(body, type="Warning", reason="InvalidSpec", message="; ".join(map(str, errors)))
        return None

    observed = expectations.apply(uid, pods.children(namespace, uid))
    plan = desired.plan(name, spec, observed)
    failure: tuple[str, str] | None = None

    if plan.delete:
        expectations.expect(uid, plan.delete)
        results = await asyncio.gather(
            *(api.delete_pod(namespace, n) for n in plan.delete), return_exceptions=True
        )
        failed = [(n, r) for n, r in zip(plan.delete, results, strict=True) if isinstance(r, BaseException)]
        deleted = [n for n, r in zip(plan.delete, results, strict=True) if r is True]
        if deleted:
            kopf.event(
                body, type="Normal", reason="SuccessfulDelete", message=f"Deleted pods: {', '.join(deleted)}"
            )
        if failed:
            expectations.cancel(uid, [n for n, _ in failed])
            failure = ("FailedDelete", f"deleting {failed[0][0]}: {reason_of(failed[0][1])}")

    if plan.create_slots and failure is None:
        slots = list(plan.create_slots)
        created: list[str] = []
        for size in desired.slow_start_batches(len(slots)):
            batch, slots = slots[:size], slots[size:]
            manifests = [desired.pod_manifest(body, spec, s) for s in batch]
            results = await asyncio.gather(
                *(api.create_pod(namespace, m) for m in manifests), return_exceptions=True
            )
            created += [m["metadata"]["name"] for m, r in zip(manifests, results, strict=True) if r is True]
            errs = [r for r in results if isinstance(r, BaseException)]
            if errs:
                # Like the ReplicaSet controller: stop at the first failing batch, skip the rest.
                failure = ("FailedCreate", reason_of(errs[0]))
                break
        if created:
            kopf.event(
                body, type="Normal", reason="SuccessfulCreate", message=f"Created pods: {', '.join(created)}"
            )

    if failure is None:
        try:
            await reconcile_service(body, spec)
        except Exception as exc:
            failure = ("FailedService", reason_of(exc))

    new_status = status.compute(
        name=name,
        spec=spec,
        generation=generation,
        pods=observed,
        plan=plan,
        failure=failure,
        current=current,
        now=now,
    )
    await api.status.write(body, new_status)
    desired_gauge.labels(namespace, name).set(int(spec.get("replicas") or 0))
    ready_gauge.labels(namespace, name).set(new_status.get("readyReplicas") or 0)
    if failure is not None:
        kopf.event(body, type="Warning", reason=failure[0], message=failure[1])
        raise ReconcileError(f"{failure[0]}: {failure[1]}")
    return None
