"""The ``/metrics`` filter's reviews, sent through the operator's own client.

``MetricsAuth`` decides one request (its ``Authorization`` header, method and path) as
controller-runtime's ``WithAuthenticationAndAuthorization`` does (``shared.api.metricsauth``
has the rules, bodies and caches): TokenReview, then SubjectAccessReview, each answer cached.

The reviews go through the operator's ``KubeClient``, so they are
counted in ``rest_client_requests_total`` and wait in the same client-side rate limiter as its
other calls; they are not fenced (a review persists nothing, and a standby serves metrics too:
``shared.client.kube.is_write``). Concurrent requests with one token (or one user and path)
share one review in flight, so a scrape storm with one token makes one call, not one per scrape.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any, Protocol, TypeVar

from shared.api import metricsauth as rules
from shared.api.errors import OperatorError
from shared.api.metricsauth import Decision, User
from shared.client.kube import reason_of

logger = logging.getLogger("shared.metricsauth")
T = TypeVar("T")


class Reviewer(Protocol):
    """What is needed of a client: ``shared.client.kube.KubeClient.create``."""

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]: ...


Observer = Callable[[str, str], None]  # (review, result): see ``MetricsAuth``


class _OverLimitError(OperatorError):
    """A limited review that may not start now; its argument names the limit."""


class MetricsAuth:
    """Authenticate and authorize requests for ``/metrics`` (below).

    ``clock`` is monotonic seconds (tests pass their own). ``observe(review, result)`` is told of
    every review made: ``("tokenreview", "authenticated" | "unauthenticated" | "error")``,
    ``("subjectaccessreview", "allowed" | "denied" | "error")``, and of every review not made
    because a limit was reached: ``("limited", "rate" | "in_flight")``.

    Reviews for a token no request was allowed with yet (a new token, or one refused before) are
    limited (``shared.api.metricsauth``): at most ``new_token_qps`` TokenReviews a second (a
    burst of ``new_token_burst``) and ``new_reviews_in_flight`` reviews at once; a request beyond
    either is answered 429 at once, without a review, so neither a flood's calls nor its waiting
    requests pile up in the operator's client, whose connections and API budget its reconciles
    need. A known token's renewal and its user's review are made whatever the flood.
    """

    def __init__(
        self,
        kube: Reviewer,
        *,
        clock: Callable[[], float] = time.monotonic,
        token_cache_size: int = rules.TOKEN_CACHE_SIZE,
        review_cache_size: int = rules.REVIEW_CACHE_SIZE,
        new_token_qps: float = rules.NEW_TOKEN_QPS,
        new_token_burst: int = rules.NEW_TOKEN_BURST,
        new_reviews_in_flight: int = rules.NEW_REVIEWS_IN_FLIGHT,
        observe: Observer | None = None,
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._key = rules.TokenKey()
        self.tokens = rules.Tokens(token_cache_size, token_cache_size)
        self.reviews = rules.Reviews(review_cache_size, review_cache_size)
        self.new_tokens = rules.RateLimit(new_token_qps, new_token_burst)
        self.new_reviews_in_flight = new_reviews_in_flight
        self._new_in_flight = 0
        self._inflight: dict[Hashable, asyncio.Future[Any]] = {}
        self._observe = observe or (lambda review, result: None)
        self._close = close

    async def decide(self, authorization: str | None, method: str, path: str) -> Decision:
        token = rules.bearer_token(authorization)
        if token is None:
            return rules.UNAUTHORIZED
        key = self._key(token)
        cached = self.tokens.get(key, self._clock())
        # Reviews for a token never seen allowed are what a flood is made of: they are limited.
        limited = cached is None or not cached.known
        try:
            if cached is not None and cached.fresh:
                user = cached.user
            else:
                try:
                    user = await self._authenticate(key, token, limited)
                except _OverLimitError:
                    raise
                except Exception as exc:
                    logger.error(f"metrics: TokenReview failed: {reason_of(exc)}")
                    return Decision(500, "Authentication failed")
            if user is None:
                return rules.UNAUTHORIZED
            review = (user, path, rules.verb_of(method))
            if (decision := self.reviews.get(review, self._clock())) is None:
                try:
                    decision = await self._authorize(review, limited)
                except _OverLimitError:
                    raise
                except Exception as exc:
                    logger.error(f"metrics: SubjectAccessReview for {user.name} failed: {reason_of(exc)}")
                    return Decision(500, f"Authorization for user {user.name} failed")
        except _OverLimitError as limit:
            self._observe("limited", limit.args[0])
            return rules.TOO_MANY
        self.tokens.decided(key, decision, self._clock())
        return decision

    async def _authenticate(self, key: bytes, token: str, limited: bool) -> User | None:
        async def review() -> User | None:
            try:
                answer = await self._kube.create(rules.TOKEN_REVIEWS, rules.token_review(token))
            except Exception:
                self._observe("tokenreview", "error")
                raise
            user = rules.reviewed_user(answer)
            self._observe("tokenreview", "unauthenticated" if user is None else "authenticated")
            self.tokens.reviewed(key, user, self._clock())
            return user

        return await self._once(("token", key), review, limited=limited, rate=True)

    async def _authorize(self, key: rules.ReviewKey, limited: bool) -> Decision:
        user, path, verb = key

        async def review() -> Decision:
            body = rules.subject_access_review(user, path, verb)
            try:
                answer = await self._kube.create(rules.SUBJECT_ACCESS_REVIEWS, body)
            except Exception:
                self._observe("subjectaccessreview", "error")
                raise
            decision = rules.access_decision(answer, user)
            self._observe("subjectaccessreview", "allowed" if decision.allowed else "denied")
            self.reviews.put(key, decision, self._clock())
            return decision

        # Not rated: it follows a TokenReview that was (a token is refused only for DENY_TTL).
        return await self._once(("review", key), review, limited=limited, rate=False)

    async def _once(self, key: Hashable, make: Callable[[], Awaitable[T]], *, limited: bool, rate: bool) -> T:
        """Run ``make`` once for every caller asking for ``key`` while it runs. A ``limited``
        review starts only within the bound in flight and (``rate``) the rate limit, else
        ``_OverLimitError`` is raised; joining one already running is free."""
        running = self._inflight.get(key)
        if running is None:
            if limited:
                if self._new_in_flight >= self.new_reviews_in_flight:
                    raise _OverLimitError("in_flight")
                if rate and not self.new_tokens.take(self._clock()):
                    raise _OverLimitError("rate")
                self._new_in_flight += 1
            running = asyncio.ensure_future(make())
            self._inflight[key] = running

            def done(_: asyncio.Future[Any]) -> None:
                self._inflight.pop(key, None)
                if limited:
                    self._new_in_flight -= 1

            running.add_done_callback(done)
        # A caller that goes away (a scrape that timed out) leaves the review to the others.
        result: T = await asyncio.shield(running)
        return result

    async def close(self) -> None:
        """Close the client, when this filter was given one of its own."""
        if self._close is not None:
            await self._close()
