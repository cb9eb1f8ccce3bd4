"""Taking turns by namespace: who is served next when something the operator shares frees up.

One operator serves every namespace, and a namespace is a tenant that can create as many
objects as its quota allows. Wherever the operator's work queues up, one first-come line lets
a namespace that floods it hold back every other: 3000 new WebServers in one namespace made a
change in another wait 126 s for its status (``tools/bench/noisy_neighbour.py``). Two such
lines exist, and both take turns through :class:`RoundRobin`:

- the reconcile slots (`shared.controller.slots.FairSlots`): which waiting pass runs
  next;
- the client's token bucket (:class:`shared.client.kube.TokenBucket`): which waiting request
  goes out next. A pass holds its slot while its requests wait for tokens, and one pass can
  ask for many at once (a WebServer creating 64 pods in one slow-start batch), so a change in
  a quiet namespace that got a slot still waited behind every token a busy one had asked for.

Neither the API server's priority and fairness nor controller-runtime helps here: the former
shares by user, and every request of the operator is one user's; the latter has one FIFO queue
per controller.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from typing import NamedTuple


class Woken(NamedTuple):
    """Whom :meth:`RoundRobin.wake` served: the group, and the item if it was one
    (:meth:`RoundRobin.put`), None for a waiter."""

    group: Hashable
    item: Hashable = None


class RoundRobin:
    """Waiters in groups: first come first served within a group, round-robin over the groups.

    The groups that have waiters form a round, in order: :meth:`wake` wakes the first waiter of
    the first group, which then goes to the end of the round. A group that starts to wait
    joins at the end, so it waits for at most one waiter of each group ahead of it.
    :meth:`to_back` sends a group to the end out of turn (the one that was just served by
    other means). Waiters live on the running event loop.

    A place in the line can also be held by an item (:meth:`put`: a key, not None, that has no
    task waiting for it): :meth:`wake` hands it back to the caller instead of waking anyone, in
    its turn like any waiter. It costs a reference in a deque where a waiting task costs its
    coroutine's frames, a future and their bookkeeping (about 4 KB).
    """

    def __init__(self) -> None:
        # Group -> its waiters (futures) and items in arrival order; the dict's order is the
        # round. A cancelled waiter stays in its queue and is skipped when reached.
        self._groups: dict[Hashable, deque[Hashable]] = {}
        self._waiting = 0

    def __len__(self) -> int:
        """Waiters not yet woken (cancelled ones not counted) and items not yet taken."""
        return self._waiting

    def _append(self, group: Hashable, entry: Hashable) -> None:
        queue = self._groups.get(group)
        if queue is None:
            queue = self._groups[group] = deque()
        queue.append(entry)
        self._waiting += 1

    def put(self, group: Hashable, item: Hashable) -> None:
        """Queue ``item`` in ``group``: :meth:`wake` returns it in its turn."""
        if item is None:
            raise ValueError("an item cannot be None (None means a waiter was woken)")
        self._append(group, item)

    async def wait(self, group: Hashable, abandon: Callable[[], None]) -> None:
        """Wait in ``group`` until woken. A waiter cancelled after it was woken calls ``abandon``
        (to give back what it was handed) before it raises."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._append(group, waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                abandon()
            else:
                self._waiting -= 1
            raise

    def wake(self, eligible: Callable[[Hashable], bool] | None = None) -> Woken | None:
        """Wake the first waiter of the first group of the round (of the first ``eligible``
        group, if given), or take its first item, and send that group to the end; None when
        there is none."""
        for group in list(self._groups) if eligible is not None else self._first():
            if eligible is not None and not eligible(group):
                continue
            queue = self._groups.pop(group)
            # A waiter cancelled while waiting: dropped here.
            while queue and isinstance(first := queue[0], asyncio.Future) and first.done():
                queue.popleft()
            if not queue:
                continue
            entry = queue.popleft()
            if queue:
                self._groups[group] = queue
            self._waiting -= 1
            if isinstance(entry, asyncio.Future):
                entry.set_result(None)
                return Woken(group)
            return Woken(group, entry)
        return None

    def _first(self) -> Iterator[Hashable]:
        """The first group of the round, again and again as it changes, until there is none."""
        while self._groups:
            yield next(iter(self._groups))

    def to_back(self, group: Hashable) -> None:
        if group in self._groups:
            self._groups[group] = self._groups.pop(group)
