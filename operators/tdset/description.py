"""The TDSet operator as data: what the tools, the entry point and the builder read.

See ``shared.api.description``; the API itself stays in ``.schema``, the logic in
``.reconciler``.
"""

from __future__ import annotations

from typing import Any

from operators.tdset import access, schema
from shared.api.description import NAMESPACED, Alert, MetricSpec, OperatorDescription, Panel, Resource

OBJECT = "{{namespace}}/{{name}}"  # Grafana legend of a per-object series
# A scale target: read (the claim) and patched (the claim's label and annotations, never its
# spec), listed (the start-up sweep finds claims of TDSets deleted while it was down), and its
# /scale written. The apps kinds' /scale is never read: their Scale comes from the object the
# pass has read (operators.tdset.target.OWN_FIELDS_SCALE); a custom resource's /scale is.
APPS_SCALE_VERBS = ("patch",)
TARGET: dict[str, Any] = {"verbs": ("get", "list", "patch"), "watched": False, "scale": APPS_SCALE_VERBS}
# The aggregated ClusterRole a cluster admin extends to let TDSets scale more kinds: every
# ClusterRole with this label is folded into it (deploy/install.yaml binds it to the operator).
SCALER_ROLE = "k8s-operators-py:tdset-operator-scaler"
SCALER_LABEL = "tdset.k8s-operators-py.dev/aggregate-to-scale"

DESCRIPTION = OperatorDescription(
    name="tdset",
    app=schema.APP,
    crd=schema.CRD,
    access=access.POLICIES,
    # A pass that flips a target at a boundary is one write, so it holds its slot for a round
    # trip rather than for CPU, and every TDSet sharing the boundary is due at once: more slots
    # than the runtime's default put more of those writes in flight (docs/benchmarks.md).
    max_concurrent_reconciles=64,
    resources=(
        # create it, patch (scale, template, adopt an orphan); get after AlreadyExists. As a
        # spec.scaleTargetRef (not a child then): get and patch (the claim's label and
        # annotations), list (the start-up sweep of claims), /scale written.
        Resource(
            "Deployment",
            "v1",
            "deployments",
            group="apps",
            verbs=("create", "delete", "get", "patch"),
            scale=APPS_SCALE_VERBS,
        ),
        # shared.client.services.converge; get after AlreadyExists (ours or a stranger's?).
        Resource("Service", "v1", "services", verbs=("create", "delete", "get", "patch")),
        # The user's HPA: watched (all of them) and given a floor (patch), never owned.
        Resource(
            "HorizontalPodAutoscaler",
            "v2",
            "horizontalpodautoscalers",
            child=False,
            group="autoscaling",
            verbs=("patch",),
        ),
        # The other kinds a spec.scaleTargetRef may name out of the box (operators.tdset.target);
        # read by name, never watched (docs/operators/tdset-targets.md). A cluster
        # admin allows more kinds through the aggregated ClusterRole (SCALER_ROLE).
        Resource("StatefulSet", "v1", "statefulsets", child=False, group="apps", **TARGET),
        Resource("ReplicaSet", "v1", "replicasets", child=False, group="apps", **TARGET),
        Resource(
            "WebServer",
            "v1alpha1",
            "webservers",
            child=False,
            group="demo.k8s.io",
            **{**TARGET, "scale": ("get", "patch")},
        ),
        # Holidays (spec.holidays.configMapRef): any ConfigMap of the namespace, watched as
        # metadata only, the referenced ones read (get) and parsed once per change, never written.
        Resource("ConfigMap", "v1", "configmaps", child=False, verbs=("get",)),
    ),
    display="TDSet",
    summary="A Deployment whose replica count follows a time-of-day schedule (time zones, DST, HPA floor).",
    tagline="time-of-day scaling",
    keywords=("scheduled scaling", "time of day"),
    catalog_text="""\
## TDSet
A Deployment whose replica count follows time windows in a time zone, acted on exactly at
each boundary; an HPA on the Deployment gets the schedule as its `minReplicas`. Instead of
its own Deployment, a TDSet can scale a workload you already run (`spec.scaleTargetRef`: a
Deployment, StatefulSet, ReplicaSet, WebServer, or any kind with a `/scale` subresource), and
gives its replicas back when it goes.

```yaml
apiVersion: schedule.rs/v1
kind: TDSet
metadata: {name: shop}
spec:
  container: {image: nginx:1.27, port: 80}
  schedulingConfig: [{startTime: 9, endTime: 17, replica: 5}]
  defaultReplica: 2
  timeZone: Europe/Berlin
```
""",
    example="examples/tdset.yaml",
    aggregated_role=SCALER_ROLE,
    aggregate_label=SCALER_LABEL,
    metrics=(
        MetricSpec(
            "tdset_desired_replicas",
            "gauge",
            "Replicas the TDSet operator maintains for a TDSet now",
            NAMESPACED,
        ),
        MetricSpec(
            "tdset_scheduled_replicas", "gauge", "Replicas a TDSet's schedule asks for now", NAMESPACED
        ),
        MetricSpec(
            "tdset_degraded", "gauge", "1 when a TDSet's Degraded condition is True, else 0", NAMESPACED
        ),
    ),
    alerts=(
        Alert(
            "TDSetDegraded",
            "tdset_degraded == 1",
            for_="10m",
            severity="warning",
            summary="TDSet {{ $labels.namespace }}/{{ $labels.name }} is Degraded",
            description="TDSet {{ $labels.namespace }}/{{ $labels.name }} has been Degraded for 10 minutes "
            "(invalid spec or its Deployment cannot be written): its replicas do not follow the schedule.",
        ),
    ),
    panels=(
        Panel(
            "TDSet desired vs scheduled replicas",
            (
                ("tdset_desired_replicas", f"{OBJECT} desired"),
                ("tdset_scheduled_replicas", f"{OBJECT} scheduled"),
            ),
            "short",
        ),
    ),
)
