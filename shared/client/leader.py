"""Leader election on a ``coordination.k8s.io`` Lease, as controller-runtime does it.

Two replicas run; one leads and writes, the other keeps warm caches and takes over when the
Lease expires. Every write passes the leader's fence first, so a process that may have lost the
Lease writes nothing. Timings, fencing and hand-over: ``LeaderElector``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import math
import os
import random
import socket
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

import aiohttp

from shared.api.errors import ApiError, Conflict, NotLeaderError
from shared.api.leases import COORDINATION
from shared.client.kube import KubeClient, namespaced

LEASE_DURATION = 15.0  # seconds; controller-runtime's defaults
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
JITTER_FACTOR = 1.2  # client-go's, for standbys' retries
EXIT_CODE = 1
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
logger = logging.getLogger("shared.leader")

Clock = Callable[[], float]
WallClock = Callable[[], datetime.datetime]


def new_identity(env: Mapping[str, str] | None = None) -> str:
    """controller-runtime's holder identity: the host (the pod's name in a pod), ``_``, a UUID."""
    env = os.environ if env is None else env
    return f"{env.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4()}"


def micro_time(when: datetime.datetime) -> str:
    """Kubernetes' MicroTime: RFC 3339 in UTC with microseconds."""
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def duration_errors(lease_duration: float, renew_deadline: float, retry_period: float) -> list[str]:
    """What client-go's ``NewLeaderElector`` would refuse in these durations."""
    errors = []
    if min(lease_duration, renew_deadline, retry_period) <= 0:
        errors.append("the lease duration, renew deadline and retry period must be positive")
    if lease_duration <= renew_deadline:
        errors.append(
            f"the lease duration ({lease_duration:g}s) must exceed the renew deadline ({renew_deadline:g}s)"
        )
    if renew_deadline <= JITTER_FACTOR * retry_period:
        errors.append(
            f"the renew deadline ({renew_deadline:g}s) must exceed {JITTER_FACTOR:g} x the retry period "
            f"({retry_period:g}s)"
        )
    return errors


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def __post_init__(self) -> None:
        errors = duration_errors(self.lease_duration, self.renew_deadline, self.retry_period)
        if not (self.namespace and self.name and self.identity):
            errors.append("the Lease needs a namespace, a name and a holder identity")
        if errors:
            raise ValueError("; ".join(errors))


class Status(Protocol):
    """Where leadership is reported (a ``leader_election_master_status`` series)."""

    def set(self, value: float) -> None: ...


def exit_process(reason: str) -> NoReturn:
    """Leave at once with status 1: nothing more may be written, and a restart is a clean standby.

    ``os._exit``, not an exception: kopf's shutdown would run for seconds (and its handlers
    could try to write); the caller must not get control back.
    """
    logger.critical(f"leader election lost: {reason}; exiting")
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    sys.stderr.flush()
    os._exit(EXIT_CODE)


