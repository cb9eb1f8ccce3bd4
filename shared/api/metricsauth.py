"""Who may read ``/metrics``: controller-runtime's ``WithAuthenticationAndAuthorization`` as data.

controller-runtime (``pkg/metrics/filters``, v0.16+) and the kubebuilder/operator-sdk scaffold
serve metrics over HTTPS and answer only a caller the API server vouches for:

1. the request's bearer token is checked by a **TokenReview** (``authentication.k8s.io/v1``);
   no token, or one the API server does not authenticate → **401**;
2. the user it names is checked by a **SubjectAccessReview** (``authorization.k8s.io/v1``) for
   the non-resource URL: ``nonResourceAttributes {path: /metrics, verb: get}`` (the HTTP
   method, lower-cased); not allowed → **403**;
3. a review that cannot be made (the API server unreachable, the operator's own RBAC missing)
   → **500**, never an answer in the caller's favour.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

AUTHENTICATION = "authentication.k8s.io"
AUTHORIZATION = "authorization.k8s.io"
TOKEN_REVIEWS = f"/apis/{AUTHENTICATION}/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = f"/apis/{AUTHORIZATION}/v1/subjectaccessreviews"
METRICS_PATH = "/metrics"

# The apiserver's delegating authenticator and authorizer (controller-runtime's settings).
TOKEN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
# How long a token once allowed stays known (its renewal is not limited): a projected
# ServiceAccount token, Prometheus', lives 1 h by default and is replaced at 80 % of that.
KNOWN_TTL = 3600.0
# Entries, not bytes: a token's entry is a 32-byte digest and a small user record; a review's
# a user and a path. A few thousand callers is far more than any cluster's scrapers; each
# partition (known/refused, allowed/denied) has its own bound.
TOKEN_CACHE_SIZE = 4096
REVIEW_CACHE_SIZE = 4096
# Reviews of tokens never seen allowed: a legitimate scraper shows a new token about once an
# hour, so a burst of 10 and one a second afterwards are ample for scrapers when nobody floods,
# and cap what a flood costs the API server (and the operator's own API budget) at one review
# a second (during a flood, a scraper's new token competes with it for that one).
NEW_TOKEN_QPS = 1.0
NEW_TOKEN_BURST = 10
NEW_REVIEWS_IN_FLIGHT = 4

K = TypeVar("K")
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """A bounded map whose entries expire: each put names its lifetime; at ``size`` entries the
    least recently used one goes. Time is passed in (monotonic seconds), so tests need no clock."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, not {size}")
        self.size = size
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K, now: float) -> V | None:
        found = self._items.get(key)
        if found is None:
            return None
        expires, value = found
        if now >= expires:
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V, ttl: float, now: float) -> None:
        self._items[key] = (now + ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def pop(self, key: K) -> V | None:
        """Remove ``key``'s entry; its value (expired or not), or None."""
        found = self._items.pop(key, None)
        return None if found is None else found[1]

    def __len__(self) -> int:
        return len(self._items)


class RateLimit:
    """A token bucket that never waits: ``burst`` tokens, refilled at ``qps`` a second; ``take``
    says whether one was there (client-go's ``TryAccept``). Time is passed in."""

    def __init__(self, qps: float, burst: int) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"a rate limit needs qps > 0 and burst >= 1, not {qps} and {burst}")
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last: float | None = None

    def take(self, now: float) -> bool:
        if self._last is not None:
            self._tokens = min(float(self.burst), self._tokens + max(0.0, now - self._last) * self.qps)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


class TokenKey:
    """Cache keys for bearer tokens: HMAC-SHA256 under a key made at start, as the apiserver's
    token cache does, so neither the cache nor a guess at its hash function reveals a token."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def __call__(self, token: str) -> bytes:
        return hmac.new(self._key, token.encode(), hashlib.sha256).digest()


@dataclass(frozen=True)
class User:
    """The user a TokenReview vouched for (``status.user``)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # sorted, hashable: part of a cache key


@dataclass(frozen=True)
class Decision:
    """The answer to one request for ``/metrics``: 200 lets it through, else the HTTP error."""

    status: int
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


