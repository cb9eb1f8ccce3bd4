"""Signed images, verified at pull by containers/image, the library catalogd pulls with.

The real registry (``localcluster.registry.Registry``) holds the bundle and catalog images
``make images`` builds; cosign signs them and attaches their SBOMs with a key pair made for this
test (no transparency log). containers/image's ``copy.Image`` (``imagecopy``, the pull path of
catalogd; Debian's skopeo is built without sigstore) under the policy ``localcluster.signing``
writes (our key for our registry scope, everything else rejected) accepts them, and refuses an
image re-pushed under a signed tag, an unsigned image and one signed by another key. Needs root
and buildah for the images (as test_images.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcluster import images, signing
from localcluster.ociimage import ImageFile, layer_tar, write_archive
from localcluster.registry import Registry

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="building images with buildah needs root"),
    pytest.mark.skipif(shutil.which("buildah") is None, reason="buildah is not installed (make system-deps)"),
    pytest.mark.skipif(
        shutil.which("skopeo") is None, reason="skopeo (the registry's push) is not installed"
    ),
    pytest.mark.timeout(1800),  # a cold first build of the images on a busy 2-core machine
]
SIGNED = ("k8s-operators-py-bundle", "k8s-operators-py-catalog")
PREFIX = "ghcr.io/k8s-operators-py"
REJECTED = "Source image rejected"


@dataclass
class Setup:
    registry: Registry
    key: Path
    public: Path
    other_key: Path
    policy_dir: Path
    archives: dict[str, Path]  # image name -> OCI archive
    signed: dict[str, str]  # image name -> local reference by digest

    def pull(self, ref: str, dest: Path) -> subprocess.CompletedProcess[str]:
        """containers/image's copy under our policy, from the registry into an OCI layout."""
        return signing.copy_under_policy(ref, dest, self.policy_dir, cert_dir=self.registry.certs_dir)

    def sign(self, ref: str, key: Path | None = None) -> None:
        signing.sign(ref, key=key or self.key, ca_file=self.registry.ca_file)

    def by_digest(self, public_ref: str, digest: str) -> str:
        return f"{self.registry.local_ref(public_ref).rsplit(':', 1)[0]}@{digest}"


def small_archive(path: Path, text: bytes) -> Path:
    """A one-file image whose content (and so digest) is ``text``: what an attacker re-pushes."""
    return write_archive(path, f"{PREFIX}/small:1", layer_tar({"/payload": ImageFile(text)}), user="65532")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("signing")
    built = images.ensure_images(list(SIGNED), tool="buildah")
    archives = {name: built[images.BY_NAME[name].ref()] for name in SIGNED}
    key, public = signing.ensure_key_pair(root / "ours")
    other_key, _ = signing.ensure_key_pair(root / "theirs")
    with Registry(root / "registry") as registry:
        scope = f"{registry.address}/{PREFIX}"
        policy_dir = root / "policy"
        signing.write_policy_files(policy_dir, [scope], public)
        s = Setup(registry, key, public, other_key, policy_dir, archives, {})
        for name, archive in archives.items():
            public_ref = images.BY_NAME[name].ref()
            ref = s.by_digest(public_ref, registry.push(archive, public_ref))
            signing.sign_and_attest(ref, archive, key=key, ca_file=registry.ca_file)
            s.signed[name] = ref
        yield s


@pytest.mark.parametrize("name", SIGNED)
def test_signed_bundle_and_catalog_are_accepted_by_tag_and_by_digest(setup, name, tmp_path):
    by_tag = setup.registry.local_ref(images.BY_NAME[name].ref())
    for ref in (by_tag, setup.signed[name]):
        pulled = setup.pull(ref, tmp_path / "out")
        assert pulled.returncode == 0, pulled.stderr


@pytest.mark.parametrize("name", SIGNED)
def test_cosign_verifies_the_signature_and_the_sbom_attestation(setup, name):
    ref = setup.signed[name]
    (payload,) = signing.verify(ref, public_key=setup.public, ca_file=setup.registry.ca_file)
    assert payload["critical"]["image"]["docker-manifest-digest"] == ref.split("@", 1)[1]
    (statement,) = signing.verify_attestation(ref, public_key=setup.public, ca_file=setup.registry.ca_file)
    assert statement["predicateType"] == "https://spdx.dev/Document"
    assert statement["subject"][0]["digest"]["sha256"] == ref.split("@sha256:", 1)[1]
    assert statement["predicate"]["name"] == images.BY_NAME[name].ref()


def test_an_image_repushed_under_a_signed_tag_is_refused(setup, tmp_path):
    public_ref = f"{PREFIX}/tampered-catalog:0.1.0"
    original = setup.registry.push(setup.archives["k8s-operators-py-catalog"], public_ref)
    setup.sign(setup.by_digest(public_ref, original))
    local = setup.registry.local_ref(public_ref)
    assert setup.pull(local, tmp_path / "before").returncode == 0
    # Different content under the same tag: its digest is one no signature covers.
    tampered = setup.registry.push(small_archive(tmp_path / "evil.tar", b"not the catalog"), public_ref)
    assert tampered != original
    refused = setup.pull(local, tmp_path / "after")
    assert refused.returncode != 0 and REJECTED in refused.stderr, refused.stderr
    # What was signed is still accepted by its digest.
    assert setup.pull(setup.by_digest(public_ref, original), tmp_path / "original").returncode == 0


def test_an_unsigned_image_is_refused(setup, tmp_path):
    public_ref = f"{PREFIX}/unsigned:0.1.0"
    setup.registry.push(setup.archives["k8s-operators-py-bundle"], public_ref)
    refused = setup.pull(setup.registry.local_ref(public_ref), tmp_path / "out")
    assert refused.returncode != 0 and REJECTED in refused.stderr, refused.stderr


def test_an_image_signed_by_another_key_is_refused(setup, tmp_path):
    public_ref = f"{PREFIX}/other-key:0.1.0"
    ref = setup.by_digest(
        public_ref, setup.registry.push(small_archive(tmp_path / "x.tar", b"x"), public_ref)
    )
    setup.sign(ref, setup.other_key)
    refused = setup.pull(ref, tmp_path / "out")
    assert refused.returncode != 0 and REJECTED in refused.stderr, refused.stderr
    with pytest.raises(subprocess.CalledProcessError):
        signing.verify(ref, public_key=setup.public, ca_file=setup.registry.ca_file)


def test_images_outside_our_scope_are_rejected_by_default(setup, tmp_path):
    # Another repository of the same registry, outside the scope the policy names.
    public_ref = "quay.io/someone/else:1"
    setup.registry.push(small_archive(tmp_path / "y.tar", b"y"), public_ref)
    refused = setup.pull(setup.registry.local_ref(public_ref), tmp_path / "out")
    assert refused.returncode != 0 and REJECTED in refused.stderr, refused.stderr
