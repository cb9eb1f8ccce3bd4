"""An in-memory API server behind ``shared.client.kube.KubeClient``: unit tests of reconcilers.

In the style of client-go's fake clientset and kubernetes/sample-controller's
``controller_test.go``: a test puts objects in, runs one reconcile pass with a ``FakeKube`` as
its client, and asserts the exact list of ``Action`` s the pass sent (verb, resource,
namespace, name, subresource) and the objects that result. ``FakeKube`` overrides only
``request`` (every helper of the real client — ``create``, ``get``, ``get_if_exists``,
``replace``, ``merge_patch``, ``json_patch``, ``delete`` — goes through it), ``load`` and
``close``; paths are the ones the real client builds (``shared.client.kube.namespaced``).
"""

from __future__ import annotations

import copy
import datetime
import inspect
import json
import random
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from shared.api.errors import ApiError, NotFound
from shared.client.kube import JSON, JSON_PATCH, MERGE_PATCH, KubeClient

REPO = Path(__file__).resolve().parents[2]
READS = frozenset({"get", "list"})
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class Resource:
    """One kind the fake serves: ``plural`` in ``group`` at ``versions``."""

    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    namespaced: bool = True
    status: bool = False  # has a /status subresource
    custom: bool = False  # a custom resource (CRD): strict updates, CRD status strategy
    # /scale: (spec replicas, status replicas, label selector) as dotted paths, or None
    scale: tuple[str, str, str] | None = None
    generation: bool = True  # counts metadata.generation (ConfigMaps, Services, Leases... do not)
    answers_deleted: bool = False  # a delete answers the object, not a Status (pods, services...)
    # The OpenAPI schema of a custom resource (its defaults are applied).
    schema: Mapping[str, Any] | None = field(default=None, compare=False)


_SCALE = ("spec.replicas", "status.replicas", "status.selector")
# What each kind does, as kube-apiserver 1.34 does it (the contract test checks the table).
BUILTIN = (
    Resource("", ("v1",), "pods", "Pod", status=True, answers_deleted=True),
    Resource("", ("v1",), "services", "Service", status=True, generation=False, answers_deleted=True),
    Resource("", ("v1",), "configmaps", "ConfigMap", generation=False),
    Resource("", ("v1",), "secrets", "Secret", generation=False),
    Resource("", ("v1",), "serviceaccounts", "ServiceAccount", generation=False, answers_deleted=True),
    Resource("", ("v1",), "events", "Event", generation=False),
    Resource("", ("v1",), "endpoints", "Endpoints", generation=False),
    Resource(
        "",
        ("v1",),
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        status=True,
        generation=False,
        answers_deleted=True,
    ),
    Resource("", ("v1",), "resourcequotas", "ResourceQuota", status=True, generation=False),
    Resource("", ("v1",), "namespaces", "Namespace", namespaced=False, status=True, generation=False),
    Resource("", ("v1",), "nodes", "Node", namespaced=False, status=True, generation=False),
    Resource("apps", ("v1",), "deployments", "Deployment", status=True, scale=_SCALE),
    Resource("apps", ("v1",), "replicasets", "ReplicaSet", status=True, scale=_SCALE),
    Resource("apps", ("v1",), "statefulsets", "StatefulSet", status=True, scale=_SCALE),
    Resource("apps", ("v1",), "daemonsets", "DaemonSet", status=True),
    Resource("batch", ("v1",), "jobs", "Job", status=True, answers_deleted=True),
    Resource(
        "autoscaling",
        ("v2", "v1"),
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        status=True,
        generation=False,
    ),
    Resource("coordination.k8s.io", ("v1",), "leases", "Lease", generation=False),
    Resource("events.k8s.io", ("v1",), "events", "Event", generation=False),
    Resource("policy", ("v1",), "poddisruptionbudgets", "PodDisruptionBudget", status=True),
    Resource("networking.k8s.io", ("v1",), "networkpolicies", "NetworkPolicy"),
)


@cache
def bundle_resources() -> tuple[Resource, ...]:
    """The custom resources the operators ship, from the bundle's CRDs."""
    found = []
    for path in sorted((REPO / "bundle" / "manifests").glob("*.yaml")):
        # libyaml's loader where PyYAML has it (its wheels do): the same documents, ten times faster.
        doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        served = [v for v in spec["versions"] if v.get("served")]
        subresources = served[0].get("subresources") or {} if served else {}
        scale = subresources.get("scale")
        found.append(
            Resource(
                spec["group"],
                tuple(v["name"] for v in served),
                spec["names"]["plural"],
                spec["names"]["kind"],
                namespaced=spec["scope"] == "Namespaced",
                status="status" in subresources,
                custom=True,
                schema=served[0].get("schema", {}).get("openAPIV3Schema") if served else None,
                scale=(
                    (
                        scale["specReplicasPath"].lstrip("."),
                        scale["statusReplicasPath"].lstrip("."),
                        scale.get("labelSelectorPath", "").lstrip("."),
                    )
                    if scale
                    else None
                ),
            )
        )
    return tuple(found)


