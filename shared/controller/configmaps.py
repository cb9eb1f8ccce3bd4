"""ConfigMaps that specs reference by name, read when a pass needs them: a ConfigMap no object
references costs (almost) nothing, however large, labelled or not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

from shared.client.kube import KubeClient
from shared.controller.watches import Watch

T = TypeVar("T")
Key = tuple[str, str]  # (namespace, name)
# ConfigMaps read and parsed at once (each up to 1 MiB of data, a few times that parsed).
READS_AT_ONCE = 2


@dataclass(frozen=True)
class Held(Generic[T]):
    """What is kept of one referenced ConfigMap: the state it was read at, the keys the summary
    answers for, and the summary (None: the ConfigMap did not exist)."""

    resource_version: str
    want: frozenset[str]
    value: T | None


class ReferencedConfigMaps(Generic[T]):
    """See below. ``summarize(body, want)`` makes the summary kept of a ConfigMap
    body (``want``: the keys its readers asked about); it runs in a thread.

    A Deployment may mount any ConfigMap of its namespace, and so may the operators' kinds. Watching
    every ConfigMap with its data would hold, and parse on the event loop, whatever any tenant
    stores in any ConfigMap; watching only labelled ones puts a friction on users that no peer
    imposes. So, as controller-runtime's metadata-only watches:

    - ConfigMaps are watched as metadata only (``metadata_only``):
      an event carries a name and a resourceVersion (which changes with every write), and the event
      of a ConfigMap that no object references is dropped at once: nothing is kept of it;
    - a pass asks for the ConfigMaps its object references (``ReferencedConfigMaps.read``). Each
      is read with a GET the first time and again after the watch reported a write of it; the body
      is parsed and summarised in a thread (``asyncio.to_thread``), and only the summary is kept (a
      digest and the keys asked for, parsed dates: the ``summarize`` function's result), never the
      data. At most ``READS_AT_ONCE`` bodies are read and parsed at a time, which bounds the
      transient memory of reads to that many ConfigMaps (1 MiB of data each, at most);
    - which object reads which is kept (``ReferencedConfigMaps.refer``), so a write wakes exactly
      its readers, and what no object reads any more is dropped.
    """

    def __init__(
        self,
        kube: KubeClient,
        kick: Callable[[str, str], None],
        summarize: Callable[[Mapping[str, Any], frozenset[str]], T],
        *,
        reads_at_once: int = READS_AT_ONCE,
    ) -> None:
        self._kube = kube
        self._kick = kick
        self._summarize = summarize
        self._reads_at_once = reads_at_once
        self._reading: asyncio.Semaphore | None = None
        self._held: dict[Key, Held[T]] = {}
        # Per referenced ConfigMap: bumped by every event that changes it, so a read that was
        # under way when the change came is not kept as current.
        self._epoch: dict[Key, int] = {}
        self._readers: dict[Key, set[str]] = {}  # ConfigMap -> the names of objects reading it
        self._reads: dict[Key, frozenset[Key]] = {}  # object -> the ConfigMaps it reads

    def watch(self, group: str = "", version: str = "v1", plural: str = "configmaps") -> Watch:
        """The metadata-only watch of ConfigMaps whose events go to ``changed``."""
        return Watch(group, version, plural, self.changed, metadata_only=True)

    def changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """One watch event (metadata only): wakes the readers of a ConfigMap that changed."""
        meta = body.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        readers = self._readers.get(key)
        if not readers:
            return  # referenced by no object: nothing is kept
        held = self._held.get(key)
        rv = str(meta.get("resourceVersion") or "")
        unchanged = held is not None and held.value is not None and held.resource_version == rv
        if event_type != "DELETED" and unchanged:
            return  # the state already read (a relist, the echo of the read's own state)
        self._epoch[key] = self._epoch.get(key, 0) + 1
        self._held.pop(key, None)
        for reader in sorted(readers):
            self._kick(key[0], reader)

    def refer(self, namespace: str, reader: str, names: Iterable[str]) -> None:
        """The object ``reader`` of ``namespace`` reads the ConfigMaps ``names`` now (none: it
        reads none, or is gone)."""
        wanted = frozenset((namespace, name) for name in names)
        old = self._reads.pop((namespace, reader), frozenset())
        for key in old - wanted:
            readers = self._readers.get(key)
            if readers is not None:
                readers.discard(reader)
                if not readers:
                    del self._readers[key]
                    self._held.pop(key, None)
                    self._epoch.pop(key, None)
        if wanted:
            self._reads[(namespace, reader)] = wanted
        for key in wanted:
            self._readers.setdefault(key, set()).add(reader)

    async def read(self, namespace: str, name: str, want: frozenset[str] = frozenset()) -> T | None:
        """The summary of ConfigMap ``name`` (None if it does not exist), answering for the keys
        ``want``: the one kept while the watch reports no write, else read now. Raises
        ``ApiError`` when the read fails (not for a 404)."""
        key = (namespace, name)
        held = self._held.get(key)
        if held is not None and want <= held.want:
            return held.value
        if held is not None:
            want = want | held.want
        if self._reading is None:
            self._reading = asyncio.Semaphore(self._reads_at_once)
        async with self._reading:
            # Another pass may have read it while this one waited for its turn.
            held = self._held.get(key)
            if held is not None and want <= held.want:
                return held.value
            epoch = self._epoch.get(key, 0)
            raw = await self._kube.get_bytes(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
            if raw is None:
                rv, value = "", None
            else:
                rv, value = await asyncio.to_thread(self._parse, raw, want)
        if self._epoch.get(key, 0) == epoch and key in self._readers:
            self._held[key] = Held(rv, want, value)
        return value

    def _parse(self, raw: bytes, want: frozenset[str]) -> tuple[str, T]:
        body = orjson.loads(raw)
        rv = str((body.get("metadata") or {}).get("resourceVersion") or "")
        return rv, self._summarize(body, want)

    def held(self) -> dict[Key, Held[T]]:
        """What is kept, by ConfigMap (for tests and the sizing of the operator)."""
        return dict(self._held)

    def readers(self, namespace: str, name: str) -> frozenset[str]:
        return frozenset(self._readers.get((namespace, name), ()))

    def __len__(self) -> int:
        return len(self._held)