ALLOWED = Decision(200)
UNAUTHORIZED = Decision(401, "Unauthorized")
TOO_MANY = Decision(429, "Too many new tokens to review, retry later")


@dataclass(frozen=True)
class Cached:
    """What the token caches know of a token: its user (None: not authenticated), whether that
    is still ``fresh`` (else its review is due again), and whether a request with it was
    allowed (``known``: its reviews are not limited)."""

    user: User | None
    fresh: bool
    known: bool


class Tokens:
    """The token caches, partitioned so that what an unauthorized caller sends cannot push out
    an allowed caller's entry.

    ``known``: tokens a request was allowed with, kept ``KNOWN_TTL`` and LRU-bounded among
    themselves; their review is fresh for ``TOKEN_TTL``, then renewed. ``refused``: every
    other reviewed token, not authenticated (for ``TOKEN_TTL``) or authenticated but not (yet)
    allowed (for ``DENY_TTL``, the user's denial's lifetime), LRU-bounded on its own.
    """

    def __init__(self, known_size: int = TOKEN_CACHE_SIZE, refused_size: int = TOKEN_CACHE_SIZE) -> None:
        # digest -> (user, when its TokenReview was made)
        self.known: TTLCache[bytes, tuple[User, float]] = TTLCache(known_size)
        self.refused: TTLCache[bytes, tuple[User | None, float]] = TTLCache(refused_size)

    def get(self, key: bytes, now: float) -> Cached | None:
        if (known := self.known.get(key, now)) is not None:
            user, reviewed = known
            return Cached(user, now - reviewed < TOKEN_TTL, known=True)
        if (refused := self.refused.get(key, now)) is not None:
            return Cached(refused[0], fresh=True, known=False)
        return None

    def reviewed(self, key: bytes, user: User | None, now: float) -> None:
        """A TokenReview's answer: a known token's renewal stays known while authenticated."""
        if user is not None and self.known.pop(key) is not None:
            self.known.put(key, (user, now), KNOWN_TTL, now)
            return
        self.known.pop(key)
        ttl = TOKEN_TTL if user is None else DENY_TTL
        self.refused.put(key, (user, now), ttl, now)

    def decided(self, key: bytes, decision: Decision, now: float) -> None:
        """Where a token belongs once a request with it was decided: known when allowed."""
        if decision.allowed:
            if (refused := self.refused.pop(key)) is not None and refused[0] is not None:
                self.known.put(key, (refused[0], refused[1]), KNOWN_TTL, now)
        elif (known := self.known.pop(key)) is not None:
            self.refused.put(key, known, DENY_TTL, now)

    def __len__(self) -> int:
        return len(self.known) + len(self.refused)


ReviewKey = tuple[User, str, str]  # user, path, verb


class Reviews:
    """SubjectAccessReview answers, "allowed" (``ALLOW_TTL``) and "denied" (``DENY_TTL``)
    each in a bounded cache of its own, so denied users cannot push out an allowed one."""

    def __init__(self, allowed_size: int = REVIEW_CACHE_SIZE, denied_size: int = REVIEW_CACHE_SIZE) -> None:
        self.allowed: TTLCache[ReviewKey, Decision] = TTLCache(allowed_size)
        self.denied: TTLCache[ReviewKey, Decision] = TTLCache(denied_size)

    def get(self, key: ReviewKey, now: float) -> Decision | None:
        found = self.allowed.get(key, now)
        return found if found is not None else self.denied.get(key, now)

    def put(self, key: ReviewKey, decision: Decision, now: float) -> None:
        if decision.allowed:
            self.denied.pop(key)
            self.allowed.put(key, decision, ALLOW_TTL, now)
        else:
            self.allowed.pop(key)
            self.denied.put(key, decision, DENY_TTL, now)

    def __len__(self) -> int:
        return len(self.allowed) + len(self.denied)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, as the apiserver's bearer-token
    authenticator reads it (scheme case-insensitive, one token, surrounding space ignored)."""
    parts = (authorization or "").strip().split(" ")
    if len(parts) != 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def token_review(token: str) -> dict[str, Any]:
    """The TokenReview to create for ``token`` (no audiences: the API server's own)."""
    return {"apiVersion": f"{AUTHENTICATION}/v1", "kind": "TokenReview", "spec": {"token": token}}


def reviewed_user(review: Mapping[str, Any]) -> User | None:
    """The user a created TokenReview authenticated, or None (the token is not valid)."""
    status = review.get("status") or {}
    user = status.get("user") or {}
    if not status.get("authenticated") or not user.get("username"):
        return None
    extra = user.get("extra") or {}
    return User(
        name=str(user["username"]),
        uid=str(user.get("uid") or ""),
        groups=tuple(str(g) for g in user.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(x) for x in v or ())) for k, v in extra.items())),
    )


