"""The Kubernetes API client every operator uses for its own calls.

kopf has its own client for watching and patching its objects; children are created and
deleted with the official ``kubernetes`` client, configured the same way kopf is: in-cluster
service account when running in a pod, else ``$KUBECONFIG`` / ``~/.kube/config``.
"""

from __future__ import annotations

import functools

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException


@functools.cache
def api_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an API error, None for anything else."""
    return exc.status if isinstance(exc, ApiException) else None


def reason_of(exc: BaseException) -> str:
    """A short human message for an API error (the server's message when it has one)."""
    if isinstance(exc, ApiException):
        import json

        try:
            return str(json.loads(exc.body or "{}").get("message") or exc.reason)
        except ValueError:
            return f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"
