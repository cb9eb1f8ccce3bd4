"""Writing an object's status whole, and only when it changed.

kopf merge-patches replace lists, so each operator computes the complete status and writes it
in one merge patch of the status subresource.

A pass may run before the watch has delivered the object with our own last write, so "the
status now" is the newest of two: our last write (at the resourceVersion the API server
answered with) and the body's (at its resourceVersion). Comparing with the body alone is wrong
both ways: it writes the same status twice, and — worse — it skips a needed write when the
new status equals the body's *older* one (status A on the body, our write B not seen yet, the
pass wants A again: without this, B stays on the server, and the echo of B wakes no pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.api import conditions
from shared.api.errors import ApiError, Invalid, SupersededError
from shared.api.versions import revision
from shared.client.kube import KubeClient, is_uid_mismatch, namespaced


class StatusWriter:
    """The status subresource of one custom resource kind.

    **Only onto the object the pass read.** A pass can outlive its object: ``kubectl replace
    --force`` deletes and re-creates under the same name while a pass is in flight. Every write
    carries the UID of the body as a precondition (a JSON patch opening with a ``test`` of
    ``/metadata/uid``; a merge patch's ``metadata.uid`` is ignored by a status subresource), so a
    superseded pass never puts its result on the new object: it ends with
    ``shared.client.kube.SupersededError`` and the loop runs again for whatever holds the name.
    The status is sent whole: the newest known status with each key of ``new`` in place of its value
    (None deletes a key; nulls inside a value are dropped). A key's value is replaced, never merged
    into: a nested object written with fewer keys than before keeps none of the old ones.
    """

    def __init__(self, kube: KubeClient, group: str, version: str, plural: str) -> None:
        self.kube = kube
        self.group_version = f"{group}/{version}"
        self.plural = plural
        # uid -> (the resourceVersion our write produced, the status written)
        self._last: dict[str, tuple[int | None, dict[str, Any]]] = {}

    def last(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """The status this process last wrote for ``body`` (None before the first write)."""
        last = self._last.get(body["metadata"]["uid"])
        return None if last is None else last[1]

    def current(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The newest status known: the body's if it is as new as our last write, else ours."""
        last = self._last.get(body["metadata"]["uid"])
        if last is not None:
            written_at, written = last
            seen_at = revision(body)
            if written_at is None or seen_at is None or seen_at < written_at:
                # A copy: a pass may set keys on it (Netperf does), and it may be the stored
                # body's own status (see _share).
                return dict(written)
            # The body is as new as our write. Its echo may have come before the write's answer
            # (then it was not told apart as an echo, and this pass followed it): share now.
            self._share(body)
        return dict(body.get("status") or {})

    def is_echo(self, body: Mapping[str, Any]) -> bool:
        """Whether ``body`` carries the status this process last wrote (the echo of our write,
        which needs no pass; any other status change does)."""
        last = self.last(body)
        echo = last is not None and conditions.status_patch(body.get("status"), last) is None
        if echo:
            self._share(body)
        return echo

    def _share(self, body: Mapping[str, Any]) -> None:
        """Keep our last write as the body's own values once the body carries it (the echo):
        the same keys, equal values, but the body's objects, so the conditions and strings
        of each object's status are held once (the work queue stores the body), not twice."""
        uid = body["metadata"]["uid"]
        last = self._last.get(uid)
        status = body.get("status")
        if last is None or not isinstance(status, Mapping):
            return
        if all(status.get(key) is value for key, value in last[1].items()):
            return  # shared already
        if type(status) is dict and status.keys() == last[1].keys() and status == last[1]:
            # The usual case, the body's status is our write whole: hold its dict itself, not
            # a dict of its values (about 0.5 KB per object on the leader, measured at 2000).
            self._last[uid] = (last[0], status)
            return
        shared = {key: status.get(key) for key in last[1]}
        if shared == last[1]:
            self._last[uid] = (last[0], shared)

    def forget(self, uid: str) -> None:
        self._last.pop(uid, None)

    async def _replaced(self, status_path: str, uid: str) -> bool:
        """Whether the name no longer holds the object of ``uid``: the API server answers a failed
        JSON-patch ``test`` with a bare 422, like other refusals, so it is asked (with a list,
        the verb the operator holds for its kind anyway)."""
        collection, _, name = status_path.removesuffix("/status").rpartition("/")
        found = await self.kube.get(collection, params={"fieldSelector": f"metadata.name={name}"})
        return not any(item["metadata"].get("uid") == uid for item in found.get("items") or [])

    async def write(self, body: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """Write ``new`` as the whole status unless it changes nothing; True when written."""
        meta = body["metadata"]
        new = dict(new)
        if conditions.status_patch(self.current(body), new) is None:
            return False
        path = namespaced(meta["namespace"], self.plural, meta["name"], self.group_version) + "/status"
        # Not a deep merge: TDSet's decidedBy {layer: default} written over {layer: override,
        # entry: annotation} kept the stale entry.
        whole = _without_nulls({**self.current(body), **new})
        try:
            answer = await self.kube.json_patch(
                path, [{"op": "add", "path": "/status", "value": whole}], uid=meta["uid"]
            )
        except ApiError as exc:
            if is_uid_mismatch(exc) or (isinstance(exc, Invalid) and await self._replaced(path, meta["uid"])):
                raise SupersededError(
                    f"{meta['namespace']}/{meta['name']} (uid {meta['uid']}) is gone or was replaced: "
                    "its status is not written"
                ) from exc
            raise
        self._last[meta["uid"]] = (revision(answer or {}), whole)
        return True


def _without_nulls(value: Any) -> Any:
    """``value`` without the None values of its mappings, at every depth (the API server would
    store them as nulls, which a schema without ``nullable`` refuses)."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
