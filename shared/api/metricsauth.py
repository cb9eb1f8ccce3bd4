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

Both answers are cached as the API server's delegating authenticator and authorizer cache
them: a TokenReview's result (authenticated or not) for 1 min, a SubjectAccessReview's
"allowed" for 5 min and "denied" for 30 s; errors are never cached. Unlike those caches, ours
are bounded (:class:`TTLCache`, least recently used out first) and keyed by a keyed hash of the
token, never the token itself: a flood of random tokens costs a fixed amount of memory, and a
heap dump holds no token.

This module holds only the pure parts (bodies, decisions, caches, RBAC rules), so they are
tested without HTTP; :mod:`shared.client.metricsauth` sends the reviews through the operator's
own client, and :mod:`shared.controller.serving` applies the decision to each request.
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
# Entries, not bytes: a token's entry is a 32-byte digest and a small user record; a review's
# a user and a path. A few thousand callers is far more than any cluster's scrapers.
TOKEN_CACHE_SIZE = 4096
REVIEW_CACHE_SIZE = 4096

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

    def __len__(self) -> int:
        return len(self._items)


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
    the authorizer's reason is not passed on: it is about the cluster's policy, not the caller's)."""
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
