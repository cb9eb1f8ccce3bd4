"""``make bundle``: render the OLM bundle (registry+v1) from the same sources as the operators.

    python -m tools.generate.bundle [--version 0.1.0] [--registry ghcr.io/k8s-operators-py]
        [--monitoring-namespace monitoring ...] [--check]

Sources: each registered operator's description (``operators/<name>/description.py``: its
CRD and descriptors from ``schema.py``, permissions derived from it, display text, resources,
example file in ``examples/``, images); ``shared.controller.serving`` (ports). Output:

    bundle/manifests/   the CSV, the CRDs, a metrics Service, a ServiceMonitor and a
                        PodDisruptionBudget per operator, the metrics-reader ClusterRole, an
                        editor and a viewer ClusterRole per kind (aggregated to admin/edit/view)
    bundle/metadata/annotations.yaml
    bundle/tests/scorecard/config.yaml
    bundle/bundle.Dockerfile
    images/<operator>-operator/Dockerfile   (one image per operator)
    deploy/install.yaml                     (installing without OLM)
    deploy/network-policies.yaml            (the operators' NetworkPolicies alone, for OLM installs)
    deploy/admission-policies.yaml          (the ValidatingAdmissionPolicies alone, for OLM installs)
    docs/grafana-dashboard.json and the PrometheusRule (tools/generate/monitoring.py)

The metrics table of the documentation is written by ``make docs`` (tools/generate/docs.py).

``--check`` exits 1 naming the files that differ from what would be generated (CI runs it).
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

import shared
from operators import descriptions
from shared.api import access, leases, metricsauth
from shared.api.crd import to_yaml
from shared.api.description import Image, OperatorDescription
from shared.controller.serving import DEFAULT_METRICS_PORT, DEFAULT_PROBE_PORT
from tools.generate import monitoring
from tools.generate.manifests import render as manifests_render
from tools.generate.sync import sync

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "bundle"
PACKAGE = "k8s-operators-py"
CHANNELS = ("stable",)
DEFAULT_CHANNEL = "stable"
DEFAULT_REGISTRY = "ghcr.io/k8s-operators-py"
MIN_KUBE_VERSION = "1.29.0"  # CEL validation rules GA, autoscaling/v2
SCORECARD_IMAGE = "quay.io/operator-framework/scorecard-test:v1.33.0"
ICON = REPO / "bundle" / "icon.svg"
# Versions published to users, oldest first. The CSV of a newer version `replaces` the newest of
# these below it, which is the edge OLM follows to upgrade a running install in place.
RELEASED = ("0.1.0",)
# Pods per operator: a leader and a warm standby (leader election, shared/client/leader.py).
OPERATOR_REPLICAS = 2


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("-", 1)[0].split("."))


def replaces(version: str) -> str | None:
    """The CSV name ``version``'s CSV replaces: the newest released version below it, if any."""
    older = [v for v in RELEASED if _version_key(v) < _version_key(version)]
    return f"{PACKAGE}.v{max(older, key=_version_key)}" if older else None


# The CSV's description (also the catalog's package description): this, one section per
# operator (its description's ``catalog_text``), then OUTRO.
INTRO = """\
{count} small operators written in Python on [kopf](https://kopf.readthedocs.io), built to
behave like the best Go operators: level-based, idempotent, restart-safe, observable, with
least-privilege ServiceAccounts. Each runs as its own Deployment with its own image and
ServiceAccount. Apply deploy/admission-policies.yaml (Kubernetes >= 1.30) so that what a spec
makes an operator do is checked against its author's own rights; editor and viewer roles per
kind aggregate into admin, edit and view.

"""
OUTRO = f"""\
Metrics (controller-runtime compatible) are served over HTTPS on port {DEFAULT_METRICS_PORT} of each
operator, to callers allowed `get` on `/metrics` (bind the ClusterRole
`{PACKAGE}-metrics-reader` to Prometheus' ServiceAccount), and scraped through the bundled
ServiceMonitors.
"""
# The Secret (kubernetes.io/tls) whose tls.crt and tls.key an operator serves /metrics with when
# it exists (cert-manager can write it); optional: without it the operator makes a self-signed one.
# Mounted whole (an ``items`` list would fail the pod on a Secret lacking one of its keys).
METRICS_CERT_DIR = "/etc/metrics-cert"
# The ClusterRole a scraper is bound to. kubebuilder names it `metrics-reader` behind the
# project's name prefix: a bare `metrics-reader` would be every kubebuilder project's too.
METRICS_READER = f"{PACKAGE}-metrics-reader"


