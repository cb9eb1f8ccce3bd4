"""What a tenant obtains through our kinds, and the checks that keep it to what they could do
themselves: ValidatingAdmissionPolicies whose CEL asks the API server's ``authorizer`` about the
*requesting* user, and the editor/viewer ClusterRoles of each kind.

An operator acts with its own ServiceAccount's rights, wider than any tenant's: a WebServer
naming a Secret gets pods mounting it, a Netperf on ``path: host`` gets ``hostNetwork`` pods, a
TDSet naming a Deployment scales it. Each operator declares, as ``AccessPolicy`` values in
its description, which spec fields make it act on what; here they become one
ValidatingAdmissionPolicy each (``admissionregistration.k8s.io/v1``, Kubernetes >= 1.30) and its
binding, refusing a create, or an update that changes ``spec``, by a user who lacks the right
the field stands for. The refusal names the verb, the resource and the object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.api.crd import CRDSpec

VAP_API = "admissionregistration.k8s.io/v1"
RBAC_API = "rbac.authorization.k8s.io/v1"
# Checked when the object is created, or when an update changes its spec.
SPEC_CHANGED = (
    "request.operation == 'CREATE' || has(object.spec) != has(oldObject.spec) || "
    "(has(object.spec) && object.spec != oldObject.spec)"
)
# Authorizer checks one policy makes at most: the API server prices a check at 350,000 of the
# 10,000,000 a policy evaluation may spend (and an expression 1,000,000, so one check each).
MAX_DISTINCT = 24
EDITOR_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
VIEWER_VERBS = ("get", "list", "watch")
# Where the editor and viewer roles aggregate (kube-controller-manager folds them in).
EDITOR_AGGREGATES = ("admin", "edit")
VIEWER_AGGREGATES = ("view",)


def _quote(text: str) -> str:
    """A CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Right:
    """A right the requesting user needs when ``when`` holds (CEL over ``object``, ``spec``
    known to exist).

    ``group``, ``resource`` and ``name`` are CEL string expressions (``name`` empty: any object
    of the namespace, as for ``create``); ``subresource`` and ``verb`` are literals. ``field``
    says which spec field asks for it and ``why`` what the operator does with it, for the
    refusal and the documentation.
    """

    field: str
    when: str
    verb: str
    group: str
    resource: str
    why: str
    name: str = ""
    subresource: str = ""

    def check(self) -> str:
        """The CEL call asking the authorizer about the requesting user."""
        call = f"authorizer.group({self.group}).resource({self.resource})"
        if self.subresource:
            call += f".subresource({_quote(self.subresource)})"
        call += ".namespace(request.namespace)"
        if self.name:
            call += f".name({self.name})"
        return f"{call}.check({_quote(self.verb)}).allowed()"

    def message(self, kind: str) -> str:
        """A CEL string expression: who lacks which right, for what. E.g. ``WebServer "web": the
        Secret it names (spec.volumes, spec.env, spec.envFrom) needs get on secrets "db" in
        namespace "shop", which "alice" lacks (...)``."""
        parts = [
            _quote(kind + ' "'),
            "object.metadata.name",
            _quote('": ' + self.field + " needs " + self.verb + " on "),
            self.resource,
        ]
        if self.subresource:
            parts.append(_quote("/" + self.subresource))
        if self.name:
            parts += [_quote(' "'), self.name, _quote('"')]
        parts += [
            _quote(' in namespace "'),
            "request.namespace",
            _quote('", which "'),
            "request.userInfo.username",
            _quote('" lacks (' + self.why + ")"),
        ]
        return " + ".join(parts)


@dataclass(frozen=True)
class NameSource:
    """A spec field holding names of objects in the object's namespace: ``names`` is a CEL list
    of strings (``spec`` known to exist) and ``most`` its schema's maximum length."""

    field: str
    names: str
    most: int


@dataclass(frozen=True)
class References:
    """Objects of one resource named by spec fields: each distinct name needs ``verb`` on it."""

    kind: str  # e.g. Secret
    group: str
    resource: str
    verb: str
    sources: tuple[NameSource, ...]
    why: str

    @property
    def fields(self) -> str:
        return ", ".join(s.field for s in self.sources)

    @property
    def field(self) -> str:
        """What the refusal says asks for the right."""
        return f"the {self.kind} it names ({', '.join(s.field.split('[')[0] for s in self.sources)})"

    @property
    def most(self) -> int:
        return sum(s.most for s in self.sources)

    def names(self) -> str:
        """A CEL list of every name, in the order of the sources, duplicates included."""
        return " + ".join(f"({s.names})" for s in self.sources)

    def distinct(self) -> str:
        """A CEL list of the distinct names (each at its first place): a literal list of the
        positions, since CEL's macros have no index."""
        positions = ", ".join(str(i) for i in range(self.most))
        return (
            f"[{positions}].filter(i, i < size(variables.names) && "
            "variables.names.indexOf(variables.names[i]) == i).map(i, variables.names[i])"
        )

    def rights(self) -> list[Right]:
        """One right per distinct name, up to ``MAX_DISTINCT``."""
        return [
            Right(
                field=self.field,
                when=f"size(variables.distinct) > {i}",
                verb=self.verb,
                group=_quote(self.group),
                resource=_quote(self.resource),
                name=f"variables.distinct[{i}]",
                why=self.why,
            )
            for i in range(MAX_DISTINCT)
        ]

    def limit(self, kind: str) -> dict[str, str]:
        """The validation refusing more distinct names than the policy can check."""
        return {
            "expression": f"!has(object.spec) || size(variables.distinct) <= {MAX_DISTINCT}",
            "message": (
                f"a {kind} may name at most {MAX_DISTINCT} distinct {self.resource} in {self.fields}: "
                "admission checks the author's right to each, and the API server allows no more "
                "checks per request"
            ),
            "reason": "Invalid",
        }


