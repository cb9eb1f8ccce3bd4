"""Small helpers for integration tests: polling with a deadline instead of sleeping."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float = 60.0, what: str = "condition") -> T:
    """Call ``probe`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = probe()
            if value:
                return value
        except Exception as exc:  # the API may answer 404 until an object appears
            last_exc = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(0.2)


def fresh_namespace(core: Any, prefix: str, labels: dict[str, str] | None = None) -> str:
    """Create a uniquely named namespace and wait until pods can be created in it.

    Pods are rejected until the ServiceAccount controller has made ``default``.
    """
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
    wait_for(lambda: core.read_namespaced_service_account("default", name), 60, "default ServiceAccount")
    return name


def delete_namespace(core: Any, name: str) -> None:
    """Delete a test's namespace (gone already is fine)."""
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def hold_pods_at(core: Any, namespace: str, pods: int, name: str = "hold") -> None:
    """A ResourceQuota that lets only ``pods`` pods exist in ``namespace``.

    It stops a scale-up at exactly that count for as long as a test needs (creates beyond it are
    refused with 403), so "killed in the middle of a scale-up" is a state, not a race. The
    quota admits nothing until the quota controller has filled in its status: wait for that.
    """
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": name}, "spec": {"hard": {"pods": str(pods)}}}
    )
    wait_for(
        lambda: (
            (core.read_namespaced_resource_quota(name, namespace).status.hard or {}).get("pods") == str(pods)
        ),
        60,
        "the quota's status",
    )
