"""The ``/metrics`` filter's decisions and caches (controller-runtime's
``WithAuthenticationAndAuthorization``), without HTTP: the reviews are answered by a fake API
that records what it was asked; time is a number the test moves."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.process import free_port
from shared.api import metricsauth as rules
from shared.api.errors import ApiError
from shared.api.metricsauth import Decision, RateLimit, Reviews, Tokens, TTLCache, User
from shared.client.kube import is_write
from shared.client.metricsauth import MetricsAuth
from shared.controller import certs
from shared.controller.metrics import Metrics
from shared.controller.serving import Endpoints, Readiness
from tests.framework.properties import examples

READER = "system:serviceaccount:monitoring:prometheus"


class FakeAPI:
    """TokenReview and SubjectAccessReview as an API server would answer them.

    ``tokens``: token -> username; ``allowed``: usernames allowed ``get`` on /metrics;
    ``fail``: raise this on the next calls instead; ``gate``: hold every answer until set.
    """

    def __init__(self) -> None:
        self.tokens = {"good": READER, "other": "system:serviceaccount:default:nobody"}
        self.allowed = {READER}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: Exception | None = None
        self.gate: asyncio.Event | None = None

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append((path, dict(body)))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        if path == rules.TOKEN_REVIEWS:
            user = self.tokens.get(body["spec"]["token"])
            status = {"authenticated": True, "user": {"username": user, "uid": "u-1", "groups": ["g"]}}
            return {**body, "status": status if user else {"authenticated": False, "error": "invalid"}}
        assert path == rules.SUBJECT_ACCESS_REVIEWS
        allowed = body["spec"]["user"] in self.allowed and body["spec"]["nonResourceAttributes"] == {
            "path": "/metrics",
            "verb": "get",
        }
        return {**body, "status": {"allowed": allowed, **({} if allowed else {"reason": "no RBAC"})}}

    def kinds(self) -> list[str]:
        return [path.rsplit("/", 1)[1] for path, _ in self.calls]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> FakeAPI:
    return FakeAPI()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def auth(api: FakeAPI, clock: Clock) -> MetricsAuth:
    return MetricsAuth(api, clock=clock)


# -- pure parts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("  Bearer abc  ", "abc"),
        ("Bearer", None),
        ("Bearer ", None),
        ("Bearer a b", None),
        ("Basic abc", None),
        ("abc", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token_is_read_as_the_apiserver_reads_it(header, token):
    assert rules.bearer_token(header) == token


def test_review_bodies_and_decisions():
    assert rules.token_review("t") == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "t"},
    }
    answer = {
        "status": {
            "authenticated": True,
            "user": {"username": "alice", "uid": "1", "groups": ["a", "b"], "extra": {"k": ["v"]}},
        }
    }
    user = rules.reviewed_user(answer)
    assert user == User("alice", "1", ("a", "b"), (("k", ("v",)),))
    assert rules.reviewed_user({"status": {"authenticated": False, "error": "expired"}}) is None
    assert rules.reviewed_user({"status": {"authenticated": True, "user": {}}}) is None
    assert rules.subject_access_review(user, "/metrics", rules.verb_of("GET")) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "groups": ["a", "b"],
            "uid": "1",
            "extra": {"k": ["v"]},
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    }
    assert rules.access_decision({"status": {"allowed": True}}, user) == rules.ALLOWED
    denied = rules.access_decision({"status": {"allowed": False, "reason": "no"}}, user)
    assert (denied.status, denied.message) == (403, "Authorization denied for user alice")
    assert rules.access_decision({"status": {"allowed": True, "denied": True}}, user).status == 403


def test_ttl_cache_expires_and_stays_bounded():
    cache: TTLCache[str, int] = TTLCache(3)
    cache.put("a", 1, ttl=10, now=0)
    assert cache.get("a", now=9.9) == 1
    assert cache.get("a", now=10) is None and len(cache) == 0
    for i, key in enumerate("abcd"):
        cache.put(key, i, ttl=100, now=0)
    assert len(cache) == 3 and cache.get("a", 1) is None  # the least recently used went
    cache.get("b", 1)  # used: now "c" is the oldest
    cache.put("e", 4, ttl=100, now=1)
    assert cache.get("c", 2) is None and cache.get("b", 2) == 1
    with pytest.raises(ValueError):
        TTLCache(0)


def test_tokens_are_cached_under_a_keyed_hash_not_in_clear():
    key = rules.TokenKey(b"k" * 32)
    assert key("t") == key("t") != key("u") and len(key("t")) == 32 and key("t") != b"t"
    assert rules.TokenKey()("t") != rules.TokenKey()("t")  # a new key per process


def test_rules_as_the_scaffold_grants_them():
    assert rules.operator_rules() == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]
    assert rules.reader_rules() == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_reviews_are_never_fenced_writes():
    """A standby (whose writes are fenced) must still answer its scrapers."""
    assert not is_write("POST", "/apis/authentication.k8s.io/v1/tokenreviews")
    assert not is_write("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews")
    assert not is_write("POST", "/apis/authorization.k8s.io/v1/namespaces/x/localsubjectaccessreviews")
    assert not is_write("GET", "/api/v1/pods")
    assert is_write("POST", "/api/v1/namespaces/x/pods")
    assert is_write("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews/../../../api/v1/pods")
    assert is_write("DELETE", "/apis/coordination.k8s.io/v1/namespaces/x/leases/tokenreviews")


# -- decisions ----------------------------------------------------------------------------------


async def test_no_token_is_401_without_asking_the_api(auth, api):
    for header in (None, "", "Basic dXNlcjpwdw==", "Bearer"):
        decision = await auth.decide(header, "GET", "/metrics")
        assert (decision.status, decision.message) == (401, "Unauthorized")
    assert api.calls == []


async def test_an_invalid_token_is_401_and_that_answer_is_cached_for_a_minute(auth, api, clock):
    assert (await auth.decide("Bearer forged", "GET", "/metrics")).status == 401
    assert (await auth.decide("Bearer forged", "GET", "/metrics")).status == 401
    assert api.kinds() == ["tokenreviews"]  # no SubjectAccessReview for nobody
    clock.now += rules.TOKEN_TTL
    assert (await auth.decide("Bearer forged", "GET", "/metrics")).status == 401
    assert api.kinds() == ["tokenreviews", "tokenreviews"]


async def test_allowed_is_200_and_cached_five_minutes_the_token_one(auth, api, clock):
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
    _, sar = api.calls[1]
    assert sar["spec"]["user"] == READER and sar["spec"]["groups"] == ["g"] and sar["spec"]["uid"] == "u-1"
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
    assert api.kinds() == ["tokenreviews", "subjectaccessreviews"]
    clock.now += rules.TOKEN_TTL  # the token is checked again; the user's allowance still holds
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
    assert api.kinds() == ["tokenreviews", "subjectaccessreviews", "tokenreviews"]
    clock.now += rules.ALLOW_TTL
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
    assert api.kinds()[3:] == ["tokenreviews", "subjectaccessreviews"]


async def test_denied_is_403_and_cached_thirty_seconds(auth, api, clock):
    decision = await auth.decide("Bearer other", "GET", "/metrics")
    assert decision.status == 403
    assert decision.message == "Authorization denied for user system:serviceaccount:default:nobody"
    api.allowed.add("system:serviceaccount:default:nobody")  # bound to metrics-reader meanwhile
    clock.now += rules.DENY_TTL - 1
    assert (await auth.decide("Bearer other", "GET", "/metrics")).status == 403
    clock.now += 1
    assert (await auth.decide("Bearer other", "GET", "/metrics")).allowed


async def test_the_verb_is_the_method_and_the_path_the_request_path(auth, api):
    assert (await auth.decide("Bearer good", "POST", "/metrics")).status == 403
    assert api.calls[-1][1]["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "post"}


async def test_review_errors_are_500_and_never_cached(auth, api):
    api.fail = ApiError(403, "Forbidden", "cannot create tokenreviews")
    decision = await auth.decide("Bearer good", "GET", "/metrics")
    assert (decision.status, decision.message) == (500, "Authentication failed")
    api.fail = None
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed  # asked again at once
    auth.reviews = Reviews(8, 8)
    api.fail = aiohttp.ClientConnectionError("connection refused")
    decision = await auth.decide("Bearer good", "GET", "/metrics")
    assert (decision.status, decision.message) == (500, f"Authorization for user {READER} failed")
    api.fail = None
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed


async def test_a_flood_of_random_tokens_holds_memory_at_the_bound(api, clock):
    auth = MetricsAuth(api, clock=clock, token_cache_size=100)
    for i in range(1000):
        clock.now += 1 / rules.NEW_TOKEN_QPS  # slow enough for the rate limit: every one reviewed
        assert (await auth.decide(f"Bearer random-{i}", "GET", "/metrics")).status == 401
    assert api.kinds() == ["tokenreviews"] * 1000
    assert len(auth.tokens.refused) == 100 and len(auth.tokens.known) == 0 and len(auth.reviews) == 0


async def test_concurrent_requests_with_one_token_share_one_review(auth, api):
    api.gate = asyncio.Event()
    pending = [asyncio.create_task(auth.decide("Bearer good", "GET", "/metrics")) for _ in range(20)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    api.gate.set()
    assert all(d.allowed for d in await asyncio.gather(*pending))
    assert api.kinds() == ["tokenreviews", "subjectaccessreviews"]


async def test_a_caller_that_goes_away_leaves_the_review_to_the_others(auth, api):
    api.gate = asyncio.Event()
    first = asyncio.create_task(auth.decide("Bearer good", "GET", "/metrics"))
    second = asyncio.create_task(auth.decide("Bearer good", "GET", "/metrics"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    first.cancel()
    api.gate.set()
    assert (await second).allowed
    assert api.kinds() == ["tokenreviews", "subjectaccessreviews"]


# -- certificates and the HTTPS endpoint --------------------------------------------------------


def test_a_self_signed_certificate_for_localhost_when_none_is_mounted(tmp_path):
    cert_pem, _ = certs.self_signed(names=("localhost", "pod-1"))
    cert = x509.load_pem_x509_certificate(cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost", "pod-1"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "::1"]
    assert cert.issuer == cert.subject
    # An empty directory (an optional Secret that does not exist) is not an error.
    assert isinstance(certs.server_context(tmp_path), ssl.SSLContext)
    assert isinstance(certs.server_context(None), ssl.SSLContext)


def _client_context(cafile: str | None = None) -> ssl.SSLContext:
    if cafile:
        return ssl.create_default_context(cafile=cafile)
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


async def test_endpoints_serve_metrics_over_https_to_the_allowed_only_and_probes_over_http(
    auth, api, tmp_path
):
    """A mounted certificate is served (a client trusting only it connects); the filter answers
    before the handler; the probes stay plain HTTP on their port."""
    cert_pem, key_pem = certs.self_signed(names=("localhost",))
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "tls.key").write_bytes(key_pem)
    metrics = Metrics()
    metrics.init_controllers(["demo"], 1)
    mport, pport = free_port(), free_port()
    endpoints = Endpoints(
        metrics,
        Readiness(),
        mport,
        pport,
        host="127.0.0.1",
        metrics_tls=certs.server_context(tmp_path),
        metrics_auth=auth,
    )
    await endpoints.start()
    url = f"https://localhost:{mport}/metrics"
    try:
        async with aiohttp.ClientSession() as http:
            trusting = _client_context(str(tmp_path / "tls.crt"))
            async with http.get(url, ssl=trusting) as resp:
                assert (resp.status, await resp.text()) == (401, "Unauthorized")
            for token, status in (("forged", 401), ("other", 403), ("good", 200)):
                headers = {"Authorization": f"Bearer {token}"}
                async with http.get(url, ssl=trusting, headers=headers) as resp:
                    assert resp.status == status, token
                    body = await resp.text()
            assert 'controller_runtime_reconcile_total{controller="demo",result="success"} 0.0' in body
            with pytest.raises(aiohttp.ClientError):  # no plain HTTP on the metrics port
                async with http.get(f"http://127.0.0.1:{mport}/metrics") as resp:
                    await resp.read()
            async with http.get(f"http://127.0.0.1:{pport}/healthz") as resp:
                assert resp.status == 200
    finally:
        await endpoints.stop()


def test_https_metrics_cannot_share_the_probes_port():
    with pytest.raises(ValueError, match="port of their own"):
        Endpoints(Metrics(), Readiness(), 9000, 9000, metrics_tls=certs.server_context())


def _write_pair(directory, names: tuple[str, ...]) -> bytes:
    """A new certificate and key in ``directory``, swapped in by rename as the kubelet does."""
    cert_pem, key_pem = certs.self_signed(names=names)
    for name, data in (("tls.key", key_pem), ("tls.crt", cert_pem)):
        (directory / f".{name}.new").write_bytes(data)
        (directory / f".{name}.new").replace(directory / name)
    return cert_pem


async def _served_certificate(port: int) -> x509.Certificate:
    """The certificate the server at ``port`` presents to a new connection."""
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=_client_context())
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
    return x509.load_der_x509_certificate(der)


def _names(cert: x509.Certificate) -> list[str]:
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )


async def test_a_mounted_certificate_is_picked_up_and_rotated_without_a_restart(tmp_path):
    """An optional Secret created after start, then renewed: each is served from the next
    connection after the next look (every RECHECK_INTERVAL seconds; time is the test's)."""
    clock = Clock()
    ctx = certs.server_context(tmp_path, clock=clock)
    port = free_port()
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", port, ssl=ctx)
    try:
        assert "localhost" in _names(await _served_certificate(port))  # self-signed: nothing mounted
        _write_pair(tmp_path, ("first.example",))
        assert "localhost" in _names(await _served_certificate(port))  # not looked at yet
        clock.now += certs.RECHECK_INTERVAL
        assert _names(await _served_certificate(port)) == ["first.example"]
        _write_pair(tmp_path, ("second.example",))
        clock.now += certs.RECHECK_INTERVAL
        assert _names(await _served_certificate(port)) == ["second.example"]
        # A broken pair (a certificate without its key) is refused; the last good one stays.
        (tmp_path / "tls.crt").write_bytes(certs.self_signed(names=("third.example",))[0])
        clock.now += certs.RECHECK_INTERVAL
        assert _names(await _served_certificate(port)) == ["second.example"]
    finally:
        server.close()
        await server.wait_closed()


# -- a door that cannot be used to slow the operator ----------------------------------------


class Observed:
    """What ``MetricsAuth`` tells its ``observe``, counted."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def __call__(self, review: str, result: str) -> None:
        self.counts[(review, result)] = self.counts.get((review, result), 0) + 1


@given(
    qps=st.floats(min_value=1e-3, max_value=1e3),
    burst=st.integers(min_value=1, max_value=1000),
    steps=st.lists(st.floats(min_value=0, max_value=1e4), max_size=200),
)
def test_the_rate_limit_never_grants_more_than_its_burst_and_rate(qps, burst, steps):
    limit = RateLimit(qps, burst)
    now, start, granted = 0.0, 0.0, 0
    for step in steps:
        now += step
        granted += limit.take(now)
        assert granted <= burst + qps * (now - start) + 1e-6
    # An idle bucket fills up to its burst, and no further.
    now += burst / qps + 1
    assert sum(limit.take(now) for _ in range(burst + 1)) == burst


def test_the_rate_limit_takes_its_burst_then_one_per_interval_and_tolerates_a_clock_going_back():
    limit = RateLimit(2.0, 3)
    assert [limit.take(10.0) for _ in range(4)] == [True, True, True, False]
    assert not limit.take(10.4) and limit.take(10.5) and not limit.take(10.5)
    assert not limit.take(5.0)  # no refill from a clock that went back
    for qps, burst in ((0, 1), (-1, 1), (1, 0)):
        with pytest.raises(ValueError):
            RateLimit(qps, burst)


def test_token_caches_admit_to_the_known_partition_only_what_was_allowed():
    tokens, alice = Tokens(2, 2), User("alice")
    tokens.reviewed(b"a", alice, now=0)
    assert tokens.get(b"a", 0) == rules.Cached(alice, fresh=True, known=False)
    tokens.decided(b"a", rules.ALLOWED, now=1)
    assert tokens.get(b"a", 1) == rules.Cached(alice, fresh=True, known=True)
    # Known: fresh for the token TTL from its review, then due for a renewal, kept for KNOWN_TTL.
    assert tokens.get(b"a", rules.TOKEN_TTL) == rules.Cached(alice, fresh=False, known=True)
    tokens.reviewed(b"a", alice, now=rules.TOKEN_TTL)
    assert tokens.get(b"a", rules.TOKEN_TTL + 1).fresh
    assert tokens.get(b"a", rules.TOKEN_TTL + rules.KNOWN_TTL) is None
    # Denied later (its binding removed): back to the refused partition, for the denial's TTL.
    tokens.reviewed(b"b", alice, now=0)
    tokens.decided(b"b", rules.ALLOWED, now=0)
    tokens.decided(b"b", Decision(403, "no"), now=0)
    assert tokens.get(b"b", 0) == rules.Cached(alice, fresh=True, known=False)
    assert tokens.get(b"b", rules.DENY_TTL) is None
    # A renewal that no longer authenticates: refused (the account was deleted).
    tokens.reviewed(b"c", alice, now=0)
    tokens.decided(b"c", rules.ALLOWED, now=0)
    tokens.reviewed(b"c", None, now=1)
    assert tokens.get(b"c", 1) == rules.Cached(None, fresh=True, known=False)
    assert tokens.get(b"c", 1 + rules.TOKEN_TTL) is None
    # Many refused tokens push out only refused ones.
    tokens.reviewed(b"d", alice, now=0)
    tokens.decided(b"d", rules.ALLOWED, now=0)
    for i in range(100):
        tokens.reviewed(b"x%d" % i, None, now=0)
    assert tokens.get(b"d", 0) is not None and len(tokens.refused) == 2


def test_review_caches_keep_allowed_and_denied_apart():
    reviews = Reviews(1, 1)
    good, bad = (User("good"), "/metrics", "get"), (User("bad"), "/metrics", "get")
    reviews.put(good, rules.ALLOWED, now=0)
    for i in range(10):
        reviews.put((User(f"bad-{i}"), "/metrics", "get"), Decision(403, "no"), now=0)
    assert reviews.get(good, rules.ALLOW_TTL - 1) == rules.ALLOWED
    reviews.put(bad, Decision(403, "no"), now=0)
    assert reviews.get(bad, rules.DENY_TTL - 1) is not None and reviews.get(bad, rules.DENY_TTL) is None
    reviews.put(good, Decision(403, "no"), now=1)  # revoked: the denial replaces the allowance
    assert reviews.get(good, 2) == Decision(403, "no") and len(reviews.allowed) == 0


@pytest.mark.parametrize("flood", ["forged", "valid but not allowed"])
async def test_a_flood_of_tokens_leaves_the_scrapers_entry_cached(api, clock, flood):
    """However many tokens a caller without the right sends, and however fast (here never
    limited), Prometheus' token and its allowance stay cached: no review for its scrapes."""
    auth = MetricsAuth(api, clock=clock, token_cache_size=8, review_cache_size=8, new_token_qps=1e9)
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
    made = len(api.calls)
    for i in range(1000):
        if flood != "forged":
            api.tokens[f"flood-{i}"] = f"system:serviceaccount:tenant:sa-{i}"
        clock.now += rules.TOKEN_TTL / 1000 / 2  # all within the scraper's token TTL
        assert (await auth.decide(f"Bearer flood-{i}", "GET", "/metrics")).status in (401, 403)
        if i % 100 == 0:
            before = len(api.calls)
            assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
            assert len(api.calls) == before
    assert len(api.calls) - made == (1000 if flood == "forged" else 2000)
    assert len(auth.tokens.known) == 1 and len(auth.tokens.refused) == 8


async def test_new_tokens_beyond_the_rate_get_429_without_a_review_and_known_ones_do_not_wait(api, clock):
    observed = Observed()
    auth = MetricsAuth(api, clock=clock, new_token_qps=0.5, new_token_burst=3, observe=observed)
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed  # takes one of the burst
    answers = [(await auth.decide(f"Bearer bogus-{i}", "GET", "/metrics")).status for i in range(50)]
    assert answers == [401, 401] + [429] * 48
    assert rules.TOO_MANY.message == "Too many new tokens to review, retry later"
    assert api.kinds() == ["tokenreviews", "subjectaccessreviews"] + ["tokenreviews"] * 2
    # A token reviewed before is answered from its cache, limit or not (a refused one too).
    assert (await auth.decide("Bearer bogus-0", "GET", "/metrics")).status == 401
    # The scraper's token is due for a renewal: a known token's review is not limited.
    clock.now += rules.TOKEN_TTL
    auth.new_tokens = RateLimit(0.5, 1)
    assert auth.new_tokens.take(clock.now)  # the bucket is empty again
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
    assert api.kinds()[-1] == "tokenreviews" and len(api.calls) == 5
    assert (await auth.decide("Bearer another", "GET", "/metrics")).status == 429
    clock.now += 1 / 0.5  # one token's worth of time later: one more new token reviewed
    assert (await auth.decide("Bearer another", "GET", "/metrics")).status == 401
    assert (await auth.decide("Bearer yet-another", "GET", "/metrics")).status == 429
    assert observed.counts == {
        ("tokenreview", "authenticated"): 2,
        ("subjectaccessreview", "allowed"): 1,
        ("tokenreview", "unauthenticated"): 3,
        ("limited", "rate"): 50,
    }


async def test_new_tokens_reviews_in_flight_are_bounded_and_the_rest_answered_429_at_once(api, clock):
    """A slow API server: no more than the bound of new tokens' reviews wait on it; the others
    are refused at once (no request piles up), a known token's renewal still gets through."""
    observed = Observed()
    auth = MetricsAuth(api, clock=clock, new_token_qps=1e9, new_reviews_in_flight=3, observe=observed)
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
    clock.now += rules.TOKEN_TTL
    api.gate = asyncio.Event()
    waiting = [asyncio.create_task(auth.decide(f"Bearer bogus-{i}", "GET", "/metrics")) for i in range(3)]
    renewal = asyncio.create_task(auth.decide("Bearer good", "GET", "/metrics"))
    joined = asyncio.create_task(auth.decide("Bearer bogus-0", "GET", "/metrics"))  # same token: joins
    for _ in range(3):
        await asyncio.sleep(0)
    refused = [await auth.decide(f"Bearer more-{i}", "GET", "/metrics") for i in range(20)]
    assert {d.status for d in refused} == {429}
    assert len(api.calls) == 2 + 3 + 1  # the first scrape's two, three new tokens', the renewal
    api.gate.set()
    assert [d.status for d in await asyncio.gather(*waiting, joined)] == [401] * 4
    assert (await renewal).allowed
    assert observed.counts[("limited", "in_flight")] == 20
    assert auth._new_in_flight == 0
    # With room again, a new token is reviewed.
    assert (await auth.decide("Bearer more-0", "GET", "/metrics")).status == 401


async def test_an_authenticated_new_token_is_limited_until_allowed(api, clock):
    """A valid token of an account without the right: its SubjectAccessReview counts among the
    limited reviews in flight; once allowed, its reviews are a known token's."""
    api.gate = asyncio.Event()
    auth = MetricsAuth(api, clock=clock, new_token_qps=1e9, new_reviews_in_flight=1)
    first = asyncio.create_task(auth.decide("Bearer other", "GET", "/metrics"))
    for _ in range(3):
        await asyncio.sleep(0)
    assert (await auth.decide("Bearer good", "GET", "/metrics")).status == 429
    api.gate.set()
    assert (await first).status == 403
    assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
    assert auth.tokens.get(auth._key("good"), clock.now).known
    assert not auth.tokens.get(auth._key("other"), clock.now).known


@settings(deadline=None, max_examples=examples(50))
@given(
    flood=st.lists(
        st.tuples(st.sampled_from(["forged", "valid", "repeat"]), st.floats(min_value=0, max_value=1)),
        max_size=300,
    ),
    sizes=st.tuples(st.integers(min_value=1, max_value=16), st.integers(min_value=1, max_value=16)),
)
def test_no_sequence_of_refused_tokens_evicts_the_scrapers_entries(flood, sizes):
    """Whatever mix of forged tokens, valid tokens of accounts without the right and repeats,
    at whatever pace within the scraper's token TTL, and whatever the caches' bounds: the
    scraper's token and allowance stay cached (its scrapes make no review)."""

    async def run() -> None:
        api, clock = FakeAPI(), Clock()
        auth = MetricsAuth(
            api, clock=clock, token_cache_size=sizes[0], review_cache_size=sizes[1], new_token_qps=1e9
        )
        assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
        pace = (rules.TOKEN_TTL - 1) / max(1, sum(step for _, step in flood))
        for i, (kind, step) in enumerate(flood):
            clock.now += step * pace
            token = {"forged": f"forged-{i}", "valid": f"valid-{i}", "repeat": "valid-0"}[kind]
            if kind != "forged":
                api.tokens[token] = f"system:serviceaccount:tenant:{token}"
            assert not (await auth.decide(f"Bearer {token}", "GET", "/metrics")).allowed
            made = len(api.calls)
            assert (await auth.decide("Bearer good", "GET", "/metrics")).allowed
            assert len(api.calls) == made

    asyncio.run(run())
