"""openshift-preflight's offline checks, on the bundle's CSV and on every image's OCI archive.

    python -m tools.check.preflight operator [BUNDLE_DIR]     the CSV checks (make lint)
    python -m tools.check.preflight container [ARCHIVE ...]   the image checks (default: every built image)

Each check carries the name preflight gives it and applies the rule of its source
(``internal/policy/operator`` and ``internal/policy/container``, v1.14.1), stricter where
preflight only warns (every CSV image must be in ``relatedImages``). ``preflight check operator``
cannot run here: it runs its whole policy, which needs an OpenShift cluster (DeployableByOLM,
scorecard) and Red Hat's Pyxis service (CertifiedImages), with no way to select checks. ``preflight
check container`` runs against the dev registry, and a test compares its verdicts with these;
its BasedOnUbi (Pyxis) and RPM-database checks cannot pass on Debian images, so the make targets
use these. ValidateOperatorBundle is operator-sdk's validators (``make validate``); DeployableByOLM
is the OLM suite.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

import shared

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "bundle"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
FEATURE = "features.operators.openshift.io/"
REQUIRED_FEATURES = (
    "disconnected",
    "fips-compliant",
    "proxy-aware",
    "tls-profiles",
    "token-auth-aws",
    "token-auth-azure",
    "token-auth-gcp",
)
OPTIONAL_FEATURES = ("cnf", "cni", "csi")
REQUIRED_LABELS = ("name", "vendor", "version", "release", "summary", "description", "maintainer")
TRADEMARK_LABELS = ("name", "vendor", "maintainer")
MAX_LAYERS = 40
LICENSES = "licenses"


@dataclass(frozen=True)
class Result:
    """One check's verdict on one subject (the CSV or an image), with why."""

    check: str
    subject: str
    passed: bool
    detail: str

    @property
    def enforced(self) -> bool:
        return self.check not in OPTIONAL

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL" if self.enforced else "WARN"
        return f"{verdict}  {self.check:<48} {self.subject}: {self.detail}"


# --- operator checks: the CSV ------------------------------------------------------------------


