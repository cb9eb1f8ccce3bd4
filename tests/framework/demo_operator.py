"""A minimal operator built only from ``shared``, to test the shared runtime on a real API.

Primary objects are ConfigMaps labelled ``demo=yes``; each gets one child Pod. Every pod event
the operator receives is logged as ``SEEN pod <name>``, so a test can prove the server-side
label selector keeps foreign pods out of the watch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from shared.api import ownership
from shared.client.kube import KubeClient
from shared.controller import caches
from shared.controller.options import parse_options
from shared.controller.runtime import Runtime
from shared.controller.watches import Watch
from shared.controller.workqueue import Controller

APP = "demo"
runtime = Runtime(app=APP, controllers=(APP,), options=parse_options(None, prog=APP))
kube = KubeClient(observer=runtime.metrics.observe_request)
log = logging.getLogger("demo")

children = caches.OwnerCache(lambda b: b["metadata"]["name"])


async def reconcile(body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    if children.children(meta["namespace"], meta["uid"]):
        return
    pod = ownership.adopt(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-child"},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
        },
        body,
        APP,
        "child",
    )
    children.observe("ADDED", await kube.create(f"/api/v1/namespaces/{meta['namespace']}/pods", pod))


controller = Controller(APP, reconcile, metrics=runtime.metrics, gate=runtime.active)
runtime.manage(controller, kube)


def seen(event_type: str | None, body: Mapping[str, Any]) -> None:
    # Filed, but no kick of the owner: one pass per ConfigMap (the test counts them).
    children.observe(event_type, body)
    log.info(f"SEEN pod {body['metadata']['name']}")


WATCHES = [
    Watch("", "v1", "configmaps", controller.observe, {"demo": "yes"}),
    Watch("", "v1", "pods", seen, caches.managed_labels(APP)),
]

if __name__ == "__main__":
    runtime.run(WATCHES)
