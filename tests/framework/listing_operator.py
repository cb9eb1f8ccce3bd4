"""A test operator built from `shared`, with the builder every operator uses, whose child
handler blocks, for readiness.

The child handler blocks a thread for 10 ms, as a handler making one call with a synchronous
client does, so the handlers of a listing fall behind kopf's watcher, and the end of the
listing goes by while many listed children are not in the cache yet (our operators' handlers
do not block, and lag the listing by a few events only: the race is the same, its window far
smaller).

Primary objects are ConfigMaps labelled `listing=yes`; each wants one child Secret, and a
pass that finds none in the cache creates one (`generateName`): a pass planned from a
half-filled cache leaves a surplus Secret behind, as a WebServer would a surplus pod.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from shared.api import ownership
from shared.api.crd import CRDSpec
from shared.api.description import OperatorDescription, Resource
from shared.controller import caches
from shared.controller.builder import Operator
from shared.controller.options import parse_options
from shared.controller.reconciler import Context, Reconciler
from shared.controller.watches import Watch

APP = "listing"
# The builder's primary kind: ConfigMaps (a core kind, standing in for a CRD; no status is written).
DESCRIPTION = OperatorDescription(
    name=APP,
    app=APP,
    crd=CRDSpec("", "v1", "ConfigMap", "configmaps", spec_schema={}, status_schema={}),
    resources=(Resource("Secret", "v1", "secrets", verbs=("create",)),),
    display="Listing",
    summary="A test operator.",
    tagline="a test operator",
    keywords=(),
    catalog_text="",
    example="",
)
log = logging.getLogger(APP)


class ListingReconciler(Reconciler):
    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.children = caches.OwnerCache(lambda b: b["metadata"]["name"])

    def watches(self) -> Sequence[Watch]:
        return [Watch("", "v1", "secrets", self.child_seen, caches.managed_labels(APP))]

    async def child_seen(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        # A blocking call in a thread, as a handler with a synchronous client makes.
        await asyncio.to_thread(time.sleep, 0.01)
        self.children.observe(event_type, body)

    async def reconcile(self, body: Mapping[str, Any]) -> None:
        meta = body["metadata"]
        log.info(f"PASS {meta['name']} with {len(self.children)} children cached")
        if self.children.children(meta["namespace"], meta["uid"]):
            return
        child = {"apiVersion": "v1", "kind": "Secret", "metadata": {"generateName": f"{meta['name']}-"}}
        path = f"/api/v1/namespaces/{meta['namespace']}/secrets"
        self.children.observe(
            "ADDED", await self.ctx.kube.create(path, ownership.adopt(child, body, APP, "child"))
        )


if __name__ == "__main__":
    options = parse_options(None, prog=APP)
    Operator(DESCRIPTION, ListingReconciler, options=options, primary_labels={"listing": "yes"}).run()
