"""Label-filtered watches and an owner -> children cache.

An operator must neither list nor hold objects that are not its own: children are watched with
a server-side ``labelSelector`` (``managed_labels``, a ``Watch``'s
``labels``), so the API server never sends foreign pods at all.

On top of that, ``OwnerCache`` maps (namespace, controller UID) to a small summary of each
child, fed by the child kind's watch events, so a reconcile finds its children without an API
call. (kopf's own ``@kopf.index`` would do the same, but it holds back every handler until each
new object is indexed, which stalled event processing for tens of seconds under a burst of
pod events on a 2-core machine.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from shared.api.ownership import INSTANCE, controller_of, managed_selector
from shared.api.versions import is_later, revision

OwnerKey = tuple[str, str]
# What the cache keeps of each child (a view dataclass, a name).
S = TypeVar("S")
# How many deleted UIDs a cache remembers (about 2 MB at most): a write-through comes within a
# pass's requests of the DELETED it must not undo, not after thousands of other deletions.
DELETED_UIDS = 10_000


def managed_labels(app: str) -> dict[str, str]:
    """The labels every child of ``app`` carries: the selector of the children's watches."""
    return dict(part.split("=", 1) for part in managed_selector(app).split(","))


@dataclass(frozen=True)
class Orphan:
    """A child of ours without a controller: what adopting it needs."""

    name: str
    uid: str
    deleting: bool
    owner_references: tuple[Mapping[str, Any], ...] = ()


def orphan_of(body: Mapping[str, Any]) -> Orphan:
    meta = body.get("metadata") or {}
    return Orphan(
        name=meta["name"],
        uid=meta.get("uid") or "",
        deleting=bool(meta.get("deletionTimestamp")),
        owner_references=tuple(meta.get("ownerReferences") or ()),
    )


class Version(NamedTuple):
    """Which object a cached name holds, and which state of it."""

    uid: str
    resource_version: str
    creation_timestamp: str

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> Version:
        return cls(
            str(meta.get("uid") or ""),
            str(meta.get("resourceVersion") or ""),
            str(meta.get("creationTimestamp") or ""),
        )

    def as_body(self) -> dict[str, Any]:
        return {
            "metadata": {
                "resourceVersion": self.resource_version,
                "creationTimestamp": self.creation_timestamp,
            }
        }


