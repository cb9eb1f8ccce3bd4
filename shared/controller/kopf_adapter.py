"""The one seam to kopf: every use of kopf in the operators is in this module.

kopf gives the operators their watches (list, then watch, reconnect and relist, server-side
label selectors) and runs the process (signals, start-up and clean-up activities). Everything
else is ours: the reconcile loops (``shared.controller.workqueue``), the client that makes
every write (``shared.client.kube``, fenced by the leader election and metered), Events
(``shared.client.events``), metrics and probes. So kopf here only reads: its own Event
posting is switched off, no handler of ours asks it to patch an object (only ``on.event``
handlers are registered; no finalizers, no progress annotations), and peering is off.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import random
import time
import types
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import kopf
import orjson

from shared.controller import informer
from shared.controller.serving import Listed, Listing, Readiness
from shared.controller.watches import METADATA_ONLY, METADATA_ONLY_LIST, Watch

KOPF_VERSION = "1.45.2"  # the kopf whose internals track_watches wraps (constraints.txt)
LOG_FORMATS = {"plain": kopf.LogFormat.PLAIN, "full": kopf.LogFormat.FULL, "json": kopf.LogFormat.JSON}
RESYNC_PERIOD = 600.0  # seconds between forced relists of each watch (shared.controller.informer)
# Overrides RESYNC_PERIOD: for benchmarks that measure a relist (tools/bench/scale.py --relist).
RESYNC_PERIOD_ENV = "WATCH_RESYNC_PERIOD"
RETRY_CAP = 30.0  # longest pause between attempts of a failing watch (client-go's reflector)
OBJECT_LOGGER = "kopf.objects"  # kopf's per-object logger (its handlers' outcomes)
# Objects per page of a listing (client-go's reflector pages by 500): kopf holds one page of a
# relist at a time instead of the whole listing in one response.
LIST_CHUNK_SIZE = 500
logger = logging.getLogger("shared.serving")
# What kopf's watch-stream decoder calls (``json.loads``), backed by orjson (track_watches).
_FAST_JSON = types.SimpleNamespace(loads=orjson.loads)


class NoDiffBase(kopf.DiffBaseStorage):
    """A diff base that is the same empty essence for every body: nothing is ever "changed".

    kopf computes, for every event of every object, the diff between the last handled state
    and the new one (a deep copy of the whole body, ``managedFields`` included, cleaned and
    compared field by field) before it looks at which handlers it has. Only its change
    handlers (``on.create``/``update``/``resume``, daemons, timers) read that diff, and we
    register none (``register``: ``on.event`` only), so it is pure cost: more CPU per event than
    the rest of kopf's processing of it (``tools/bench/scale.py --cost``, ``docs/benchmarks.md``). Nothing is
    stored either (kopf's default keeps it in an annotation, which only its change handlers
    write).
    """

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return kopf.BodyEssence()

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def configure_settings(settings: kopf.OperatorSettings, watches: Iterable[Watch]) -> None:
    """kopf's settings for a process that only watches (see ``run``'s docstring)."""
    # No per-event diff of each body: it serves change handlers only, and there are none.
    settings.persistence.diffbase_storage = NoDiffBase()
    # kopf logs "Handler '…' succeeded." at INFO for every event of every object (two lines
    # per WebServer created, one per event of its pods): a formatted record per event that
    # says nothing (our handlers only file the event). Its warnings and errors stay, and so
    # does everything when the process runs verbose (DEBUG).
    objects = logging.getLogger(OBJECT_LOGGER)
    if objects.getEffectiveLevel() == logging.INFO:
        objects.setLevel(logging.WARNING)
    # kopf's peering is not a Lease election (shared.client.leader elects the leader).
    settings.peering.standalone = True
    # No namespace or CRD observation: no cluster-wide list permission is needed for it.
    settings.scanning.disabled = True
    # kopf posts no Events (not even for its own errors): ours go through the fenced client.
    # kopf.warn() checks only the level, hence both.
    settings.posting.enabled = False
    settings.posting.level = logging.CRITICAL + 1
    # The server ends each watch after 5 min, and the client drops one after 5.5 min: a
    # connection that died without a FIN or RST (a partition) is noticed, not waited on forever.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    # API retries at most 2 s apart (kopf's default grows to 21 s between attempts, so an
    # outage of 22 s took 12 s more to recover from); a watch whose retries run out connects
    # again, and one that fails otherwise starts over (track_watches).
    settings.networking.error_backoffs = (0.5, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2)
    # Listings (the first, every relist and resync) in pages: ``limit``/``continue``, read as
    # one consistent snapshot by the API server; no full listing is ever held in one piece.
    settings.watching.chunk_size = LIST_CHUNK_SIZE
    for watch in watches:
        if watch.selector:
            # Server-side: the API server never sends objects without the labels (kopf's
            # handler ``labels=`` filter alone is client-side: everything is still listed).
            settings.watching.label_selectors[watch.plural] = watch.selector


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's credentials, never left on disk.

    In a pod, the official client's in-cluster loader: it reads the ServiceAccount's files and
    takes the API server's address from ``KUBERNETES_SERVICE_HOST`` (kopf's own
    service-account login uses ``kubernetes.default.svc``, a name that needs cluster DNS).
    Elsewhere, kopf's kubeconfig loader, which keeps an embedded certificate and key in memory:
    the official one writes them to temp files removed only at a clean exit, so every SIGKILL
    left a client key on disk. Kubeconfigs that need a plugin (exec, auth-provider) still go
    through the official client.
    """
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return kopf.login_via_client(**kwargs)
    info = kopf.login_with_kubeconfig(**kwargs)
    if info is not None and (info.token or info.certificate_data or info.certificate_path or info.username):
        return info
    return kopf.login_via_client(**kwargs)


