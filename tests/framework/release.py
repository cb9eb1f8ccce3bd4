"""A next release of the bundle, rendered and built the way a release is: for the upgrade tests.

:func:`build_release` renders release ``version`` (operator Dockerfiles and a bundle that
``replaces`` the published one) into a directory, builds its operator, bundle and catalog images
(the catalog holds the published bundles and the new one, as ``make catalog VERSION=...``
writes it) and returns reference -> OCI archive, for a registry to serve. Nothing is committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "k8s-operators-py"
REGISTRY = "ghcr.io/k8s-operators-py"
OPERATORS = ("netperf", "tdset", "webserver")
RELEASED = "0.1.0"


@dataclass(frozen=True)
class Release:
    version: str
    bundle_dir: Path
    archives: dict[str, Path]  # image reference -> OCI archive


def catalog_ref(version: str) -> str:
    return f"{REGISTRY}/{PACKAGE}-catalog:{version}"


def build_release(version: str, root: Path) -> Release:
    from localcluster import images as image_tools
    from tools.generate import bundle, catalog

    bundle_dir = bundle.render_into(root / "release", version, REGISTRY)
    specs = [
        image_tools.ImageSpec(
            f"{op}-operator",
            root / "release" / "images" / f"{op}-operator" / "Dockerfile",
            REPO,
            f"{op} {version}",
        )
        for op in OPERATORS
    ]
    specs.append(
        image_tools.ImageSpec(f"{PACKAGE}-bundle", bundle_dir / "bundle.Dockerfile", bundle_dir, "bundle")
    )
    context = root / "catalog-context"
    earlier = catalog.released(REPO / "catalog" / PACKAGE / "catalog.yaml", version)
    assert [b["name"] for b in earlier.bundles] == [f"{PACKAGE}.v{RELEASED}"]
    text = catalog.render(version, REGISTRY, bundles=[(version, bundle_dir)], earlier=earlier)
    catalog.write(context, text)
    (context / "catalog.Dockerfile").write_text(catalog.CATALOG_DOCKERFILE)
    specs.append(
        image_tools.ImageSpec(f"{PACKAGE}-catalog", context / "catalog.Dockerfile", context, "catalog")
    )
    archives = image_tools.ensure_images(specs, version=version, registry=REGISTRY)
    return Release(version, bundle_dir, dict(archives))
