"""The ``/metrics`` filter's reviews, sent through the operator's own client.

:class:`MetricsAuth` decides one request (its ``Authorization`` header, method and path) as
controller-runtime's ``WithAuthenticationAndAuthorization`` does (:mod:`shared.api.metricsauth`
has the rules, bodies and caches): TokenReview, then SubjectAccessReview, each answer cached.

The reviews go through the operator's :class:`~shared.client.kube.KubeClient`, so they are
counted in ``rest_client_requests_total`` and wait in the same client-side rate limiter as its
other calls; they are not fenced (a review persists nothing, and a standby serves metrics too:
:func:`shared.client.kube.is_write`). Concurrent requests with one token (or one user and path)
share one review in flight, so a scrape storm with one token makes one call, not one per scrape.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any, Protocol, TypeVar

from shared.api import metricsauth as rules
from shared.api.metricsauth import Decision, TTLCache, User
from shared.client.kube import reason_of

logger = logging.getLogger("shared.metricsauth")
T = TypeVar("T")


class Reviewer(Protocol):
    """What is needed of a client: :meth:`shared.client.kube.KubeClient.create`."""

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]: ...


class MetricsAuth:
    """Authenticate and authorize requests for ``/metrics`` (see the module docstring).

    ``clock`` is monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        kube: Reviewer,
        *,
        clock: Callable[[], float] = time.monotonic,
        token_cache_size: int = rules.TOKEN_CACHE_SIZE,
        review_cache_size: int = rules.REVIEW_CACHE_SIZE,
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._key = rules.TokenKey()
        # A token's digest -> (the user,), or (None,): a token the API server did not authenticate.
        self.tokens: TTLCache[bytes, tuple[User | None]] = TTLCache(token_cache_size)
        self.reviews: TTLCache[tuple[User, str, str], Decision] = TTLCache(review_cache_size)
        self._inflight: dict[Hashable, asyncio.Future[Any]] = {}
        self._close = close

    async def decide(self, authorization: str | None, method: str, path: str) -> Decision:
        token = rules.bearer_token(authorization)
        if token is None:
            return rules.UNAUTHORIZED
        try:
            user = await self._authenticate(token)
        except Exception as exc:
            logger.error(f"metrics: TokenReview failed: {reason_of(exc)}")
            return Decision(500, "Authentication failed")
        if user is None:
            return rules.UNAUTHORIZED
        try:
            return await self._authorize(user, rules.verb_of(method), path)
        except Exception as exc:
            logger.error(f"metrics: SubjectAccessReview for {user.name} failed: {reason_of(exc)}")
            return Decision(500, f"Authorization for user {user.name} failed")

    async def _authenticate(self, token: str) -> User | None:
        key = self._key(token)
        if (cached := self.tokens.get(key, self._clock())) is not None:
            return cached[0]

        async def review() -> User | None:
            answer = await self._kube.create(rules.TOKEN_REVIEWS, rules.token_review(token))
            user = rules.reviewed_user(answer)
            self.tokens.put(key, (user,), rules.TOKEN_TTL, self._clock())
            return user

        return await self._once(("token", key), review)

    async def _authorize(self, user: User, verb: str, path: str) -> Decision:
        key = (user, path, verb)
        if (cached := self.reviews.get(key, self._clock())) is not None:
            return cached

        async def review() -> Decision:
            body = rules.subject_access_review(user, path, verb)
            answer = await self._kube.create(rules.SUBJECT_ACCESS_REVIEWS, body)
            decision = rules.access_decision(answer, user)
            ttl = rules.ALLOW_TTL if decision.allowed else rules.DENY_TTL
            self.reviews.put(key, decision, ttl, self._clock())
            return decision

        return await self._once(("review", key), review)

    async def _once(self, key: Hashable, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make`` once for every caller asking for ``key`` while it runs."""
        running = self._inflight.get(key)
        if running is None:
            running = asyncio.ensure_future(make())
            self._inflight[key] = running
            running.add_done_callback(lambda _: self._inflight.pop(key, None))
        # A caller that goes away (a scrape that timed out) leaves the review to the others.
        result: T = await asyncio.shield(running)
        return result

    async def close(self) -> None:
        """Close the client, when this filter was given one of its own."""
        if self._close is not None:
            await self._close()