class OwnerCache(Generic[S]):
    """Children of each owner, kept up to date from watch events; summaries, not full bodies.

    Children that lost their controller (the owner was deleted with ``--cascade=orphan``, or an
    Argo CD Replace) keep their labels; the cache keeps them apart, by namespace and
    ``app.kubernetes.io/instance``, so the owner of that name can adopt them as the ReplicaSet
    controller adopts orphans that match its selector (``OwnerCache.orphans``).

    Handlers also write the objects their requests answered with into the cache ("write-through"),
    so the next pass sees its own work before the watch brings it. Such an answer can be older
    than events the watch has delivered since (the GET answered before a delete, the event came
    first), so the cache keeps each name's UID and resourceVersion beside its summary and ignores
    a state older than the one it holds, and remembers the UIDs whose DELETED it processed (the
    last ``DELETED_UIDS``; UIDs are never reused): without that a deleted child, put back by a
    late write-through, would stay in the cache for good, as no event would ever remove it again.
    """

    def __init__(self, summarize: Callable[[Mapping[str, Any]], S]) -> None:
        self._summarize = summarize
        self._children: dict[OwnerKey, dict[str, S]] = {}
        self._owner: dict[tuple[str, str], OwnerKey] = {}
        # (namespace, instance label) -> name -> Orphan; (namespace, name) -> that key.
        self._orphans: dict[tuple[str, str], dict[str, Orphan]] = {}
        self._orphan_of: dict[tuple[str, str], tuple[str, str]] = {}
        # (namespace, name) -> the Version held, for every name in _owner or _orphan_of.
        self._versions: dict[tuple[str, str], Version] = {}
        # UID -> the revision of its DELETED event (None if not an integer), oldest first.
        self._deleted: OrderedDict[str, int | None] = OrderedDict()

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> str | None:
        """Apply one watch event or write-through; returns the controller UID to wake (None for
        orphans). A state older than the cache's of that name changes nothing."""
        meta = body.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta["name"]
        ref = controller_of(body)
        new_key = (namespace, ref["uid"]) if ref is not None and ref.get("uid") else None
        stale = self._stale(event_type, body, (namespace, name))
        self._remember(event_type, body, stale=stale)
        if stale:
            key = new_key or self._owner.get((namespace, name))
            return key[1] if key else None
        old_key = self._owner.pop((namespace, name), None)
        if old_key is not None and (old_key != new_key or event_type == "DELETED"):
            self._discard(old_key, name)
        if event_type != "DELETED" and new_key is not None:
            self._children.setdefault(new_key, {})[name] = self._summarize(body)
            self._owner[(namespace, name)] = new_key
        self._observe_orphan(event_type, body, namespace, name, orphaned=new_key is None)
        if (namespace, name) in self._owner or (namespace, name) in self._orphan_of:
            self._versions[(namespace, name)] = Version.of(meta)
        else:
            self._versions.pop((namespace, name), None)
        key = new_key or old_key
        return key[1] if key else None

    def _stale(self, event_type: str | None, body: Mapping[str, Any], where: tuple[str, str]) -> bool:
        """Whether ``body`` is older than what the cache knows of its name: a state of a deleted
        object from before its deletion, an earlier state of the object held, or a state of an
        earlier object of the name (whose DELETED, too, must not remove the later one)."""
        uid = str((body.get("metadata") or {}).get("uid") or "")
        if event_type != "DELETED" and uid in self._deleted:
            deleted_at, rv = self._deleted[uid], revision(body)
            # A later state: the DELETED only meant it had left the watch's label selector.
            if deleted_at is None or rv is None or rv <= deleted_at:
                return True
        held = self._versions.get(where)
        if held is None:
            return False
        if held.uid != uid:
            return not is_later(body, held.as_body())
        rv, held_rv = revision(body), revision(held.as_body())
        return event_type != "DELETED" and rv is not None and held_rv is not None and rv < held_rv

    def _remember(self, event_type: str | None, body: Mapping[str, Any], *, stale: bool) -> None:
        """Keep track of deleted UIDs: a DELETED is remembered even when it removes nothing (the
        name holds a later object), a later state of a deleted UID (back in the selector)
        forgets it."""
        uid = str((body.get("metadata") or {}).get("uid") or "")
        if not uid:
            return
        if event_type != "DELETED":
            if not stale:
                self._deleted.pop(uid, None)
            return
        self._deleted[uid] = revision(body)
        self._deleted.move_to_end(uid)
        while len(self._deleted) > DELETED_UIDS:
            self._deleted.popitem(last=False)

    def _observe_orphan(
        self, event_type: str | None, body: Mapping[str, Any], namespace: str, name: str, *, orphaned: bool
    ) -> None:
        old = self._orphan_of.pop((namespace, name), None)
        if old is not None:
            group = self._orphans.get(old, {})
            group.pop(name, None)
            if not group:
                self._orphans.pop(old, None)
        meta = body.get("metadata") or {}
        instance = (meta.get("labels") or {}).get(INSTANCE)
        if event_type == "DELETED" or not orphaned or not instance:
            return
        key = (namespace, instance)
        self._orphans.setdefault(key, {})[name] = orphan_of(body)
        self._orphan_of[(namespace, name)] = key

    def orphans(self, namespace: str, instance: str) -> list[Orphan]:
        """Our children labelled for owner name ``instance`` that have no controller."""
        return list(self._orphans.get((namespace, instance), {}).values())

    def _discard(self, key: OwnerKey, name: str) -> None:
        children = self._children.get(key)
        if children is not None:
            children.pop(name, None)
            if not children:
                del self._children[key]

    def children(self, namespace: str, owner_uid: str) -> list[S]:
        return list(self._children.get((namespace, owner_uid), {}).values())

    def __len__(self) -> int:
        return sum(len(c) for c in self._children.values())