def register(
    registry: kopf.OperatorRegistry,
    watches: Iterable[Watch],
    *,
    startup: Callable[[], Awaitable[None]],
    cleanup: Callable[[], Awaitable[None]],
) -> None:
    """Register ``watches`` and the process's start-up and clean-up in ``registry``."""
    watches = list(watches)
    for i, watch in enumerate(watches):
        kopf.on.event(
            group=watch.group,
            version=watch.version,
            plural=watch.plural,
            labels=dict(watch.labels) or None,
            registry=registry,
            id=f"watch-{i}-{watch.resource}",
        )(_event_handler(watch))

    async def on_startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_settings(settings, watches)
        await startup()

    async def on_cleanup(**_: Any) -> None:
        await cleanup()

    kopf.on.login(registry=registry, id="shared-login")(login)
    kopf.on.startup(registry=registry, id="shared-startup")(on_startup)
    kopf.on.cleanup(registry=registry, id="shared-cleanup")(on_cleanup)


def _event_handler(watch: Watch) -> Callable[..., Awaitable[None]]:
    handler = watch.handler

    async def on_event(type: str | None, event: Mapping[str, Any], **_: Any) -> None:
        # The raw body, not kopf's Body: the consumers keep it (the work queue's store), and
        # kopf's Body wraps it in four more objects per event.
        result = handler(type, event["object"])
        if inspect.isawaitable(result):
            await result

    return on_event