def load_csv(bundle: Path = BUNDLE) -> dict[str, Any]:
    (path,) = sorted((bundle / "manifests").glob("*.clusterserviceversion.yaml"))
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def _containers(csv: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for dep in csv["spec"]["install"]["spec"].get("deployments", []):
        pod = dep["spec"]["template"]["spec"]
        yield from pod.get("initContainers", [])
        yield from pod.get("containers", [])


def csv_images(csv: Mapping[str, Any]) -> set[str]:
    """Every image the CSV's deployments run or hand their operators (``RELATED_IMAGE_*``)."""
    images = set()
    for c in _containers(csv):
        images.add(c["image"])
        images.update(
            e["value"] for e in c.get("env", []) if e["name"].startswith("RELATED_IMAGE_") and "value" in e
        )
    return images


def related_images(csv: Mapping[str, Any]) -> list[str]:
    return [r["image"] for r in csv["spec"].get("relatedImages", [])]


def all_image_refs_in_related_images(csv: Mapping[str, Any]) -> tuple[bool, str]:
    missing = sorted(csv_images(csv) - set(related_images(csv)))
    return (
        not missing,
        f"not in relatedImages: {missing}" if missing else "every CSV image is in relatedImages",
    )


def follows_restricted_network_enablement_guidelines(csv: Mapping[str, Any]) -> tuple[bool, str]:
    annotations = csv["metadata"].get("annotations", {})
    legacy = annotations.get("operators.openshift.io/infrastructure-features", "")
    if annotations.get(f"{FEATURE}disconnected") != "true" and "disconnected" not in legacy.lower():
        return False, f'{FEATURE}disconnected is not "true"'
    related = related_images(csv)
    if not related:
        return False, "spec.relatedImages is empty"
    unpinned = [image for image in related if not DIGEST.search(image)]
    if unpinned:
        return False, f"related images not pinned by digest: {unpinned}"
    env = sorted(
        {
            e["name"]
            for c in _containers(csv)
            for e in c.get("env", [])
            if e["name"].startswith("RELATED_IMAGE_")
        }
    )
    if not env:
        return False, "no RELATED_IMAGE_* environment variable in the operator containers"
    return True, f"disconnected, {len(related)} related images by digest, {', '.join(env)}"


def required_annotations(csv: Mapping[str, Any]) -> tuple[bool, str]:
    annotations = csv["metadata"].get("annotations", {})
    missing = [f"{FEATURE}{f}" for f in REQUIRED_FEATURES if f"{FEATURE}{f}" not in annotations]
    wrong = {
        f"{FEATURE}{f}": annotations[f"{FEATURE}{f}"]
        for f in (*REQUIRED_FEATURES, *OPTIONAL_FEATURES)
        if f"{FEATURE}{f}" in annotations and annotations[f"{FEATURE}{f}"] not in ("true", "false")
    }
    if missing or wrong:
        return False, f"missing: {missing}; not true/false: {wrong}"
    return True, "every feature annotation is true or false"


def security_context_constraints_in_csv(csv: Mapping[str, Any]) -> tuple[bool, str]:
    for perm in csv["spec"]["install"]["spec"].get("clusterPermissions", []):
        for rule in perm.get("rules", []):
            if "security.openshift.io" in rule.get(
                "apiGroups", []
            ) and "securitycontextconstraints" in rule.get("resources", []):
                names = rule.get("resourceNames", [])
                if len(names) > 1:
                    return False, f"only one SCC may be requested, not {names}"
                return True, f"requests the SCC {names}"
    return True, "no custom SCC: the default restricted SCC applies"


OPERATOR_CHECKS: dict[str, Callable[[Mapping[str, Any]], tuple[bool, str]]] = {
    "AllImageRefsInRelatedImages": all_image_refs_in_related_images,
    "FollowsRestrictedNetworkEnablementGuidelines": follows_restricted_network_enablement_guidelines,
    "RequiredAnnotations": required_annotations,
    "SecurityContextConstraintsInCSV": security_context_constraints_in_csv,
}


# Preflight's level "optional": reported, never failing the run. An operator that truthfully does
# not claim ``disconnected`` fails this one by definition.
OPTIONAL = frozenset({"FollowsRestrictedNetworkEnablementGuidelines"})


def operator_checks(csv: Mapping[str, Any], subject: str = "CSV") -> list[Result]:
    return [Result(name, subject, *check(csv)) for name, check in OPERATOR_CHECKS.items()]


# --- container checks: an OCI archive ----------------------------------------------------------


@dataclass(frozen=True)
class Image:
    """What the container checks read from an OCI archive: tag, config, layer count, files."""

    ref: str  # the reference the archive was saved under (org.opencontainers.image.ref.name)
    config: Mapping[str, Any]
    layers: int
    files: Mapping[str, int]  # path (no leading /) -> size, after whiteouts

    @property
    def labels(self) -> Mapping[str, str]:
        labels: Mapping[str, str] = self.config.get("config", {}).get("Labels") or {}
        return labels

    @property
    def user(self) -> str:
        user: str = self.config.get("config", {}).get("User", "")
        return user


def read_archive(path: Path) -> Image:
    """The first image of an OCI archive (``oci-archive:``), its layers applied in order."""
    with tarfile.open(path) as tar:

        def blob(digest: str) -> bytes:
            f = tar.extractfile(f"blobs/{digest.replace(':', '/')}")
            assert f is not None
            return f.read()

        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        desc = index["manifests"][0]
        annotations = desc.get("annotations", {})
        # containerd's full name when present; buildah and skopeo write the reference (or tag) to the OCI one.
        ref = annotations.get("io.containerd.image.name") or annotations.get(
            "org.opencontainers.image.ref.name", ""
        )
        manifest = json.loads(blob(desc["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        files: dict[str, int] = {}
        for layer in manifest["layers"]:
            f = tar.extractfile(f"blobs/{layer['digest'].replace(':', '/')}")
            assert f is not None
            with tarfile.open(fileobj=f, mode="r|*") as lt:
                for member in lt:
                    _apply(files, member)
    return Image(ref, config, len(manifest["layers"]), files)


def _apply(files: dict[str, int], member: tarfile.TarInfo) -> None:
    raw = member.name.removeprefix("./").lstrip("/")
    path = PurePosixPath(raw)
    name = path.name
    if name == ".wh..wh..opq":
        prefix = f"{path.parent}/"
        for key in [k for k in files if k.startswith(prefix)]:
            del files[key]
        return
    if name.startswith(".wh."):
        gone = str(path.parent / name.removeprefix(".wh."))
        for key in [k for k in files if k == gone or k.startswith(f"{gone}/")]:
            del files[key]
        return
    files[str(path)] = member.size if member.isfile() else 0
    if member.isdir():
        files[str(path)] = -1  # a directory


def has_license(image: Image) -> tuple[bool, str]:
    if image.files.get(LICENSES) != -1:
        return False, "/licenses is not a directory in the image"
    found = {k: v for k, v in image.files.items() if k.startswith(f"{LICENSES}/") and k.count("/") == 1}
    if not any(size > 0 for size in found.values()):
        return False, "/licenses holds no non-empty file"
    return True, f"/licenses: {', '.join(sorted(k.split('/', 1)[1] for k in found))}"


def has_unique_tag(image: Image) -> tuple[bool, str]:
    last = image.ref.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else (last if "/" not in image.ref else "")
    if not tag or tag == "latest":
        return False, f"tagged {tag or 'nothing'}: a unique tag (the version) is needed"
    return True, f"tag {tag}"


def layer_count_acceptable(image: Image) -> tuple[bool, str]:
    return image.layers <= MAX_LAYERS, f"{image.layers} layers (at most {MAX_LAYERS})"


def has_required_label(image: Image) -> tuple[bool, str]:
    missing = [label for label in REQUIRED_LABELS if not image.labels.get(label)]
    return (
        not missing,
        f"missing labels: {missing}"
        if missing
        else "name, vendor, version, release, summary, description, maintainer",
    )


def violates_red_hat_trademark(text: str) -> bool:
    """Preflight's rule: "Red Hat" may only appear as "for Red Hat", never leading."""
    lower = text.lower()
    starting = re.match(r"^[^a-z0-9]*red[^a-z0-9]*hat", lower) is not None
    count = len(re.findall(r"red[^a-z0-9]*hat", lower))
    count -= starting
    count -= re.search(r"for[^a-z0-9]*red[^a-z0-9]*hat", lower) is not None
    return starting or count > 0


def has_no_prohibited_labels(image: Image) -> tuple[bool, str]:
    bad = [label for label in TRADEMARK_LABELS if violates_red_hat_trademark(image.labels.get(label, ""))]
    return not bad, f"labels naming Red Hat: {bad}" if bad else "no label names Red Hat"


def has_prohibited_container_name(image: Image) -> tuple[bool, str]:
    name = image.ref.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    bad = violates_red_hat_trademark(name)
    return not bad, f"the name {name!r} uses Red Hat's trademark" if bad else f"name {name}"


def run_as_non_root(image: Image) -> tuple[bool, str]:
    user = image.user
    if user in ("", "0", "root") or user.split(":", 1)[0] in ("0", "root"):
        return False, f"USER {user or '(none)'} is root"
    return True, f"USER {user}"


CONTAINER_CHECKS: dict[str, Callable[[Image], tuple[bool, str]]] = {
    "HasLicense": has_license,
    "HasUniqueTag": has_unique_tag,
    "LayerCountAcceptable": layer_count_acceptable,
    "HasRequiredLabel": has_required_label,
    "HasNoProhibitedLabels": has_no_prohibited_labels,
    "RunAsNonRoot": run_as_non_root,
    "HasProhibitedContainerName": has_prohibited_container_name,
}


def container_checks(image: Image) -> list[Result]:
    return [Result(name, image.ref, *check(image)) for name, check in CONTAINER_CHECKS.items()]


def runnable_archives() -> list[Path]:
    """The archives of every image that runs as a container (operators, operands, web)."""
    from localcluster import images

    return [
        images.archive_dir() / f"{spec.name}-{shared.__version__}.tar"
        for spec in images.IMAGES
        if spec.name not in ("k8s-operators-py-bundle", "k8s-operators-py-catalog")
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="policy", required=True)
    op = sub.add_parser("operator", help="the CSV checks")
    op.add_argument("bundle", nargs="?", type=Path, default=BUNDLE)
    co = sub.add_parser("container", help="the image checks")
    co.add_argument("archives", nargs="*", type=Path)
    args = parser.parse_args(argv)
    if args.policy == "operator":
        results = operator_checks(load_csv(args.bundle), str(args.bundle))
    else:
        results = [
            r for path in args.archives or runnable_archives() for r in container_checks(read_archive(path))
        ]
    for r in results:
        print(r.line())
    failed = [r for r in results if not r.passed and r.enforced]
    warned = [r for r in results if not r.passed and not r.enforced]
    print(
        f"preflight ({args.policy}): {len(results) - len(failed) - len(warned)} passed, "
        f"{len(failed)} failed, {len(warned)} optional (preflight's level) not met"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