def subject_access_review(user: User, path: str, verb: str) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user`` may ``verb`` the non-resource URL ``path``."""
    spec: dict[str, Any] = {
        "user": user.name,
        "groups": list(user.groups),
        "nonResourceAttributes": {"path": path, "verb": verb},
    }
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra}
    return {"apiVersion": f"{AUTHORIZATION}/v1", "kind": "SubjectAccessReview", "spec": spec}


def access_decision(review: Mapping[str, Any], user: User) -> Decision:
    """A created SubjectAccessReview as the answer to the request (controller-runtime's texts;
    the authorizer's reason is not passed on: it is about the cluster's policy, not the caller's).

    Both answers are cached as the API server's delegating authenticator and authorizer cache
    them: a TokenReview's result (authenticated or not) for 1 min, a SubjectAccessReview's
    "allowed" for 5 min and "denied" for 30 s; errors are never cached. Unlike those caches, ours
    are bounded (``TTLCache``, least recently used out first), keyed by a keyed hash of the
    token, never the token itself (a heap dump holds no token), and **partitioned by outcome**
    (``Tokens``, ``Reviews``): a token enters the cache of known tokens only once a
    request with it was allowed, and a decision the cache of allowed decisions only when allowed.
    Whatever a caller without the right to read the metrics sends (random tokens, valid tokens of
    accounts of its own) lands in the other partition, so it can push out only its own kind and
    never the scraper's entries: Prometheus' scrapes keep being answered from the cache.

    A new token costs a review of the API server, made with the operator's own credentials (its
    API priority-and-fairness budget, its client's connections); so reviews of tokens never seen
    allowed are limited: a token bucket (``RateLimit``, ``NEW_TOKEN_QPS``) and a bound
    on such reviews in flight (``NEW_REVIEWS_IN_FLIGHT``). A request beyond either is answered
    **429** without a review. A known token's renewal (its review is due again after
    ``TOKEN_TTL``) is not limited: only callers once allowed can have one.

    This module holds only the pure parts (bodies, decisions, caches, RBAC rules), so they are
    tested without HTTP; ``shared.client.metricsauth`` sends the reviews through the operator's
    own client, and ``shared.controller.serving`` applies the decision to each request.
    """
    status = review.get("status") or {}
    if status.get("allowed") and not status.get("denied"):
        return ALLOWED
    return Decision(403, f"Authorization denied for user {user.name}")


def verb_of(method: str) -> str:
    """The non-resource verb of an HTTP method, as the apiserver's request info makes it."""
    return method.lower()


def operator_rules() -> list[dict[str, Any]]:
    """What an operator needs to check its scrapers: cluster-scoped, so granted cluster-wide
    (the CSV's ``clusterPermissions``; a ClusterRole without OLM)."""
    return [
        {"apiGroups": [AUTHENTICATION], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": [AUTHORIZATION], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]


def reader_rules() -> list[dict[str, Any]]:
    """What a scraper needs: ``get`` on the non-resource URL ``/metrics`` (bound by the user to
    Prometheus' ServiceAccount; it also lets it read every other component's ``/metrics``, the
    API server's included, as kubebuilder's ``metrics-reader`` does)."""
    return [{"nonResourceURLs": [METRICS_PATH], "verbs": ["get"]}]
