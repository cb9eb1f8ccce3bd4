"""CRD upgrade compatibility: the generated CRDs against every released snapshot in ``api-history/``.

    python -m tools.check.crd_compat          findings, exit 1 if any (``make lint`` runs it)

OLM updates CRDs in place when a new bundle ``replaces`` the old one, and objects written under
the old release stay in etcd. So a release keeps every released version served and the storage
version unchanged, and within a version only adds optional fields and relaxes validation
(docs/operations/upgrades.md, "CRD compatibility policy"). ``problems`` names, for one CRD,
every change that could make a stored object invalid or unreadable; anything it does not list
(descriptions, defaults on new fields, new optional properties, looser bounds) is allowed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
HISTORY = REPO / "api-history"
CURRENT = REPO / "bundle" / "manifests"

# keyword -> how a new value may differ from the old: "ge" may only grow, "le" may only shrink.
_LOWER_BOUNDS = ("minimum", "minLength", "minItems", "minProperties")  # raising one tightens
_UPPER_BOUNDS = ("maximum", "maxLength", "maxItems", "maxProperties")  # lowering (or adding) tightens
_FIXED = ("type", "format", "pattern", "x-kubernetes-int-or-string")


CREATE_ONLY_PREFIX = "oldSelf.hasValue() || "
RATCHET_PREFIX = "(oldSelf.hasValue() && oldSelf.value() == self) || "


def create_only(rule: dict[str, Any]) -> bool:
    """A rule that holds on every update (``shared.api.crd.create_only_rule``): it can reject a
    new object but never one already stored, so adding it breaks no upgrade."""
    return bool(rule.get("optionalOldSelf")) and str(rule["rule"]).startswith(CREATE_ONLY_PREFIX)


def ratcheting(rule: dict[str, Any]) -> bool:
    """A rule that holds while its field keeps its value (``shared.api.crd.ratcheting_rule``): a
    stored object stays writable as long as that field is left alone, so adding it breaks no
    upgrade; only setting the field to a new invalid value is refused."""
    return bool(rule.get("optionalOldSelf")) and str(rule["rule"]).startswith(RATCHET_PREFIX)


def _rules(schema: dict[str, Any]) -> list[str]:
    return [
        r["rule"]
        for r in schema.get("x-kubernetes-validations", [])
        if not create_only(r) and not ratcheting(r)
    ]


def _children(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, sub in schema.get("properties", {}).items():
        yield f".{name}", sub
    if isinstance(schema.get("items"), dict):
        yield "[]", schema["items"]
    if isinstance(schema.get("additionalProperties"), dict):
        yield ".*", schema["additionalProperties"]


def _bound_problems(old: dict[str, Any], new: dict[str, Any], where: str) -> Iterator[str]:
    for key in _LOWER_BOUNDS:
        if key in new and (key not in old or new[key] > old[key]):
            yield f"{where}: {key} raised {old.get(key)!r} -> {new[key]!r}"
    for key in _UPPER_BOUNDS:
        if key in new and (key not in old or new[key] < old[key]):
            yield f"{where}: {key} lowered {old.get(key)!r} -> {new[key]!r}"
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        if new.get(key) and not old.get(key):
            yield f"{where}: {key} turned on"


def _keyword_problems(old: dict[str, Any], new: dict[str, Any], where: str) -> Iterator[str]:
    yield from _bound_problems(old, new, where)
    for key in _FIXED:
        if key in old and old.get(key) != new.get(key):
            yield f"{where}: {key} changed {old.get(key)!r} -> {new.get(key)!r}"
        elif key == "pattern" and key in new and key not in old:
            yield f"{where}: pattern added {new[key]!r}"
    if "enum" in new and "enum" not in old:
        yield f"{where}: enum added {new['enum']}"
    elif "enum" in new and (missing := [v for v in old["enum"] if v not in new["enum"]]):
        yield f"{where}: enum narrowed, no longer allows {missing}"
    if old.get("x-kubernetes-preserve-unknown-fields") and not new.get(
        "x-kubernetes-preserve-unknown-fields"
    ):
        yield f"{where}: x-kubernetes-preserve-unknown-fields turned off"
    if added := sorted(set(new.get("required", [])) - set(old.get("required", []))):
        yield f"{where}: newly required {added}"
    if added_rules := [r for r in _rules(new) if r not in _rules(old)]:
        yield f"{where}: CEL rules added on an existing field {added_rules}"


def _schema_problems(old: dict[str, Any], new: dict[str, Any], path: str) -> Iterator[str]:
    yield from _keyword_problems(old, new, path or ".")
    new_children = dict(_children(new))
    for suffix, old_sub in _children(old):
        if suffix not in new_children:
            yield f"{path}{suffix}: removed"
        else:
            yield from _schema_problems(old_sub, new_children[suffix], path + suffix)


def problems(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What in ``new`` (a CRD manifest) could break objects stored under ``old``."""
    name = old["metadata"]["name"]
    found: list[str] = []
    for key in ("group", "scope"):
        if old["spec"][key] != new["spec"][key]:
            found.append(f"{key} changed {old['spec'][key]!r} -> {new['spec'][key]!r}")
    for key in ("kind", "plural"):
        if old["spec"]["names"][key] != new["spec"]["names"][key]:
            found.append(
                f"names.{key} changed {old['spec']['names'][key]!r} -> {new['spec']['names'][key]!r}"
            )
    versions = {v["name"]: v for v in new["spec"]["versions"]}
    for version in old["spec"]["versions"]:
        v = version["name"]
        current = versions.get(v)
        if current is None:
            found.append(f"{v}: version removed")
            continue
        if version.get("served") and not current.get("served"):
            found.append(f"{v}: no longer served")
        if version.get("storage") and not current.get("storage"):
            found.append(f"{v}: no longer the storage version")
        old_schema = version["schema"]["openAPIV3Schema"]
        new_schema = current["schema"]["openAPIV3Schema"]
        found += [f"{v} {p}" for p in _schema_problems(old_schema, new_schema, "")]
    return [f"{name} {p}" for p in found]


def _crds(directory: Path) -> dict[str, dict[str, Any]]:
    docs = (yaml.safe_load(p.read_text()) for p in sorted(directory.glob("*.yaml")))
    return {d["metadata"]["name"]: d for d in docs if d and d.get("kind") == "CustomResourceDefinition"}


def check(history: Path = HISTORY, current: Path = CURRENT) -> list[str]:
    """Every released snapshot (``history/<version>/*.yaml``) against the CRDs in ``current``."""
    now = _crds(current)
    found: list[str] = []
    for release in sorted(p for p in history.iterdir() if p.is_dir()):
        for name, old in _crds(release).items():
            if name not in now:
                found.append(f"{release.name}: {name} released but no longer generated")
            else:
                found += [f"{release.name}: {p}" for p in problems(old, now[name])]
    return found


def main() -> int:
    findings = check()
    for finding in findings:
        print(finding)
    releases = sorted(p.name for p in HISTORY.iterdir() if p.is_dir())
    if findings:
        print(f"CRDs incompatible with released versions ({len(findings)} findings)", file=sys.stderr)
        return 1
    print(f"CRDs compatible with every released version: {', '.join(releases)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
