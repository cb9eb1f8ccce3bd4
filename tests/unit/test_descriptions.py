"""The operator descriptions (``shared.api.description``): complete, true to the wiring, and enough.

Three claims, one test group each:

- ``operators.PACKAGES`` lists exactly the operator packages there are;
- what a description declares is what the builder wires: the controller, the app label, the
  children watched through a label selector, the other watches, the CRD, RBAC (derived from
  the description) for every watch and call, and exactly the declared metrics;
- a fourth operator is one new package plus its name in ``PACKAGES``: a synthetic package,
  written to a temp dir and registered for the test only, shows up in every generated file
  (CRD, CSV, Deployment, RBAC, Dockerfile, install.yaml, NetworkPolicy, alerts, dashboard, its API reference
  page, the metrics table and navigation of the documentation, images) and runs through the
  shared entry point; the repository is not written to.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path

import prometheus_client
import pytest
import yaml

import operators
from localcluster import images
from operators import PACKAGES, description, descriptions
from shared.api import leases
from shared.api.description import OperatorDescription
from shared.controller.builder import Operator, run
from shared.controller.metrics import TABLE, Metrics, ObjectCounter, ObjectGauge
from shared.controller.reconciler import Reconciler
from shared.controller.runtime import Runtime
from shared.controller.watches import Watch
from tools.generate import bundle, docs, manifests, monitoring

REPO = Path(__file__).resolve().parents[2]
METRIC_TYPES = (
    prometheus_client.Counter,
    prometheus_client.Gauge,
    prometheus_client.Histogram,
    ObjectCounter,
    ObjectGauge,
)


def test_packages_are_exactly_the_operator_packages():
    found = sorted(p.parent.name for p in (REPO / "operators").glob("*/__init__.py"))
    assert sorted(PACKAGES) == found, "register a new operator package in operators.PACKAGES"
    assert [d.name for d in descriptions()] == list(PACKAGES)
    for name in PACKAGES:  # the entry point: run(DESCRIPTION, <its Reconciler subclass>)
        main = importlib.import_module(f"operators.{name}.__main__")
        assert main.DESCRIPTION is description(name)
        reconcilers = [c for c in vars(main).values() if isinstance(c, type) and issubclass(c, Reconciler)]
        assert [c.__module__ for c in reconcilers] == [f"operators.{name}.reconciler"]
        assert main.run is run


def test_names_do_not_collide_across_operators():
    ops = descriptions()
    for key in (
        lambda d: d.name,
        lambda d: d.app,
        lambda d: d.crd.name,
        lambda d: d.crd.kind,
        lambda d: d.example,
    ):
        values = [key(d) for d in ops]
        assert len(values) == len(set(values)), values
    metrics = [m.name for m in TABLE] + [m.name for d in ops for m in d.metrics]
    alerts = [a.name for d in ops for a in d.alerts]
    images_ = [i.name for d in ops for i in d.images]
    for values in (metrics, alerts, images_):
        assert len(values) == len(set(values)), values


def _granted(op: OperatorDescription, group: str, resource: str) -> set[str]:
    return {
        verb
        for rule in op.rules
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _metric_objects(module: object) -> dict[int, str]:
    return {id(v): k for k, v in vars(module).items() if isinstance(v, METRIC_TYPES)}


@pytest.mark.parametrize("name", PACKAGES)
def test_the_builder_wires_what_the_description_declares(name):
    op = description(name)
    schema = importlib.import_module(f"operators.{name}.schema")
    # The description points at the operator's own modules; it restates nothing.
    assert op.crd is schema.CRD and op.app == schema.APP

    reconciler = importlib.import_module(f"operators.{name}.reconciler")
    (cls,) = [
        c
        for c in vars(reconciler).values()
        if isinstance(c, type) and issubclass(c, Reconciler) and c.__module__ == reconciler.__name__
    ]
    built = Operator(op, cls)
    assert built.controller.name == op.controller
    runtime = built.runtime
    assert (runtime.app, runtime.controllers) == (op.app, (op.controller,))

    # Its watches: the primary unfiltered, children by the app's label selector, the other
    # resources without it (unfiltered, or by a label of their own: TDSet's holiday ConfigMaps).
    watches = built.watches()
    primary = (op.crd.group, op.crd.version, op.crd.plural)
    assert (watches[0].group, watches[0].version, watches[0].plural, watches[0].selector) == (*primary, "")
    app_label = "app.kubernetes.io/name"
    labelled = {w.plural for w in watches if app_label in w.labels}
    assert labelled == set(op.child_resources)
    assert all(w.labels[app_label] == op.app for w in watches if app_label in w.labels)
    others = {(w.group, w.version, w.plural) for w in watches if app_label not in w.labels}
    watched = [r for r in op.resources if r.watched]
    assert others - {primary} == {(r.group, r.version, r.plural) for r in watched if not r.child}
    assert len(watches) == 1 + len(watched)

    # RBAC covers every watch, the status writes and every declared resource's calls.
    for watch in watches:
        assert {"list", "watch"} <= _granted(op, watch.group, watch.plural), watch.plural
    assert "patch" in _granted(op, op.crd.group, f"{op.crd.plural}/status")
    assert {"create", "patch"} <= _granted(op, "", "events")  # posted, then patched as they recur
    for resource in op.resources:
        assert set(resource.verbs) <= _granted(op, resource.group, resource.plural), resource
        assert set(resource.scale) <= _granted(op, resource.group, f"{resource.plural}/scale"), resource
    # The bundle runs it with --leader-elect: its own Lease, and no other, is granted.
    assert all(rule in op.rules for rule in leases.rules(op.app))

    # Exactly the declared metrics: the reconciler holds each one, and none other exists.
    assert set(_metric_objects(built.reconciler)) == _declared(runtime, op)
    assert _families(runtime.metrics) == _families(Metrics(domain=op.metrics))


def _declared(runtime: Runtime, op: OperatorDescription) -> set[int]:
    return {id(getattr(runtime.metrics, m.kind)(m.name)) for m in op.metrics}


def _families(metrics: Metrics) -> set[str]:
    return {family.name for family in metrics.registry.collect()}


# --- a fourth operator --------------------------------------------------------------------------

FOURTH_DESCRIPTION = '''
"""A synthetic fourth operator, registered by tests/unit/test_descriptions.py only."""

from shared.api.crd import CRDSpec
from shared.api.description import NAMESPACED, Alert, Image, MetricSpec, OperatorDescription, Panel, Resource

CRD = CRDSpec(
    group="fourth.example.com",
    version="v1alpha1",
    kind="Fourth",
    plural="fourths",
    spec_schema={{"type": "object", "properties": {{"size": {{"type": "integer"}}}}}},
    status_schema={{"type": "object", "properties": {{"ready": {{"type": "boolean"}}}}}},
)
DESCRIPTION = OperatorDescription(
    name="fourth",
    app="fourth",
    crd=CRD,
    resources=(Resource("ConfigMap", "v1", "configmaps", verbs=("create",)),),
    display="Fourth",
    summary="Keeps one ConfigMap per Fourth.",
    tagline="configuration maps",
    keywords=("fourth",),
    catalog_text="## Fourth\\nOne ConfigMap per Fourth.\\n",
    example={example!r},
    metrics=(MetricSpec("fourth_things", "gauge", "Things a Fourth keeps", NAMESPACED),),
    alerts=(
        Alert("FourthStuck", "fourth_things == 0", for_="5m", severity="warning", summary="", description=""),
    ),
    panels=(Panel("Fourth things", (("fourth_things", "{{{{name}}}}"),), "short"),),
    images=(Image("fourth-tool", "ghcr.io/k8s-operators-py/fourth-tool:0.1.0", "fourth-tool", "a tool"),),
)
'''

FOURTH_RECONCILER = '''
"""The synthetic fourth operator's reconciler: one child kind, one gauge, no logic."""

