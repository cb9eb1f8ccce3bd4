"""The dev cluster's registry (localcluster.registry): the distribution registry over TLS.

Starts the real ``registry`` binary (built from its pinned Go module on first use) with a
certificate from the local PKI, pushes OCI archives made here with skopeo (digests preserved) and
with buildah, pulls them back, and checks what clients without the CA, or over plain HTTP, get;
a private containerd (the real node's runtime) pulls through the mirror config the node gets.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import ociimage
from localcluster.registry import Registry, archive_digest
from tests.framework.waits import wait_for

REF = "ghcr.io/k8s-operators-py/registry-test:1.0"

pytestmark = pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo missing (make system-deps)")


def _archive(path: Path, ref: str = REF, text: bytes = b"hello\n") -> Path:
    layer = ociimage.layer_tar({"/hello.txt": ociimage.ImageFile(text)})
    return ociimage.write_archive(path, ref, layer, cmd=["cat", "/hello.txt"])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(tmp_path_factory.mktemp("registry")) as reg:
        yield reg


def _skopeo(reg: Registry, *args: str) -> str:
    proc = subprocess.run(["skopeo", *args], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_pushed_archive_is_served_under_its_digest(registry, tmp_path):
    archive = _archive(tmp_path / "img.tar")
    digest = registry.push(archive, REF)
    assert digest == archive_digest(archive)  # byte for byte: the built digest is the pulled one
    assert registry.digest(REF) == digest
    raw = _skopeo(
        registry,
        "inspect",
        "--raw",
        f"--cert-dir={registry.certs_dir}",
        f"docker://{registry.local_ref(REF)}",
    )
    assert json.loads(raw)["layers"][0]["mediaType"] == ociimage.MEDIA_LAYER
    out = tmp_path / "pulled"
    _skopeo(
        registry,
        "copy",
        "--quiet",
        "--preserve-digests",
        f"--src-cert-dir={registry.certs_dir}",
        f"docker://{registry.local_ref(REF)}",
        f"oci:{out}:pulled",
    )
    index = json.loads((out / "index.json").read_text())
    assert index["manifests"][0]["digest"] == digest
    assert ("GET", REF) in registry.pulls()


def test_pulls_by_digest_are_recorded_by_digest(registry, tmp_path):
    ref = "quay.io/k8s-operators-py/by-digest:2"
    digest = registry.push(_archive(tmp_path / "d.tar", ref, b"by digest\n"), ref)
    by_digest = f"quay.io/k8s-operators-py/by-digest@{digest}"
    assert registry.digest(by_digest) == digest
    assert ("HEAD", by_digest) in registry.pulls()


def test_docker_hub_names_get_library(registry, tmp_path):
    registry.push(_archive(tmp_path / "bb.tar", "busybox:1", b"bb\n"), "busybox:1")
    with urllib.request.urlopen(
        f"{registry.url}/v2/docker.io/library/busybox/tags/list", context=registry.ssl_context(), timeout=30
    ) as resp:
        assert json.load(resp)["tags"] == ["1"]


def test_buildah_pushes_to_it_with_the_ca(registry, tmp_path):
    archive = _archive(tmp_path / "b.tar", "localhost/buildah-push:1", b"from buildah\n")
    storage = [
        "--root",
        str(tmp_path / "root"),
        "--runroot",
        str(tmp_path / "run"),
        "--storage-driver",
        "vfs",
    ]
    target = registry.local_ref("ghcr.io/k8s-operators-py/buildah-push:1")
    for args in (
        ["pull", "--quiet", f"oci-archive:{archive}"],
        [
            "push",
            "--quiet",
            f"--cert-dir={registry.certs_dir}",
            "localhost/buildah-push:1",
            f"docker://{target}",
        ],
    ):
        proc = subprocess.run(
            ["buildah", *storage, *args], capture_output=True, text=True, timeout=300, check=False
        )
        assert proc.returncode == 0, proc.stderr
    assert registry.digest("ghcr.io/k8s-operators-py/buildah-push:1").startswith("sha256:")


def test_only_tls_with_the_ca_is_accepted(registry):
    with pytest.raises(urllib.error.URLError) as unknown_ca:
        urllib.request.urlopen(f"{registry.url}/v2/", context=ssl.create_default_context(), timeout=30)
    assert isinstance(unknown_ca.value.reason, ssl.SSLCertVerificationError)
    with pytest.raises(urllib.error.HTTPError) as plain:  # Go's TLS server: 400 to plain HTTP
        urllib.request.urlopen(f"http://{registry.address}/v2/", timeout=30)
    assert plain.value.code == 400


def test_content_survives_a_restart(tmp_path):
    archive = _archive(tmp_path / "r.tar", "ghcr.io/k8s-operators-py/restart:1", b"again\n")
    reg = Registry(tmp_path / "registry")
    with reg:
        digest = reg.push(archive, "ghcr.io/k8s-operators-py/restart:1")
    with reg:
        assert reg.digest("ghcr.io/k8s-operators-py/restart:1") == digest


CONTAINERD_CONFIG = """\
version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{d}/c.sock"
[ttrpc]
  address = "{d}/t.sock"
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("containerd") is None, reason="containerd as root")
def test_containerd_pulls_through_the_mirror_by_tag_and_digest(registry, tmp_path):
    """The node's runtime, with the hosts.toml the real node gets: a private containerd (no CRI,
    no network set-up) pulls ``ghcr.io/…`` from the registry, trusting it through the CA."""
    ref = "ghcr.io/k8s-operators-py/containerd-pull:1"
    digest = registry.push(_archive(tmp_path / "c.tar", ref, b"for containerd\n"), ref)
    hosts = registry.write_hosts_config(tmp_path / "certs.d")
    d = Path(tempfile.mkdtemp(prefix="ctrd-", dir="/tmp"))  # a short path for the socket
    (d / "config.toml").write_text(CONTAINERD_CONFIG.format(d=d))
    with (d / "containerd.log").open("w") as log:
        daemon = subprocess.Popen(["containerd", "--config", str(d / "config.toml")], stdout=log, stderr=log)
    try:
        wait_for((d / "c.sock").exists, 60, "containerd's socket")
        for wanted in (ref, f"ghcr.io/k8s-operators-py/containerd-pull@{digest}"):
            pull = [
                "ctr",
                "--address",
                str(d / "c.sock"),
                "images",
                "pull",
                "--hosts-dir",
                str(hosts),
                wanted,
            ]
            proc = subprocess.run(pull, capture_output=True, text=True, timeout=120, check=False)
            assert proc.returncode == 0, proc.stderr
        # containerd resolves a tag with HEAD, then fetches by digest.
        assert ("HEAD", ref) in registry.pulls()
        assert ("GET", f"ghcr.io/k8s-operators-py/containerd-pull@{digest}") in registry.pulls()
    finally:
        daemon.terminate()
        daemon.wait(30)
        shutil.rmtree(d, ignore_errors=True)
