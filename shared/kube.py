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
import json
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"


class ApiError(Exception):
    """A non-2xx answer of the API server."""

    def __init__(self, status: int, reason: str, message: str, body: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = dict(body or {})


def reason_of(exc: BaseException) -> str:
    """A short human message for an error: the API server's own message when it has one."""
    if isinstance(exc, ApiError):
        return exc.message or f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def _load_configuration() -> Any:
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
    except config.ConfigException:
        config.load_kube_config(client_configuration=cfg)
    return cfg


class KubeClient:
    """An async JSON client for one API server."""

    def __init__(
        self,
        configuration: Any | None = None,
        observer: Callable[[str, str, int | str, float], None] | None = None,
    ) -> None:
        self._cfg = configuration
        # Called with (method, host, status code or "<error>", seconds) after every request.
        self._observer = observer
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | None = None

    async def load(self) -> None:
        """Load credentials off the event loop (call from a startup handler)."""
        if self._cfg is None:
            self._cfg = await asyncio.to_thread(_load_configuration)

    def _ssl_context(self) -> ssl.SSLContext:
        cfg = self._cfg
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

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": JSON, "Content-Type": content_type}
        token = self._cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            headers["Authorization"] = token if token.lower().startswith("bearer ") else f"Bearer {token}"
        return headers

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = JSON,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        if self._cfg is None:
            self._cfg = _load_configuration()
        if self._session is None or self._session.closed:
            self._ssl = self._ssl_context()
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        url = self._cfg.host.rstrip("/") + path
        data = json.dumps(body) if body is not None else None
        host = urllib.parse.urlsplit(self._cfg.host).netloc
        start = time.monotonic()
        code: int | str = "<error>"
        try:
            async with self._session.request(
                method, url, data=data, params=params, headers=self._headers(content_type), ssl=self._ssl
            ) as resp:
                status, reason = resp.status, resp.reason
                code = status
                text = await resp.text()
        finally:
            if self._observer is not None:
                self._observer(method, host, code, time.monotonic() - start)
        try:
            payload = json.loads(text) if text else {}
        except ValueError:
            payload = {"message": text[:500]}
        if status >= 400:
            raise ApiError(
                status,
                str(payload.get("reason") or reason),
                str(payload.get("message") or ""),
                payload,
            )
        return payload if isinstance(payload, dict) else {"items": payload}

    async def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body)

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self.request("GET", path, params=params)

    async def merge_patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, body, content_type=MERGE_PATCH)

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("DELETE", path, body)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def namespaced(namespace: str, plural: str, name: str = "", group_version: str = "v1") -> str:
    """The API path of a namespaced collection or object (core group when ``v1``)."""
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    path = f"{base}/namespaces/{namespace}/{plural}"
    return f"{path}/{name}" if name else path