def metrics_cert_secret(op: OperatorDescription) -> str:
    return f"{op.deployment}-metrics-cert"


COUNTS = ("No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten")


def csv_description() -> str:
    ops = descriptions()
    count = COUNTS[len(ops)] if len(ops) < len(COUNTS) else str(len(ops))
    return INTRO.format(count=count) + "".join(op.catalog_text + "\n" for op in ops) + OUTRO


def _and(items: Sequence[str]) -> str:
    """``a, b and c``."""
    return " and ".join(filter(None, [", ".join(items[:-1]), items[-1]]))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def image(registry: str, name: str, version: str) -> str:
    return f"{registry}/{name}-operator:{version}"


Digests = Mapping[str, str]  # tag reference -> manifest digest of the image built for it


def pinned(ref: str, digests: Digests | None) -> str:
    """``ref`` by digest (``repo@sha256:…``) when ``digests`` are given, else ``ref`` itself."""
    if digests is None:
        return ref
    if ref not in digests:
        raise KeyError(f"no digest for {ref}: build the images first (make images)")
    return f"{ref.rsplit(':', 1)[0]}@{digests[ref]}"


def related_env(img: Image) -> str:
    """The operator container's variable naming an operand image: ``RELATED_IMAGE_<name>``."""
    return "RELATED_IMAGE_" + img.related_name.upper().replace("-", "_")


def operand_ref(img: Image, version: str) -> str:
    """An operand image at this release's tag (its default reference names the repository)."""
    return img.default.rsplit(":", 1)[0] + f":{version}"


def _title(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", " ", key).replace("_", " ").title().replace("Ip", "IP")


def _descriptors(schema: Mapping[str, Any], *, status: bool) -> list[dict[str, Any]]:
    out = []
    for key, prop in sorted((schema.get("properties") or {}).items()):
        d: dict[str, Any] = {
            "path": key,
            "displayName": _title(key),
            "description": str(prop.get("description") or _title(key)),
        }
        if key == "conditions":
            d["x-descriptors"] = ["urn:alm:descriptor:io.kubernetes.conditions"]
        elif status and key == "status":
            d["x-descriptors"] = ["urn:alm:descriptor:io.kubernetes.phase"]
        out.append(d)
    return out


def owned_crd(op: OperatorDescription) -> dict[str, Any]:
    crd = op.crd
    return {
        "name": crd.name,
        "version": crd.version,
        "kind": crd.kind,
        "displayName": op.display,
        "description": op.summary,
        "resources": [{"kind": r.kind, "name": "", "version": r.version} for r in op.resources],
        "specDescriptors": _descriptors(crd.spec_schema, status=False),
        "statusDescriptors": _descriptors(crd.status_schema, status=True),
    }


def deployment(
    op: OperatorDescription, registry: str, version: str, digests: Digests | None = None
) -> dict[str, Any]:
    labels = {
        "app.kubernetes.io/name": op.deployment,
        "app.kubernetes.io/component": "operator",
        "app.kubernetes.io/part-of": PACKAGE,
    }
    probe = {"port": "probes"}
    container = {
        "name": "operator",
        "image": pinned(image(registry, op.name, version), digests),
        "imagePullPolicy": "IfNotPresent",
        # As kubebuilder's scaffold: the flag is off for `python -m operators.<name>` on a host.
        # Secure metrics are the default everywhere; said here so the manifest shows it.
        "args": ["--leader-elect", "--metrics-secure=true"],
        "env": [
            {
                # OLM's OperatorGroup target namespaces (comma list; empty = all) -> what we watch.
                "name": "WATCH_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}},
            },
            {"name": "LOG_FORMAT", "value": "json"},
            # The operator's identity (logs, kopf, the Lease's holder): the pod, whatever UID the
            # platform runs it as.
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            # Where the leader-election Lease lives: the operator's own namespace.
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            # A mounted serving certificate for /metrics, if its Secret exists (else self-signed).
            {"name": "METRICS_CERT_DIR", "value": METRICS_CERT_DIR},
            # The operand images it starts by default (relatedImages; by digest when pinned).
            *({"name": related_env(i), "value": pinned(operand_ref(i, version), digests)} for i in op.images),
        ],
        "ports": [
            {"name": "metrics", "containerPort": DEFAULT_METRICS_PORT, "protocol": "TCP"},
            {"name": "probes", "containerPort": DEFAULT_PROBE_PORT, "protocol": "TCP"},
        ],
        "livenessProbe": {
            "httpGet": {**probe, "path": "/healthz"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "readinessProbe": {"httpGet": {**probe, "path": "/readyz"}, "periodSeconds": 5},
        # Memory from docs/operations/sizing.md (tools/bench/scale.py --memory ... --standby
        # --relist --restart): the limit is the largest peak at 10,000 custom resources with
        # their children (274 MiB, the WebServer leader while relisting) plus 40 % headroom,
        # for the leader and the standby alike; the request is the leader's resident memory
        # at about 6,000.
        "resources": {
            "requests": {"cpu": "50m", "memory": "192Mi"},
            "limits": {"cpu": "500m", "memory": "384Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "metrics-cert", "mountPath": METRICS_CERT_DIR, "readOnly": True},
        ],
    }
    return {
        "name": op.deployment,
        "label": labels,
        "spec": {
            # One leads, one stands by with warm caches (docs/operations/high-availability.md).
            "replicas": OPERATOR_REPLICAS,
            # A new pod is Ready (caches listed) before an old one goes, so a standby is always
            # there to take the Lease the old leader releases on SIGTERM.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "selector": {"matchLabels": {"app.kubernetes.io/name": op.deployment}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"kubectl.kubernetes.io/default-container": "operator"},
                },
                "spec": {
                    "serviceAccountName": op.deployment,
                    # Leader and standby on different nodes where there are several; preferred,
                    # so a one-node cluster still runs both.
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {
                                            "matchLabels": {"app.kubernetes.io/name": op.deployment}
                                        },
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [container],
                    "volumes": [
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                        {
                            "name": "metrics-cert",
                            "secret": {
                                "secretName": metrics_cert_secret(op),
                                "optional": True,
                            },
                        },
                    ],
                },
            },
        },
    }


def metrics_service(op: OperatorDescription) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{op.deployment}-metrics",
            "labels": {"app.kubernetes.io/name": op.deployment, "app.kubernetes.io/part-of": PACKAGE},
        },
        "spec": {
            "selector": {"app.kubernetes.io/name": op.deployment},
            "ports": [
                {"name": "metrics", "port": DEFAULT_METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}
            ],
        },
    }


