"""One declarative description per operator: what it is, as data every consumer reads.

The model is controller-runtime's builder (``For(&Primary{}).Owns(&Child{}).Complete(r)``) and
kubebuilder's ``PROJECT`` file: a few lines that name an operator's primary resource, the
children it owns, its reconcile function and everything generated around it. Here that is one
``OperatorDescription`` per operator package (``operators/<name>/description.py``), listed
once in ``operators.PACKAGES``, and read by
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.api import leases, metricsauth
from shared.api.access import AccessPolicy
from shared.api.crd import CRDSpec

NAMESPACED = ("namespace", "name")  # the labels of a per-object metric
METRIC_KINDS = ("counter", "gauge", "histogram")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: the single place its name, type, help text and labels are written."""

    name: str
    kind: str  # counter | gauge | histogram
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


@dataclass(frozen=True)
class Resource:
    """A kind the operator creates or changes besides its primary one (the CSV's ``resources``).

    ``child``: it creates and owns these (controller ownerReference, the app's labels), so they
    are watched through a server-side label selector (``shared.controller.reconciler.Context.owns``).
    Objects it only adjusts (an HPA it gives a floor) are not children. A resource is watched
    (``list``, ``watch``) unless ``watched`` is False (an object reached by name only, such as a
    TDSet's scale target); ``verbs`` are the other calls the operator makes on it, ``scale`` the
    calls on its ``/scale`` subresource, and with them the RBAC rules of the kind
    (``OperatorDescription.rules``).
    """

    kind: str
    version: str
    plural: str
    child: bool = True
    group: str = ""  # "" is the core API
    verbs: tuple[str, ...] = ()
    watched: bool = True
    scale: tuple[str, ...] = ()  # verbs on <plural>/scale

    def rules(self) -> list[dict[str, Any]]:
        verbs = {*self.verbs, *(("list", "watch") if self.watched else ())}
        rules = [{"apiGroups": [self.group], "resources": [self.plural], "verbs": sorted(verbs)}]
        if self.scale:
            rules.append(
                {
                    "apiGroups": [self.group],
                    "resources": [f"{self.plural}/scale"],
                    "verbs": sorted(self.scale),
                }
            )
        return rules


@dataclass(frozen=True)
class Alert:
    """A Prometheus alert on this operator's metrics (``runbook_url`` is derived from the name)."""

    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str


@dataclass(frozen=True)
class Panel:
    """A Grafana time-series panel: (PromQL, legend) pairs and a unit."""

    title: str
    exprs: tuple[tuple[str, str], ...]
    unit: str


@dataclass(frozen=True)
class Image:
    """An image the operator's workloads run, built here from ``images/<name>/Dockerfile``."""

    name: str  # <registry>/<name>:<version>, images/<name>/
    default: str  # the reference the operator uses when a spec names none
    related_name: str  # its entry in the CSV's relatedImages
    description: str  # what ``make images`` says it is


