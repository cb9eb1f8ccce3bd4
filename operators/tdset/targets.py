"""A TDSet's scale target as the reconciler sees it: who holds it, what a pass found of it, and
why it cannot be scaled (`TargetConflictError`, `TargetError`). The claims are given back by
the sweeps (`.sweeps`); reading and writing a target is `.target` and `.api`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.tdset import target as scaletarget
from shared.api.errors import (
    ConflictError,
    OperatorError,
)


class TargetConflictError(ConflictError):
    """The scale target is held by another live TDSet, or controlled by another object (an
    owner reference with ``controller: true``): this one leaves it alone."""

    reason = "TargetConflict"


# Seconds between the passes of a TDSet whose target another holds (each one read, no write).
CONFLICT_RECHECK = 30.0


class TargetError(OperatorError):
    """The scale target cannot be scaled (yet): ``reason`` is the condition's and Event's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# The kinds whose /scale refuses a Scale carrying another object's UID (409): the apps registry
# checks it; a custom resource's /scale does not (kube-apiserver 1.34: a WebServer's took a
# wrong UID), so a replaced one would be written unclaimed. (group, kind)
UID_CHECKED = frozenset({("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet")})


@dataclass(frozen=True)
class KnownTarget:
    """What the last pass of a TDSet found of its scale target, holding the claim: enough to
    write a boundary's replicas with one request (``TDSetReconciler.flip_target``)."""

    ref: scaletarget.Ref
    plural: str
    uid: str  # the target's UID: the precondition of the write
    replicas: int  # its spec.replicas as that pass left it


@dataclass
class FoundTarget:
    """A scale target as a pass found it: its plural, the object, the claim, its Scale."""

    plural: str
    obj: Mapping[str, Any]
    claim: scaletarget.Claim
    scale: scaletarget.ScaleView
    claimed_now: bool  # claimed by this pass