def service_monitor(op: OperatorDescription) -> dict[str, Any]:
    """Prometheus Operator scrapes over HTTPS with its own ServiceAccount's token (bound to
    :data:`METRICS_READER`), as the kubebuilder scaffold's ServiceMonitor does.

    ``insecureSkipVerify``: the operators serve a self-signed certificate unless one is mounted,
    and no CA is known to Prometheus; the token, checked by the API server, says who scrapes.
    ``serverName`` is the Service's name in the suggested namespace: the name a mounted
    certificate is issued for, so turning verification on (with its CA) needs no other change.
    """
    svc = f"{op.deployment}-metrics"
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": op.deployment,
            "labels": {"app.kubernetes.io/name": op.deployment, "app.kubernetes.io/part-of": PACKAGE},
        },
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": op.deployment}},
            "endpoints": [
                {
                    "port": "metrics",
                    "path": metricsauth.METRICS_PATH,
                    "interval": "30s",
                    "scheme": "https",
                    "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                    "tlsConfig": {"insecureSkipVerify": True, "serverName": f"{svc}.{PACKAGE}.svc"},
                }
            ],
        },
    }


def metrics_reader() -> dict[str, Any]:
    """``get`` on ``/metrics``, for the user to bind to Prometheus' ServiceAccount (not bound here:
    who scrapes is the cluster's)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": METRICS_READER, "labels": {"app.kubernetes.io/part-of": PACKAGE}},
        "rules": metricsauth.reader_rules(),
    }


def kind_roles(op: OperatorDescription) -> list[dict[str, Any]]:
    """The editor and viewer ClusterRoles of ``op``'s kind, as operator-sdk scaffolds them,
    labelled for aggregation into ``admin``/``edit`` and ``view`` (docs/operations/security-model.md)."""
    labels = {"app.kubernetes.io/part-of": PACKAGE}
    return [
        access.editor_role(PACKAGE, op.name, op.crd, labels),
        access.viewer_role(PACKAGE, op.name, op.crd, labels),
    ]


def admission_policies() -> list[dict[str, Any]]:
    """Every operator's ValidatingAdmissionPolicies and bindings (:mod:`shared.api.access`).

    Not in the OLM bundle: OLM v0 installs a fixed list of kinds and this is not one of them;
    OLM users apply deploy/admission-policies.yaml (docs/operations/install.md)."""
    labels = {"app.kubernetes.io/part-of": PACKAGE}
    return [
        doc
        for op in descriptions()
        for policy in op.access
        for doc in access.admission_policy(PACKAGE, op.name, op.crd, policy, labels)
    ]


def disruption_budget(op: OperatorDescription) -> dict[str, Any]:
    """A node drain evicts one operator pod at a time: the other leads, or takes over."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": op.deployment,
            "labels": {"app.kubernetes.io/name": op.deployment, "app.kubernetes.io/part-of": PACKAGE},
        },
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": op.deployment}},
        },
    }


