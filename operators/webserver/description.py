"""The WebServer operator as data: what the tools, the entry point and the builder read.

See ``shared.api.description``; the API itself stays in ``.schema``, the logic in
``.reconciler``.
"""

from __future__ import annotations

from operators.webserver import access, schema
from shared.api.description import NAMESPACED, Alert, MetricSpec, OperatorDescription, Panel, Resource

OBJECT = "{{namespace}}/{{name}}"  # Grafana legend of a per-object series

DESCRIPTION = OperatorDescription(
    name="webserver",
    app=schema.APP,
    crd=schema.CRD,
    access=access.POLICIES,
    resources=(
        # create/delete pods; get after AlreadyExists (whose pod is it?); patch adopts an orphan.
        Resource("Pod", "v1", "pods", verbs=("create", "delete", "get", "patch")),
        # shared.client.services.converge; get after AlreadyExists (ours or a stranger's?).
        Resource("Service", "v1", "services", verbs=("create", "delete", "get", "patch")),
        # ConfigMaps a spec references, any of the namespace: watched as metadata only, the
        # referenced ones read (get; a digest of each kept, never its data), never written.
        # No Secrets: spec.restartedAt rolls pods for a changed one.
        Resource("ConfigMap", "v1", "configmaps", child=False, verbs=("get",)),
        # shared.client.budgets.converge: the budget over the pods while replicas >= 2.
        Resource(
            "PodDisruptionBudget",
            "v1",
            "poddisruptionbudgets",
            group="policy",
            verbs=("create", "delete", "get", "patch"),
        ),
    ),
    display="WebServer",
    summary="N identical web-server pods, kept like a ReplicaSet would, optionally behind a Service.",
    tagline="web-server pods",
    keywords=("web server",),
    catalog_text="""\
## WebServer
N identical web-server pods kept like a ReplicaSet would (scale subresource, rolling
updates), configured with environment, ConfigMap and Secret files and HTTP health checks
(a ConfigMap edit rolls the pods), optionally behind a Service. Rollouts have a progress
deadline, a revision history, pause, and an optional automatic rollback to the last revision
that became available; a PodDisruptionBudget (from 2 replicas) and a soft spread over nodes
and zones come by default.

```yaml
apiVersion: demo.k8s.io/v1alpha1
kind: WebServer
metadata: {name: web}
spec: {replicas: 3, image: nginxdemos/hello}
```
""",
    example="examples/webserver.yaml",
    metrics=(
        MetricSpec("webserver_desired_replicas", "gauge", "spec.replicas of a WebServer", NAMESPACED),
        MetricSpec("webserver_ready_replicas", "gauge", "Ready pods of a WebServer", NAMESPACED),
        MetricSpec(
            "webserver_rollbacks_total",
            "counter",
            "Automatic rollbacks of a WebServer (a rollout past progressDeadlineSeconds)",
            NAMESPACED,
        ),
        MetricSpec(
            "webserver_canary_aborts_total",
            "counter",
            "Canaries of a WebServer aborted by the operator's analysis (back to the stable revision)",
            NAMESPACED,
        ),
    ),
    alerts=(
        Alert(
            "WebServerRolledBack",
            "increase(webserver_rollbacks_total[1h]) > 0",
            for_="0m",
            severity="warning",
            summary="WebServer {{ $labels.namespace }}/{{ $labels.name }} rolled back a rollout",
            description="A rollout of WebServer {{ $labels.namespace }}/{{ $labels.name }} missed its "
            "progressDeadlineSeconds and the operator went back to the last revision that became "
            "available; the spec still asks for the template that failed.",
        ),
    ),
    panels=(
        Panel(
            "WebServer desired vs ready replicas",
            (
                ("webserver_desired_replicas", f"{OBJECT} desired"),
                ("webserver_ready_replicas", f"{OBJECT} ready"),
            ),
            "short",
        ),
        Panel(
            "WebServer automatic rollbacks", (("increase(webserver_rollbacks_total[1h])", OBJECT),), "short"
        ),
    ),
)