def run(
    watches: Iterable[Watch],
    readiness: Readiness,
    *,
    startup: Callable[[], Awaitable[None]],
    cleanup: Callable[[], Awaitable[None]],
    namespaces: tuple[str, ...],
    identity: str,
    verbose: bool = False,
    log_format: str = "plain",
) -> None:
    """Run the process until SIGINT/SIGTERM: the watches, one per resource and namespace (one
    cluster-wide when ``namespaces`` is empty), reported to ``readiness``.

    Public kopf API is used wherever it can do the job: ``kopf.on.event``/``startup``/``cleanup``/
    ``login`` with an explicit registry, ``kopf.OperatorSettings``, ``kopf.login_via_client``/
    ``login_with_kubeconfig``, ``kopf.configure``, ``kopf.run``. Two things have no public
    equivalent in kopf 1.45 and are done here through its internals, pinned to the kopf version in
    ``constraints.txt`` and checked by ``tests/unit/test_kopf_adapter.py`` (it fails on a kopf whose
    internals changed shape): the end of a watch's initial listing together with the handling of
    every listed object (client-go's ``HasSynced``, which readiness and the controllers' gate need),
    and a relist that reports deletions missed while a watch was down (client-go's ``Replace``).
    The same wrapping hands each event straight to the watches' handlers, without kopf's per-event
    processing (most of the operator's CPU, all of it machinery for handlers we do not have),
    and its request function is wrapped so that a metadata-only watch (``Watch.metadata_only``)
    lists and watches ``PartialObjectMetadata``, which kopf's settings cannot ask for.
    Why, and what the exit is: ``docs/design/kopf-adapter.md``.
    """
    watches = list(watches)
    kopf.configure(verbose=verbose, log_format=LOG_FORMATS[log_format])
    readiness.expect(len(watches) * max(1, len(namespaces)))
    resync = float(os.environ.get(RESYNC_PERIOD_ENV) or RESYNC_PERIOD)
    undo = track_watches(readiness, resync, watches=watches)
    registry = kopf.OperatorRegistry()
    register(registry, watches, startup=startup, cleanup=cleanup)
    try:
        kopf.run(
            registry=registry,
            standalone=True,
            identity=identity,  # type: ignore[arg-type]  # kopf.Identity is a NewType of str
            clusterwide=not namespaces,
            namespaces=list(namespaces),
        )
    finally:
        undo()