# Where Prometheus runs, the only namespace whose pods may reach the metrics port
# (`--monitoring-namespace`): kube-prometheus' and the Prometheus Operator's Helm chart's
# usual namespace. OpenShift's: `openshift-monitoring` (platform) and
# `openshift-user-workload-monitoring` (user workloads).
DEFAULT_MONITORING_NAMESPACES = ("monitoring",)
# Set by the API server on every namespace to the namespace's name (Kubernetes 1.22+), and
# reset if anyone writes another value: a tenant cannot make their namespace match.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def network_policy(
    op: OperatorDescription, monitoring_namespaces: Sequence[str] = DEFAULT_MONITORING_NAMESPACES
) -> dict[str, Any]:
    """Ingress to the operator's pods only on its metrics port, from the
    ``monitoring_namespaces``, and on its probe port.

    Selects what the Deployment selects. The metrics port admits pods of the monitoring
    namespaces only: every other pod's connections are dropped before a TLS handshake or a
    TokenReview costs the operator anything. The probe port stays open to every source: the
    kubelet probes from the node's address, which is the cluster's (and most CNIs let a node
    reach its own pods whatever the policy). The operators serve nothing else: their work is
    outbound, to the API server. So egress stays open: the API server's address is the
    cluster's (the ``kubernetes`` Service is rewritten to the endpoints' addresses before most
    CNIs apply a policy, and those are host or load-balancer addresses that differ per cluster),
    and a policy that guessed it wrong would cut the operators off. Not in the OLM bundle: OLM
    before v0.32 fails the whole InstallPlan on a NetworkPolicy, and the pinned operator-sdk's
    ``bundle validate`` refuses the kind (docs/operations/install.md).
    """
    if not monitoring_namespaces:
        raise ValueError("the metrics port needs at least one monitoring namespace")
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": op.deployment,
            "labels": {"app.kubernetes.io/name": op.deployment, "app.kubernetes.io/part-of": PACKAGE},
        },
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": op.deployment}},
            "policyTypes": ["Ingress"],
            # Numbers, not the container ports' names: every CNI that enforces policies
            # understands them.
            "ingress": [
                {
                    "from": [
                        {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}
                        for namespace in monitoring_namespaces
                    ],
                    "ports": [{"port": DEFAULT_METRICS_PORT, "protocol": "TCP"}],
                },
                {"ports": [{"port": DEFAULT_PROBE_PORT, "protocol": "TCP"}]},
            ],
        },
    }