@dataclass(frozen=True)
class Action:
    """One request the fake API server received, as client-go's fake records it.

    ``verb``: create, get, list, update, patch, delete. ``name`` is the object's (for a create,
    the body's ``metadata.name``: empty with ``generateName``). ``body``: what was sent (the
    object, the patch, the delete options), a copy. ``patch_type``: ``merge`` or ``json``.
    """

    verb: str
    resource: str
    namespace: str
    name: str
    subresource: str = ""
    body: Any = None
    group: str = ""
    version: str = ""
    patch_type: str = ""
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """(verb, resource, namespace, name, subresource): what sample-controller's tests compare."""
        return (self.verb, self.resource, self.namespace, self.name, self.subresource)

    def matches(self, verb: str, resource: str) -> bool:
        """client-go's ``Action.Matches``, with ``*`` for any and ``plural/subresource``."""
        plural, _, sub = resource.partition("/")
        return (
            verb in ("*", self.verb)
            and plural in ("*", self.resource)
            and (not sub or sub == self.subresource)
        )


# A reaction answers an action (a dict), raises (an ApiError), or returns None to pass it on.
Reaction = Callable[[Action], "dict[str, Any] | Awaitable[dict[str, Any] | None] | None"]


@dataclass
class _Reactor:
    verb: str
    resource: str
    reaction: Reaction
    times: int | None  # None: every time


def status_error(
    code: int,
    reason: str,
    message: str,
    *,
    name: str = "",
    resource: str = "",
    group: str = "",
    causes: list[dict[str, str]] | None = None,
) -> ApiError:
    """An ``ApiError`` as the real client raises it for the API server's Status answer."""
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    if causes:
        details["causes"] = causes
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return ApiError(code, reason, message, body)


def fail(code: int, reason: str = "", message: str = "") -> Callable[[Action], None]:
    """A reaction refusing the action with ``code`` (for ``FakeKube.prepend_reactor``).

    The default reasons and messages are the API server's: ``fail(403, message="exceeded
    quota: ...")`` is a quota refusal of a create, ``fail(409)`` a stale write. The fake replaces
    the real client's ``request``, retries included: a 429 or 503 is raised at once, where the
    real client raises it only after its retries.
    """
    reasons = {
        400: "BadRequest",
        403: "Forbidden",
        404: "NotFound",
        409: "Conflict",
        410: "Expired",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
    }

    def react(action: Action) -> None:
        what = _qualified(action.resource, action.group)
        text = message
        if code == 409 and not text:
            text = (
                f'Operation cannot be fulfilled on {what} "{action.name}": the object has been '
                "modified; please apply your changes to the latest version and try again"
            )
        elif code == 403:
            text = f'{what} "{action.name}" is forbidden: {message or "refused by the test"}'
        elif code == 404 and not text:
            text = f'{what} "{action.name}" not found'
        raise status_error(
            code,
            reason or reasons.get(code, "Unknown"),
            text or f"refused by the test ({code})",
            name=action.name,
            resource=action.resource,
            group=action.group,
        )

    return react


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


@dataclass(frozen=True)
class _Target:
    """A parsed request path."""

    resource: Resource
    version: str
    namespace: str
    name: str
    subresource: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.resource.group, self.resource.plural, self.namespace, self.name)


@dataclass
class _Server:
    """What the clients of one fake API server share."""

    now: Callable[[], float | datetime.datetime]
    random: random.Random
    revision: int = 0
    store: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)
    resources: dict[tuple[str, str], Resource] = field(default_factory=dict)