class LeaderElector:
    """Campaign for one Lease, renew it while leading, fence writes; see below.

    ``kube`` should be a client of the elector's own: its rate limiter must never hold a
    renewal behind a burst of the operator's writes, and its writes are not fenced.
    ``on_lost`` is called (with why) when leadership lapses; it must not return in production
    (``exit_process``). ``clock`` is monotonic; ``wall`` only fills in the record's times.

    Several replicas of an operator can then run at once: one, the leader, reconciles and writes;
    the others (standbys) keep their watch caches warm, answer ``/readyz``, write nothing and take
    over when the leader goes. The semantics are client-go's ``leaderelection`` package with
    controller-runtime's defaults:

    - **lease duration** (15 s): a standby takes the Lease over only once the record has not
      changed for the record's own ``leaseDurationSeconds``, counted from when *this* process saw
      it change;
    - **renew deadline** (10 s): the leader acts only until this long after its last successful
      renewal;
    - **retry period** (2 s): how often the leader renews, and standbys try (with up to 120 %
      jitter, as ``wait.JitterUntil``);
    - the holder identity is unique per process: the pod name (``POD_NAME``, else the host name),
      ``_``, a UUID, so a restarted container never mistakes its predecessor's lease for its own;
    - **release on shutdown** (client-go's ``ReleaseOnCancel``): a leader that stops cleanly empties
      ``holderIdentity`` and sets ``leaseDurationSeconds`` to 1, so a standby takes over at its next
      try instead of 15 s later (a rollout hands over at once). The update is conditional on the
      resourceVersion this process saw last, so it never releases someone else's lease.

    Every decision is taken on this process's monotonic clock, never by comparing another
    machine's wall clock: ``acquireTime`` and ``renewTime`` (MicroTime) are written for people and
    tools only.

    **Fencing.** A Lease is a promise between well-behaved processes: the API server does not stop
    a deposed leader from writing. So every write this process makes checks, just before it is
    sent, that its last successful renewal is less than the renew deadline old
    (``LeaderElector.fence``, installed in ``shared.client.kube.KubeClient``, which makes
    every write of the operator, its Events included; kopf only watches). A standby can take the
    Lease only a full lease duration after it saw the last renewal, and it saw it after the leader
    sent it, so a leader that keeps the rule stops writing at least ``lease - renew`` (5 s) before
    anyone else may start (for clocks that run at the same rate, client-go's assumption too). A
    leader past its deadline (the API server unreachable for 10 s, or the process frozen by
    SIGSTOP, a paused VM or a stalled node and then resumed) refuses the write and exits with
    status 1, like controller-runtime's "leader election lost"; restarted, it is a standby with
    fresh caches. On a process that does not lead (a standby, or a leader that released on
    shutdown) a write is refused with ``NotLeaderError`` and nothing else happens.

    Not covered, as in controller-runtime: a request already on the wire when the process froze
    can still reach the API server late; the 5 s margin covers ordinary request latency only.
    """

    def __init__(
        self,
        config: ElectionConfig,
        kube: KubeClient,
        *,
        on_lost: Callable[[str], None] = exit_process,
        status: Status | None = None,
        clock: Clock | None = None,
        wall: WallClock | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self._kube = kube
        self._on_lost = on_lost
        self._status = status
        self._clock = clock or time.monotonic
        self._wall = wall or (lambda: datetime.datetime.now(datetime.UTC))
        self._sleep = sleep
        self._jitter = jitter
        self._lease: dict[str, Any] | None = None  # as last read or written
        self._observed: dict[str, Any] | None = None  # its spec
        self._observed_at = 0.0  # monotonic time the spec was last seen to change
        # Monotonic send time of the last successful acquire or renewal; None: not leading.
        self._renewed_at: float | None = None
        # Lost or released: this elector never campaigns again (the Lease may still name it,
        # and a new campaign would take it back with caches and state from before the loss).
        self._finished = False
        if status is not None:
            status.set(0)

    @property
    def path(self) -> str:
        return namespaced(self.config.namespace, "leases", self.config.name, COORDINATION)

    def is_leader(self) -> bool:
        """Leading, and the last successful renewal is younger than the renew deadline."""
        return self._renewed_at is not None and self._clock() < self._renewed_at + self.config.renew_deadline

    def fence(self, method: str = "", path: str = "") -> None:
        """Refuse a write unless this process leads (``LeaderElector``'s docstring); a leader past its
        renew deadline has lost: ``on_lost`` is called before the refusal is raised."""
        if self.is_leader():
            # The wall-clock instant of the check, for a test or a person to match a write that
            # reached the API server late (paused after this check, before its bytes went out).
            logger.debug("fence: %s %s allowed at %.6f", method, path, time.time())
            return
        if self._renewed_at is not None:
            self._lose(
                f"last renewal {self._clock() - self._renewed_at:.1f}s ago, renew deadline "
                f"{self.config.renew_deadline:g}s; refused {method} {path}"
            )
        raise NotLeaderError(
            f"not the leader of lease {self.config.namespace}/{self.config.name}: {method} {path}"
        )

    def _lose(self, reason: str) -> None:
        self._renewed_at, self._finished = None, True
        if self._status is not None:
            self._status.set(0)
        self._on_lost(reason)

    def _record(self, spec: Mapping[str, Any] | None, now: datetime.datetime) -> dict[str, Any]:
        ours = spec is not None and spec.get("holderIdentity") == self.config.identity
        transitions = int((spec or {}).get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": math.ceil(self.config.lease_duration),
            "acquireTime": (spec or {}).get("acquireTime") if ours else micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions if ours or spec is None else transitions + 1,
        }

    def _lapsed(self) -> bool:
        """Leading but past the deadline: lose now (and write nothing more)."""
        if self._renewed_at is not None and not self.is_leader():
            self._lose(
                f"no successful renewal for {self._clock() - self._renewed_at:.1f}s "
                f"(renew deadline {self.config.renew_deadline:g}s)"
            )
            return True
        return False

    def _took(self, lease: dict[str, Any], sent: float) -> None:
        first = self._renewed_at is None
        self._lease, self._observed, self._observed_at = lease, lease.get("spec") or {}, sent
        self._renewed_at = sent
        if first:
            logger.info(
                f"acquired lease {self.config.namespace}/{self.config.name} as {self.config.identity}"
            )
            if self._status is not None:
                self._status.set(1)

    async def try_acquire_or_renew(self) -> bool:
        """One attempt, as client-go's ``tryAcquireOrRenew``; returns whether this process leads.

        Never sends a write once leadership has lapsed, and nothing at all once lost or released.
        """
        if self._finished or self._lapsed():
            return False
        lease = await self._kube.get_if_exists(self.path)
        now = self._wall()
        if lease is None:
            return await self._write(
                None,
                {
                    "apiVersion": COORDINATION,
                    "kind": "Lease",
                    "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                    "spec": self._record(None, now),
                },
            )
        spec = lease.get("spec") or {}
        if spec != self._observed:
            self._observed, self._observed_at = spec, self._clock()
        self._lease = lease
        if not self._may_take(spec):
            return False
        return await self._write(lease, {**lease, "spec": self._record(spec, now)})

    def _may_take(self, spec: Mapping[str, Any]) -> bool:
        """Whether the Lease, as just read, is free, expired or ours."""
        holder = spec.get("holderIdentity") or ""
        if not holder or holder == self.config.identity:
            return True
        if self._renewed_at is not None:  # someone else holds it: stop at once, whatever the deadline
            self._lose(f"the lease is held by {holder}")
            return False
        return self._clock() >= self._observed_at + float(spec.get("leaseDurationSeconds") or 0)

    async def _write(self, current: Mapping[str, Any] | None, body: Mapping[str, Any]) -> bool:
        """Create (``current`` None) or update the Lease; False on a conflict with another writer.

        ``sent`` is taken before the write goes out: the validity it starts can only be shorter
        than the one other candidates count from when they see the write.
        """
        if self._lapsed():
            return False
        sent = self._clock()
        try:
            if current is None:
                written = await self._kube.create(self.path.rsplit("/", 1)[0], body)
            else:
                written = await self._kube.replace(self.path, body)
        except ApiError as exc:
            if isinstance(exc, Conflict):  # created or changed by another since the read
                return False
            raise
        self._took(written, sent)
        return True

    async def _attempt(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self.try_acquire_or_renew(), timeout)
        except TimeoutError:
            logger.warning(
                f"lease {self.config.namespace}/{self.config.name}: no answer within {timeout:.1f}s"
            )
        except (ApiError, aiohttp.ClientError, OSError) as exc:
            logger.warning(f"lease {self.config.namespace}/{self.config.name}: {exc!r}")

    async def run(self) -> None:
        """Campaign until elected, then renew until cancelled (or until leadership is lost)."""
        cfg = self.config
        logger.info(f"campaigning for lease {cfg.namespace}/{cfg.name} as {cfg.identity}")
        while self._renewed_at is None and not self._finished:
            await self._attempt(cfg.renew_deadline)
            if self._renewed_at is None:
                await self._sleep(cfg.retry_period * (1 + JITTER_FACTOR * self._jitter()))
        while self._renewed_at is not None:
            await self._sleep(
                max(0.0, min(cfg.retry_period, self._renewed_at + cfg.renew_deadline - self._clock()))
            )
            if self._lapsed() or self._renewed_at is None:
                return
            await self._attempt(self._renewed_at + cfg.renew_deadline - self._clock())

    async def release(self) -> bool:
        """Stop leading now; hand the Lease over if it is still ours. Returns whether it was.

        Every write after this is refused (without exiting). The update carries the
        resourceVersion of the Lease as this process last read or wrote it: if anyone changed it
        since, the update fails with a conflict and nothing is released.
        """
        was_leader, lease = self.is_leader(), self._lease
        self._renewed_at, self._finished = None, True
        if self._status is not None:
            self._status.set(0)
        if not was_leader or lease is None:
            return False
        now = micro_time(self._wall())
        spec = {
            **(lease.get("spec") or {}),
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
        }
        try:
            await asyncio.wait_for(
                self._kube.replace(self.path, {**lease, "spec": spec}), self.config.renew_deadline
            )
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            logger.warning(f"could not release lease {self.config.namespace}/{self.config.name}: {exc!r}")
            return False
        logger.info(f"released lease {self.config.namespace}/{self.config.name}")
        return True
