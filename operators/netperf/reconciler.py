"""The Netperf reconciler: one pass moves a Netperf's run at most one step.

Every Netperf gets one reconcile loop (``shared.controller.workqueue.Controller``, made by
``shared.controller.builder.Operator``), woken by changes of the Netperf and of its pods
and Services (server-side label selector, indexed by owner) and by time: a running test's pass
returns the delay to its deadline, so a timeout fires when it is due.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.netperf import desired, measurement, schedule, schema, status, verdicts
from operators.netperf.api import NetperfAPI
from operators.netperf.description import DESCRIPTION
from operators.netperf.desired import PodView, ServiceView
from operators.netperf.parse import ParseError, Result, parse, truncate
from operators.netperf.schema import APP, CRD, KIND, combination_errors
from shared.api import conditions, ownership, podsecurity
from shared.api.errors import ApiError, Failure, Forbidden, Invalid, ReconcileError, SupersededError
from shared.api.validation import FieldError, SchemaValidator, name_errors
from shared.client.kube import reason_of
from shared.controller import caches
from shared.controller.builder import report_failure
from shared.controller.metrics import ObjectGauge
from shared.controller.reconciler import Context, Generations, Reconciler
from shared.controller.watches import Watch

logger = logging.getLogger("operators.netperf")
POD, SERVICE = DESCRIPTION.resource("pods"), DESCRIPTION.resource("services")
VALIDATOR = SchemaValidator(CRD.openapi_schema())


def _parse_time(value: str | None) -> datetime.datetime | None:
    if not value:
        return None
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _server_timeout(server: PodView | None, seconds: int) -> Failure:
    if server is None:
        return Failure("ServerNotCreated", f"the server pod was not created within {seconds}s")
    if server.unschedulable:
        return Failure(
            "Unschedulable", f"server pod {server.name} could not be scheduled: {server.unschedulable}"
        )
    detail = f" ({server.waiting})" if server.waiting else ""
    return Failure(
        "ServerNotReady",
        f"server pod {server.name} was not Running with an IP within {seconds}s "
        f"(phase {server.phase}){detail}",
    )


def _client_timeout(client: PodView | None, seconds: int) -> Failure:
    if client is not None and client.unschedulable:
        return Failure(
            "Unschedulable", f"client pod {client.name} could not be scheduled: {client.unschedulable}"
        )
    name = client.name if client is not None else "the client pod"
    detail = f" ({client.waiting})" if client is not None and client.waiting else ""
    return Failure(
        "ClientTimeout",
        f"{name} did not finish within {seconds}s of the start{detail}; is traffic to the server "
        "blocked (e.g. by a NetworkPolicy), or is timeoutSeconds too short for samples x duration?",
    )


def _refused_for_good(exc: ApiError) -> bool:
    """A pod the API server will refuse however often it is sent: invalid, or against the
    namespace's Pod Security. (A quota's 403 is retried: pods that end free it.)"""
    return isinstance(exc, Invalid) or (
        isinstance(exc, Forbidden) and "violates PodSecurity" in reason_of(exc)
    )


def first_path_run(spec: Mapping[str, Any], run: str) -> str:
    """The pods' run key of a run's first path (compare: ``<run>-<path>``)."""
    paths = schema.paths(dict(spec))
    return desired.path_run(run, paths[0], bool(spec.get("compare")))


def claimed_spec(current: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """The spec of the run in progress: a scheduled run's as claimed (status.runSpec); a one-off
    run's from the spec without its schedule fields, so a schedule added while it runs does not
    change the samples it was started with."""
    return desired.effective(current.get("runSpec") or schedule.run_spec(body.get("spec") or {}))


def test_failure(p: Pass) -> Failure | None:
    """Why a run in Test has failed, if it has: client failed, deadline passed, server lost."""
    server, client = p.server, p.client
    if client is not None and client.failed:
        text = truncate(client.message) or "(no termination message)"
        return Failure("ClientFailed", f"netperf exited with {client.exit_code}: {text}")
    if p.remaining <= 0:
        return _client_timeout(client, p.timeout)
    if server is None or server.finished or server.deleting:
        state = "gone" if server is None else server.phase
        return Failure("ServerLost", f"server pod {p.names.server} is {state} during the test")
    return None


@dataclass
class Pass:
    """One reconcile pass over a claimed run: the Netperf, its run's pods and its deadline."""

    body: Mapping[str, Any]
    spec: dict[str, Any]
    current: dict[str, Any]
    names: desired.PodNames
    views: list[PodView]
    server: PodView | None
    client: PodView | None
    now: datetime.datetime
    timeout: int
    remaining: float
    reconciler: NetperfReconciler
    # The key of the run's pods (desired.of_run): the generation, or r<n> when scheduled; with
    # compare, <that>-<path> (desired.path_run).
    run: str
    path: str = schema.DEFAULT_PATH
    compare: bool = False
    service: ServiceView | None = None
    run_of_paths: str = ""  # a compare run's own key, without the path

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    @property
    def generation(self) -> int:
        return int(self.body["metadata"].get("generation", 0))

    async def fail(self, reason: str, message: str) -> None:
        if self.compare:
            message = f"path {self.path}: {message}"
        await self.reconciler._finish(
            self.body,
            status.error(current=self.current, reason=reason, message=message, now=self.now),
            self.views,
        )

    async def create(self, manifest: dict[str, Any], what: str) -> bool:
        """Create a pod of this run; False (and Error) when a stranger has its name, or when
        the API server refuses the pod for good (invalid, Pod Security: a retry cannot help)."""
        try:
            pod, created = await self.reconciler.api.create_pod(self.namespace, manifest)
        except ApiError as exc:
            if not _refused_for_good(exc):
                raise
            await self.fail("PodRejected", f"the API server refused {what}: {reason_of(exc)}")
            return False
        holder = ownership.classify(pod, self.body, APP)
        if holder is not ownership.Holder.OURS:
            name = manifest["metadata"]["name"]
            ref = ownership.controller_of(pod) or {}
            if holder is ownership.Holder.PREDECESSOR:
                # A deleted predecessor of the same name (delete && apply): its pod goes with it.
                # Not a conflict; retry, and its deletion wakes this Netperf (pod_changed).
                self.reconciler.ctx.event(
                    self.body,
                    "WaitingForPodName",
                    f"pod {name} still belongs to the deleted {KIND}",
                    "Warning",
                )
                raise ReconcileError(
                    "WaitingForPodName",
                    f"pod {name} still belongs to the previous {KIND} {ref['name']} (uid {ref['uid']})",
                )
            if holder is ownership.Holder.ORPHAN:
                # Left by `kubectl delete --cascade=orphan` of a predecessor: its run is not this
                # one (its results would be the old object's), so it is adopted — the one change
                # the ReplicaSet rule allows on a pod labelled for us — and deleted as ours. Its
                # deletion wakes this Netperf (pod_changed), which then creates its own.
                adopted = await self.reconciler.api.adopt_pod(self.namespace, pod, self.body)
                await self.reconciler.api.delete_pod(self.namespace, name, adopted["metadata"]["uid"])
                self.reconciler.ctx.event(
                    self.body,
                    "DeletedOrphanedPod",
                    f"Adopted and deleted orphaned pod {name} of an earlier run",
                )
                raise ReconcileError(
                    "DeletedOrphanedPod", f"pod {name} was an orphan of an earlier run; waiting for it to go"
                )
            await self.fail("PodConflict", f"a pod named {name} exists and is not ours")
            return False
        view = desired.pod_view(pod)
        if not desired.of_run(view, self.body["metadata"]["uid"], self.run):
            # Ours, but not made for this run: an orphan of a predecessor of the same name,
            # adopted and deleted, still Terminating. Its output is the old object's result;
            # wait for the name (its deletion wakes this Netperf).
            name = manifest["metadata"]["name"]
            self.reconciler.ctx.event(
                self.body,
                "WaitingForPodName",
                f"pod {name} of an earlier run is still terminating",
                "Warning",
            )
            raise ReconcileError(
                "WaitingForPodName", f"pod {name} was made for {view.created_for}'s run; waiting for it to go"
            )
        self.reconciler.pods.observe(
            "ADDED", pod
        )  # write-through: the watch may be slower than the next pass
        if created:  # else it was ours already (a restart, a lagging cache): nothing was done
            self.reconciler.ctx.event(self.body, "CreatedPod", f"Created {what}")
        return True

    async def ensure_service(self) -> ServiceView | None:
        """The service path's Service of this run, created if missing; None (and Error) when a
        Service of its name is not ours: it is left exactly as it is."""
        if self.service is not None:
            return self.service
        meta = self.body["metadata"]
        manifest = desired.service(self.body, self.spec, self.run)
        name = manifest["metadata"]["name"]
        svc, created = await self.reconciler.api.create_service(self.namespace, manifest)
        view = desired.service_view(svc)
        holder = ownership.classify(svc, self.body, APP)
        if holder is not ownership.Holder.OURS:
            if holder is ownership.Holder.PREDECESSOR:
                # A deleted predecessor's (delete && apply): the garbage collector removes it.
                raise ReconcileError(
                    "WaitingForServiceName", f"service {name} still belongs to the previous {KIND}"
                )
            await self.fail(
                "ServiceConflict",
                f"a Service named {name} exists and is not controlled by this {KIND}; it is left "
                "alone (delete or rename it, or rename the Netperf)",
            )
            return None
        if not desired.of_run(view, meta["uid"], self.run):
            raise ReconcileError("WaitingForServiceName", f"service {name} of an earlier run is still there")
        self.reconciler.services.observe("ADDED", svc)  # write-through, as for pods
        if created:
            self.reconciler.ctx.event(self.body, "CreatedService", f"Created service {name}")
        self.service = view
        return view


