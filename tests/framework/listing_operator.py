"""A test operator built from ``shared`` whose child handler blocks, for readiness.

The child handler blocks a thread for 10 ms, as a handler making one call with a synchronous
client does, so the handlers of a listing fall
behind kopf's watcher, and the end of the listing goes by while many listed children are
not in the cache yet (our operators' handlers do not block, and lag the listing by a few
events only: the race is the same, its window far smaller).

Primary objects are ConfigMaps labelled ``listing=yes``; each wants one child Secret, and a
pass that finds none in the cache creates one (``generateName``): a pass planned from a
half-filled cache leaves a surplus Secret behind, as a WebServer would a surplus pod.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from shared.api import ownership
from shared.client.kube import KubeClient
from shared.controller import caches
from shared.controller.options import parse_options
from shared.controller.runtime import Runtime
from shared.controller.watches import Watch
from shared.controller.workqueue import Controller

APP = "listing"
runtime = Runtime(app=APP, controllers=(APP,), options=parse_options(None, prog=APP))
kube = KubeClient(observer=runtime.metrics.observe_request)
children = caches.OwnerCache(lambda b: b["metadata"]["name"])
log = logging.getLogger(APP)


async def reconcile(body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    log.info(f"PASS {meta['name']} with {len(children)} children cached")
    if children.children(meta["namespace"], meta["uid"]):
        return
    child = {"apiVersion": "v1", "kind": "Secret", "metadata": {"generateName": f"{meta['name']}-"}}
    path = f"/api/v1/namespaces/{meta['namespace']}/secrets"
    children.observe("ADDED", await kube.create(path, ownership.adopt(child, body, APP, "child")))


controller = Controller(APP, reconcile, metrics=runtime.metrics, gate=runtime.active)
runtime.manage(controller, kube)


async def child_seen(event_type: str | None, body: Mapping[str, Any]) -> None:
    # A blocking call in a thread, as a handler with a synchronous client makes.
    await asyncio.to_thread(time.sleep, 0.01)
    children.observe(event_type, body)


WATCHES = [
    Watch("", "v1", "secrets", child_seen, caches.managed_labels(APP)),
    Watch("", "v1", "configmaps", controller.observe, {"listing": "yes"}),
]

if __name__ == "__main__":
    runtime.run(WATCHES)
