"""A minimal operator built only from `shared`, with the builder every operator uses, to test the
shared runtime on a real API.

Primary objects are ConfigMaps labelled `demo=yes`; each gets one child Pod. Every pod event
the operator receives is logged as `SEEN pod <name>`, so a test can prove the server-side
label selector keeps foreign pods out of the watch.
"""

from __future__ import annotations

import logging
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

APP = "demo"
# The builder's primary kind: ConfigMaps (a core kind, standing in for a CRD; no status is written).
DESCRIPTION = OperatorDescription(
    name=APP,
    app=APP,
    crd=CRDSpec("", "v1", "ConfigMap", "configmaps", spec_schema={}, status_schema={}),
    resources=(Resource("Pod", "v1", "pods", verbs=("create",)),),
    display="Demo",
    summary="A test operator.",
    tagline="a test operator",
    keywords=(),
    catalog_text="",
    example="",
)
log = logging.getLogger("demo")


class DemoReconciler(Reconciler):
    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.children = caches.OwnerCache(lambda b: b["metadata"]["name"])

    def watches(self) -> Sequence[Watch]:
        return [Watch("", "v1", "pods", self.seen, caches.managed_labels(APP))]

    def seen(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        # Filed, but no kick of the owner: one pass per ConfigMap (the test counts them).
        self.children.observe(event_type, body)
        log.info(f"SEEN pod {body['metadata']['name']}")

    async def reconcile(self, body: Mapping[str, Any]) -> None:
        meta = body["metadata"]
        if self.children.children(meta["namespace"], meta["uid"]):
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
        created = await self.ctx.kube.create(f"/api/v1/namespaces/{meta['namespace']}/pods", pod)
        self.children.observe("ADDED", created)


if __name__ == "__main__":
    options = parse_options(None, prog=APP)
    Operator(DESCRIPTION, DemoReconciler, options=options, primary_labels={"demo": "yes"}).run()
