"""A release pinned by digest (tools/generate/release.py), built for real and pushed to the registry.

Builds (or reuses) every image with buildah, the bundle and catalog rendered with their digests,
then reads what the bundle and catalog *images* hold: the CSV names each image by the digest of
the archive built for it, the catalog names the bundle image by its digest, and the registry
serves every image under exactly that digest. Needs root and buildah (CI has both).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from localcluster.registry import Registry, archive_digest
from tools.generate import bundle, release

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="building images with buildah needs root"),
    pytest.mark.skipif(shutil.which("buildah") is None, reason="buildah is not installed (make system-deps)"),
    pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo is not installed (make system-deps)"),
    pytest.mark.timeout(1800),  # a cold build on a busy machine
]
VERSION = "0.1.0"
REGISTRY = bundle.DEFAULT_REGISTRY


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> release.Release:
    return release.build(VERSION, REGISTRY, tmp_path_factory.mktemp("release") / VERSION)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(tmp_path_factory.mktemp("registry")) as reg:
        yield reg


def image_file(archive: Path, path: str) -> bytes:
    """The file ``path`` as the image's layers leave it (the last layer holding it wins)."""
    found = None
    with tarfile.open(archive) as outer:

        def blob(digest: str) -> bytes:
            member = outer.extractfile("blobs/" + digest.replace(":", "/", 1))
            assert member is not None, digest
            return member.read()

        (top,) = json.loads(blob_index(outer))["manifests"]
        manifest = json.loads(blob(top["digest"]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=io.BytesIO(blob(layer["digest"])), mode="r:*") as tar:
                for member in tar:
                    if member.name.lstrip("./") == path and member.isfile():
                        extracted = tar.extractfile(member)
                        assert extracted is not None
                        found = extracted.read()
    assert found is not None, f"{path} not in {archive}"
    return found


def blob_index(outer: tarfile.TarFile) -> bytes:
    member = outer.extractfile("index.json")
    assert member is not None
    return member.read()


def test_the_digests_are_the_built_archives_and_the_registry_serves_them(built, registry):
    assert set(built.digests) == set(built.archives)
    assert json.loads((built.root / "digests.json").read_text()) == built.digests
    for ref, archive in built.archives.items():
        assert archive_digest(archive) == built.digests[ref]
        assert registry.push(archive, ref) == built.digests[ref]
        assert registry.digest(ref) == built.digests[ref]
        assert registry.digest(built.pinned(ref)) == built.digests[ref]


def test_the_bundle_image_names_every_image_by_the_digest_built(built):
    archive = built.archives[f"{REGISTRY}/{bundle.PACKAGE}-bundle:{VERSION}"]
    csv = yaml.safe_load(image_file(archive, f"manifests/{bundle.PACKAGE}.clusterserviceversion.yaml"))
    leaves = {ref for ref in built.digests if not ref.split("/")[-1].startswith(bundle.PACKAGE)}
    related = {r["image"] for r in csv["spec"]["relatedImages"]}
    assert related == {built.pinned(ref) for ref in leaves if not ref.endswith(f"/web:{VERSION}")}
    for dep in csv["spec"]["install"]["spec"]["deployments"]:
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        assert container["image"] == built.pinned(f"{REGISTRY}/{dep['name']}:{VERSION}")
        for env in container["env"]:
            if env["name"].startswith("RELATED_IMAGE_"):
                assert env["value"] in related
    assert {k for k in csv["metadata"]["labels"] if "/arch." in k} == {
        f"operatorframework.io/arch.{a}" for a in built.arches
    }


def test_the_catalog_image_names_the_bundle_by_its_digest(built):
    archive = built.archives[f"{REGISTRY}/{bundle.PACKAGE}-catalog:{VERSION}"]
    docs = list(yaml.safe_load_all(image_file(archive, f"configs/{bundle.PACKAGE}/catalog.yaml")))
    (entry,) = [d for d in docs if d and d.get("schema") == "olm.bundle"]
    assert entry["image"] == built.pinned(f"{REGISTRY}/{bundle.PACKAGE}-bundle:{VERSION}")


def test_the_pinned_install_yaml_runs_the_same_digests(built):
    docs = [d for d in yaml.safe_load_all((built.root / "deploy" / "install.yaml").read_text()) if d]
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        assert container["image"] == built.pinned(f"{REGISTRY}/{dep['metadata']['name']}:{VERSION}")