def own_namespace_rules(rules: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rules about the operator's own namespace: the leader-election Lease."""
    return [dict(r) for r in rules if leases.GROUP in r["apiGroups"]]


def watched_namespace_rules(rules: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [dict(r) for r in rules if leases.GROUP not in r["apiGroups"]]


def alm_examples() -> list[dict[str, Any]]:
    return [yaml.safe_load((REPO / op.example).read_text()) for op in descriptions()]


# The architectures the committed CSV claims: what `make images` builds here (linux/amd64 only,
# docs/development/images.md says why). A pinned release reads them from the images it built.
DEFAULT_ARCHES = ("amd64",)
# The capability level the CSV claims: the highest level whose criteria, and every lower
# level's, are met; docs/operations/capabilities.md maps each criterion to its evidence (a unit
# test keeps the two in step).
CAPABILITY = "Seamless Upgrades"
CAPABILITY_LEVELS = ("Basic Install", "Seamless Upgrades", "Full Lifecycle", "Deep Insights", "Auto Pilot")
# OpenShift's infrastructure features (preflight's RequiredAnnotations), each justified in
# docs/operations/install.md (Infrastructure features).
FEATURES = {
    # The WebServer's default image is Docker Hub's nginxdemos/hello, by tag: not built here,
    # so it cannot be pinned by digest, and a mirrored cluster cannot pull it.
    "disconnected": False,
    # Python's hashlib and ssl on Debian's OpenSSL: not a FIPS-validated module.
    "fips-compliant": False,
    # Neither HTTP_PROXY/HTTPS_PROXY/NO_PROXY are read nor passed down to the operands.
    "proxy-aware": False,
    # /metrics serves TLS with fixed settings, not the cluster's tlsSecurityProfile.
    "tls-profiles": False,
    # No cloud API is called: nothing to authenticate with short-lived cloud tokens.
    "token-auth-aws": False,
    "token-auth-azure": False,
    "token-auth-gcp": False,
}


def csv(
    version: str, registry: str, digests: Digests | None = None, arches: Sequence[str] = DEFAULT_ARCHES
) -> dict[str, Any]:
    name = f"{PACKAGE}.v{version}"
    ops = descriptions()
    related = [
        {"name": op.deployment, "image": pinned(image(registry, op.name, version), digests)} for op in ops
    ]
    # Operand images: the default reference, at this release's tag.
    related += [
        {"name": i.related_name, "image": pinned(operand_ref(i, version), digests)}
        for op in ops
        for i in op.images
    ]
    return {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": name,
            "namespace": "placeholder",
            "annotations": {
                "alm-examples": json.dumps(alm_examples(), indent=2),
                "capabilities": CAPABILITY,
                "categories": "Networking,Developer Tools",
                "containerImage": pinned(image(registry, "webserver", version), digests),
                "description": _sentence(f"{_and([op.tagline for op in ops])}, in Python."),
                "repository": "https://github.com/k8s-operators-py/k8s-operators-py",
                "support": "k8s-operators-py",
                "operatorframework.io/suggested-namespace": PACKAGE,
                **{
                    f"features.operators.openshift.io/{name}": str(value).lower()
                    for name, value in FEATURES.items()
                },
            },
            "labels": {
                **{f"operatorframework.io/arch.{arch}": "supported" for arch in sorted(arches)},
                "operatorframework.io/os.linux": "supported",
            },
        },
        "spec": {
            "displayName": f"Python Operators: {', '.join(op.display for op in ops)}",
            "description": csv_description(),
            "version": version,
            **({"replaces": previous} if (previous := replaces(version)) else {}),
            "minKubeVersion": MIN_KUBE_VERSION,
            "maturity": "alpha",
            "keywords": [*(k for op in ops for k in op.keywords), "kopf"],
            "maintainers": [
                {"name": "k8s-operators-py maintainers", "email": "maintainers@k8s-operators-py.dev"}
            ],
            "provider": {"name": "k8s-operators-py", "url": "https://github.com/k8s-operators-py"},
            "links": [
                {"name": "Source", "url": "https://github.com/k8s-operators-py/k8s-operators-py"},
                {
                    "name": "Documentation",
                    "url": "https://github.com/k8s-operators-py/k8s-operators-py#readme",
                },
            ],
            "icon": [
                {"base64data": base64.b64encode(ICON.read_bytes()).decode(), "mediatype": "image/svg+xml"}
            ],
            "installModes": [
                {"type": mode, "supported": True}
                for mode in ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
            ],
            "customresourcedefinitions": {"owned": [owned_crd(op) for op in ops]},
            "install": {
                "strategy": "deployment",
                "spec": {
                    "permissions": [
                        {"serviceAccountName": op.deployment, "rules": [dict(r) for r in op.rules]}
                        for op in ops
                    ],
                    # Cluster-scoped: the reviews of the /metrics filter (TokenReview,
                    # SubjectAccessReview), whatever the install mode.
                    "clusterPermissions": [
                        {"serviceAccountName": op.deployment, "rules": op.cluster_rules} for op in ops
                    ],
                    "deployments": [deployment(op, registry, version, digests) for op in ops],
                },
            },
            "relatedImages": related,
        },
    }


ANNOTATIONS = {
    "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
    "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
    "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
    "operators.operatorframework.io.bundle.package.v1": PACKAGE,
    "operators.operatorframework.io.bundle.channels.v1": ",".join(CHANNELS),
    "operators.operatorframework.io.bundle.channel.default.v1": DEFAULT_CHANNEL,
    "operators.operatorframework.io.test.mediatype.v1": "scorecard+v1",
    "operators.operatorframework.io.test.config.v1": "tests/scorecard/",
}


def scorecard_config() -> dict[str, Any]:
    tests = [
        "basic-check-spec",
        "olm-bundle-validation",
        "olm-crds-have-validation",
        "olm-crds-have-resources",
    ]
    tests += ["olm-spec-descriptors", "olm-status-descriptors"]
    return {
        "apiVersion": "scorecard.operatorframework.io/v1alpha3",
        "kind": "Configuration",
        "metadata": {"name": "config"},
        "stages": [
            {
                "parallel": True,
                "tests": [
                    {
                        "entrypoint": ["scorecard-test", test],
                        "image": SCORECARD_IMAGE,
                        "labels": {"suite": "basic" if test.startswith("basic") else "olm", "test": test},
                    }
                    for test in tests
                ],
            }
        ],
    }


def bundle_dockerfile() -> str:
    labels = "".join(f"LABEL {k}={v}\n" for k, v in ANNOTATIONS.items())
    return (
        "# The OLM bundle image (generated by `make bundle`; build from bundle/):\n"
        f"#   docker build -f bundle.Dockerfile -t {DEFAULT_REGISTRY}/{PACKAGE}-bundle:<version> bundle\n"
        "FROM scratch\n\n"
        f"{labels}\n"
        "COPY manifests /manifests/\n"
        "COPY metadata /metadata/\n"
        "COPY tests/scorecard /tests/scorecard/\n"
    )


INSTALL_NAMESPACE = PACKAGE
PSA_MODES = ("enforce", "audit", "warn")


def plain_install(
    version: str,
    registry: str,
    monitoring_namespaces: Sequence[str] = DEFAULT_MONITORING_NAMESPACES,
    digests: Digests | None = None,
) -> list[dict[str, Any]]:
    """Without OLM: namespace, per-operator ServiceAccount, ClusterRole/-Binding, Role/-Binding,
    the kind's editor/viewer ClusterRoles, Deployment, PodDisruptionBudget, Service,
    NetworkPolicy; the metrics-reader ClusterRole and the ValidatingAdmissionPolicies.

    The same pod templates as in the CSV; without OLM the ``olm.targetNamespaces`` annotation is
    absent, the downward-API variable is empty and each operator watches all namespaces, so its
    rules are granted cluster-wide (a ClusterRole) — what OLM's AllNamespaces mode does too —
    except the leader-election Lease's, which only the install namespace needs (a Role).
    """
    labels = {"app.kubernetes.io/part-of": PACKAGE}
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": INSTALL_NAMESPACE,
                # The operator pods meet the `restricted` Pod Security profile: enforce it.
                "labels": {**labels, **{f"pod-security.kubernetes.io/{m}": "restricted" for m in PSA_MODES}},
            },
        }
    ]
    for op in descriptions():
        meta = {"name": op.deployment, "namespace": INSTALL_NAMESPACE, "labels": labels}
        role = f"{PACKAGE}:{op.deployment}"
        dep = deployment(op, registry, version, digests)
        subjects = [{"kind": "ServiceAccount", "name": op.deployment, "namespace": INSTALL_NAMESPACE}]
        election = {**meta, "name": f"{op.deployment}-leader-election"}
        docs += [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": role, "labels": labels},
                "rules": [*watched_namespace_rules(op.rules), *op.cluster_rules],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": role, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": subjects,
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": election,
                "rules": own_namespace_rules(op.rules),
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": election,
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": election["name"],
                },
                "subjects": subjects,
            },
            *aggregated_role(op, subjects, labels),
            *kind_roles(op),
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {**meta, "labels": {**labels, **dep["label"]}},
                "spec": dep["spec"],
            },
            {
                **disruption_budget(op),
                "metadata": {**disruption_budget(op)["metadata"], "namespace": INSTALL_NAMESPACE},
            },
            {
                **metrics_service(op),
                "metadata": {**metrics_service(op)["metadata"], "namespace": INSTALL_NAMESPACE},
            },
            {
                **network_policy(op, monitoring_namespaces),
                "metadata": {**network_policy(op)["metadata"], "namespace": INSTALL_NAMESPACE},
            },
        ]
    return [*docs, metrics_reader(), *admission_policies()]


