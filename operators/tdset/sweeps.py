"""The TDSet operator's give-back sweeps: what a TDSet took and no longer needs goes back.

A TDSet may raise an HPA's `minReplicas` (its floor) and claim a scale target it does not own;
when it is deleted, or points elsewhere, `FloorSweeps` restores the HPA's own bounds and
`TargetSweeps` removes the claim. Each runs in the background, once every watch has listed and
only on the leader, one sweep at a time; the reconciler requests them and they find the TDSets
gone from the controller's store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from operators.tdset import desired
from operators.tdset import target as scaletarget
from operators.tdset.api import ScaleTargets, TDSetAPI
from operators.tdset.description import DESCRIPTION
from operators.tdset.desired import AutoscalerView
from shared.api.errors import (
    ApiError,
    Conflict,
    NotFound,
)

logger = logging.getLogger("operators.tdset")
# The kinds a scaleTargetRef may name out of the box (RBAC in the description): the start-up
# sweep lists their claims. (apiVersion, kind, plural)
TARGET_KINDS = tuple(
    (f"{r.group}/{r.version}" if r.group else r.version, r.kind, r.plural)
    for r in DESCRIPTION.resources
    if r.scale
)
# HPAs by (namespace, name).
Autoscalers = dict[tuple[str, str], AutoscalerView]
# A scale target: (namespace, group, kind, name).
TargetKey = tuple[str, str, str, str]


class Sweeps:
    """A sweep run in the background, once every watch has listed (before, a live TDSet may look
    gone) and only on the leader (``active``): a standby never writes.

    One sweep at a time; a request during a sweep asks for exactly one more, so the initial
    listing of many annotated objects starts one sweep, not one (and its patches) per object.
    Subclasses say what one sweep does (``_sweep``); it may ask for one more itself.
    """

    task_name = "tdset/sweep"

    def __init__(self, active: Callable[[], bool]) -> None:
        self._active = active
        self._task: asyncio.Task[None] | None = None
        self._again = False

    def request(self) -> None:
        self._again = True
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def wait(self) -> None:
        """Until the sweeps asked for so far are done (tests)."""
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while not self._active():  # listed, and (leader election) leading
            await asyncio.sleep(0.1)
        while self._again:
            self._again = False
            await self._sweep()

    async def _sweep(self) -> None:
        raise NotImplementedError


class FloorSweeps(Sweeps):
    """Sweeps giving back the minReplicas (and maxReplicas, if capped) of HPAs that a TDSet no
    longer here held (deleted, even while this operator was down) or that it no longer scales
    (``Sweeps``)."""

    task_name = "tdset/restore-floors"

    def __init__(
        self,
        api: TDSetAPI,
        autoscalers: Autoscalers,
        live: Callable[[], set[str]],
        active: Callable[[], bool],
        scales: Callable[[str], TargetKey | None] = lambda uid: None,
    ) -> None:
        super().__init__(active)
        self._api = api
        self._autoscalers = autoscalers
        self._live = live
        # What a live TDSet scales now (None: not known): an HPA whose floor it raised on a
        # target it no longer points at (scaleTargetRef changed) gets its minReplicas back too.
        self._scales = scales

    async def _sweep(self) -> None:
        live = self._live()
        for hpa in list(self._autoscalers.values()):
            if hpa.floor_owner is not None and (
                hpa.floor_owner not in live or self._moved_away(hpa, hpa.floor_owner)
            ):
                try:
                    await self._restore_floor(hpa)
                except Exception as exc:  # one HPA's failure must not end the sweeps for all
                    logger.warning(f"restoring minReplicas of HPA {hpa.namespace}/{hpa.name}: {exc!r}")

    def _moved_away(self, hpa: AutoscalerView, owner: str) -> bool:
        now = self._scales(owner)
        scaled = desired.scaled_by(hpa)
        return now is not None and scaled is not None and now != (hpa.namespace, *scaled)

    async def _restore_floor(self, hpa: AutoscalerView) -> None:
        try:
            await self._api.patch_autoscaler(hpa.namespace, hpa.name, desired.restore_patch(hpa))
        except ApiError as exc:
            if not isinstance(exc, NotFound):
                logger.warning(f"restoring minReplicas of HPA {hpa.namespace}/{hpa.name}: {exc}")
            return
        capped = (
            f", maxReplicas {hpa.max_replicas} -> {hpa.original_max}" if hpa.original_max is not None else ""
        )
        logger.info(
            f"HPA {hpa.namespace}/{hpa.name}: minReplicas {hpa.min_replicas} -> {hpa.original_min}{capped} "
            "(the TDSet that raised it is gone)"
        )


def target_key(namespace: str, ref: scaletarget.Ref) -> TargetKey:
    return (namespace, *ref.key)


@dataclass(frozen=True)
class Held:
    """A claim the operator knows of: which TDSet holds the target, and how to reach it."""

    holder: str
    api_version: str
    plural: str


class TargetSweeps(Sweeps):
    """Gives the replicas back to scale targets no TDSet wants any more: its TDSet was deleted
    (also while this operator was down), points at another object, or went back to a
    ``container``. The counterpart of ``FloorSweeps`` for ``spec.scaleTargetRef``.

    The claims are known from the passes that made or confirmed them and, once after start,
    from a listing of each kind supported out of the box (``TARGET_KINDS``) with the
    ``operators.tdset.target.HOLDER`` label selector in the watched namespaces: a TDSet
    deleted while the operator was down left its claim there. Targets are not watched (see
    docs/operators/tdset-targets.md), so a claim on a kind a cluster admin
    added is known from the passes only: one left by a TDSet deleted while the operator was down
    is not found (documented, with the label to look for).

    Runs as ``Sweeps`` do: once every watch has listed, only on the leader, one at a time.
    """

    task_name = "tdset/give-back-targets"

    def __init__(
        self,
        api: ScaleTargets,
        wants: Callable[[str], TargetKey | None],
        active: Callable[[], bool],
        namespaces: Callable[[], tuple[str, ...]],
        event: Callable[[Mapping[str, Any], str, str], None],
        *,
        autoscaled: Callable[[TargetKey], bool] = lambda key: False,
        released: Callable[[TargetKey], None] = lambda key: None,
    ) -> None:
        super().__init__(active)
        self._api = api
        self._wants = wants
        # Told when a target is free: a TDSet that found it taken (TargetConflict) takes it now,
        # not at the end of its backoff.
        self._released = released
        # An HPA scales it: its replicas are the HPA's to set (the HPA gets its floor back).
        self._autoscaled = autoscaled
        self._namespaces = namespaces
        self._event = event
        self.claims: dict[TargetKey, Held] = {}
        self._listed = False

    def claimed(self, key: TargetKey, held: Held) -> None:
        """A pass holds ``key`` for ``held.holder``: sweep if the holder no longer wants it."""
        self.claims[key] = held
        if self._wants(held.holder) != key:
            self.request()

    async def _sweep(self) -> None:
        if not self._listed:
            self._listed = await self._list()
        for key, held in list(self.claims.items()):
            if self._wants(held.holder) == key:
                continue
            try:
                await self._give_back(key, held)
            except Exception as exc:  # one target's failure must not end the sweeps for all
                logger.warning(f"giving back {key[2]} {key[0]}/{key[3]}: {exc!r}")

    async def _list(self) -> bool:
        """Every claim on the kinds supported out of the box; whether each listing succeeded (a
        kind the cluster does not serve, such as WebServer without its CRD, has none)."""
        listed = True
        for namespace in self._namespaces() or ("",):
            for api_version, kind, plural in TARGET_KINDS:
                try:
                    found = await self._api.list_claimed(namespace, plural, api_version)
                except ApiError as exc:
                    if isinstance(exc, NotFound):
                        continue
                    logger.warning(f"listing the {plural} TDSets hold: {exc}; again at the next sweep")
                    listed = False
                    continue
                except Exception as exc:
                    logger.warning(f"listing the {plural} TDSets hold: {exc!r}; again at the next sweep")
                    listed = False
                    continue
                for obj in found:
                    holder, meta = scaletarget.claim_of(obj).holder, obj["metadata"]
                    if holder is not None:
                        key = (meta["namespace"], api_version.rpartition("/")[0], kind, meta["name"])
                        self.claims.setdefault(key, Held(holder, api_version, plural))
        return listed

    async def _give_back(self, key: TargetKey, held: Held) -> None:
        namespace, _, kind, name = key
        obj = await self._api.get(namespace, held.plural, name, held.api_version)
        claim = scaletarget.claim_of(obj) if obj is not None else None
        if obj is None or claim is None or claim.holder is None:
            self.claims.pop(key, None)  # gone, or given back by someone else
            return
        if claim.holder != held.holder:  # taken over since: judge the new holder
            self.claims[key] = Held(claim.holder, held.api_version, held.plural)
            self._again = True
            return
        original = scaletarget.give_back_replicas(claim)
        if self._autoscaled(key):
            original = None
        # Both writes carry what was read as preconditions (UID, resourceVersion): the claim
        # taken meanwhile by a TDSet re-created under the same name is kept, with the user's
        # original replicas it carries (a 409: read again, in the sweep that follows).
        version = claim.resource_version
        try:
            if original is not None:
                answer = await self._api.patch_scale(
                    namespace,
                    held.plural,
                    name,
                    held.api_version,
                    original,
                    uid=claim.uid,
                    resource_version=version,
                )
                version = str((answer.get("metadata") or {}).get("resourceVersion") or version)
            await self._api.patch(
                namespace, held.plural, name, held.api_version, scaletarget.release_patch(claim, version)
            )
        except ApiError as exc:
            if not isinstance(exc, Conflict):
                raise
            self._again = True
            return
        self.claims.pop(key, None)
        self._released(key)
        why = f"TDSet {claim.holder_name} (uid {claim.holder}) no longer scales it"
        gave = f"replicas set back to {original}" if original is not None else "released to its HPA"
        logger.info(f"{kind} {namespace}/{name}: {gave} ({why})")
        self._event(obj, "GaveBackReplicas", f"{gave[0].upper()}{gave[1:]}: {why}")
