"""Each image's SPDX SBOM (syft) and preflight's container checks, on the images ``make images`` builds.

A small image made here (a dpkg database and a Python distribution) shows what syft must find;
the built images (buildah, as in test_images.py: root needed) must each have an SBOM that names
their Debian packages and, for the operators, their Python packages, and pass preflight's
offline container checks (tools/check/preflight.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import shared
from localcluster import images, sbom
from localcluster.ociimage import ImageFile, layer_tar, write_archive
from tools.check import preflight

DPKG_STATUS = b"""\
Package: hello
Status: install ok installed
Priority: optional
Section: devel
Installed-Size: 280
Maintainer: Santiago Vila <sanvila@debian.org>
Architecture: amd64
Version: 2.10-3
Description: example package based on GNU hello
"""
KOPF_METADATA = b"Metadata-Version: 2.1\nName: kopf\nVersion: 1.38.0\n"
RUNNABLE = [
    spec.name
    for spec in images.IMAGES
    if spec.name not in ("k8s-operators-py-bundle", "k8s-operators-py-catalog")
]
OPERATORS = [spec.name for spec in images.IMAGES if spec.name.endswith("-operator")]
# What each image installs from Debian on top of the base: its SBOM must name it.
DEBIAN_PACKAGE = {"netperf": "netperf", "web": "nginx"} | dict.fromkeys(OPERATORS, "python3.11")

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="building images with buildah needs root")
BUILDAH = pytest.mark.skipif(
    shutil.which("buildah") is None, reason="buildah is not installed (make system-deps)"
)


def test_syft_names_the_debian_and_python_packages_of_an_image(tmp_path):
    files = {
        "/etc/os-release": ImageFile(b'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'),
        "/var/lib/dpkg/status": ImageFile(DPKG_STATUS),
        "/venv/lib/python3.11/site-packages/kopf-1.38.0.dist-info/METADATA": ImageFile(KOPF_METADATA),
        "/venv/lib/python3.11/site-packages/kopf-1.38.0.dist-info/RECORD": ImageFile(b""),
    }
    archive = write_archive(tmp_path / "small.tar", "registry.example/small:1", layer_tar(files))
    path = sbom.ensure_sbom(archive, "registry.example/small:1")
    found = {(p.kind, p.name, p.version) for p in sbom.packages(path)}
    assert ("deb", "hello", "2.10-3") in found
    assert ("pypi", "kopf", "1.38.0") in found
    # The same archive again: the SBOM is kept, not rewritten.
    mtime = path.stat().st_mtime_ns
    assert sbom.ensure_sbom(archive) == path and path.stat().st_mtime_ns == mtime


@pytest.fixture(scope="module")
def built() -> dict[str, Path]:
    """Every runnable image, built or reused: name -> OCI archive (its SBOM beside it)."""
    archives = images.ensure_images(RUNNABLE, tool="buildah")
    return {name: archives[images.BY_NAME[name].ref()] for name in RUNNABLE}


@ROOT
@BUILDAH
@pytest.mark.timeout(1800)  # a cold first build on a busy 2-core machine
@pytest.mark.parametrize("name", RUNNABLE)
def test_each_image_has_an_sbom_naming_its_packages(built, name):
    path = sbom.sbom_path(built[name])
    found = sbom.packages(path)
    debian = {p.name for p in found if p.kind == "deb"}
    python = {p.name.lower() for p in found if p.kind == "pypi"}
    assert DEBIAN_PACKAGE[name] in debian, sorted(debian)
    assert {"base-files", "dpkg", "libc6"} <= debian
    if name in OPERATORS:
        assert {"kopf", "aiohttp", "k8s-operators"} <= python, sorted(python)
    assert f"{images.BY_NAME[name].ref()}" in path.read_text()


@ROOT
@BUILDAH
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", RUNNABLE)
def test_each_image_passes_preflights_container_checks(built, name):
    results = preflight.container_checks(preflight.read_archive(built[name]))
    assert [r.check for r in results] == list(preflight.CONTAINER_CHECKS)
    failed = [r.line() for r in results if not r.passed]
    assert not failed, "\n".join(failed)
    assert images.BY_NAME[name].ref().endswith(f":{shared.__version__}")