def aggregated_role(
    op: OperatorDescription, subjects: list[dict[str, Any]], labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The operator's aggregated ClusterRole and its binding, when it has one: empty until a
    cluster admin adds a ClusterRole carrying ``op.aggregate_label: "true"`` (kube-controller-
    manager folds its rules in). Not in the CSV: ``clusterPermissions`` are plain rules, and
    only the installer, with cluster-admin rights, may create a role with an aggregationRule."""
    if not op.aggregated_role:
        return []
    name = op.aggregated_role
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": dict(labels)},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {op.aggregate_label: "true"}}]},
            "rules": [],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(labels)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects,
        },
    ]


# Debian's own python3 on debian:bookworm-slim (bookworm ships 3.11): every image of the project
# then starts from one public base, the one a machine without a registry can make locally
# (localcluster/images.py), so the images tested here are the images users build.
BASE_IMAGE = "debian:bookworm-slim"
# bookworm's python3/python3-venv (unchanged since its release); the interpreter they depend on,
# python3.11, follows bookworm-security.
PYTHON3_VERSION = "3.11.2-1+b1"
OPERATOR_UID = 65532
OPERATOR_USER = "nonroot"  # distroless's name for 65532 (Debian has a group "operator", GID 37)


def operator_dockerfile(op: OperatorDescription, registry: str, version: str) -> str:
    """One image per operator: the same build, a different entry point."""
    return f"""\
# The {op.display} operator image. Generated by `make bundle` (tools/generate/bundle.py): do not edit.
# Build from the repository root (`make images` builds every image):
#   docker build -f images/{op.deployment}/Dockerfile -t {image(registry, op.name, version)} .
# Debian's python3 ({PYTHON3_VERSION} is bookworm's 3.11); the operator runs as UID {OPERATOR_UID},
# which has a passwd entry (kopf calls getpass.getuser() at start-up), and writes nothing outside
# /tmp, so a read-only root filesystem works.
ARG PYTHON3_VERSION={PYTHON3_VERSION}

FROM {BASE_IMAGE} AS build
ARG PYTHON3_VERSION
RUN apt-get update \\
 && apt-get install -y --no-install-recommends "python3-venv=${{PYTHON3_VERSION}}" \\
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY shared ./shared
COPY operators ./operators
# Exactly the versions CI tested: constraints.txt is the lock. pip and setuptools only install:
# they leave the venv before it is copied into the image.
RUN python3 -m venv /venv \\
 && /venv/bin/pip install --no-cache-dir --disable-pip-version-check -c constraints.txt . \\
 && /venv/bin/python -m pip uninstall --yes --disable-pip-version-check pip setuptools

FROM {BASE_IMAGE}
ARG PYTHON3_VERSION
# The interpreter only: no pip, no build tools in the running image.
RUN apt-get update \\
 && apt-get install -y --no-install-recommends "python3=${{PYTHON3_VERSION}}" \\
 && rm -rf /var/lib/apt/lists/* \\
 && groupadd --gid {OPERATOR_UID} {OPERATOR_USER} \\
 && useradd --no-log-init --uid {OPERATOR_UID} --gid {OPERATOR_UID} --create-home \\
            --home-dir /home/{OPERATOR_USER} --shell /usr/sbin/nologin {OPERATOR_USER}
ENV PATH=/venv/bin:$PATH \\
    PYTHONDONTWRITEBYTECODE=1 \\
    PYTHONUNBUFFERED=1
COPY --from=build /venv /venv
USER {OPERATOR_UID}:{OPERATOR_UID}
WORKDIR /home/{OPERATOR_USER}
EXPOSE {DEFAULT_METRICS_PORT} {DEFAULT_PROBE_PORT}
# What differs between the operator images comes last: every layer above is shared by all three.
LABEL org.opencontainers.image.title="{op.deployment}" \\
      org.opencontainers.image.description="{op.summary}" \\
      org.opencontainers.image.source="https://github.com/k8s-operators-py/k8s-operators-py" \\
      org.opencontainers.image.version="{version}" \\
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["python", "-m", "operators.{op.name}"]
"""


GENERATED = "# Generated by `make bundle` (tools/generate/bundle.py). Do not edit.\n"


def _yaml(doc: Mapping[str, Any]) -> str:
    return to_yaml(doc, GENERATED)


def render(
    version: str,
    registry: str,
    monitoring_namespaces: Sequence[str] = DEFAULT_MONITORING_NAMESPACES,
    digests: Digests | None = None,
    arches: Sequence[str] = DEFAULT_ARCHES,
) -> dict[Path, str]:
    """Every generated file; with ``digests`` every image of this release is named by digest,
    ``arches`` the architectures the CSV says its images support."""
    ops = descriptions()
    files: dict[Path, str] = manifests_render()
    manifests = BUNDLE / "manifests"
    files[manifests / f"{PACKAGE}.clusterserviceversion.yaml"] = _yaml(
        csv(version, registry, digests, arches)
    )
    for op in ops:
        files[manifests / f"{op.deployment}-metrics_v1_service.yaml"] = _yaml(metrics_service(op))
        files[manifests / f"{op.deployment}_monitoring.coreos.com_v1_servicemonitor.yaml"] = _yaml(
            service_monitor(op)
        )
        files[manifests / f"{op.deployment}_policy_v1_poddisruptionbudget.yaml"] = _yaml(
            disruption_budget(op)
        )
    reader = manifests / f"{METRICS_READER}_rbac.authorization.k8s.io_v1_clusterrole.yaml"
    files[reader] = _yaml(metrics_reader())
    for op in ops:
        for role in kind_roles(op):
            files[manifests / f"{role['metadata']['name']}_rbac.authorization.k8s.io_v1_clusterrole.yaml"] = (
                _yaml(role)
            )
    files[BUNDLE / "metadata" / "annotations.yaml"] = _yaml({"annotations": ANNOTATIONS})
    files[BUNDLE / "tests" / "scorecard" / "config.yaml"] = _yaml(scorecard_config())
    files[BUNDLE / "bundle.Dockerfile"] = bundle_dockerfile()
    for op in ops:
        files[REPO / "images" / op.deployment / "Dockerfile"] = operator_dockerfile(op, registry, version)
    files[manifests / f"{PACKAGE}_monitoring.coreos.com_v1_prometheusrule.yaml"] = _yaml(
        monitoring.prometheus_rule()
    )
    files[REPO / "docs" / "grafana-dashboard.json"] = monitoring.dashboard_json()
    docs = "".join(
        "---\n" + to_yaml(doc, "") for doc in plain_install(version, registry, monitoring_namespaces, digests)
    )
    files[REPO / "deploy" / "install.yaml"] = "# Install without OLM. " + GENERATED[2:] + docs
    policies = "".join("---\n" + to_yaml(network_policy(op, monitoring_namespaces), "") for op in ops)
    files[REPO / "deploy" / "network-policies.yaml"] = (
        "# The operators' NetworkPolicies, for an OLM install (deploy/install.yaml has them):\n"
        "#   kubectl apply -n <the operators' namespace> -f deploy/network-policies.yaml\n"
        + GENERATED
        + policies
    )
    files[REPO / "deploy" / "admission-policies.yaml"] = (
        "# The ValidatingAdmissionPolicies checking a tenant's own rights, for an OLM install\n"
        "# (deploy/install.yaml has them; Kubernetes >= 1.30):\n"
        "#   kubectl apply -f deploy/admission-policies.yaml\n"
        + GENERATED
        + "".join("---\n" + to_yaml(doc, "") for doc in admission_policies())
    )
    return files


def render_into(
    root: Path,
    version: str,
    registry: str,
    digests: Digests | None = None,
    arches: Sequence[str] = DEFAULT_ARCHES,
) -> Path:
    """Write the bundle and the operator Dockerfiles of ``version`` under ``root`` (not the repo).

    ``root/bundle`` is then a bundle build context and ``root/images/<op>-operator/Dockerfile``
    the operator images' Dockerfiles (their context stays the repository), ``root/deploy`` the
    plain install. For a release pinned by digest (``digests``) or one being tried (the OLM
    upgrade test) without touching the committed files. Returns ``root/bundle``.
    """
    for path, text in render(version, registry, digests=digests, arches=arches).items():
        for under in (BUNDLE, REPO / "images", REPO / "deploy"):
            if path.is_relative_to(under):
                target = root / path.relative_to(REPO)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    return root / "bundle"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=shared.__version__)
    parser.add_argument("--registry", default=DEFAULT_REGISTRY)
    parser.add_argument(
        "--monitoring-namespace",
        action="append",
        dest="monitoring",
        metavar="NAMESPACE",
        help="the only namespace whose pods may reach the metrics port (repeat for several; "
        f"default: {', '.join(DEFAULT_MONITORING_NAMESPACES)})",
    )
    parser.add_argument("--check", action="store_true", help="fail if the files differ instead of writing")
    args = parser.parse_args(argv)
    files = render(args.version, args.registry, args.monitoring or DEFAULT_MONITORING_NAMESPACES)
    extra = [p for p in (BUNDLE / "manifests").glob("*.yaml") if p not in files]
    return sync(files, check=args.check, what="bundle out of date (run `make bundle`)", extra=extra)


if __name__ == "__main__":
    sys.exit(main())