from operators.fourth.description import DESCRIPTION
from shared.controller import caches
from shared.controller.reconciler import Reconciler


class FourthReconciler(Reconciler):
    def __init__(self, ctx):
        super().__init__(ctx)
        self.things = ctx.metrics.gauge("fourth_things")
        self.configmaps = caches.OwnerCache(lambda body: body["metadata"]["name"])

    def watches(self):
        return [self.ctx.owns(DESCRIPTION.resource("configmaps"), self.configmaps)]

    async def reconcile(self, body):
        return None
'''


@pytest.fixture
def fourth(tmp_path, monkeypatch):
    """``operators.fourth`` in a temp dir, in ``operators.PACKAGES`` for this test only."""
    package = tmp_path / "fourth"
    package.mkdir()
    example = tmp_path / "fourth.yaml"
    example.write_text(
        "apiVersion: fourth.example.com/v1alpha1\nkind: Fourth\nmetadata: {name: f}\nspec: {size: 1}\n"
    )
    (package / "__init__.py").write_text('"""The fourth operator (test only)."""\n')
    # An absolute example path: ``REPO / path`` is then that path (bundle reads REPO / example).
    (package / "description.py").write_text(textwrap.dedent(FOURTH_DESCRIPTION.format(example=str(example))))
    (package / "reconciler.py").write_text(FOURTH_RECONCILER)
    main = (REPO / "operators" / "netperf" / "__main__.py").read_text()
    (package / "__main__.py").write_text(main.replace("netperf", "fourth").replace("Netperf", "Fourth"))
    monkeypatch.setattr(operators, "__path__", [*operators.__path__, str(tmp_path)])
    monkeypatch.setattr(operators, "PACKAGES", (*PACKAGES, "fourth"))
    importlib.invalidate_caches()
    yield description("fourth")
    for module in [m for m in sys.modules if m == "operators.fourth" or m.startswith("operators.fourth.")]:
        del sys.modules[module]


def _committed() -> dict[Path, bytes]:
    roots = [REPO / d for d in ("bundle", "deploy", "docs", "images", "operators")]
    roots += [REPO / "README.md", REPO / "mkdocs.yml"]
    files = [p for r in roots for p in ([r] if r.is_file() else r.rglob("*")) if p.is_file()]
    return {p: p.read_bytes() for p in files if "__pycache__" not in p.parts}


@pytest.mark.slow  # renders the bundle and the docs three times
def test_a_fourth_operator_is_a_package_and_one_line(fourth, monkeypatch):
    before = _committed()
    with monkeypatch.context() as unregistered:
        unregistered.setattr(operators, "PACKAGES", PACKAGES)
        three = bundle.render("0.1.0", bundle.DEFAULT_REGISTRY)
        three_pages = docs.render()
    assert [d.name for d in descriptions()] == [*PACKAGES, "fourth"]

    # CRD
    crds = manifests.render()
    assert yaml.safe_load(crds[manifests.crd_path(fourth.crd)].split("\n", 1)[1])["metadata"]["name"] == (
        "fourths.fourth.example.com"
    )

    # the bundle
    files = bundle.render("0.1.0", bundle.DEFAULT_REGISTRY)
    assert set(files) - set(three) == {
        manifests.crd_path(fourth.crd),
        bundle.BUNDLE / "manifests" / "fourth-operator-metrics_v1_service.yaml",
        bundle.BUNDLE / "manifests" / "fourth-operator_monitoring.coreos.com_v1_servicemonitor.yaml",
        bundle.BUNDLE / "manifests" / "fourth-operator_policy_v1_poddisruptionbudget.yaml",
        # the editor and viewer roles every kind gets, aggregated to admin/edit/view
        bundle.BUNDLE
        / "manifests"
        / "k8s-operators-py-fourth-editor-role_rbac.authorization.k8s.io_v1_clusterrole.yaml",
        bundle.BUNDLE
        / "manifests"
        / "k8s-operators-py-fourth-viewer-role_rbac.authorization.k8s.io_v1_clusterrole.yaml",
        REPO / "images" / "fourth-operator" / "Dockerfile",
    }
    csv = bundle.csv("0.1.0", bundle.DEFAULT_REGISTRY)
    spec = csv["spec"]
    (owned,) = [c for c in spec["customresourcedefinitions"]["owned"] if c["kind"] == "Fourth"]
    assert owned["description"] == fourth.summary
    assert owned["resources"] == [{"kind": "ConfigMap", "name": "", "version": "v1"}]
    assert {"serviceAccountName": "fourth-operator", "rules": fourth.rules} in spec["install"]["spec"][
        "permissions"
    ]
    (dep,) = [d for d in spec["install"]["spec"]["deployments"] if d["name"] == "fourth-operator"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"].endswith("/fourth-operator:0.1.0")
    related = {r["name"]: r["image"] for r in spec["relatedImages"]}
    assert related["fourth-operator"].endswith("/fourth-operator:0.1.0")
    assert related["fourth-tool"] == "ghcr.io/k8s-operators-py/fourth-tool:0.1.0"
    assert {"kind": "Fourth", "apiVersion": "fourth.example.com/v1alpha1"}.items() <= (
        json.loads(csv["metadata"]["annotations"]["alm-examples"])[-1].items()
    )
    assert spec["description"].startswith("Four small operators") and "## Fourth\n" in spec["description"]
    assert spec["displayName"].endswith(", Fourth") and "fourth" in spec["keywords"]
    assert csv["metadata"]["annotations"]["description"].endswith("and configuration maps, in Python.")
    dockerfile = files[REPO / "images" / "fourth-operator" / "Dockerfile"]
    assert 'ENTRYPOINT ["python", "-m", "operators.fourth"]' in dockerfile
    install = {
        (d["kind"], d["metadata"]["name"])
        for d in yaml.safe_load_all(files[REPO / "deploy" / "install.yaml"])
    }
    assert {
        ("ServiceAccount", "fourth-operator"),
        ("ClusterRole", "k8s-operators-py:fourth-operator"),
        ("ClusterRoleBinding", "k8s-operators-py:fourth-operator"),
        ("Deployment", "fourth-operator"),
        ("Service", "fourth-operator-metrics"),
        ("NetworkPolicy", "fourth-operator"),
    } <= install
    policies = [
        d["metadata"]["name"] for d in yaml.safe_load_all(files[REPO / "deploy" / "network-policies.yaml"])
    ]
    assert policies[-1] == "fourth-operator"

    # monitoring: the shared alerts and panels cover it, its own are added
    alerts = {a["alert"]: a for a in monitoring.alerts()}
    assert "FourthOperatorNotScraped" in alerts and "FourthStuck" in alerts
    assert "fourth-operator-metrics" in alerts["K8sOperatorsPyOperatorDown"]["expr"]
    assert "fourth" in alerts["K8sOperatorsPyReconcileErrorsHigh"]["expr"]
    board = monitoring.dashboard()
    assert "Fourth things" in [p["title"] for p in board["panels"]]
    assert board["templating"]["list"][1]["query"].split(",")[-1] == "fourth"

    # the documentation: an API reference page from its schema, its metric, its place in the nav
    pages = docs.render()
    assert set(pages) - set(three_pages) == {docs.REFERENCE / "fourth.md"}
    reference = pages[docs.REFERENCE / "fourth.md"]
    assert reference.startswith(docs.GENERATED.format(source="operators/fourth/schema.py"))
    assert "| API version | `fourth.example.com/v1alpha1` (served and stored) |" in reference
    assert "| `spec.size` | integer |" in reference and "| `status.ready` | boolean |" in reference
    assert (
        "| `fourth_things` | gauge | `namespace`, `name` | fourth | Things a Fourth keeps |"
        in pages[docs.MONITORING]
    )
    assert "      - Fourth: reference/fourth.md\n" in pages[docs.MKDOCS]

    # images
    specs = {s.name: s for s in images.image_specs()}
    assert specs["fourth-operator"].dockerfile == REPO / "images" / "fourth-operator" / "Dockerfile"
    assert specs["fourth-tool"].context == REPO  # every image builds from the root: /licenses

    # Only the files about all operators change (no other operator's own), and nothing was written.
    manifests_dir = bundle.BUNDLE / "manifests"
    assert {p for p in set(three) & set(files) if files[p] != three[p]} == {
        manifests_dir / f"{bundle.PACKAGE}.clusterserviceversion.yaml",
        manifests_dir / f"{bundle.PACKAGE}_monitoring.coreos.com_v1_prometheusrule.yaml",
        REPO / "docs" / "grafana-dashboard.json",
        REPO / "deploy" / "install.yaml",
        REPO / "deploy" / "network-policies.yaml",
    }
    assert {p for p in set(three_pages) & set(pages) if pages[p] != three_pages[p]} == {
        docs.MONITORING,
        docs.MKDOCS,
    }
    assert _committed() == before


def test_a_fourth_operator_runs_through_the_shared_entry_point(fourth, monkeypatch):
    ran: list[tuple[Runtime, list[Watch]]] = []
    monkeypatch.setattr(Runtime, "run", lambda self, watches: ran.append((self, list(watches))))
    main = importlib.import_module("operators.fourth.__main__")
    main.run(main.DESCRIPTION, main.FourthReconciler, ["--namespace", "team-a", "--metrics-port", "9999"])
    ((runtime, watches),) = ran
    assert runtime.options.namespaces == ("team-a",)
    assert runtime.options.metrics_port == 9999
    assert runtime.app == "fourth" and runtime.controllers == ("fourth",)
    assert [(w.plural, w.selector) for w in watches] == [
        ("fourths", ""),
        ("configmaps", "app.kubernetes.io/managed-by=k8s-operators-py,app.kubernetes.io/name=fourth"),
    ]
    assert _families(runtime.metrics) == _families(Metrics(domain=fourth.metrics))
    # Its RBAC, derived from the description: the child's calls beside the shared rules.
    assert {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["create", "list", "watch"],
    } in fourth.rules


def test_a_description_refuses_what_would_break_a_tool():
    op = description("webserver")
    fields = {f: getattr(op, f) for f in op.__dataclass_fields__}
    assert op.resource("pods").kind == "Pod"
    with pytest.raises(KeyError, match="0 resources named 'deployments'"):
        op.resource("deployments")  # a reconciler binds its kinds by name, never by position
    with pytest.raises(ValueError, match="does not start with webserver_"):
        OperatorDescription(**{**fields, "metrics": (TABLE[0],)})
