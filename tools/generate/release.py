"""A release pinned by digest: the bundle and catalog name every image by the digest built for it.

    python -m tools.generate.release [--version 0.1.0] [--registry ghcr.io/k8s-operators-py]
        [--out DIR]

The order is forced by what names what: the operator and operand images are built first
(:mod:`localcluster.images`) and their digests read from their archives (the manifest digest,
which :meth:`localcluster.registry.Registry.push` preserves, so it is the digest every puller
resolves); the bundle is then rendered with those digests (``tools.generate.bundle``: the CSV's
Deployments, ``relatedImages``, ``RELATED_IMAGE_*`` and ``containerImage``; ``deploy/install.yaml``
too) and its image built; the catalog is rendered from that bundle with the bundle image's
digest and its image built. Everything goes under ``DIR`` (default
``~/.cache/k8s-operators-py/images/release/<version>``): ``bundle/``, ``deploy/install.yaml``,
``catalog/``, ``digests.json``, ``archives/`` (the images, linked out of the image cache).

What is committed and what is computed: the repository's ``bundle/``, ``deploy/`` and
``catalog/`` name images by tag (``make bundle``; reproducible anywhere, so lint checks them for
drift); the digests exist only once images are built, and differ between machines (builds are not
bit-for-bit reproducible), so the pinned copies are computed here, never committed. The pinned
bundle and catalog images are tagged ``<version>-pinned`` locally and pushed under ``<version>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import shared
from localcluster import images as image_tools
from localcluster.binaries import file_lock
from localcluster.registry import archive_digest
from operators import descriptions
from tools.generate import bundle, catalog

PINNED_SUFFIX = "-pinned"


@dataclass
class Release:
    """A built release: public tag reference -> archive and -> digest, and the pinned files."""

    version: str
    root: Path
    archives: dict[str, Path] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    arches: list[str] = field(default_factory=list)  # supported by every image, from their configs

    @property
    def bundle_dir(self) -> Path:
        return self.root / "bundle"

    def pinned(self, ref: str) -> str:
        return bundle.pinned(ref, self.digests)


def architectures(archive: Path) -> set[str]:
    """The architectures an OCI archive's image runs on: its config's, or for an image index
    (a manifest list) each manifest's platform."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> dict[str, Any]:
            member = tar.extractfile("blobs/" + digest.replace(":", "/", 1))
            if member is None:
                raise ValueError(f"{archive}: blob {digest} missing")
            return dict(json.load(member))

        index = tar.extractfile("index.json")
        if index is None:
            raise ValueError(f"{archive}: no index.json")
        (top,) = json.load(index)["manifests"]
        doc = blob(top["digest"])
        if "manifests" in doc:  # an index: one entry per platform
            return {m["platform"]["architecture"] for m in doc["manifests"] if "platform" in m}
        return {str(blob(doc["config"]["digest"])["architecture"])}


def default_root(version: str) -> Path:
    return image_tools.cache_root() / "release" / version


def leaf_names() -> list[str]:
    """The images nothing else of the release names by digest: operators, operands, web."""
    return [
        *(op.deployment for op in descriptions()),
        *(i.name for op in descriptions() for i in op.images),
        "web",
    ]


def build(
    version: str = shared.__version__,
    registry: str = bundle.DEFAULT_REGISTRY,
    root: Path | None = None,
    earlier: catalog.Released | None = None,
) -> Release:
    """Build the release ``version`` pinned by digest into ``root`` (see the module's text).

    ``earlier`` are the published bundles the catalog keeps (default: those of the committed
    catalog); the operator images of a version other than the repository's are built from
    Dockerfiles rendered for it.
    """
    root = root or default_root(version)
    # Two builders of one root (make release beside a test) would render over each other.
    with file_lock(root.with_name(root.name + ".lock")):
        return _build(version, registry, root, earlier)


def _build(version: str, registry: str, root: Path, earlier: catalog.Released | None) -> Release:
    shutil.rmtree(root, ignore_errors=True)
    release = Release(version, root)
    # Operator Dockerfiles of this version (the committed ones when it is the repository's).
    bundle.render_into(root, version, registry)
    specs = []
    for name in leaf_names():
        spec = image_tools.BY_NAME[name]
        rendered = root / "images" / name / "Dockerfile"
        if rendered.exists() and version != shared.__version__:
            spec = image_tools.ImageSpec(name, rendered, spec.context, spec.description)
        specs.append(spec)
    built = image_tools.ensure_images(specs, version=version, registry=registry)
    release.archives.update({ref: _keep(root, archive) for ref, archive in built.items()})
    release.digests.update({ref: archive_digest(a) for ref, a in release.archives.items()})

    release.arches = sorted(set.intersection(*(architectures(a) for a in release.archives.values())))
    if not release.arches:
        raise RuntimeError(f"the images of {version} share no architecture: {release.archives}")
    bundle.render_into(root, version, registry, release.digests, release.arches)
    bundle_spec = image_tools.ImageSpec(
        f"{bundle.PACKAGE}-bundle",
        release.bundle_dir / "bundle.Dockerfile",
        release.bundle_dir,
        "the OLM bundle",
    )
    _build_pinned(release, bundle_spec, registry)

    context = root / "catalog-context"
    if earlier is None:
        earlier = catalog.released(catalog.CATALOG / bundle.PACKAGE / "catalog.yaml", version)
    text = catalog.render(
        version, registry, bundles=[(version, release.bundle_dir)], earlier=earlier, digests=release.digests
    )
    catalog.write(context, text)
    (context / "catalog.Dockerfile").write_text(catalog.CATALOG_DOCKERFILE)
    catalog_spec = image_tools.ImageSpec(
        f"{bundle.PACKAGE}-catalog", context / "catalog.Dockerfile", context, "the file-based catalog"
    )
    _build_pinned(release, catalog_spec, registry)
    (root / "digests.json").write_text(json.dumps(release.digests, indent=2, sort_keys=True) + "\n")
    return release


def _build_pinned(release: Release, spec: image_tools.ImageSpec, registry: str) -> None:
    """Build ``spec`` as ``<version>-pinned`` (beside the tag-form image of the same name) and
    record it under its public reference ``<registry>/<name>:<version>``."""
    built = image_tools.ensure_images([spec], version=release.version + PINNED_SUFFIX, registry=registry)
    (archive,) = built.values()
    archive = _keep(release.root, archive)
    ref = spec.ref(registry, release.version)
    release.archives[ref] = archive
    release.digests[ref] = archive_digest(archive)


def _keep(root: Path, archive: Path) -> Path:
    """A link to ``archive`` under ``root/archives``: a later build of the same tag (another
    checkout sharing the image cache) replaces the cached file, never this release's image."""
    kept = root / "archives" / archive.name
    kept.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(archive, kept)
    except OSError:  # another filesystem
        shutil.copyfile(archive, kept)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=shared.__version__)
    parser.add_argument("--registry", default=bundle.DEFAULT_REGISTRY)
    parser.add_argument("--out", type=Path, help="default: the images cache's release/<version>")
    args = parser.parse_args(argv)
    release = build(args.version, args.registry, args.out)
    for ref, digest in sorted(release.digests.items()):
        print(f"{ref}  {digest}")
    print(f"architectures (CSV labels): {', '.join(release.arches)}")
    print(f"pinned bundle, install.yaml and catalog in {release.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