def track_watches(
    readiness: Readiness,
    resync_period: float | None = RESYNC_PERIOD,
    *,
    watches: Iterable[Watch] = (),
) -> Callable[[], None]:
    """Route kopf's watch streams through ``readiness`` and ``shared.controller.informer.converging``,
    and hand each event of a resource that ``watches`` declares straight to their handlers.

    Returns an undo function. Every event of a listing (the listed objects, and the deletions
    a relist found) is counted in a ``Listing`` and reported
    back once handled: the watch is ready when its listing has ended and the count is back to
    zero. A relist is counted the same way; readiness, once reached, stays.

    kopf has no public hook for either moment, so this wraps two of its internals: the
    ``continuous_watch`` generator, to see the listing and its end (the same wrapper makes
    every relist converge, ``shared.controller.informer``), and ``queueing.watcher``, the
    consumer of each resource's stream. For a resource of ``watches`` the wrapper is the whole
    consumer (``_dispatch``): each event goes to the watches' handlers in the stream's
    order, without kopf's per-event processing (``process_resource_event``: its body, patch,
    memo, per-object records and handler machinery, a worker task per object), which for
    ``on.event`` handlers that never ask for a patch only ended up calling the handler. Any
    other resource (none in the operators) keeps kopf's own watcher, its events counted when
    kopf has processed them.

    Each watch (resource and namespace) keeps one ``Store``
    across its relists; the resync period gets up to 10% jitter so the watches of one process
    (and of many operators) do not relist in step.

    A watch never gives up. kopf lets an API error that outlasts its request retries escape
    its watch stream (a 429 "storage is (re)initializing" from an API server that just
    started, a 403 while RBAC is being fixed, a 5xx), and the operator then stops: every
    API-server restart could cost a pod restart. Here the error is caught, counted as a
    failing watch (``/healthz`` turns unhealthy once one has failed for ``blind_after``
    seconds, so a watch that cannot recover still ends in a restart rather than a blind
    process), and the watch starts over with a fresh listing after a jittered, capped
    exponential pause.
    """
    from kopf._cogs.clients import watching
    from kopf._core.reactor import queueing

    original = watching.continuous_watch
    original_watcher = queueing.watcher
    if getattr(original, "_readiness_wrapped", False):
        raise RuntimeError("kopf watches are already tracked by another Readiness")
    stores: dict[str, informer.Store] = {}
    by_resource: dict[tuple[str, str, str], list[Watch]] = {}
    for watch in watches:
        by_resource.setdefault((watch.group, watch.version, watch.plural), []).append(watch)

    async def continuous_watch(**kwargs: Any) -> AsyncIterator[Any]:
        key = f"{kwargs['resource']}@{kwargs.get('namespace') or '*'}"
        readiness.watch_started(key)
        store = stores.setdefault(key, _store_for(by_resource, kwargs["resource"]))
        failures = 0
        while True:
            resync = resync_period * random.uniform(1.0, 1.1) if resync_period else None
            listing = Listing(lambda: readiness.watch_listed(key))
            try:
                async for item in informer.converging(
                    original(**kwargs),
                    store,
                    listed_marker=watching.Bookmark.LISTED,
                    resync_after=resync,
                    name=key,
                ):
                    if item is watching.Bookmark.LISTED:
                        listing.end()
                        readiness.watch_recovered(key)
                        failures = 0
                    # BOOKMARK events are dropped unhandled: one counted would never come back
                    # (none comes before LISTED today).
                    if not listing.ended and isinstance(item, Mapping) and item.get("type") != "BOOKMARK":
                        yield listing.track(item)
                    else:
                        yield item
                return  # 410 Gone, resync, pause: kopf's infinite_watch lists again
            except Exception as exc:
                readiness.watch_failing(key, time.monotonic())
                delay = min(RETRY_CAP, 0.5 * 2**failures) * random.uniform(1.0, 1.2)
                failures += 1
                logger.warning(f"watch of {key} failed ({exc!r}); listing again in {delay:.1f}s")
                await asyncio.sleep(delay)

    async def watcher(
        *,
        processor: Any,
        settings: Any,
        resource: Any,
        namespace: Any,
        operator_paused: Any = None,
        operator_indexed: Any = None,
        resource_indexed: Any = None,
        **kwargs: Any,
    ) -> None:
        ours = by_resource.get((resource.group, resource.version, resource.plural))
        if not ours:
            await original_watcher(
                processor=_reporting(processor),
                settings=settings,
                resource=resource,
                namespace=namespace,
                operator_paused=operator_paused,
                operator_indexed=operator_indexed,
                resource_indexed=resource_indexed,
                **kwargs,
            )
            return

        async def listed() -> None:
            # kopf holds its readiness until every indexed resource has listed (no index is
            # registered here, so there is no toggle; kept for kopf's contract).
            if operator_indexed is not None and resource_indexed is not None:
                await operator_indexed.drop_toggle(resource_indexed)

        stream = watching.infinite_watch(
            settings=settings, resource=resource, namespace=namespace, operator_paused=operator_paused
        )
        await _dispatch(stream, ours, f"{resource}@{namespace or '*'}", watching.Bookmark.LISTED, listed)

    continuous_watch._readiness_wrapped = True  # type: ignore[attr-defined]  # a marker: wrapped once
    watching.continuous_watch = continuous_watch
    queueing.watcher = watcher
    undo_api = (
        _decode_streams_with_orjson(),
        _metadata_only_requests({key for key, ws in by_resource.items() if any(w.metadata_only for w in ws)}),
    )

    def undo() -> None:
        watching.continuous_watch = original
        queueing.watcher = original_watcher
        for undo_one in undo_api:
            undo_one()

    return undo


def _decode_streams_with_orjson() -> Callable[[], None]:
    """kopf decodes each line of a watch stream with the standard ``json.loads`` (in
    ``api.stream``, the module's one use of ``json``): the largest single cost left per event
    once kopf's processing was gone (py-spy, docs/benchmarks.md). orjson parses the same text
    to the same values several times faster, as the client does for our own requests. Returns
    the undo."""
    from kopf._cogs.clients import api

    # The module's global ``json`` (an import, not exported: hence through its namespace).
    namespace = vars(api)
    original = namespace["json"]
    namespace["json"] = _FAST_JSON  # only its .loads is called

    def undo() -> None:
        namespace["json"] = original

    return undo


