"""`FairSlots`: at most so many passes at once, taken in turns by namespace, so that one
namespace with many objects to work on never holds every slot while another waits."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from shared.client.fair import RoundRobin


class FairSlots:
    """At most ``limit`` holders at once, taking turns by group (namespace) when they wait
    (``RoundRobin``), and no group holding more than ``limit - 1``.

    A slot that comes free goes to the first waiter of the first group of the round, and that
    group goes to the end of the round. The group of the holder that gives a slot back goes to
    the end too, so a group that held slots while another queued up does not get the next one
    ahead of it: with one slot, 100 holders waiting in group A and then one in group B, B is
    served second.

    Taking turns is not enough when a group's holders are slow (a WebServer creating 100 pods
    holds its slot for as long as its requests wait for the client's rate limit): every slot
    could be held by them, and a newcomer of another group would wait for the first of them to
    end. So one group never holds the last slot (with a ``limit`` of 1 there is nothing to keep):
    a group holding no slot finds one free at once unless other groups hold them. A single busy
    group runs ``limit - 1`` holders at once, its waiters staying in line while the last slot
    is free.

    A slot is handed straight from the holder that gives it back to the waiter it goes to, so
    no newcomer can take it in between; a waiter cancelled as it was handed one passes it on.

    Who waits need not be a task: ``take_or_queue`` queues a key in the same line, and the
    slot that comes to it is handed to ``start(key)``, held, which starts the key's work then
    (``Controller`` starts a request's task only then). ``start`` returning False (the key
    is no longer wanted) passes the slot on.
    """

    def __init__(self, limit: int, start: Callable[[Hashable], bool] | None = None) -> None:
        if limit < 1:
            raise ValueError(f"the limit must be >= 1, not {limit}")
        self.limit = limit
        self.per_group = max(1, limit - 1)
        self._held = 0
        self._held_by: dict[Hashable, int] = {}
        self._at_most = 0  # groups holding per_group slots
        self._waiters = RoundRobin()
        self._start = start

    @property
    def held(self) -> int:
        """Slots held now."""
        return self._held

    @property
    def waiting(self) -> int:
        """Holders waiting for a slot now, and keys queued for one."""
        return len(self._waiters)

    def held_by(self, group: Hashable) -> int:
        return self._held_by.get(group, 0)

    def slot(self, group: Hashable) -> _Slot:
        """A reusable ``async with`` that holds one slot, waiting in ``group``."""
        return _Slot(self, group)

    def _may_take(self, group: Hashable) -> bool:
        return self._held < self.limit and self._held_by.get(group, 0) < self.per_group

    def _take(self, group: Hashable) -> None:
        self._held += 1
        held = self._held_by[group] = self._held_by.get(group, 0) + 1
        self._at_most += held == self.per_group

    def _give_back(self, group: Hashable) -> None:
        held = self._held_by.pop(group) - 1
        self._at_most -= held + 1 == self.per_group
        if held:
            self._held_by[group] = held
        self._held -= 1

    async def acquire(self, group: Hashable) -> None:
        # A slot free for this group means no waiter may take it (release hands every slot it
        # can to a waiter): nobody is passed over.
        if self._may_take(group):
            self._take(group)
            return
        await self._waiters.wait(group, abandon=lambda: self.release(group))

    def try_acquire(self, group: Hashable) -> bool:
        """Take a slot if one is free for ``group`` now, without waiting."""
        if self._may_take(group):
            self._take(group)
            return True
        return False

    def take_or_queue(self, group: Hashable, key: Hashable) -> bool:
        """Take a slot for ``key`` now (True), or queue ``key`` in ``group`` (False): the slot
        that comes to it is handed to ``start(key)``. The caller queues a key once."""
        if self._start is None:
            raise RuntimeError("queueing keys needs a start function")
        if self.try_acquire(group):
            return True
        self._waiters.put(group, key)
        return False

    def release(self, group: Hashable) -> None:
        self._give_back(group)
        self._waiters.to_back(group)  # its turn is over
        # Only a group at its most is passed over (the one busy group, if any).
        while (woken := self._waiters.wake(self._may_take if self._at_most else None)) is not None:
            self._take(woken.group)  # the slot passes to it, held all along
            if woken.item is None or self._start is None or self._start(woken.item):
                return
            self._give_back(woken.group)  # a key no longer wanted: the slot goes on


class _Slot:
    def __init__(self, slots: FairSlots, group: Hashable) -> None:
        self._slots = slots
        self._group = group

    async def __aenter__(self) -> None:
        await self._slots.acquire(self._group)

    async def __aexit__(self, *exc: object) -> None:
        self._slots.release(self._group)
