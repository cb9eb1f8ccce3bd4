"""What a WebServer's spec lets its author obtain beyond their own rights, and the checks of
those rights at admission (``shared.api.access``).

Its pods mount, or take into their environment, every Secret and ConfigMap the spec names, and
serve their files over HTTP: naming one requires ``get`` on it.
"""

from __future__ import annotations

from operators.webserver import schema
from shared.api.access import AccessPolicy, NameSource, References

_CONF = schema.CONFIGURATION_SCHEMA


def _sources(kind_field: str, key_ref: str, ref: str) -> tuple[NameSource, ...]:
    """The fields naming a Secret (``secret``, ``secretKeyRef``, ``secretRef``) or a ConfigMap."""
    return (
        NameSource(
            f"spec.volumes[].{kind_field}",
            f"has(object.spec.volumes) ? object.spec.volumes.filter(v, has(v.{kind_field}))"
            f".map(v, v.{kind_field}.name) : []",
            _CONF["volumes"]["maxItems"],
        ),
        NameSource(
            f"spec.env[].valueFrom.{key_ref}",
            "has(object.spec.env) ? object.spec.env.filter(e, has(e.valueFrom) && "
            f"has(e.valueFrom.{key_ref})).map(e, e.valueFrom.{key_ref}.name) : []",
            _CONF["env"]["maxItems"],
        ),
        NameSource(
            f"spec.envFrom[].{ref}",
            f"has(object.spec.envFrom) ? object.spec.envFrom.filter(e, has(e.{ref}))"
            f".map(e, e.{ref}.name) : []",
            _CONF["envFrom"]["maxItems"],
        ),
    )


POLICIES = (
    AccessPolicy(
        suffix="secrets",
        summary="every Secret named by spec.volumes, spec.env or spec.envFrom needs get on that Secret",
        references=References(
            kind="Secret",
            group="",
            resource="secrets",
            verb="get",
            sources=_sources("secret", "secretKeyRef", "secretRef"),
            why="the pods mount it or read it into their environment",
        ),
    ),
    AccessPolicy(
        suffix="configmaps",
        summary="every ConfigMap named by spec.volumes, spec.env or spec.envFrom needs get on that ConfigMap",
        references=References(
            kind="ConfigMap",
            group="",
            resource="configmaps",
            verb="get",
            sources=_sources("configMap", "configMapKeyRef", "configMapRef"),
            why="the pods mount it or read it into their environment",
        ),
    ),
)