def _store_for(by_resource: Mapping[tuple[str, str, str], list[Watch]], resource: Any) -> informer.Store:
    """A new watch's ``Store``: of a metadata-only kind (read by
    reference), its tombstones keep the objects' identity only, not the labels tenants choose."""
    served = by_resource.get((resource.group, resource.version, resource.plural)) or []
    return informer.Store(identity_only=any(w.metadata_only for w in served))


def collection_of(url: str) -> tuple[str, str, str] | None:
    """The (group, version, plural) of a URL that lists or watches a collection (a cluster's or
    a namespace's), None for any other URL (one object, a subresource, discovery)."""
    parts = [p for p in urllib.parse.urlsplit(url).path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if len(rest) == 3 and rest[0] == "namespaces":
        return group, version, rest[2]
    if len(rest) == 1:
        return group, version, rest[0]
    return None


def _metadata_only_requests(resources: set[tuple[str, str, str]]) -> Callable[[], None]:
    """kopf lists and watches every resource as full objects, and its settings have no request
    headers: its requests (``api.request``, which its listing and its watch streams call) are
    wrapped so that a watch of ``resources`` asks for ``PartialObjectMetadata`` and a listing
    for a ``PartialObjectMetadataList`` (``METADATA_ONLY``,
    ``METADATA_ONLY_LIST``). Returns the undo."""
    from kopf._cogs.clients import api

    namespace = vars(api)
    original = namespace["request"]
    if not resources:
        return lambda: None

    async def request(method: str, url: str, *, headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
        if method.lower() == "get" and collection_of(url) in resources:
            watch = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("watch") == ["true"]
            headers = {**(headers or {}), "Accept": METADATA_ONLY if watch else METADATA_ONLY_LIST}
        return await original(method, url, headers=headers, **kwargs)

    namespace["request"] = request

    def undo() -> None:
        namespace["request"] = original

    return undo


async def _dispatch(
    stream: AsyncIterator[Any],
    watches: list[Watch],
    name: str,
    listed_marker: object,
    listed: Callable[[], Awaitable[None]],
) -> None:
    """Consume one resource's watch ``stream`` (kopf's ``infinite_watch`` through
    ``track_watches``' wrapper): hand each event to every watch of ``watches`` whose labels
    its object has, in the stream's order, and call ``listed`` at each end of a listing.

    One event at a time: the order kopf's per-object workers kept (an object's events in
    order) holds for the whole stream, and the handlers only file work (a coroutine handler
    holds the stream until it returns). A handler's exception is logged and the stream goes
    on, as kopf does for ``on.event`` handlers, and the event's other handlers still run.
    Listed events are reported handled (``Listed``) once all
    their handlers have returned, so the listing is synced only then.
    """
    async for raw_event in stream:
        if not isinstance(raw_event, Mapping):  # kopf's markers
            if raw_event is listed_marker:
                await listed()
            continue
        try:
            event_type = raw_event.get("type")
            body = raw_event.get("object")
            if event_type == "BOOKMARK" or not isinstance(body, Mapping):
                continue
            for watch in watches:
                if watch.labels and not _has_labels(body, watch.labels):
                    continue
                try:
                    result = watch.handler(event_type, body)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    meta = body.get("metadata") or {}
                    logger.exception(
                        f"handler of {name} failed on {event_type or 'listed'} "
                        f"{meta.get('namespace') or ''}/{meta.get('name') or ''}; the watch goes on"
                    )
        finally:
            if isinstance(raw_event, Listed):
                raw_event.handled()


def _has_labels(body: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether ``body`` carries every label of ``labels`` (the server-side selector should have
    sent no other object; kopf's ``labels=`` filter checked the same on every event)."""
    have = (body.get("metadata") or {}).get("labels") or {}
    return all(have.get(k) == v for k, v in labels.items())


def _reporting(processor: Any) -> Any:
    """kopf's ``processor``, reporting each listed event once kopf has processed it (handlers
    included, whether they succeeded or not): for a resource ``_dispatch`` does not serve."""

    async def processing(*, raw_event: Any, **kw: Any) -> Any:
        try:
            return await processor(raw_event=raw_event, **kw)
        finally:
            if isinstance(raw_event, Listed):
                raw_event.handled()

    return processing
