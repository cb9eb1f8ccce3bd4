"""The file-based catalog: a release keeps every published bundle and adds an upgrade edge.

Uses opm built from the pinned module (``localcluster.gotools``), offline.
"""

from pathlib import Path

import yaml

from tools.generate import bundle, catalog

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "catalog" / bundle.PACKAGE / "catalog.yaml"


def docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_the_committed_catalog_is_what_make_catalog_renders():
    text = catalog.render(
        bundle.RELEASED[-1], bundle.DEFAULT_REGISTRY, earlier=catalog.released(COMMITTED, "0.1.0")
    )
    assert text == COMMITTED.read_text()


def test_the_next_release_keeps_the_published_bundle_and_replaces_it(tmp_path):
    earlier = catalog.released(COMMITTED, "0.1.1")
    published = [d for d in docs(COMMITTED.read_text()) if d["schema"] == "olm.bundle"]
    assert list(earlier.bundles) == published  # byte for byte as published, not re-rendered
    bundle_dir = bundle.render_into(tmp_path / "release", "0.1.1", bundle.DEFAULT_REGISTRY)
    text = catalog.render("0.1.1", bundle.DEFAULT_REGISTRY, bundles=[("0.1.1", bundle_dir)], earlier=earlier)
    rendered = docs(text)
    (channel,) = [d for d in rendered if d["schema"] == "olm.channel"]
    assert channel["entries"] == [
        {"name": "k8s-operators-py.v0.1.0"},
        {"name": "k8s-operators-py.v0.1.1", "replaces": "k8s-operators-py.v0.1.0"},
    ]
    images = [d["image"] for d in rendered if d["schema"] == "olm.bundle"]
    assert images == [f"{bundle.DEFAULT_REGISTRY}/{bundle.PACKAGE}-bundle:{v}" for v in ("0.1.0", "0.1.1")]
    catalog.write(tmp_path / "ctx", text)  # opm validate passes (raises otherwise)


def test_a_version_not_released_is_not_kept(tmp_path):
    other = tmp_path / "catalog.yaml"
    text = COMMITTED.read_text().replace("version: 0.1.0", "version: 0.0.9")
    other.write_text(text)
    assert catalog.released(other, "0.1.1").bundles == ()
    assert catalog.released(tmp_path / "missing.yaml", "0.1.1").bundles == ()