class FakeKube(KubeClient):
    """A ``KubeClient`` answering from an in-memory store (module docstring).

    ``objects`` are stored first (``add``). ``now`` gives the creation and deletion
    timestamps (seconds since the epoch, or a datetime: ``Clock().now`` of
    ``shared.api.clock`` fits); ``seed`` makes UIDs and generated names repeatable.

    A request never yields to the event loop (unless an async reaction does): the requests a
    pass runs concurrently (``asyncio.gather``) reach the fake, and ``actions``, in the
    order they were started, so expected action lists are deterministic.

    **What is modelled**, as kube-apiserver 1.34 does it (``tests/integration/test_fakekube_contract.py``
    sends the same requests to a real API server and to the fake and requires the same answers):

    - create: ``uid``, an increasing ``resourceVersion`` (one counter for the whole store, like
      etcd's revision), ``creationTimestamp``, ``generation`` 1 on the kinds that count it (not
      ConfigMaps, Services, Leases...), ``generateName``, the defaults of a custom resource's schema;
      the status of a kind with a status subresource is dropped; 409 ``AlreadyExists``; 400 when the
      body's namespace is not the path's;
    - get, list (``labelSelector``: ``=``, ``==``, ``!=``, ``in``, ``notin``, ``key``, ``!key``;
      ``fieldSelector``: ``=``/``!=`` on any dotted path such as ``metadata.name``), 404 ``NotFound``;
    - update (PUT): 409 ``Conflict`` on a stale ``metadata.resourceVersion`` or another
      ``metadata.uid``; custom resources refuse an update without a resourceVersion (422);
    - merge patch (RFC 7386) and JSON patch (RFC 6902, ``test`` included): a failed operation is the
      API server's bare 422 ``Invalid`` that says nothing of which operation failed (here the
      patch error is the ``ApiError``'s ``__cause__``); a changed ``metadata.uid`` is 422
      "field is immutable"; ``metadata.resourceVersion`` in a merge patch is a precondition (409);
    - a write that changes nothing keeps the resourceVersion;
    - delete: ``preconditions.uid`` / ``preconditions.resourceVersion`` (409, the API server's
      words); the answer is the object for the kinds that answer so (pods, services...), else a
      ``Success`` Status; an object with finalizers, or a pod bound to a node (``spec.nodeName``)
      deleted with a grace period, stays with a ``deletionTimestamp`` (a pod until
      ``FakeKube.remove``, as its kubelet would confirm; others until their last finalizer is
      removed);
    - ``generation``: bumped when anything but ``metadata`` and ``status`` changes (and when a
      deletion starts), never by a status write;
    - the ``/status`` subresource writes only the status (the stored object with the new status, as
      the CRD status strategy copies it: ``metadata`` in a status patch is ignored, so a merge patch
      cannot carry a UID precondition there); the main resource of a kind with a status subresource
      ignores status changes; a kind without one has no ``/status`` (404). Which kinds have one is
      ``Resource.status`` (the CRDs say it for custom resources; ``FakeKube.register``
      changes it);
    - ``/scale`` of kinds that have it (Deployments, ReplicaSets, StatefulSets; custom resources as
      their CRD declares): an ``autoscaling/v1`` Scale, reads and writes of the replicas;
    - discovery of a group-version (``GET /api/v1``, ``GET /apis/<group>/<version>``): the
      ``APIResourceList`` of the kinds served, with their ``/status`` and ``/scale`` entries
      (recorded as a ``get`` action with an empty resource);
    - unknown resources and unserved versions: 404 "the server could not find the requested
      resource", so a wrong path fails here as it does on a cluster.

    The custom resources are read from the bundle's CRDs (``bundle/manifests``), so a new operator's
    kind is known without an edit here; others are added with ``FakeKube.register``.

    **What is not modelled**: watches; garbage collection (owner references are stored, nothing is
    deleted with its owner) and every other controller (no ReplicaSets from Deployments, no
    Endpoints, no scheduling, pods stay as created); the defaulting of built-in kinds (no
    ``clusterIP``, no pod ``status.phase``); validation against the schemas; admission (quotas, Pod
    Security, namespaces that do not exist or terminate); RBAC;
    server-side apply and strategic merge patch (415); dry-run; delete-collection; version
    conversion (an object is stored once and answered with the apiVersion asked for);
    ``managedFields``. Those are for the integration tests; a failure they cause is injected with a
    reactor (``FakeKube.prepend_reactor``, ``fail``).

    **Actions and reactors**, like client-go's fake: every request that reaches the server is
    recorded as an ``Action`` in ``FakeKube.actions`` (a write refused by ``fence`` never
    reaches it and is not recorded, as with the real client); a reactor added with
    ``FakeKube.prepend_reactor`` sees matching actions first and may answer, raise (an
    ``ApiError`` built by ``status_error``) or pass (return None).
    """

    def __init__(
        self,
        *objects: Mapping[str, Any],
        now: Callable[[], float | datetime.datetime] = time.time,
        seed: int = 0,
        resources: Iterable[Resource] = (),
        observer: Callable[[str, str, int | str, float], None] | None = None,
    ) -> None:
        super().__init__(observer=observer, qps=0)
        self._server = _Server(now, random.Random(seed))
        for resource in (*BUILTIN, *bundle_resources(), *resources):
            self.register(resource)
        self._reactors: list[_Reactor] = []
        self.actions: list[Action] = []
        self.closed = False
        for obj in objects:
            self.add(obj)

    def client(self) -> FakeKube:
        """Another client of the same API server, with actions, reactors and a fence of its own:
        a leader elector's own client beside the operator's fenced one, or the test acting as a
        user (``kubectl scale``) without its writes among the pass's actions."""
        other = FakeKube(observer=self._observer)
        other._server = self._server
        return other

    # -- set-up and inspection -------------------------------------------------------------

    def register(self, resource: Resource) -> None:
        """Serve ``resource`` (replacing a kind of the same group and plural)."""
        self._server.resources[(resource.group, resource.plural)] = resource

    def add(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as it is, without an action (client-go's tracker ``Add``): what the
        cluster holds before the pass. UID, resourceVersion, creationTimestamp and generation
        are filled in when missing. Returns the stored object."""
        resource = self._by_kind(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        namespace = meta.get("namespace", "") if resource.namespaced else ""
        if resource.namespaced and not namespace:
            raise ValueError(f"{obj['kind']} {meta.get('name')} needs a namespace")
        stored = copy.deepcopy(dict(obj))
        stored_meta = stored["metadata"]
        stored_meta.setdefault("uid", self._uid())
        stored_meta.setdefault("creationTimestamp", self._timestamp())
        if resource.generation:
            stored_meta.setdefault("generation", 1)
        if resource.schema:
            _apply_defaults(stored, resource.schema)
        stored_meta["resourceVersion"] = self._next_revision()
        self._server.store[(resource.group, resource.plural, namespace, meta["name"])] = stored
        return copy.deepcopy(stored)

    def object(self, path: str) -> dict[str, Any] | None:
        """The object stored at ``path`` (a copy), None when there is none; no action."""
        target = self._parse(path)
        found = self._server.store.get(target.key)
        return copy.deepcopy(found) if found is not None else None

    def objects(self, resource: str, namespace: str | None = None, group: str = "") -> list[dict[str, Any]]:
        """The stored objects of ``resource`` (a plural), copies, by namespace and name."""
        return [
            copy.deepcopy(obj)
            for (g, plural, ns, _), obj in sorted(self._server.store.items(), key=lambda kv: kv[0])
            if g == group and plural == resource and namespace in (None, ns)
        ]

    def remove(self, path: str) -> None:
        """Drop the object at ``path`` now, without an action: a kubelet confirming a pod's
        termination, the garbage collector, someone else's delete."""
        del self._server.store[self._parse(path).key]
        self._next_revision()

    def writes(self, *, ignore: Iterable[str] = ()) -> list[Action]:
        """The actions that are not reads (get, list), but for those on the ``ignore`` d
        resources (``ignore=["events"]``, as sample-controller's tests filter what they do not
        assert on)."""
        return [a for a in self.actions if a.verb not in READS and a.resource not in ignore]

    def keys(
        self, *, reads: bool = False, ignore: Iterable[str] = ()
    ) -> list[tuple[str, str, str, str, str]]:
        """(verb, resource, namespace, name, subresource) of each write (and read, with ``reads``)."""
        ignore = frozenset(ignore)
        actions = (
            [a for a in self.actions if a.resource not in ignore] if reads else self.writes(ignore=ignore)
        )
        return [a.key for a in actions]

    def events(self) -> list[tuple[str, str, str]]:
        """(type, reason, message) of each Event created (core/v1 or events.k8s.io/v1) or patched
        (an Event that recurred: its count grown), in order: what a test asserts on a pass's
        Events, like client-go's ``FakeRecorder``."""
        reported = []
        for a in self.actions:
            if a.resource != "events" or not isinstance(a.body, Mapping):
                continue
            if a.verb == "create":
                message = a.body.get("message", a.body.get("note", ""))
                reported.append((a.body.get("type", ""), a.body.get("reason", ""), message))
            elif a.verb == "patch":
                stored = self.object(f"/api/v1/namespaces/{a.namespace}/events/{a.name}") or {}
                message = a.body.get("message", stored.get("message", ""))
                reported.append((stored.get("type", ""), stored.get("reason", ""), message))
        return reported

    def clear_actions(self) -> None:
        self.actions.clear()

    def prepend_reactor(
        self, verb: str, resource: str, reaction: Reaction, *, times: int | None = None
    ) -> None:
        """client-go's ``PrependReactor``: ``reaction`` sees matching actions before the store
        (and before the reactors added earlier). ``verb`` and ``resource`` may be ``*``;
        ``resource`` may name a subresource (``webservers/status``). With ``times``, the reactor
        is used that many times, then dropped (a conflict once, then success)."""
        self._reactors.insert(0, _Reactor(verb, resource, reaction, times))

    async def serve(self, action: Action) -> dict[str, Any]:
        """What the store answers to ``action``, without reactors (for a reaction that alters
        the real answer): a copy, the store is changed only by the action itself."""
        return copy.deepcopy(self._serve(action))

    # -- the client's interface -----------------------------------------------------------------

    async def load(self) -> None:
        """No credentials to load."""

    async def close(self) -> None:
        self.closed = True

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | list[Any] | None = None,
        *,
        content_type: str = JSON,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        method = method.upper()
        # As the real client: a write is asked about before it is sent, and a refused one never
        # reaches the server (so it is not an action either).
        self._fence_write(method, path)
        code: int | str = "<error>"
        try:
            action = self._action(method, path, body, content_type, dict(params or {}))
            self.actions.append(action)
            answer = await self._react(action)
            code = 201 if action.verb == "create" else 200
            # The client answers with JSON: what a caller gets never aliases the store.
            return dict(json.loads(json.dumps(answer)))
        except ApiError as exc:
            code = exc.status
            raise
        finally:
            if self._observer is not None:
                self._observer(method, "fakekube", code, 0.0)

    async def get_bytes(self, path: str) -> bytes | None:
        """As the real client: the answer of a GET unparsed, None for a 404 (one ``get`` action)."""
        try:
            return json.dumps(await self.request("GET", path)).encode()
        except ApiError as exc:
            if isinstance(exc, NotFound):
                return None
            raise

    # -- dispatch -------------------------------------------------------------------------------

    def _action(self, method: str, path: str, body: Any, content_type: str, params: dict[str, str]) -> Action:
        if params.get("watch") in ("1", "true"):
            raise NotImplementedError("FakeKube does not serve watches")
        parts = [p for p in path.split("?", 1)[0].split("/") if p]
        if method == "GET" and (parts == ["api", "v1"] or (parts[:1] == ["apis"] and len(parts) == 3)):
            # Discovery of a group-version: an action without a resource.
            group, version = ("", "v1") if parts[0] == "api" else (parts[1], parts[2])
            return Action(verb="get", resource="", namespace="", name="", group=group, version=version)
        target = self._parse(path)
        collection = not target.name
        if method == "GET":
            verb = "list" if collection else "get"
        elif method in VERBS:
            verb = VERBS[method]
        else:
            raise status_error(405, "MethodNotAllowed", f"the server does not allow this method: {method}")
        if (
            (collection and verb not in ("create", "list"))
            or (
                verb == "create" and (not collection or (target.resource.namespaced and not target.namespace))
            )
            or (verb == "delete" and target.subresource)
        ):
            raise status_error(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
            )
        patch_type = ""
        if verb == "patch":
            patch_type = {MERGE_PATCH: "merge", JSON_PATCH: "json"}.get(content_type, "")
            if not patch_type:
                raise status_error(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format: {content_type}",
                )
        name = target.name
        if verb == "create" and isinstance(body, Mapping):
            name = str((body.get("metadata") or {}).get("name") or "")
        return Action(
            verb=verb,
            resource=target.resource.plural,
            namespace=target.namespace,
            name=name,
            subresource=target.subresource,
            body=copy.deepcopy(body),
            group=target.resource.group,
            version=target.version,
            patch_type=patch_type,
            params=params,
        )

    async def _react(self, action: Action) -> dict[str, Any]:
        for reactor in list(self._reactors):
            if not action.matches(reactor.verb, reactor.resource):
                continue
            if reactor.times is not None:
                reactor.times -= 1
                if reactor.times <= 0:
                    self._reactors.remove(reactor)
            answer = reactor.reaction(action)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None:
                return answer
        return self._serve(action)

    def _serve(self, action: Action) -> dict[str, Any]:
        if not action.resource:
            return self._discovery(action.group, action.version)
        return self._serve_resource(action)

    def _serve_resource(self, action: Action) -> dict[str, Any]:
        resource = self._server.resources[(action.group, action.resource)]
        target = _Target(resource, action.version, action.namespace, action.name, action.subresource)
        if action.verb == "list":
            return self._list(target, action.params)
        if action.verb == "create":
            return self._create(target, action.body)
        if action.verb == "delete":
            return self._delete(target, action.body)
        current = self._existing(target)
        if action.verb == "get":
            return self._scale_of(target, current) if target.subresource == "scale" else current
        if action.verb == "update":
            return self._update(target, current, action.body, conditional=True)
        return self._patch(target, current, action)

    # -- verbs ----------------------------------------------------------------------------------

    def _list(self, target: _Target, params: Mapping[str, str]) -> dict[str, Any]:
        labels = _label_selector(params.get("labelSelector", ""))
        fields = _field_selector(params.get("fieldSelector", ""))
        items = [
            obj
            for (g, plural, ns, _), obj in sorted(self._server.store.items(), key=lambda kv: kv[0])
            if (g, plural) == (target.resource.group, target.resource.plural)
            and (not target.namespace or ns == target.namespace)
            and labels((obj.get("metadata") or {}).get("labels") or {})
            and fields(obj)
        ]
        return {
            "kind": f"{target.resource.kind}List",
            "apiVersion": _api_version(target.resource.group, target.version),
            "metadata": {"resourceVersion": str(self._server.revision)},
            "items": items,
        }

    def _create(self, target: _Target, body: Any) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise status_error(400, "BadRequest", "the body of the request is not an object")
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        resource = target.resource
        if resource.namespaced:
            if meta.get("namespace", target.namespace) != target.namespace:
                raise status_error(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            meta["namespace"] = target.namespace
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = meta["generateName"] + "".join(
                self._server.random.choices("bcdfghjklmnpqrstvwxz2456789", k=5)
            )
            meta["name"] = name
        what = _qualified(resource.plural, resource.group)
        if not name:
            raise self._invalid(target, "", "metadata.name: Required value: name or generateName is required")
        key = (resource.group, resource.plural, target.namespace, name)
        if key in self._server.store:
            raise status_error(
                409,
                "AlreadyExists",
                f'{what} "{name}" already exists',
                name=name,
                resource=resource.plural,
                group=resource.group,
            )
        for server_set in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(server_set, None)
        meta["uid"] = self._uid()
        meta["creationTimestamp"] = self._timestamp()
        if resource.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        meta["resourceVersion"] = self._next_revision()
        obj["apiVersion"] = _api_version(resource.group, target.version)
        obj["kind"] = resource.kind
        if resource.status:
            obj.pop("status", None)
        if resource.schema:
            _apply_defaults(obj, resource.schema)
        self._server.store[key] = obj
        return obj

    def _existing(self, target: _Target) -> dict[str, Any]:
        found = self._server.store.get(target.key)
        if found is None:
            raise self._not_found(target)
        return found

    def _update(
        self, target: _Target, current: dict[str, Any], body: Any, *, conditional: bool
    ) -> dict[str, Any]:
        """Store ``body`` as the new ``current`` (a PUT, or a patch once applied)."""
        if not isinstance(body, Mapping):
            raise status_error(400, "BadRequest", "the body of the request is not an object")
        new = copy.deepcopy(dict(body))
        meta = new.setdefault("metadata", {})
        if meta.get("name", target.name) != target.name:
            raise status_error(
                400,
                "BadRequest",
                f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                f"({target.name})",
            )
        if target.subresource == "scale":
            return self._write_scale(target, current, new)
        self._check_update(target, current, meta, conditional=conditional)
        new = self._strategy(target, current, new)
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if new == current:
            return current  # a no-op write changes nothing, not even the resourceVersion
        new["metadata"]["resourceVersion"] = self._next_revision()
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            # The last finalizer of a deleting object is gone: the object goes.
            del self._server.store[target.key]
            return new
        self._server.store[target.key] = new
        return new

    def _check_update(
        self, target: _Target, current: Mapping[str, Any], meta: Mapping[str, Any], *, conditional: bool
    ) -> None:
        """Refuse an update as the API server would: preconditions, then validation."""
        old_meta = current["metadata"]
        uid_changed = bool(meta.get("uid")) and meta["uid"] != old_meta["uid"]
        if uid_changed and conditional:
            # A PUT's UID is a storage precondition, checked before anything else.
            raise self._conflict(target, _storage_precondition(target, "UID", meta["uid"], old_meta["uid"]))
        sent_version = meta.get("resourceVersion")
        if sent_version and str(sent_version) != old_meta["resourceVersion"]:
            raise self._conflict(
                target,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        if not sent_version and conditional and target.resource.custom:
            raise self._invalid(
                target,
                target.name,
                "metadata.resourceVersion: Invalid value: 0: must be specified for an update",
                qualified=_qualified(target.resource.plural, target.resource.group),
            )
        # A patch changing the UID: the status strategy of a custom resource copies the stored
        # metadata over it (so it is no precondition there); elsewhere the UID is immutable.
        # (kube-apiserver lists this cause twice: object meta is validated twice)
        if uid_changed and (target.subresource != "status" or not target.resource.custom):
            raise self._invalid(
                target,
                target.name,
                f'metadata.uid: Invalid value: "{meta["uid"]}": field is immutable',
                repeat=2,
            )

    @staticmethod
    def _strategy(target: _Target, current: Mapping[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """What is stored of an accepted update ``new`` of ``current``."""
        if target.subresource == "status":
            # The status strategy: the stored object with the new status, nothing else.
            stored = copy.deepcopy(dict(current))
            if "status" in new:
                stored["status"] = new["status"]
            else:
                stored.pop("status", None)
            return stored
        if target.resource.status:
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
            else:
                new.pop("status", None)
        meta, old_meta = new["metadata"], current["metadata"]
        # What the server owns in metadata is kept whatever the body says.
        for kept in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
        ):
            if kept in old_meta:
                meta[kept] = old_meta[kept]
            else:
                meta.pop(kept, None)
        meta["name"] = target.name
        if "generation" in old_meta:
            meta["generation"] = old_meta["generation"] + (1 if _spec_of(new) != _spec_of(current) else 0)
        else:
            meta.pop("generation", None)
        new["apiVersion"] = current["apiVersion"]
        new["kind"] = current["kind"]
        if target.resource.schema:
            _apply_defaults(new, target.resource.schema)
        return new

    def _patch(self, target: _Target, current: dict[str, Any], action: Action) -> dict[str, Any]:
        base = self._scale_of(target, current) if target.subresource == "scale" else current
        if action.patch_type == "merge":
            if not isinstance(action.body, Mapping):
                raise status_error(400, "BadRequest", "a merge patch must be a JSON object")
            patched = merge_patch(base, action.body)
        else:
            try:
                patched = json_patch(base, action.body)
            except JsonPatchError as exc:
                # kube-apiserver answers a bare 422, nothing of which operation failed (here it is
                # the ApiError's __cause__, for a test's debugging).
                raise status_error(
                    422, "Invalid", "the server rejected our request due to an error in our request"
                ) from exc
        if not isinstance(patched, dict):
            raise status_error(
                422, "Invalid", "the server rejected our request due to an error in our request"
            )
        sent_version = (
            (action.body.get("metadata") or {}).get("resourceVersion")
            if action.patch_type == "merge"
            else None
        )
        if not sent_version:
            # A patch is not conditional on the resourceVersion unless it sets one.
            patched.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self._update(target, current, patched, conditional=False)

    def _delete(self, target: _Target, options: Any) -> dict[str, Any]:
        current = self._existing(target)
        meta = current["metadata"]
        preconditions = (options or {}).get("preconditions") or {}
        kind = target.resource.kind
        kind = f"{kind}.{target.resource.group}" if target.resource.group else kind
        if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
            raise self._conflict(
                target,
                f"the UID in the precondition ({preconditions['uid']}) does not match the UID in record "
                f"({meta['uid']}). The object might have been deleted and then recreated",
                qualified=kind,
            )
        version = preconditions.get("resourceVersion")
        if version and str(version) != meta["resourceVersion"]:
            raise self._conflict(
                target,
                f"the ResourceVersion in the precondition ({version}) does not match the ResourceVersion "
                f"in record ({meta['resourceVersion']}). The object might have been modified",
                qualified=kind,
            )
        grace = (options or {}).get("gracePeriodSeconds")
        graceful_pod = (
            target.resource.plural == "pods"
            and target.resource.group == ""
            and (current.get("spec") or {}).get("nodeName")
            and grace != 0
        )
        if meta.get("finalizers") or graceful_pod:
            if meta.get("deletionTimestamp"):
                return current
            deleting = copy.deepcopy(current)
            deleting["metadata"]["deletionTimestamp"] = self._timestamp()
            deleting["metadata"]["deletionGracePeriodSeconds"] = (
                int(grace) if grace is not None else 30 if graceful_pod else 0
            )
            if "generation" in meta:
                deleting["metadata"]["generation"] = meta["generation"] + 1
            deleting["metadata"]["resourceVersion"] = self._next_revision()
            self._server.store[target.key] = deleting
            return deleting
        del self._server.store[target.key]
        self._next_revision()
        if target.resource.answers_deleted:
            return current
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": target.name,
                **({"group": target.resource.group} if target.resource.group else {}),
                "kind": target.resource.plural,
                "uid": meta["uid"],
            },
        }

    # -- discovery ---------------------------------------------------------------------------

    def _discovery(self, group: str, version: str) -> dict[str, Any]:
        """The ``APIResourceList`` of a group-version: each kind, and its ``/status`` and
        ``/scale`` subresources (``autoscaling/v1`` ``Scale``), as the API server lists them."""
        served = sorted(
            (r for r in self._server.resources.values() if r.group == group and version in r.versions),
            key=lambda r: r.plural,
        )
        if not served:  # the API server's mux answers, in plain text
            raise ApiError(404, "Not Found", "404 page not found\n", {})
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        resources: list[dict[str, Any]] = []
        for r in served:
            resources.append(
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": verbs,
                }
            )
            sub = {"singularName": "", "namespaced": r.namespaced, "verbs": ["get", "patch", "update"]}
            if r.status:
                resources.append({"name": f"{r.plural}/status", "kind": r.kind, **sub})
            if r.scale is not None:
                resources.append(
                    {
                        "name": f"{r.plural}/scale",
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        **sub,
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": _api_version(group, version),
            "resources": resources,
        }

    # -- /scale ------------------------------------------------------------------------------

    def _scale_of(self, target: _Target, current: Mapping[str, Any]) -> dict[str, Any]:
        spec_path, status_path, selector_path = self._scale_paths(target)
        meta = current["metadata"]
        selector = _dig(current, selector_path) if selector_path else None
        if isinstance(selector, Mapping):  # a Deployment's label selector object
            labels = selector.get("matchLabels") or {}
            selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            # autoscaling/v1 omits spec.replicas when it is 0 (omitempty), not status.replicas
            "spec": {"replicas": replicas} if (replicas := _dig(current, spec_path)) else {},
            "status": {
                "replicas": _dig(current, status_path) or 0,
                **({"selector": selector} if selector else {}),
            },
        }

    def _scale_paths(self, target: _Target) -> tuple[str, str, str]:
        assert target.resource.scale is not None  # _parse refuses /scale of a kind without it
        spec_path, status_path, selector_path = target.resource.scale
        if target.resource.kind == "Deployment" or not target.resource.custom:
            selector_path = "spec.selector"
        return spec_path, status_path, selector_path

    def _write_scale(self, target: _Target, current: dict[str, Any], scale: dict[str, Any]) -> dict[str, Any]:
        sent_uid = scale["metadata"].get("uid")
        if sent_uid and sent_uid != current["metadata"]["uid"] and not target.resource.custom:
            # The apps registry checks a UID sent in the Scale; a custom resource's /scale does not.
            raise self._conflict(
                target,
                f"Precondition failed: UID in precondition: {sent_uid}, UID in object meta: "
                f"{current['metadata']['uid']}",
                qualified=f"{target.resource.plural}/scale.{target.resource.group}",
            )
        sent_version = scale["metadata"].get("resourceVersion")
        if sent_version and str(sent_version) != current["metadata"]["resourceVersion"]:
            raise self._conflict(
                target,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        spec_path = self._scale_paths(target)[0]
        updated = copy.deepcopy(current)
        _put(updated, spec_path, (scale.get("spec") or {}).get("replicas", 0))
        if updated != current:
            updated["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
            updated["metadata"]["resourceVersion"] = self._next_revision()
            self._server.store[target.key] = updated
        return self._scale_of(target, updated)

    # -- paths, errors, counters ---------------------------------------------------------------

    def _parse(self, path: str) -> _Target:
        parts = [p for p in path.split("?", 1)[0].split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _no_such_resource()
        namespace = ""
        # /namespaces/<ns>/<plural>...: a namespaced resource; /namespaces[/<ns>[/status]] is the
        # Namespace kind itself.
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _no_such_resource()
        plural, name, subresource = (*rest, "", "")[:3]
        resource = self._server.resources.get((group, plural))
        if (
            resource is None
            or version not in resource.versions
            or (resource.namespaced and name and not namespace)
            or (not resource.namespaced and namespace)
        ):
            raise _no_such_resource()
        if (subresource and subresource not in ("status", "scale")) or (
            (subresource == "status" and not resource.status)
            or (subresource == "scale" and resource.scale is None)
        ):
            raise _no_such_resource()
        return _Target(resource, version, namespace, name, subresource)

    def _by_kind(self, api_version: str, kind: str) -> Resource:
        group = api_version.rpartition("/")[0]
        for resource in self._server.resources.values():
            if resource.group == group and resource.kind == kind:
                return resource
        raise ValueError(f"FakeKube serves no {kind} in {api_version}: register() it")

    def _not_found(self, target: _Target) -> ApiError:
        what = _qualified(target.resource.plural, target.resource.group)
        return status_error(
            404,
            "NotFound",
            f'{what} "{target.name}" not found',
            name=target.name,
            resource=target.resource.plural,
            group=target.resource.group,
        )

    def _conflict(self, target: _Target, why: str, *, qualified: str = "") -> ApiError:
        what = qualified or _qualified(target.resource.plural, target.resource.group)
        return status_error(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {what} "{target.name}": {why}',
            name=target.name,
            resource=target.resource.plural,
            group=target.resource.group,
        )

    def _invalid(
        self, target: _Target, name: str, cause: str, *, qualified: str = "", repeat: int = 1
    ) -> ApiError:
        kind = target.resource.kind
        qualified = qualified or (f"{kind}.{target.resource.group}" if target.resource.group else kind)
        field_name, _, detail = cause.partition(": ")
        return status_error(
            422,
            "Invalid",
            f'{qualified} "{name}" is invalid: {cause}',
            name=name,
            resource=kind,
            group=target.resource.group,
            causes=[{"reason": "FieldValueInvalid", "message": detail, "field": field_name}] * repeat,
        )

    def _uid(self) -> str:
        return str(uuid.UUID(int=self._server.random.getrandbits(128), version=4))

    def _next_revision(self) -> str:
        self._server.revision += 1
        return str(self._server.revision)

    def _timestamp(self) -> str:
        now = self._server.now()
        moment = (
            now if isinstance(now, datetime.datetime) else datetime.datetime.fromtimestamp(now, datetime.UTC)
        )
        return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _no_such_resource() -> ApiError:
    return status_error(404, "NotFound", "the server could not find the requested resource")


def _storage_precondition(target: _Target, what: str, wanted: str, actual: str) -> str:
    """The storage layer's message for a failed precondition, as kube-apiserver passes it on."""
    resource = target.resource
    prefix = f"{resource.group}/" if resource.group else ""
    key = f"/registry/{prefix}{resource.plural}/{target.namespace}/{target.name}".replace("//", "/")
    return (
        f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: "
        f"Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {actual}"
    )


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _apply_defaults(obj: Any, schema: Mapping[str, Any]) -> None:
    """Fill in the ``default`` s of a structural schema where ``obj`` has no value, as the API
    server does for custom resources (on create, update and read)."""
    if isinstance(obj, dict):
        for key, prop in (schema.get("properties") or {}).items():
            if key not in obj and "default" in prop:
                obj[key] = copy.deepcopy(prop["default"])
            if key in obj:
                _apply_defaults(obj[key], prop)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for value in obj.values():
                _apply_defaults(value, extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for item in obj:
            _apply_defaults(item, schema["items"])


def _spec_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What counts for ``generation``: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def _put(obj: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        obj = obj.setdefault(part, {})
    obj[last] = value


# -- selectors ----------------------------------------------------------------------------------

_REQUIREMENT = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9_.-]*)|\s(?P<set>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)


def _split_requirements(selector: str) -> Iterator[str]:
    depth, start = 0, 0
    for i, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            yield selector[start:i]
            start = i + 1
    if selector[start:].strip():
        yield selector[start:]


def _label_selector(selector: str) -> Callable[[Mapping[str, str]], bool]:
    """A label selector's matcher (the syntax of ``kubectl -l``)."""
    # (key, operator, values): = and != hold one value; in/notin a set; exists and !exists none.
    requirements: list[tuple[str, str, frozenset[str]]] = []
    for requirement in _split_requirements(selector):
        match = _REQUIREMENT.match(requirement)
        if match is None:
            raise status_error(400, "BadRequest", f"unable to parse requirement: {requirement!r}")
        op = (
            {"==": "="}.get(match["op"], match["op"])
            or match["set"]
            or ("!exists" if match["neg"] else "exists")
        )
        values = match["values"] if match["set"] else match["value"]
        requirements.append((match["key"], op, frozenset(v.strip() for v in (values or "").split(","))))

    def holds(labels: Mapping[str, str], key: str, op: str, values: frozenset[str]) -> bool:
        if op == "exists":
            return key in labels
        if op == "!exists":
            return key not in labels
        # != and notin also match an object without the label, as the API server's do.
        return (labels.get(key) in values) == (op in ("=", "in"))

    return lambda labels: all(holds(labels, *requirement) for requirement in requirements)


def _field_selector(selector: str) -> Callable[[Mapping[str, Any]], bool]:
    """A field selector's matcher: ``path=value`` / ``path!=value`` on dotted paths."""
    requirements: list[tuple[str, bool, str]] = []  # (path, equal?, value)
    for requirement in _split_requirements(selector):
        parts = re.split(r"(!=|==|=)", requirement.strip(), maxsplit=1)
        if len(parts) != 3:
            raise status_error(400, "BadRequest", f"invalid field selector: {requirement!r}")
        path, op, value = parts
        requirements.append((path, op != "!=", value))
    return lambda obj: all(
        (str(_dig(obj, path) or "") == value) == equal for path, equal, value in requirements
    )


# -- patches ------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``target`` after the merge patch ``patch`` (null deletes; lists are replaced)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class JsonPatchError(Exception):
    """An RFC 6902 operation that cannot be applied (a failed ``test`` included)."""


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, *, insert: bool) -> int:
    if token == "-" and insert:
        return len(container)
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise JsonPatchError(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not insert):
        raise JsonPatchError(f"array index {index} out of bounds")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    for token in tokens[:-1]:
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, insert=False)]
        else:
            raise JsonPatchError(f"path /{'/'.join(tokens)} does not exist")
    return doc


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, insert=False)]
    raise JsonPatchError(f"path {path} does not exist")


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise JsonPatchError("cannot remove the whole document")
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, insert=False))
    raise JsonPatchError(f"path {path} does not exist")


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise JsonPatchError(f"path {path} does not exist")
        parent[last] = value
    elif isinstance(parent, list):
        index = _index(parent, last, insert=not replace)
        if replace:
            parent[index] = value
        else:
            parent.insert(index, value)
    else:
        raise JsonPatchError(f"path {path} does not exist")
    return doc


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values (RFC 6902 ``test``): unlike Python's, ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: ``target`` (not changed) after ``operations``; raises ``JsonPatchError``."""
    if not isinstance(operations, list):
        raise JsonPatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        kind, path = op.get("op"), op.get("path")
        if not isinstance(path, str):
            raise JsonPatchError(f"operation {op!r} has no path")
        if kind == "test":
            try:
                found = _get(doc, path)
            except JsonPatchError:
                raise JsonPatchError(f"testing value {path} failed: test failed") from None
            if not _json_equal(found, op.get("value")):
                raise JsonPatchError(f"testing value {path} failed: test failed")
        elif kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=True)
        elif kind == "remove":
            _remove(doc, path)
        elif kind in ("move", "copy"):
            source = op.get("from", "")
            if kind == "move" and (path + "/").startswith(source + "/") and path != source:
                raise JsonPatchError(f"cannot move {source} into its own child {path}")
            value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
            doc = _add(doc, path, value)
        else:
            raise JsonPatchError(f"unexpected kind of operation: {kind!r}")
    return doc