@dataclass(frozen=True)
class OperatorDescription:
    """Everything about one operator that is not its reconcile logic.

    - the builder (``shared.controller.builder.Operator``): the operator's runtime (app label,
      controller, metrics registry with exactly the declared metrics), its watches, and its
      reconciler named by ``reconcile`` (``python -m operators.<name>``);
    - ``tools/generate/manifests.py`` (the CRD), ``tools/generate/bundle.py`` (CSV: owned CRD text, resources,
      permissions and cluster permissions, Deployment, relatedImages, alm-examples; metrics Service,
      ServiceMonitor, Dockerfile, ``deploy/install.yaml``), ``tools/generate/monitoring.py`` (alerts,
      dashboard panels), ``tools/generate/docs.py`` (API reference pages, the metrics table) and
      ``localcluster/images.py`` (operator and operand images).

    Before, each of those listed the three operators by hand, so adding one meant editing every
    tool and keeping their copies of its text in step. Logic stays where it was: a description
    points at the operator's ``schema.CRD``, it does not restate it; its RBAC rules are derived from
    what it declares it watches and calls (``OperatorDescription.rules``).

    This module is imported by tools that must not pay for kopf or prometheus_client (images,
    manifests): it is in the pure layer (``shared.api``) and depends on ``shared.api.crd``,
    ``shared.api.access`` and ``shared.api.metricsauth`` only; the controller layer reads it,
    never the other way round.
    """

    name: str  # package operators/<name>, image <name>-operator, controller and job names
    app: str  # app.kubernetes.io/name of every child
    crd: CRDSpec  # the primary resource
    resources: tuple[Resource, ...]
    # The bundle: display name, one-line summary (owned CRD, image label), a phrase for the
    # CSV's one-line description, keywords, a Markdown section of the CSV's description and
    # the example (a path from the repository root; alm-examples).
    display: str
    summary: str
    tagline: str
    keywords: tuple[str, ...]
    catalog_text: str
    example: str
    metrics: tuple[MetricSpec, ...] = ()  # its own, beyond the shared controller-runtime ones
    alerts: tuple[Alert, ...] = ()  # beyond the shared ones (operator down or not scraped, errors)
    panels: tuple[Panel, ...] = ()  # its dashboard panels
    images: tuple[Image, ...] = ()  # operand images it needs
    # RBAC beyond what ``rules`` derives from the resources (namespaced, the CSV's ``permissions``).
    extra_rules: Sequence[Mapping[str, Any]] = ()
    # An extension point for cluster admins: an aggregated ClusterRole of this name whose
    # aggregationRule selects ClusterRoles labelled ``aggregate_label: "true"``, bound to the
    # operator in deploy/install.yaml (a CSV cannot carry one: docs/operations/install.md).
    aggregated_role: str = ""
    aggregate_label: str = ""
    # RBAC on cluster-scoped kinds beyond the shared ones (the CSV's ``clusterPermissions``).
    extra_cluster_rules: Sequence[Mapping[str, Any]] = ()
    # What its spec fields let an author obtain, checked against the author's own rights at
    # admission (``shared.api.access``): one ValidatingAdmissionPolicy each.
    access: tuple[AccessPolicy, ...] = ()
    # Its default of passes at once (``--max-concurrent-reconciles``); None: the runtime's.
    max_concurrent_reconciles: int | None = None

    def __post_init__(self) -> None:
        for m in self.metrics:
            if m.kind not in METRIC_KINDS:
                raise ValueError(f"{self.name}: metric {m.name} has unknown type {m.kind!r}")
            # One prefix per operator keeps metric names from colliding across operators.
            if not m.name.startswith(f"{self.name}_"):
                raise ValueError(f"{self.name}: metric {m.name} does not start with {self.name}_")

    @property
    def controller(self) -> str:
        """The one controller of this operator: ``controller`` label of controller_runtime_*."""
        return self.name

    @property
    def deployment(self) -> str:
        """Name of its Deployment, ServiceAccount and image: ``<name>-operator``."""
        return f"{self.name}-operator"

    def resource(self, plural: str) -> Resource:
        """The declared resource of this plural (a reconciler binds its kinds by name)."""
        found = [r for r in self.resources if r.plural == plural]
        if len(found) != 1:
            raise KeyError(f"{self.name}: {len(found)} resources named {plural!r}")
        return found[0]

    @property
    def rules(self) -> list[dict[str, Any]]:
        """Its RBAC rules (namespaced: the CSV's ``permissions``), exactly the calls it makes:
        its watches, status writes and Events, the Lease of its leader election, each resource's
        ``verbs``, and ``extra_rules``. The RBAC tests run each operator with nothing else
        and compare the calls the API server saw (audit log) with them."""
        group, plural = self.crd.group, self.crd.plural
        rules: list[dict[str, Any]] = [
            # The builder's watch of the primary resource.
            {"apiGroups": [group], "resources": [plural], "verbs": ["list", "watch"]},
            # shared.client.statuses.StatusWriter: the status subresource, merge patch.
            {"apiGroups": [group], "resources": [f"{plural}/status"], "verbs": ["patch"]},
        ]
        if self.child_resources:
            # Children carry ``blockOwnerDeletion``: where the OwnerReferencesPermissionEnforcement
            # admission plugin is on (OpenShift; the local API server), setting it needs update here.
            rules.append({"apiGroups": [group], "resources": [f"{plural}/finalizers"], "verbs": ["update"]})
        rules += [rule for r in self.resources for rule in r.rules()]
        # shared.client.events: Events about the objects it reconciles, patched as they recur.
        rules.append({"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]})
        # shared.client.leader (--leader-elect, on in the bundle): its Lease, read and renewed by
        # name, created when missing.
        rules += leases.rules(self.app)
        rules += [dict(r) for r in self.extra_rules]
        return rules

    @property
    def cluster_rules(self) -> list[dict[str, Any]]:
        """RBAC granted cluster-wide (the CSV's ``clusterPermissions``), the same for every
        operator: the reviews its ``/metrics`` filter makes (``shared.api.metricsauth``); and
        ``extra_cluster_rules``."""
        return [*metricsauth.operator_rules(), *(dict(r) for r in self.extra_cluster_rules)]

    @property
    def child_resources(self) -> tuple[str, ...]:
        return tuple(r.plural for r in self.resources if r.child)
