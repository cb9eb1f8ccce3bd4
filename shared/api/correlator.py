"""Which Events to post, which to fold into one already posted, which to drop: client-go's
event correlator (``tools/record``'s ``EventCorrelator``) as pure logic, and the fair queue the
recorder posts from.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from shared.api.lru import LRU

# The API server refuses longer Event messages (client-go cuts them too).
MAX_MESSAGE = 1024
CACHE_SIZE = 4096  # entries of each cache, as client-go's
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_WINDOW = 600.0  # seconds between two similar Events for them to count as a burst
SPAM_BURST = 25
SPAM_REFILL = 300.0  # seconds per token
AGGREGATE_PREFIX = "(combined from similar events): "

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def cut(message: str) -> str:
    """``message`` cut to what the API server takes."""
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def _object_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    obj = event["involvedObject"]
    return (
        event.get("source", {}).get("component", ""),
        event.get("source", {}).get("host", ""),
        obj.get("kind", ""),
        obj.get("namespace", ""),
        obj.get("name", ""),
        obj.get("uid", ""),
        obj.get("apiVersion", ""),
    )


def spam_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """What the spam filter counts by: the source and the object (its uid included)."""
    return _object_key(event)


def aggregate_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """What makes Events similar: the source, the object, the type and the reason."""
    return (*_object_key(event), event.get("type", ""), event.get("reason", ""))


def message_digest(message: str) -> bytes:
    """A fixed-size stand-in for a message in the caches (a message may be 1 KiB)."""
    return hashlib.blake2b(message.encode(), digest_size=16).digest()


def event_key(event: Mapping[str, Any]) -> tuple[Hashable, ...]:
    """What makes Events identical: similar, and the same message."""
    return ("event", *aggregate_key(event), message_digest(event.get("message", "")))


class TokenBucket:
    """``burst`` tokens, refilled one per ``refill`` seconds; each accepted Event takes one.
    Passive: it is refilled when asked, from the instants it is given (a clock that goes back
    refills nothing)."""

    __slots__ = ("at", "burst", "refill", "tokens")

    def __init__(self, burst: int, refill: float, now: float) -> None:
        self.burst, self.refill = burst, refill
        self.tokens, self.at = float(burst), now

    def try_accept(self, now: float) -> bool:
        if now > self.at:
            self.tokens = min(float(self.burst), self.tokens + (now - self.at) / self.refill)
            self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class SpamFilter:
    """A ``TokenBucket`` per source and object (``spam_key``), in an ``LRU``."""

    def __init__(self, burst: int = SPAM_BURST, refill: float = SPAM_REFILL, size: int = CACHE_SIZE) -> None:
        self.burst, self.refill = burst, refill
        self._buckets: LRU[tuple[str, ...], TokenBucket] = LRU(size)

    def allow(self, event: Mapping[str, Any], now: float) -> bool:
        key = spam_key(event)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket(self.burst, self.refill, now)
            self._buckets.put(key, bucket)
        return bucket.try_accept(now)


@dataclass
class _Group:
    """The different messages a group of similar Events had lately, and when it had the last."""

    messages: set[bytes]
    last: float


class Aggregator:
    """Combines similar Events (``aggregate_key``) once a group has had ``max_events``
    different messages, each within ``window`` seconds of the previous one."""

    def __init__(
        self, max_events: int = AGGREGATE_MAX_EVENTS, window: float = AGGREGATE_WINDOW, size: int = CACHE_SIZE
    ) -> None:
        self.max_events, self.window = max_events, window
        self._groups: LRU[tuple[str, ...], _Group] = LRU(size)

    def aggregate(self, event: Mapping[str, Any], now: float) -> tuple[dict[str, Any], tuple[Hashable, ...]]:
        """The Event to record for ``event`` and the key of its series: ``event`` itself and
        ``event_key``, or the group's aggregate Event and its own key."""
        key = aggregate_key(event)
        group = self._groups.get(key)
        if group is None or now - group.last > self.window:
            group = _Group(set(), now)
            self._groups.put(key, group)
        group.messages.add(message_digest(event.get("message", "")))
        group.last = now
        if len(group.messages) < self.max_events:
            return dict(event), event_key(event)
        # Keep the set at its bound: one message is enough to stay over it.
        group.messages.pop()
        combined = {**event, "message": cut(AGGREGATE_PREFIX + event.get("message", ""))}
        return combined, ("aggregate", *key)


@dataclass(eq=False)
class Series:
    """One Event on the API server (or about to be): posted once, then patched as it recurs.

    ``count`` occurrences are on the server as ``name``; ``pending`` more wait to be written,
    the latest of them as ``latest`` (its message and ``lastTimestamp`` are what the write
    carries). ``queued``: waiting in the ``FairQueue``; ``writing``: a write is out.
    """

    key: tuple[Hashable, ...]
    namespace: str
    first_timestamp: str
    name: str | None = None
    count: int = 0
    pending: int = 0
    latest: dict[str, Any] | None = field(default=None, repr=False)
    queued: bool = False
    writing: bool = False

    def add(self, event: dict[str, Any]) -> None:
        self.pending += 1
        self.latest = event

    def take(self) -> Write:
        """The write for what is pending; those occurrences are no longer pending (a write that
        fails loses them, as client-go's does after its retries)."""
        assert self.latest is not None and self.pending > 0
        latest, n = self.latest, self.pending
        self.latest, self.pending = None, 0
        if self.name is not None:
            patch = {
                "count": self.count + n,
                "lastTimestamp": latest["lastTimestamp"],
                "message": latest["message"],
            }
            return Write("patch", patch, n, latest, self.name)
        return self.post(Write("post", {}, n, latest))

    def post(self, write: Write) -> Write:
        """``write`` as a new Event: the first, or again when the posted one is gone (Events
        expire an hour after their last change). The count goes on from what was counted."""
        self.name = None
        body = {**write.event, "count": self.count + write.n, "firstTimestamp": self.first_timestamp}
        return Write("post", body, write.n, write.event)

    def written(self, write: Write, name: str) -> None:
        """``write`` was taken by the API server as the Event ``name``."""
        self.count += write.n
        self.name = name


