"""The Kubernetes API client every operator uses for its own calls: small, async, JSON in/out.

kopf has its own client for watching; children are created, patched and deleted here. The
official ``kubernetes`` package (pydantic models on every call) costs ~0.3 s of CPU per
create on a 2-core machine and blocks a thread for it, which made 100 pods take half a minute;
this client sends and receives plain dicts over one aiohttp session on kopf's event loop.
Credentials come from the official package's loaders (in-cluster service account when running
in a pod, else ``$KUBECONFIG`` / ``~/.kube/config``), including token refresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson
from aiohttp import ClientRequest
from aiohttp.connector import Connection

from shared.api.errors import ApiError, Conflict, Invalid, NotFound, ServiceUnavailable, TooManyRequests
from shared.client.fair import RoundRobin

if TYPE_CHECKING:
    from kubernetes.client import Configuration

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
JSON = "application/json"
# No client-side rate limit unless --kube-api-qps sets one (``KubeClient``'s docstring); the burst a
# QPS set without one gets.
DEFAULT_QPS = 0.0
DEFAULT_BURST = 100
MAX_RETRIES = 10  # client-go's maxRetries for answers with Retry-After
# A longer Retry-After is not waited for inside a request, which holds its pass's slot.
MAX_RETRY_AFTER = 60.0
logger = logging.getLogger("shared.kube")

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The review kinds of authentication.k8s.io and authorization.k8s.io: created, answered, never stored.
REVIEW_PATH = re.compile(
    r"/apis/(authentication|authorization)\.k8s\.io/v1/(namespaces/[^/]+/)?[a-z]+reviews$"
)


def _jsonable(value: Any) -> Any:
    """What orjson cannot serialise itself: a Mapping that is not a dict (a read-only view)."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(body: Mapping[str, Any] | list[Any]) -> bytes:
    """A request body as JSON (orjson: a pod's create costs a tenth of the standard module's)."""
    return orjson.dumps(body, default=_jsonable)


def is_write(method: str, path: str) -> bool:
    """Whether a request changes stored state (and is fenced): a write method, not a review."""
    return method.upper() in WRITE_METHODS and not REVIEW_PATH.search(path)


Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
# Called with (method, path) before each attempt of a write; raises to refuse it.
Fence = Callable[[str, str], None]
CONNECTIONS = 100  # aiohttp's default limit of one session's open connections


def reason_of(exc: BaseException) -> str:
    """A short human message for an error: the API server's own message when it has one."""
    if isinstance(exc, ApiError):
        return exc.message or f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


