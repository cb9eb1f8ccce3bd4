"""Expectations: what a pass wrote and the watch has not shown yet, so that the next pass,
planning from the cache, neither does it again nor undoes it (controller-runtime's and the
ReplicaSet controller's expectations). Kept per owner, forgotten with it, and given up after
a time-to-live, so a lost watch event delays a pass but never stops it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

DELETE_TTL = 300.0
PATCH_TTL = 30.0


class Child(Protocol):
    """A child's view: its name and whether it is being deleted (a dataclass)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def name(self) -> str: ...

    @property
    def deleting(self) -> bool: ...


P = TypeVar("P", bound=Child)


class DeleteExpectations(Generic[P]):
    """Deletes sent and not yet seen by the watch, per owner: a pass counts those pods as
    terminating until the watch shows them so, or `ttl` seconds have passed."""

    def __init__(self, ttl: float = DELETE_TTL) -> None:
        self._ttl = ttl
        self._pending: dict[str, dict[str, float]] = {}

    def expect(self, owner_uid: str, names: Iterable[str]) -> None:
        deadline = time.monotonic() + self._ttl
        self._pending.setdefault(owner_uid, {}).update(dict.fromkeys(names, deadline))

    def cancel(self, owner_uid: str, names: Iterable[str]) -> None:
        """Deletes that failed: the pods are still there and must be counted."""
        pending = self._pending.get(owner_uid, {})
        for name in names:
            pending.pop(name, None)
        if not pending:
            self._pending.pop(owner_uid, None)

    def apply(self, owner_uid: str, pods: Sequence[P]) -> list[P]:
        """Pods as they will be: our pending deletes shown as terminating."""
        pending = self._pending.get(owner_uid, {})
        now = time.monotonic()
        seen_alive = {p.name for p in pods if not p.deleting}
        for name in list(pending):
            if name not in seen_alive or pending[name] < now:
                del pending[name]  # the watch caught up (or we gave up waiting)
        if not pending:
            # No empty dict kept for every WebServer that once scaled down.
            self._pending.pop(owner_uid, None)
        return [dataclasses.replace(p, deleting=True) if p.name in pending else p for p in pods]

    def forget(self, owner_uid: str) -> None:
        self._pending.pop(owner_uid, None)


class PatchExpectations:
    """Patches sent and not yet seen by the watch, by key (a tuple starting with the owner's
    UID): an older view of the object is not acted on until it shows the patched values, or
    `ttl` seconds have passed."""

    def __init__(self, ttl: float = PATCH_TTL) -> None:
        self._ttl = ttl
        self._pending: dict[Hashable, tuple[dict[str, Any], float]] = {}

    def expect(self, key: Hashable, values: Mapping[str, Any]) -> None:
        self._pending[key] = (dict(values), time.monotonic() + self._ttl)

    def in_flight(self, key: Hashable, observed: Mapping[str, Any]) -> bool:
        """Whether ``observed`` is older than our last patch of ``key``."""
        pending = self._pending.get(key)
        if pending is None:
            return False
        values, deadline = pending
        if all(observed.get(k) == v for k, v in values.items()) or time.monotonic() > deadline:
            del self._pending[key]
            return False
        return True

    def next_expiry(self, owner_uid: str) -> float | None:
        """Seconds until the first of ``owner_uid``'s expectations expires (None: none pending)."""
        deadlines = [
            d for k, (_, d) in self._pending.items() if isinstance(k, tuple) and k[:1] == (owner_uid,)
        ]
        return max(0.001, min(deadlines) - time.monotonic()) if deadlines else None

    def forget(self, owner_uid: str) -> None:
        for key in [k for k in self._pending if isinstance(k, tuple) and k and k[0] == owner_uid]:
            del self._pending[key]
