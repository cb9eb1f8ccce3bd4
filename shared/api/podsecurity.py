"""Security contexts that pass the ``restricted`` Pod Security Standard.

``restricted`` requires: non-root (``runAsNonRoot``, and a non-zero ``runAsUser`` when the
image's user is unknown), no privilege escalation, all capabilities dropped and the
RuntimeDefault (or Localhost) seccomp profile. Operators that create pods use these so their
pods are admitted in namespaces labelled ``pod-security.kubernetes.io/enforce: restricted``.
"""

from __future__ import annotations

from typing import Any


def restricted_pod(uid: int) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def restricted_container(*, read_only_root: bool = False) -> dict[str, Any]:
    ctx: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if read_only_root:
        ctx["readOnlyRootFilesystem"] = True
    return ctx