@dataclass(frozen=True)
class Write:
    """A POST of ``body`` (a manifest) or a PATCH of the Event ``name`` with ``body``, for ``n``
    occurrences, the latest of them ``event``."""

    verb: str
    body: dict[str, Any]
    n: int
    event: dict[str, Any] = field(repr=False)
    name: str = ""


class Correlator:
    """Aggregation, the spam filter and dedup in client-go's order (below).

    An object whose pass keeps failing reports the same Warning on every retry, and an object can
    fail in many slightly different ways. Posted one by one, such Events crowd out the useful ones
    and cost the API server a write each. Like client-go, the recorder therefore runs every Event
    through three steps (``Correlator``):

    - **Aggregation.** Events that differ only by their message (same source, object, type and
      reason) are *similar*. Once a group has seen ``max_events`` different messages, each no more
      than ``window`` seconds after the previous one, the rest are combined into one Event
      ``(combined from similar events): <latest message>``: a group never has more than
      ``max_events`` Events on the server at once.
    - **A spam filter.** A token bucket per source and object (``burst``, refilled one per
      ``refill`` seconds): what an object reports beyond it is dropped, counted.
    - **Dedup.** An Event identical to one already posted (the same message too, or the same
      aggregate) is a ``Series``: its next occurrence becomes a PATCH of the posted Event's
      ``count``, ``lastTimestamp`` and ``message`` instead of a new Event.

    Posts wait in a ``FairQueue``: one queue per namespace, served round-robin, each bounded,
    and bounded in total by dropping from the namespace that holds the most; one tenant's flood of
    failures never pushes out another tenant's Events. A series waits there once, however often it
    recurs meanwhile: its pending occurrences are folded into one write.

    Every cache is an ``LRU`` of ``size`` entries, so memory is bounded whatever the objects.
    Nothing here does I/O or reads a clock: ``now`` is given, so the rules are tested with any
    sequence of instants.
    """

    def __init__(
        self,
        *,
        max_events: int = AGGREGATE_MAX_EVENTS,
        window: float = AGGREGATE_WINDOW,
        burst: int = SPAM_BURST,
        refill: float = SPAM_REFILL,
        size: int = CACHE_SIZE,
    ) -> None:
        self.aggregator = Aggregator(max_events, window, size)
        self.spam = SpamFilter(burst, refill, size)
        self._series: LRU[tuple[Hashable, ...], Series] = LRU(size)

    def correlate(self, event: Mapping[str, Any], now: float) -> Series | None:
        """File one occurrence of ``event`` (a core/v1 Event manifest) at ``now`` (seconds):
        the series it was added to, or None when the spam filter dropped it."""
        recorded, key = self.aggregator.aggregate(event, now)
        if not self.spam.allow(event, now):
            return None
        series = self._series.get(key)
        if series is None:
            namespace = event["metadata"]["namespace"]
            series = Series(key, namespace, recorded.get("firstTimestamp", ""))
            self._series.put(key, series)
        series.add(recorded)
        return series

    def __len__(self) -> int:
        return len(self._series)


T = TypeVar("T")


class FairQueue(Generic[T]):
    """Items in one queue per namespace, taken round-robin over the namespaces.

    At most ``per_namespace`` wait in one namespace (one more drops that namespace's oldest) and
    ``total`` in all (one more drops the oldest of the namespace holding the most, which is
    never one holding fewer than the newcomer's).
    """

    def __init__(self, total: int, per_namespace: int) -> None:
        if total < 1 or per_namespace < 1:
            raise ValueError("a queue holds at least one item")
        self.total, self.per_namespace = total, per_namespace
        # Namespace -> its items, oldest first; the dict's order is the round.
        self._queues: dict[str, deque[T]] = {}
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def queued(self, namespace: str) -> int:
        return len(self._queues.get(namespace, ()))

    def put(self, namespace: str, item: T) -> T | None:
        """Queue ``item``; the item dropped to make room, if one was."""
        dropped = None
        if self.queued(namespace) >= self.per_namespace:
            dropped = self._drop(namespace)
        elif self._len >= self.total:
            fullest = max(self._queues, key=lambda ns: len(self._queues[ns]))
            if len(self._queues[fullest]) <= self.queued(namespace):
                fullest = namespace
            dropped = self._drop(fullest)
        self._queues.setdefault(namespace, deque()).append(item)
        self._len += 1
        return dropped

    def _drop(self, namespace: str) -> T:
        queue = self._queues[namespace]
        item = queue.popleft()
        self._len -= 1
        if not queue:
            del self._queues[namespace]
        return item

    def take(self) -> T:
        """The oldest item of the namespace whose turn it is; that namespace goes to the back."""
        namespace = next(iter(self._queues))
        queue = self._queues.pop(namespace)
        item = queue.popleft()
        self._len -= 1
        if queue:
            self._queues[namespace] = queue
        return item