@dataclass(frozen=True)
class AccessPolicy:
    """One ValidatingAdmissionPolicy of a kind: ``rights`` (or every name of ``references``)
    the requesting user must hold. ``suffix`` names it (``<project>-<operator>-<suffix>``);
    ``variables`` are extra CEL variables its rights read (``spec`` known to exist);
    ``summary`` is the rule in words (docs).

    Why one check per CEL expression: the API server prices an authorizer ``check`` so that one
    expression holds at most two, and one policy evaluation about 28; a list of names (every Secret a
    WebServer mounts) is reduced to its distinct names and each is checked by an expression of its
    own, up to ``MAX_DISTINCT`` per policy (more are refused with that reason). A refusal names
    one missing right, the first failed check: the API server reports one failed validation, and
    evaluates message expressions without the authorizer, so a message cannot list the others.

    An update that leaves ``spec`` alone (labels, annotations, finalizers; ``/status`` and ``/scale``
    are other resources and never matched) is not checked: whoever changes ``spec`` answers for all
    of it, since the operator acts on the whole spec anew (a tenant changing the image of a
    WebServer an admin made to mount a Secret would otherwise read it).

    Pure: data in, manifests out (``tools/generate/bundle.py`` renders them).
    """

    suffix: str
    summary: str
    rights: tuple[Right, ...] = ()
    references: References | None = None
    variables: tuple[tuple[str, str], ...] = ()

    def all_rights(self) -> list[Right]:
        return [*self.rights, *(self.references.rights() if self.references else ())]


def policy_name(project: str, operator: str, access: AccessPolicy) -> str:
    return f"{project}-{operator}-{access.suffix}"


def admission_policy(
    project: str, operator: str, crd: CRDSpec, access: AccessPolicy, labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy of ``access`` on ``crd``'s kind and its binding (every
    namespace, Deny)."""
    name = policy_name(project, operator, access)
    variables = [{"name": n, "expression": e} for n, e in access.variables]
    if access.references:
        variables[:0] = [
            {"name": "names", "expression": access.references.names()},
            {"name": "distinct", "expression": access.references.distinct()},
        ]
    validations = [
        {
            # A spec removed by an update has nothing to check.
            "expression": f"!has(object.spec) || !({right.when}) || {right.check()}",
            "messageExpression": right.message(crd.kind),
            "reason": "Forbidden",
        }
        for right in access.all_rights()
    ]
    if access.references:
        validations.append(access.references.limit(crd.kind))
    # Variables read spec: evaluated only behind has(object.spec) (they are lazy).
    policy = {
        "apiVersion": VAP_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [crd.group],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [crd.plural],
                    }
                ]
            },
            "matchConditions": [{"name": "spec-set-or-changed", "expression": SPEC_CHANGED}],
            **({"variables": variables} if variables else {}),
            "validations": validations,
        },
    }
    binding = {
        "apiVersion": VAP_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [policy, binding]


def role_name(project: str, operator: str, role: str) -> str:
    """``<project>-<operator>-<role>-role``, as operator-sdk's ``<kind>-editor-role`` behind the
    project's prefix."""
    return f"{project}-{operator}-{role}-role"


def _aggregation(roles: Sequence[str]) -> dict[str, str]:
    return {f"rbac.authorization.k8s.io/aggregate-to-{r}": "true" for r in roles}


def editor_role(project: str, operator: str, crd: CRDSpec, labels: Mapping[str, str]) -> dict[str, Any]:
    """Everything on the kind, read its status, and scale it where it has ``/scale`` (``kubectl
    scale``); aggregated to ``admin`` and ``edit``: who may create our kinds may create
    workloads, since each makes pods."""
    scale = (
        [
            {
                "apiGroups": [crd.group],
                "resources": [f"{crd.plural}/scale"],
                "verbs": ["get", "patch", "update"],
            }
        ]
        if crd.scale
        else []
    )
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": {
            "name": role_name(project, operator, "editor"),
            "labels": {**labels, **_aggregation(EDITOR_AGGREGATES)},
        },
        "rules": [
            {"apiGroups": [crd.group], "resources": [crd.plural], "verbs": list(EDITOR_VERBS)},
            {"apiGroups": [crd.group], "resources": [f"{crd.plural}/status"], "verbs": ["get"]},
            *scale,
        ],
    }


def viewer_role(project: str, operator: str, crd: CRDSpec, labels: Mapping[str, str]) -> dict[str, Any]:
    """Read the kind and its status; aggregated to ``view``."""
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": {
            "name": role_name(project, operator, "viewer"),
            "labels": {**labels, **_aggregation(VIEWER_AGGREGATES)},
        },
        "rules": [
            {"apiGroups": [crd.group], "resources": [crd.plural], "verbs": list(VIEWER_VERBS)},
            {"apiGroups": [crd.group], "resources": [f"{crd.plural}/status"], "verbs": ["get"]},
        ],
    }