class NetperfReconciler(Reconciler):
    """The pass: the module docstring, then below. Its dependencies come in ``ctx``.

    The state lives in the status (phase, ``startedAt``, ``observedGeneration``, pod names) and in
    deterministic pod names, so a restarted operator continues the same run: it finds the pods in
    its cache or gets AlreadyExists when creating them. Each pass moves a run at most one step:

        no run for this generation -> claim it (Initial, startedAt) and clean up older pods
        Initial/Server -> server pod created; once Running with an IP -> client pod (Test), which
                          retries its first connection until netserver listens (see ``.desired``)
        Test -> client pod terminated -> results parsed -> Done, or Error with the raw output
        deadline passed -> Error (Unschedulable / ServerNotReady / ClientTimeout ...)
        Done/Error -> pods deleted; then nothing at all happens until the spec changes

    The path (``spec.path``, ``.desired``): ``service`` creates the run's Service before its
    server pod and points the client at its ClusterIP; ``host`` first reads the namespace's Pod
    Security label and ends the run (``HostNetworkForbidden``) where hostNetwork is forbidden. With
    ``spec.compare`` a run steps through each path in turn (``NetperfReconciler.path_done``),
    each path with its own pods (``<run>-<path>``) and deadline; the first path's result is the
    run's.

    A Netperf with ``spec.schedule`` runs the same steps once per due time instead
    (``NetperfReconciler.scheduled``; the rules are ``.schedule``'s): its runs are numbered
    (``status.run``), their pods named by that number and made from ``status.runSpec``, and each
    result goes into ``status.history`` and is judged for a regression (``NetperfReconciler.record``).
    The pass wakes at the next due time.

    The final status is written before the pods are deleted: results are never lost, and pods a
    crash left behind are deleted by the next pass (from the cache, without API reads).
    """

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.clock = ctx.clock
        self.api = NetperfAPI(ctx.kube, ctx.statuses)
        # The spec's errors by Netperf, for the generation checked.
        self.checked_specs: Generations[tuple[FieldError, ...]] = ctx.generations()
        self.pods = caches.OwnerCache(desired.pod_view)
        self.services = caches.OwnerCache(desired.service_view)
        self.finished_runs = status.FinishedRuns()
        self.tests_total = ctx.metrics.counter("netperf_tests_total")
        # Every per-object series (results, failure, regression) is derived from the status after
        # each pass (status.series): what a restarted operator or a new leader exports is what
        # the object says, and a series that no longer applies goes.
        # Prometheus' base unit is bytes; status keeps bits/s (the tutorial's speedBitsPerSec).
        self.throughput_gauge = ctx.metrics.gauge("netperf_throughput_bytes_per_second")
        self.failed_gauge = ctx.metrics.gauge("netperf_failed")
        self.result_throughput = ctx.metrics.gauge("netperf_result_throughput_bytes_per_second")
        self.result_rate = ctx.metrics.gauge("netperf_result_transactions_per_second")
        self.result_latency = ctx.metrics.gauge("netperf_result_latency_seconds")
        self.regressed_gauge = ctx.metrics.gauge("netperf_regressed")
        self.object_series = {name: ctx.metrics.gauge(name) for name in status.SERIES}

    def watches(self) -> Sequence[Watch]:
        return [self.ctx.owns(POD, self.pods), self.ctx.owns(SERVICE, self.services)]

    def primary_changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        if (result := self.finished_runs.observe(event_type, body)) is not None:
            self.tests_total.labels(result).inc()

    def spec_errors(
        self,
        uid: str,
        generation: int,
        name: str,
        *,
        raw: dict[str, Any],
        spec: dict[str, Any],
        schedule_errors: list[FieldError],
    ) -> list[FieldError]:
        """What is wrong with the spec (`raw`, and `spec` with its defaults): a function of the
        name and the spec alone, so checked once per generation."""
        checked = self.checked_specs.known(uid, generation)
        if checked is not None:
            return list(checked)
        errors = VALIDATOR.errors(raw) + name_errors(name, service=schema.requests_service(spec))
        if not errors:  # the CEL rules, for objects that reached us without them
            errors = combination_errors(raw) + schedule_errors
        return list(self.checked_specs.keep(uid, generation, tuple(errors)))

    async def _delete_pods(
        self, body: Mapping[str, Any], views: list[PodView], keep_run: str | None = None
    ) -> None:
        """Delete these pods, and the Netperf's Services (service path) but those of ``keep_run``."""
        namespace, uid = body["metadata"]["namespace"], body["metadata"]["uid"]
        for pod in views:
            if not pod.deleting and await self.api.delete_pod(namespace, pod.name, pod.uid):
                self.ctx.event(body, "DeletedPod", f"Deleted {pod.component} pod {pod.name}")
        for svc in self.services.children(namespace, uid):
            if svc.deleting or (keep_run is not None and desired.of_run(svc, uid, keep_run)):
                continue
            if await self.api.delete_service(namespace, svc.name, svc.uid):
                self.ctx.event(body, "DeletedService", f"Deleted service {svc.name}")

    def _export(self, body: Mapping[str, Any]) -> None:
        """Make the object's series what its spec and latest status say (status.series)."""
        meta = body["metadata"]
        wanted = status.series(body.get("spec") or {}, self.api.status.current(body))
        for metric, values in wanted.items():
            gauge = self.object_series[metric]
            assert isinstance(gauge, ObjectGauge)  # per object (namespace, name, ...)
            gauge.set_object(meta["namespace"], meta["name"], values)

    def record(self, body: Mapping[str, Any], new: dict[str, Any], now: datetime.datetime) -> dict[str, Any]:
        """A scheduled run's end: its entry in the history, and the regression verdict on it
        (kept only while it applies to the spec: verdicts.settled)."""
        spec = body.get("spec") or {}
        sched, _ = schedule.parse(spec)
        limit = sched.history_limit if sched is not None else schedule.DEFAULT_HISTORY
        run_spec = desired.effective(new.get("runSpec") or spec)
        measured = measurement.with_key(run_spec)
        item = schedule.entry(
            new, run=int(new["run"]), test_type=str(run_spec["testType"]), measurement=measured["key"]
        )
        prior = [h for h in new.get("history") or [] if h.get("run") != item["run"]]  # a retried write
        outcome = schedule.verdict(prior, item, schedule.settings(spec))
        new = {**new, "history": schedule.appended(prior, item, limit)}
        if outcome is None:  # an Error: no figure to judge; the verdict stands as it was
            return new
        generation = int(body["metadata"].get("generation", 0))
        new = verdicts.recorded(new, item, measured, outcome, generation=generation, now=now)
        new = verdicts.settled(spec, new, generation=generation, now=now) or new
        verdict = new.get("regression") or {}
        if verdict.get("regressed"):
            regressed = conditions.get(new["conditions"], schedule.REGRESSED)
            assert regressed is not None  # verdicts.recorded sets it
            self.ctx.event(body, "Regressed", str(regressed["message"]), "Warning")
        return new

    async def _finish(self, body: Mapping[str, Any], new: dict[str, Any], views: list[PodView]) -> None:
        """Record the end of a run, then remove its pods (in that order: results first)."""
        meta = body["metadata"]
        if new.get("scheduledTime") and new["status"] in status.FINISHED:  # a scheduled run
            new = self.record(body, new, self.clock.now())
        await self.api.status.write(body, new)
        if new["status"] == "Done":
            complete = conditions.get(new["conditions"], status.COMPLETE)
            assert complete is not None  # status.done sets every condition
            self.ctx.event(body, "TestFinished", complete["message"])
        else:
            self.ctx.event(body, "TestFailed", f"{new['reason']}: {new['message']}", "Warning")
            logger.info(f"{meta['namespace']}/{meta['name']}: test failed: {new['reason']}: {new['message']}")
        await self._delete_pods(body, views)

    async def server_step(self, p: Pass) -> float | None:
        """Initial/Server: the server pod until its container runs with an IP, then the client (not
        waiting for the readiness probe: the client retries until netserver listens)."""
        server, names = p.server, p.names
        if server is not None and server.finished:
            await p.fail("ServerFailed", f"server pod {server.name} ended: {server.phase}")
            return None
        if server is not None and server.ip and server.phase == "Running":
            return await self.start_client(p, server.ip)
        if p.remaining <= 0:
            await p.fail(*_server_timeout(server, p.timeout))
            return None
        if server is None and not await self.start_server(p):
            return None
        if p.current["status"] == "Initial":
            summary = f"waiting for server pod {names.server}"
            await self.api.status.write(
                p.body, status.phase(current=p.current, phase="Server", summary=summary, now=p.now)
            )
        return p.remaining

    async def start_server(self, p: Pass) -> bool:
        """The server pod (and the service path's Service before it); False when the run failed."""
        if p.path == "host" and (why := await self._host_network_forbidden(p.namespace)):
            await p.fail("HostNetworkForbidden", why)
            return False
        # The Service first: kube-proxy has its rules by the time the server is Ready.
        if p.path == "service" and await p.ensure_service() is None:
            return False
        return await p.create(desired.server_pod(p.body, p.spec, p.run), f"server pod {p.names.server}")

    async def start_client(self, p: Pass, server_ip: str) -> float | None:
        """The server runs: the client pod against it (or its Service), and phase Test."""
        target, fields = server_ip, {"serverIP": server_ip}
        if p.path == "service":
            svc = await p.ensure_service()
            if svc is None:
                return None
            if not svc.cluster_ip:
                raise ReconcileError("NoClusterIP", f"service {svc.name} has no ClusterIP yet")
            target = fields["serviceIP"] = svc.cluster_ip
        client = p.names.client
        if not await p.create(desired.client_pod(p.body, p.spec, target, p.run), f"client pod {client}"):
            return None
        summary = f"client pod {client} running {p.spec['testType']} against {target}"
        if p.path != schema.DEFAULT_PATH:
            summary += f" (path {p.path})"
        new = status.phase(current=p.current, phase="Test", summary=summary, now=p.now, **fields)
        await self.api.status.write(p.body, new)
        return max(p.remaining, 0.001)

    async def _host_network_forbidden(self, namespace: str) -> str | None:
        """Why the namespace's Pod Security refuses the host path's pods, if its label says so."""
        labels = await self.api.namespace_labels(namespace)
        level = podsecurity.forbids_host_network(labels or {})
        if level is None:
            return None
        return (
            f"path host runs hostNetwork pods, which namespace {namespace}'s Pod Security level "
            f"{level} ({podsecurity.ENFORCE_LABEL}) forbids; run it in a namespace enforcing "
            "privileged, or use path pod or service"
        )

    async def path_done(self, p: Pass, result: Result) -> float | None:
        """A compare run's path ended with ``result``: on to the next path, or Done with them all.

        The top-level result fields are the first path's (history and regression detection use
        them); each path's figures go to status.paths, their ratios to status.ratios."""
        paths = schema.paths(p.spec)
        index = paths.index(p.path)
        entries = [e for e in p.current.get("paths") or [] if e.get("path") != p.path]
        entries.append(status.path_entry(p.path, result, p.now))
        fields: dict[str, Any] = {"paths": entries}
        if index == 0:
            fields.update(status.result_fields(result, p.now))
        if index + 1 < len(paths):
            following = paths[index + 1]
            names = desired.pod_names(
                p.body["metadata"]["name"], desired.path_run(p.run_of_paths, following, True)
            )
            new = status.next_path(current=p.current, path=following, names=names, now=p.now, **fields)
            await self.api.status.write(p.body, new)
            self.ctx.event(
                p.body, "PathFinished", f"path {p.path}: {entries[-1]['headline']}; next: path {following}"
            )
            await self._delete_pods(p.body, p.views)  # this path's pods and Service, before the next's
            return 0.001
        ratios = status.ratios(entries)
        summary = "; ".join(f"{e['path']} {e['headline']}" for e in entries)
        if ratios:
            summary += " (" + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()) + ")"
        new = status.phase(
            current=p.current,
            phase="Done",
            summary=summary,
            now=p.now,
            **{**fields, "completedAt": conditions.rfc3339(p.now), "ratios": ratios},
        )
        await self._finish(p.body, new, p.views)
        return None

    async def test_step(self, p: Pass) -> float | None:
        """Test: wait for the client pod to terminate, then record the result or the failure."""
        client = p.client
        if client is not None and client.succeeded:
            try:
                result = parse(
                    client.message, p.spec["testType"], int(p.spec["samples"]), int(p.spec["parallel"])
                )
            except ParseError as exc:
                await p.fail("InvalidResult", str(exc))
                return None
            if p.compare:
                return await self.path_done(p, result)
            await self._finish(p.body, status.done(current=p.current, result=result, now=p.now), p.views)
            return None
        if p.server is None:
            # Absent from the cache is not proof of absence: right after a restart kopf may not
            # have delivered every listed pod yet. Ending a run is final, so read before deciding.
            found = await self.api.get_pod(p.namespace, p.names.server)
            uid = p.body["metadata"]["uid"]
            if (
                found is not None
                and ownership.is_controlled_by(found, uid)
                and desired.of_run(desired.pod_view(found), uid, p.run)
            ):
                self.pods.observe("MODIFIED", found)
                p.server = desired.pod_view(found)
        failure = test_failure(p)
        if failure is not None:
            await p.fail(*failure)
            return None
        if client is None:
            server_ip = (
                p.current.get("serviceIP")
                or p.current.get("serverIP")
                or (p.server.ip if p.server else None)
                or ""
            )
            if not await p.create(
                desired.client_pod(p.body, p.spec, server_ip, p.run), f"client pod {p.names.client}"
            ):
                return None
        return p.remaining

    async def reconcile(self, body: Mapping[str, Any]) -> float | None:
        """One pass (``_reconcile``), then the object's series as its status now says."""
        superseded = False
        try:
            return await self._reconcile(body)
        except SupersededError:
            superseded = True  # the object is gone or replaced: its series are forgotten with it
            raise
        finally:
            if not superseded:
                self._export(body)

    async def _reconcile(self, body: Mapping[str, Any]) -> float | None:
        meta = body["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        generation = meta.get("generation", 0)
        now = self.clock.now()
        current = self.api.status.current(body)
        spec = desired.effective(body.get("spec") or {})
        views: list[PodView] = self.pods.children(namespace, uid)
        sched, schedule_errors = schedule.parse(spec)

        # A verdict that no longer applies (schedule removed, another measurement) is cleared
        # before anything else, whatever the pass does next.
        cleared = verdicts.settled(body.get("spec") or {}, current, generation=generation, now=now)
        if cleared is not None:
            await self.api.status.write(body, cleared)
            current = self.api.status.current(body)
            regressed = conditions.get(current.get("conditions"), schedule.REGRESSED) or {}
            self.ctx.event(body, "RegressionCleared", str(regressed.get("message") or ""))

        if (
            current.get("status") in status.FINISHED
            and current.get("observedGeneration") == generation
            and (sched is None or current.get("reason") == "InvalidSpec")
        ):
            # Nothing to do but leftovers of a crash between the final status and the deletes.
            await self._delete_pods(body, views)
            return None

        errors = self.spec_errors(
            uid, generation, name, raw=body.get("spec") or {}, spec=spec, schedule_errors=schedule_errors
        )
        if errors:
            message = "; ".join(map(str, errors))
            if sched is not None:  # scheduled: an error of the spec, of no run
                return await self.invalid_schedule(body, current, views, message, now)
            new = status.error(
                current=current, reason="InvalidSpec", message=message, now=now, generation=generation
            )
            # A one-off run's own error, never a scheduled run's result (nor in the history).
            new.update(runSpec=None, scheduledTime=None, nextRunTime=None)
            await self._finish(body, new, views)
            return None

        if sched is not None:
            return await self.scheduled(body, sched, current, views, now)
        names = desired.pod_names(name, first_path_run(spec, str(generation)))
        try:
            if current.get("observedGeneration") != generation or current.get("status") not in status.RUNNING:
                # A new run: claim it first, so a restart continues it instead of starting another.
                current = status.started(current=current, generation=generation, names=names, now=now)
                current["path"] = schema.paths(spec)[0]
                # A schedule removed: the history stays, the run counter too (pod names of a
                # later schedule never repeat), but this run is a one-off, not scheduled.
                current.update(runSpec=None, scheduledTime=None, nextRunTime=None)
                await self.api.status.write(body, current)
                what = f"{spec['testType']}, {spec['samples']} x {spec['duration']}s"
                if int(spec["parallel"]) > 1:
                    what += f", {spec['parallel']} parallel streams"
                if schema.paths(spec) != (schema.DEFAULT_PATH,):  # the pod path's message as before
                    what += ", paths " + " then ".join(schema.paths(spec))
                self.ctx.event(body, "TestStarted", f"{what}: server {names.server}, client {names.client}")
            # Pods of earlier runs: of an older generation, or adopted from a predecessor.
            return await self._step(
                body, spec=spec, current=current, views=views, run=str(generation), now=now
            )
        except (SupersededError, ReconcileError):
            raise
        except Exception as exc:
            raise await self._failed_update(body, exc) from exc

    async def _failed_update(self, body: Mapping[str, Any], exc: Exception) -> ReconcileError:
        """Report an unexpected error of a step (Degraded/FailedUpdate and a Warning); the
        error the pass then raises."""
        await report_failure(
            body,
            "FailedUpdate",
            reason_of(exc),
            statuses=self.api.status,
            events=self.ctx.events,
            clock=self.clock,
        )
        return ReconcileError("FailedUpdate", reason_of(exc))

    async def _step(
        self,
        body: Mapping[str, Any],
        *,
        spec: dict[str, Any],
        current: dict[str, Any],
        views: list[PodView],
        run: str,
        now: datetime.datetime,
    ) -> float | None:
        """One step of the claimed run ``run``, after deleting the pods of other runs."""
        uid, namespace = body["metadata"]["uid"], body["metadata"]["namespace"]
        paths = schema.paths(spec)
        compare = len(paths) > 1 or bool(spec.get("compare"))
        path = current.get("path") if current.get("path") in paths else paths[0]
        run_of_paths, run = run, desired.path_run(run, str(path), compare)
        spec = {**spec, "path": path}
        names = desired.pod_names(body["metadata"]["name"], run)
        # Pods of earlier runs (an older generation or run number, a compare run's earlier path,
        # or adopted from a predecessor), and their Services.
        await self._delete_pods(body, [p for p in views if not desired.of_run(p, uid, run)], keep_run=run)
        timeout = desired.timeout_seconds(spec)
        started_at = _parse_time(current.get("startedAt")) or now
        mine = {p.name: p for p in views if desired.of_run(p, uid, run)}
        services = {s.name: s for s in self.services.children(namespace, uid) if desired.of_run(s, uid, run)}
        p = Pass(
            body=body,
            spec=spec,
            current=current,
            names=names,
            views=views,
            server=mine.get(names.server),
            client=mine.get(names.client),
            now=now,
            timeout=timeout,
            remaining=(started_at + datetime.timedelta(seconds=timeout) - now).total_seconds(),
            reconciler=self,
            run=run,
            path=str(path),
            compare=compare,
            service=services.get(desired.service_name(body["metadata"]["name"], run)),
            run_of_paths=run_of_paths,
        )
        if current["status"] in ("Initial", "Server"):
            return await self.server_step(p)
        return await self.test_step(p)

    async def invalid_schedule(
        self,
        body: Mapping[str, Any],
        current: dict[str, Any],
        views: list[PodView],
        message: str,
        now: datetime.datetime,
    ) -> float | None:
        """A scheduled Netperf whose spec is refused: Degraded and a Warning Event; no run starts.
        The status' results, history and verdict are untouched (the error belongs to no run);
        a run already under way was claimed with a valid spec (status.runSpec) and finishes."""
        generation = int(body["metadata"].get("generation", 0))
        self.ctx.event(body, "InvalidSpec", message, "Warning")
        delay: float | None = None
        if current.get("status") in status.RUNNING:  # its key and spec as scheduled() has them
            scheduled = bool(current.get("scheduledTime"))
            run = f"r{current['run']}" if scheduled else str(current.get("observedGeneration"))
            spec = claimed_spec(current, body)
            delay = await self._step(body, spec=spec, current=current, views=views, run=run, now=now)
            current = self.api.status.current(body)
        else:
            await self._delete_pods(body, views)  # a crash's leftovers: no run is in progress
        new = status.spec_invalid(current=current, message=message, generation=generation, now=now)
        await self.api.status.write(body, new)
        return delay

    async def scheduled(
        self,
        body: Mapping[str, Any],
        sched: schedule.Schedule,
        current: dict[str, Any],
        views: list[PodView],
        now: datetime.datetime,
    ) -> float | None:
        """A scheduled Netperf's pass: deal with due times, then step the run in progress (if any);
        wakes at the next due time or the run's deadline, whichever is first."""
        meta = body["metadata"]
        name, generation = meta["name"], meta.get("generation", 0)
        current = status.spec_valid(current=current, generation=generation, now=now)
        running = current.get("status") in status.RUNNING
        spec_now = desired.effective(body.get("spec") or {})
        anchor = (
            _parse_time(current.get("lastScheduleTime")) or _parse_time(meta.get("creationTimestamp")) or now
        )
        decision = schedule.decide(sched, anchor, now, running=running)
        book: dict[str, Any] = {"observedGeneration": generation} if not running else {}
        if decision.consumed is not None:
            book["lastScheduleTime"] = conditions.rfc3339(decision.consumed)
        if any(decision.skipped.values()):
            book["skippedRuns"] = schedule.add_skipped(current.get("skippedRuns"), decision.skipped)
            what = ", ".join(f"{n} {reason}" for reason, n in decision.skipped.items() if n)
            self.ctx.event(body, "RunSkipped", f"due times skipped: {what}")
        book["nextRunTime"] = conditions.rfc3339(decision.next_time) if decision.next_time else None
        wake = (decision.next_time - now).total_seconds() if decision.next_time else None
        try:
            if decision.start is not None:
                number = int(current.get("run") or 0) + 1
                run = f"r{number}"
                names = desired.pod_names(name, first_path_run(spec_now, run))
                current = {
                    **status.started(current=current, generation=generation, names=names, now=now),
                    **book,
                    "run": number,
                    "runSpec": schedule.run_spec(desired.effective(body.get("spec") or {})),
                    "scheduledTime": conditions.rfc3339(decision.start),
                    "path": schema.paths(spec_now)[0],
                }
                await self.api.status.write(body, current)
                spec = desired.effective(current["runSpec"])
                what = f"run {number} (due {current['scheduledTime']}): {spec['testType']}, "
                what += f"{spec['samples']} x {spec['duration']}s"
                what += schema.detection_note(int(spec["samples"]))
                self.ctx.event(body, "TestStarted", f"{what}: server {names.server}, client {names.client}")
            elif running:  # due times met during the run, the next one: written only when changed
                current = {**current, **book}
                await self.api.status.write(body, current)
            else:
                await self.api.status.write(body, {**current, **book})
                await self._delete_pods(body, views)  # a crash's leftovers: no run is in progress
                return wake
            # A run in progress, or just claimed: its key and its spec as claimed.
            # (A one-off run still going when a schedule was added has no scheduledTime: it ends as one.)
            run = (
                f"r{current['run']}"
                if current.get("scheduledTime")
                else str(current.get("observedGeneration"))
            )
            spec = claimed_spec(current, body)
            delay = await self._step(body, spec=spec, current=current, views=views, run=run, now=now)
        except (SupersededError, ReconcileError):
            raise
        except Exception as exc:
            raise await self._failed_update(body, exc) from exc
        if delay is None:
            return wake
        return delay if wake is None else min(delay, wake)