class TokenBucket:
    """client-go's token bucket (``flowcontrol.NewTokenBucketRateLimiter``): holds up to
    ``burst`` tokens, refilled at ``qps`` per second; each request takes one. ``qps <= 0``
    means unlimited.

    Unlike client-go's, the requests that find it empty take turns by group (the namespace of
    the object: ``namespace_of``), round-robin (``RoundRobin``),
    first come first served within a group: one pass can ask for many tokens at once (a
    WebServer creating 64 pods in one slow-start batch), and a request of another namespace
    must not wait for all of them (``shared.client.fair``). One task hands out the tokens
    as they become due, while anyone waits; they are due exactly as client-go's would be.
    """

    def __init__(
        self, qps: float, burst: int, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep
    ) -> None:
        if qps < 0:
            raise ValueError(f"qps must be >= 0, not {qps}")
        if qps > 0 and burst < 1:
            raise ValueError(f"a rate limit of {qps} QPS needs a burst >= 1, not {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last: float | None = None
        self._waiters = RoundRobin()
        self._dealer: asyncio.Task[None] | None = None

    def _refill(self) -> None:
        now = self._clock()
        if self._last is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def _give_back(self) -> None:
        self._tokens += 1  # handed to a request that was cancelled: never used

    @property
    def waiting(self) -> int:
        """Requests waiting for a token now."""
        return len(self._waiters)

    async def wait(self, group: Hashable = None) -> float:
        """Wait for a token, in ``group``'s line; returns the seconds waited."""
        if self.qps <= 0:
            return 0.0
        self._refill()
        if not self._waiters and self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        start = self._clock()
        loop = asyncio.get_running_loop()
        if self._dealer is None or self._dealer.done() or self._dealer.get_loop() is not loop:
            self._dealer = loop.create_task(self._deal(), name="token-bucket")
        await self._waiters.wait(group, abandon=self._give_back)
        return self._clock() - start

    async def _deal(self) -> None:
        """Hand out each token as it becomes due, round-robin over the groups waiting."""
        while self._waiters:
            self._refill()
            # (Not quite 1 after a sleep of exactly the time to the next token: float error.)
            if self._tokens >= 1 - 1e-9:
                self._tokens -= 1
                if self._waiters.wake() is None:
                    # Every waiter left was cancelled, but their tasks have not run yet to take
                    # themselves off the count: going round again without yielding would spin
                    # forever (they never run). Nobody to deal to: the next waiter starts a dealer.
                    self._tokens += 1
                    return
                continue
            await self._sleep((1 - self._tokens) / self.qps)


class FairConnections:
    """At most ``limit`` requests in flight at once (the session's connection pool); the
    requests that find every slot taken take turns by group (the namespace), round-robin
    (``RoundRobin``), first come first served within a group.

    Without it, those requests would wait in aiohttp's pool, one first-come line: with no
    client-side rate limit (the default, ``KubeClient``'s docstring) that pool is where a WebServer
    creating 1000 pods queues, and a request of another namespace would wait behind all of
    them. A slot handed to a request that was cancelled meanwhile goes to the next.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, not {limit}")
        self.limit = limit
        self._busy = 0
        self._waiters = RoundRobin()

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot now."""
        return len(self._waiters)

    @property
    def busy(self) -> int:
        """Slots taken now."""
        return self._busy

    async def acquire(self, group: Hashable = None) -> None:
        # A free slot means nobody live waits: a release hands its slot on at once (_pass_on).
        if self._busy < self.limit:
            self._busy += 1
            return
        # Woken means handed a slot, already counted by _pass_on.
        await self._waiters.wait(group, abandon=self.release)

    def release(self) -> None:
        self._busy -= 1
        self._pass_on()

    def _pass_on(self) -> None:
        while self._busy < self.limit and self._waiters.wake() is not None:
            self._busy += 1

    @contextlib.asynccontextmanager
    async def slot(self, group: Hashable = None) -> AsyncIterator[None]:
        await self.acquire(group)
        try:
            yield
        finally:
            self.release()


def namespace_of(path: str) -> str:
    """The namespace a request path is in (``""`` for a cluster-scoped one)."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    # /api/v1/namespaces/<ns>/... and /apis/<group>/<version>/namespaces/<ns>/...
    at = 2 if parts[0] == "api" else 3
    if len(parts) > at + 1 and parts[at] == "namespaces":
        return parts[at + 1]
    return ""


def retry_after(status: int, header: str | None) -> float | None:
    """Seconds to wait before retrying an answer, or None when it is not retried here."""
    if status not in (TooManyRequests.code, ServiceUnavailable.code):
        return None
    try:
        seconds = max(0.0, float(header)) if header is not None else None
    except ValueError:  # an HTTP date: the API server sends seconds, so not worth parsing
        seconds = None
    if seconds is None:
        return 1.0 if status == TooManyRequests.code else None
    return seconds


class FencedConnector(aiohttp.TCPConnector):
    """aiohttp's connection pool, asking ``check`` (method, path) about each request once it
    holds its connection: after any wait for a free one and any connect, with nothing of the
    request sent yet. If ``check`` raises, the connection goes back to the pool unused."""

    def __init__(self, check: Fence, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._check = check

    async def connect(
        self, req: ClientRequest, traces: list[Any], timeout: aiohttp.ClientTimeout
    ) -> Connection:
        conn = await super().connect(req, traces, timeout)
        try:
            self._check(req.method, req.url.path)
        except BaseException:
            conn.release()
            raise
        return conn


def _load_configuration() -> Configuration:
    from kubernetes import client, config

    cfg = client.Configuration()
    # The official loaders are unannotated (kubernetes 37); they fill ``cfg`` in place.
    try:
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return cfg


def _forget_credential_files(cfg: Configuration) -> None:
    """Delete the files the official loader wrote ``cfg``'s embedded CA, certificate and key into.

    It removes them only at a clean exit, so every SIGKILLed process left a client key behind in
    the temp directory; once the SSL context holds them they are not needed. Only ``cfg``'s: the
    loader keeps one registry for the process, and another client (a test's, a second cluster's)
    may still need files of its own.
    """
    from kubernetes.config import kube_config

    registry = getattr(kube_config, "_temp_files", None)
    if not isinstance(registry, dict):
        return
    mine = {cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file} - {None}
    for key, path in list(registry.items()):
        if path in mine:
            with contextlib.suppress(OSError):
                os.remove(path)
            del registry[key]


def _answer(status: int, reason: str, raw: bytes) -> dict[str, Any]:
    """An answer's body, parsed; ``ApiError`` for an error status."""
    try:
        # Every answer is parsed (a create returns the object, a status write the new
        # resourceVersion); orjson does it in a fifth of the standard module's time.
        payload = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        payload = {"message": raw[:500].decode(errors="replace")}
    if status >= 400:
        details = payload if isinstance(payload, dict) else {}
        raise ApiError(
            status, str(details.get("reason") or reason), str(details.get("message") or ""), details
        )
    return payload if isinstance(payload, dict) else {"items": payload}


class KubeClient:
    """An async JSON client for one API server, rate-limited and retrying 429s (below).

    ``connections`` bounds the connections open at once (more requests wait for one).
    ``clock`` and ``sleep`` are what the rate limiter and the Retry-After waits use (tests
    inject virtual time).

    Throttling, as controller-runtime's client does it (fairness by namespace added):

    - no client-side rate limit by default, as controller-runtime since
      kubernetes-sigs/controller-runtime#3119 (2025): the API server's priority and fairness is what
      protects it, and it does so better than a fixed rate in each client, which holds back an
      operator with work to do on an idle server (1000 TDSets flipping at one boundary took at least
      18 s at the 50 QPS this client had by default, docs/benchmarks.md). ``--kube-api-qps`` sets
      one: a token bucket (``TokenBucket``, client-go's) in front of every request, ``burst``
      requests at once, then ``qps`` per second, the requests that wait taking turns by namespace;
    - what bounds the requests in flight is the connection pool (``connections``, aiohttp's 100),
      and the requests waiting for a connection take turns by namespace too
      (``FairConnections``): a WebServer creating 1000 pods does not hold back another
      namespace's request behind all of them (fairness across namespaces, ``shared.client.fair``:
      the API server's fairness shares by user, and every request of the operator is one user's);
    - a 429 (the API server's priority-and-fairness or max-in-flight rejection) or a 503 with
      ``Retry-After`` (a server or aggregated API that cannot serve now) was not processed, so it
      is retried, writes included, after the ``Retry-After`` seconds it names (1 s when a 429 names
      none), up to ``max_retries`` times (client-go's 10) before ``ApiError`` is raised. A
      wait longer than ``MAX_RETRY_AFTER`` is not sat out inside the request: it is raised,
      and the reconcile loop's backoff (which gives back the pass's concurrency slot) takes over.
      Every attempt goes through the rate limiter and is reported to ``observer``.

    Fencing: with leader election (``shared.client.leader``), ``fence`` is asked before every attempt
    of a write (POST, PUT, PATCH, DELETE) and refuses it by raising: a leader whose lease may have
    passed to another process must not send anything, also not a retry it had already begun. It is
    asked twice: after the rate limiter's wait, so a refused write never queues for a connection,
    and again once the attempt holds its connection (``FencedConnector``), when nothing is
    left to wait for before its bytes go out. The second ask is the one that counts: a write can
    wait a long time for a free connection of the pool (all taken by slow requests), and a process
    frozen (SIGSTOP) past its lease while the write waited must not send it on resuming. aiohttp's
    own resend of an idempotent request on a dropped keep-alive connection is asked too. Reads are
    never fenced (a standby keeps its caches warm), and neither are reviews (TokenReview,
    SubjectAccessReview, ...: a POST that persists nothing), with which a standby checks who may
    read its ``/metrics`` (``shared.client.metricsauth``).
    """

    def __init__(
        self,
        configuration: Configuration | None = None,
        observer: Callable[[str, str, int | str, float], None] | None = None,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        max_retries: int = MAX_RETRIES,
        connections: int = CONNECTIONS,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._cfg = configuration
        # Called with (method, host, status code or "<error>", seconds) after every attempt.
        self._observer = observer
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | None = None
        self._clock = clock
        self._sleep = sleep
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, not {max_retries}")
        self.max_retries = max_retries
        if connections < 1:
            raise ValueError(f"connections must be >= 1, not {connections}")
        self._connections = connections
        self._limiter = TokenBucket(qps, burst, clock, sleep)
        self._in_flight = FairConnections(connections)
        self.fence: Fence | None = None

    def limit_rate(self, qps: float, burst: int) -> None:
        """Replace the rate limit (the runtime applies its options at start-up)."""
        self._limiter = TokenBucket(qps, burst, self._clock, self._sleep)

    @property
    def rate_limit(self) -> tuple[float, int]:
        return self._limiter.qps, self._limiter.burst

    async def load(self) -> None:
        """Load credentials off the event loop (call from a startup handler)."""
        if self._cfg is None:
            self._cfg = await asyncio.to_thread(_load_configuration)
        self._tls()

    def _configuration(self) -> Configuration:
        if self._cfg is None:
            self._cfg = _load_configuration()
        return self._cfg

    def _tls(self) -> ssl.SSLContext:
        """The SSL context, made once: the credential files it reads are deleted right after."""
        if self._ssl is None:
            self._ssl = self._ssl_context(self._configuration())
            _forget_credential_files(self._configuration())
        return self._ssl

    @staticmethod
    def _ssl_context(cfg: Configuration) -> ssl.SSLContext:
        ctx = (
            ssl.create_default_context(cafile=cfg.ssl_ca_cert)
            if cfg.ssl_ca_cert
            else ssl.create_default_context()
        )
        if not cfg.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
        return ctx

    def _fence_write(self, method: str, path: str) -> None:
        if self.fence is not None and is_write(method, path):
            self.fence(method, path)

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": JSON, "Content-Type": content_type}
        token = self._configuration().get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            headers["Authorization"] = token if token.lower().startswith("bearer ") else f"Bearer {token}"
        return headers

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | list[Any] | None = None,
        *,
        content_type: str = JSON,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        answer = await self._exchange(method, path, body, content_type=content_type, params=params)
        return _answer(*answer)

    async def get_bytes(self, path: str) -> bytes | None:
        """A live read left unparsed (None when the object does not exist): for a body that may
        be large, which the caller parses off the event loop and does not keep."""
        status, reason, raw = await self._exchange("GET", path, None, content_type=JSON, params=None)
        if status == NotFound.code:
            return None
        if status >= 400:
            _answer(status, reason, raw)  # raises the ApiError
        return raw

    async def _exchange(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | list[Any] | None,
        *,
        content_type: str,
        params: Mapping[str, str] | None,
    ) -> tuple[int, str, bytes]:
        """Send one request (rate-limited, fenced, 429s retried): its status, reason and body."""
        tls = self._tls()
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=FencedConnector(self._fence_write, limit=self._connections),
                timeout=aiohttp.ClientTimeout(total=60),
            )
        cfg = self._configuration()
        url = cfg.host.rstrip("/") + path
        data = dumps(body) if body is not None else None
        host = urllib.parse.urlsplit(cfg.host).netloc
        namespace = namespace_of(path)
        for attempt in range(self.max_retries + 1):
            waited = await self._limiter.wait(namespace)
            if waited > 1:
                logger.info(f"waited {waited:.2f}s for client-side throttling before {method} {path}")
            # Asked again once the attempt has its connection (FencedConnector); this first ask
            # only spares a refused write the wait for a connection.
            self._fence_write(method, path)
            # A connection of the pool, in the namespace's turn (FairConnections), held until
            # the answer is read.
            async with self._in_flight.slot(namespace):
                start = time.monotonic()
                code: int | str = "<error>"
                try:
                    async with self._session.request(
                        method, url, data=data, params=params, headers=self._headers(content_type), ssl=tls
                    ) as resp:
                        status, reason = resp.status, resp.reason
                        code = status
                        raw = await resp.read()
                        delay = retry_after(status, resp.headers.get("Retry-After"))
                finally:
                    if self._observer is not None:
                        self._observer(method, host, code, time.monotonic() - start)
            if delay is None or delay > MAX_RETRY_AFTER or attempt == self.max_retries:
                break
            logger.debug(f"{method} {path}: {status}, retry {attempt + 1} after {delay:g}s")
            await self._sleep(delay)
        return status, str(reason or ""), raw

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body)

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self.request("GET", path, params=params)

    async def get_if_exists(self, path: str) -> dict[str, Any] | None:
        """A live read; None when the object does not exist (404)."""
        try:
            return await self.get(path)
        except ApiError as exc:
            if isinstance(exc, NotFound):
                return None
            raise

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT: an update, conditional on ``metadata.resourceVersion`` when the body has one."""
        return await self.request("PUT", path, body)

    async def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, body, content_type=MERGE_PATCH)

    async def json_patch(
        self, path: str, operations: list[Mapping[str, Any]], *, uid: str | None = None
    ) -> dict[str, Any]:
        """An RFC 6902 patch; with ``uid``, first a ``test`` of ``/metadata/uid``: the patch is
        refused (``is_uid_mismatch``) if the name now holds another object. A merge patch
        cannot carry that precondition on a status subresource (the API server copies the
        stored metadata over the patched object there)."""
        ops = [{"op": "test", "path": "/metadata/uid", "value": uid}] if uid else []
        return await self.request("PATCH", path, [*ops, *operations], content_type=JSON_PATCH)

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("DELETE", path, body)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def is_uid_mismatch(exc: BaseException) -> bool:
    """Whether a write was refused by its UID precondition: the object it was meant for is gone
    and another holds its name (a failed JSON-patch ``test``, 422; a changed ``metadata.uid``
    in a merge patch, 422; a delete precondition, 409) — or the name is free (404)."""
    if not isinstance(exc, ApiError):
        return False
    if isinstance(exc, NotFound):
        return True
    text = exc.message.lower()
    return (
        isinstance(exc, (Conflict, Invalid))
        and "uid" in text
        and ("precondition" in text or "test" in text or "immutable" in text)
    )


def namespaced(namespace: str, plural: str, name: str = "", group_version: str = "v1") -> str:
    """The API path of a namespaced collection or object (core group when ``v1``)."""
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    path = f"{base}/namespaces/{namespace}/{plural}"
    return f"{path}/{name}" if name else path
