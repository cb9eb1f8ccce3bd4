"""A release pinned by digest (tools.generate.bundle ``digests``, tools.generate.catalog): every
image of the release by digest in the CSV, relatedImages, RELATED_IMAGE_* and install.yaml; the
operators run what RELATED_IMAGE_* names; OpenShift's feature annotations all present."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from operators import descriptions
from operators.netperf import desired as netperf_desired
from operators.netperf.schema import DEFAULT_IMAGE
from tools.generate import bundle

REGISTRY = bundle.DEFAULT_REGISTRY
VERSION = "0.1.0"
DIGEST = re.compile(r"^[a-z0-9./-]+@sha256:[0-9a-f]{64}$")


def release_refs(version: str = VERSION) -> list[str]:
    ops = descriptions()
    return [
        *(bundle.image(REGISTRY, op.name, version) for op in ops),
        *(bundle.operand_ref(i, version) for op in ops for i in op.images),
    ]


@pytest.fixture(scope="module")
def digests() -> dict[str, str]:
    return {ref: "sha256:" + f"{n:x}" * 64 for n, ref in enumerate(release_refs(), start=1)}


def images_in(doc: object) -> list[str]:
    """Every ``image``/``containerImage`` value and RELATED_IMAGE_* env value in ``doc``."""
    found: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in ("image", "containerImage") and isinstance(value, str):
                found.append(value)
            elif key == "env" and isinstance(value, list):
                found += [e["value"] for e in value if e["name"].startswith("RELATED_IMAGE_")]
            else:
                found += images_in(value)
    elif isinstance(doc, list):
        for item in doc:
            found += images_in(item)
    return found


def test_every_image_of_a_pinned_csv_is_by_the_digest_built(digests):
    csv = bundle.csv(VERSION, REGISTRY, digests)
    spec = csv["spec"]
    deployments = spec["install"]["spec"]["deployments"]
    found = (
        images_in(deployments)
        + images_in(spec["relatedImages"])
        + [csv["metadata"]["annotations"]["containerImage"]]
    )
    assert found and all(DIGEST.match(ref) for ref in found), found
    assert {r["image"] for r in spec["relatedImages"]} == {bundle.pinned(r, digests) for r in release_refs()}
    # Each operator's container by its own image's digest.
    for op, dep in zip(descriptions(), deployments, strict=True):
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        ref = bundle.image(REGISTRY, op.name, VERSION)
        assert container["image"] == f"{ref.rsplit(':', 1)[0]}@{digests[ref]}"


def test_install_yaml_pins_the_same_images(digests):
    docs = bundle.plain_install(VERSION, REGISTRY, digests=digests)
    found = images_in([d for d in docs if d["kind"] == "Deployment"])
    assert found and all(DIGEST.match(ref) for ref in found), found


def test_a_missing_digest_is_an_error_naming_the_image():
    with pytest.raises(KeyError, match=re.escape("netperf-operator:0.1.0")):
        bundle.csv(VERSION, REGISTRY, {})


def test_every_operand_image_has_a_related_image_variable_its_operator_reads(digests):
    ops = {op.name: op for op in descriptions()}
    (netperf_image,) = ops["netperf"].images
    assert bundle.related_env(netperf_image) == netperf_desired.RELATED_IMAGE_ENV
    for op, dep in zip(
        descriptions(),
        bundle.csv(VERSION, REGISTRY, digests)["spec"]["install"]["spec"]["deployments"],
        strict=True,
    ):
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        for img in op.images:
            assert env[bundle.related_env(img)] == bundle.pinned(bundle.operand_ref(img, VERSION), digests)


def test_the_committed_bundle_names_images_by_tag_and_the_variables_too():
    text = (bundle.BUNDLE / "manifests" / f"{bundle.PACKAGE}.clusterserviceversion.yaml").read_text()
    csv = yaml.safe_load(text)
    assert "@sha256:" not in text  # digests are computed per build (tools/generate/release.py)
    refs = set(images_in(csv["spec"]["install"]["spec"]["deployments"]))
    assert refs == set(release_refs())


@given(
    pinned=st.sampled_from(["", "  ", "ghcr.io/k8s-operators-py/netperf@sha256:" + "b" * 64]),
    image=st.sampled_from([DEFAULT_IMAGE, "example.com/netperf:2.7", "netperf@sha256:" + "c" * 64]),
)
def test_netperf_pods_run_the_pinned_image_only_in_place_of_the_default(pinned, image):
    env = {netperf_desired.RELATED_IMAGE_ENV: pinned}
    got = netperf_desired.run_image({"image": image}, env)
    assert got == (pinned.strip() if image == DEFAULT_IMAGE and pinned.strip() else image)
    assert netperf_desired.run_image({}, env) == (pinned.strip() or DEFAULT_IMAGE)


def test_the_pods_made_take_their_image_from_run_image(monkeypatch):
    pinned = "ghcr.io/k8s-operators-py/netperf@sha256:" + "d" * 64
    monkeypatch.setenv(netperf_desired.RELATED_IMAGE_ENV, pinned)
    owner = {
        "apiVersion": "app.example.com/v1alpha1",
        "kind": "Netperf",
        "metadata": {"name": "np", "namespace": "ns", "uid": "u", "generation": 1},
    }
    server = netperf_desired.server_pod(owner, {})
    client = netperf_desired.client_pod(owner, {}, "10.0.0.1")
    assert [c["image"] for p in (server, client) for c in p["spec"]["containers"]] == [pinned, pinned]


def test_every_required_feature_annotation_is_true_or_false():
    annotations = bundle.csv(VERSION, REGISTRY)["metadata"]["annotations"]
    required = (
        "disconnected",
        "fips-compliant",
        "proxy-aware",
        "tls-profiles",
        "token-auth-aws",
        "token-auth-azure",
        "token-auth-gcp",
    )
    for name in required:
        assert annotations[f"features.operators.openshift.io/{name}"] in ("true", "false"), name


def test_the_csv_arch_labels_are_the_architectures_given():
    labels = bundle.csv(VERSION, REGISTRY, arches=["arm64", "amd64"])["metadata"]["labels"]
    assert {k for k in labels if k.startswith("operatorframework.io/arch.")} == {
        "operatorframework.io/arch.amd64",
        "operatorframework.io/arch.arm64",
    }
    assert (
        bundle.csv(VERSION, REGISTRY)["metadata"]["labels"]["operatorframework.io/arch.amd64"] == "supported"
    )


def test_architectures_come_from_the_image_config_or_the_index_platforms(tmp_path):
    from localcluster import ociimage
    from tools.generate import release

    layer = ociimage.layer_tar({"/a": ociimage.ImageFile(b"a")})
    single = ociimage.write_archive(tmp_path / "one.tar", "ghcr.io/x/y:1", layer)
    assert release.architectures(single) == {ociimage.oci_arch()}

    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": ociimage.MEDIA_MANIFEST,
                    "digest": "sha256:" + "1" * 64,
                    "size": 1,
                    "platform": p,
                }
                for p in ({"architecture": "amd64", "os": "linux"}, {"architecture": "arm64", "os": "linux"})
            ],
        }
    ).encode()
    digest = "sha256:" + hashlib.sha256(index).hexdigest()
    top = json.dumps({"schemaVersion": 2, "manifests": [{"digest": digest, "size": len(index)}]}).encode()
    listed = tmp_path / "list.tar"
    with tarfile.open(listed, "w") as tar:
        for name, data in (("index.json", top), ("blobs/sha256/" + digest.split(":")[1], index)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert release.architectures(listed) == {"amd64", "arm64"}
