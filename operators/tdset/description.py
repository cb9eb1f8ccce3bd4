"""The TDSet operator as data: what the tools, the entry point and the builder read.

See :mod:`shared.api.description`; the API itself stays in :mod:`.schema`, the logic in
:mod:`.reconciler`.
"""

from __future__ import annotations

from operators.tdset import schema
from shared.api.description import NAMESPACED, Alert, MetricSpec, OperatorDescription, Panel, Resource

OBJECT = "{{namespace}}/{{name}}"  # Grafana legend of a per-object series

DESCRIPTION = OperatorDescription(
    name="tdset",
    app=schema.APP,
    crd=schema.CRD,
    reconcile="operators.tdset.reconciler:TDSetReconciler",
    resources=(
        # create it, patch (scale, template, adopt an orphan); get after AlreadyExists.
        Resource("Deployment", "v1", "deployments", group="apps", verbs=("create", "delete", "get", "patch")),
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
        # Holidays (spec.holidays.configMapRef): labelled ConfigMaps only, watched, never written.
        Resource("ConfigMap", "v1", "configmaps", child=False),
    ),
    display="TDSet",
    summary="A Deployment whose replica count follows a time-of-day schedule (time zones, DST, HPA floor).",
    tagline="time-of-day scaling",
    keywords=("scheduled scaling", "time of day"),
    catalog_text="""\
## TDSet
A Deployment whose replica count follows time windows in a time zone, acted on exactly at
each boundary; an HPA on the Deployment gets the schedule as its `minReplicas`.

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
