"""The read-only registry stand-in (localcluster.registry) against archives made here."""

import hashlib
import http.client
import io
import json
import tarfile
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from localcluster import ociimage
from localcluster.registry import ImageRegistry, normalize_reference

REF = "ghcr.io/k8s-operators-py/test:1.0"


def _archive(path: Path, ref: str = REF, text: bytes = b"hello\n") -> Path:
    layer = ociimage.layer_tar({"/hello.txt": ociimage.ImageFile(text)})
    return ociimage.write_archive(path, ref, layer, cmd=["cat", "/hello.txt"])


def _rewrite_index(path: Path, change) -> Path:
    """Copy of the archive ``path`` with index.json replaced by ``change(index) -> (index, extra
    blobs)``, written next to it."""
    members = []
    with tarfile.open(path) as tar:
        for m in tar:
            data = tar.extractfile(m).read() if m.isreg() else b""
            members.append((m, data))
    out = path.with_name("rewritten-" + path.name)
    index = json.loads(next(d for m, d in members if m.name == "index.json"))
    index, extra = change(index)
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for m, content in members:
            data = json.dumps(index).encode() if m.name == "index.json" else content
            m.size = len(data)
            tar.addfile(m, io.BytesIO(data) if m.isreg() else None)
        for data in extra:
            info = tarfile.TarInfo("blobs/sha256/" + hashlib.sha256(data).hexdigest())
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def _get(url: str, method: str = "GET", headers: dict | None = None):
    """(status, headers, body) without raising on HTTP errors."""
    req = urllib.request.Request(
        url, method=method, headers=headers or {}, data=b"" if method == "PUT" else None
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers, e.read()


def _error_code(body: bytes) -> str:
    return json.loads(body)["errors"][0]["code"]


@pytest.fixture
def registry(tmp_path):
    with ImageRegistry() as reg:
        reg.add(_archive(tmp_path / "img.tar"))
        yield reg
    assert reg._server is None


def _url(reg: ImageRegistry, path: str) -> str:
    return f"http://{reg.address}{path}"


def _manifest(reg: ImageRegistry) -> tuple[bytes, str]:
    status, headers, body = _get(_url(reg, "/v2/k8s-operators-py/test/manifests/1.0?ns=ghcr.io"))
    assert status == 200
    return body, headers["Docker-Content-Digest"]


def test_reference_normalisation():
    assert normalize_reference("busybox:1") == "docker.io/library/busybox:1"
    assert normalize_reference("busybox") == "docker.io/library/busybox:latest"
    assert normalize_reference("index.docker.io/foo/bar:2") == "docker.io/foo/bar:2"
    assert normalize_reference("localhost:5000/x") == "localhost:5000/x:latest"
    assert normalize_reference(REF) == REF
    with pytest.raises(ValueError):
        normalize_reference("Bad/Name:1")


def test_base_endpoint(registry):
    for method in ("GET", "HEAD"):
        status, headers, body = _get(_url(registry, "/v2/"), method)
        assert status == 200
        assert headers["Docker-Distribution-API-Version"] == "registry/2.0"
        assert body == (b"{}" if method == "GET" else b"")


def test_add_returns_refs_and_address(registry, tmp_path):
    assert registry.refs() == [REF]
    assert registry.address.startswith("127.0.0.1:")
    assert int(registry.address.rsplit(":", 1)[1]) > 0
    assert registry.add(_archive(tmp_path / "bb.tar", "busybox:1")) == ["docker.io/library/busybox:1"]
    assert registry.refs() == ["docker.io/library/busybox:1", REF]


def test_manifest_by_tag_with_and_without_ns_and_by_digest(registry, tmp_path):
    body, digest = _manifest(registry)
    assert digest == "sha256:" + hashlib.sha256(body).hexdigest()
    manifest = json.loads(body)
    assert manifest["mediaType"] == ociimage.MEDIA_MANIFEST
    # Exactly the blob the archive holds.
    with tarfile.open(tmp_path / "img.tar") as tar:
        assert tar.extractfile(f"blobs/sha256/{digest[7:]}").read() == body

    status, headers, body2 = _get(_url(registry, "/v2/k8s-operators-py/test/manifests/1.0"))
    assert (status, body2) == (200, body)
    assert headers["Content-Type"] == ociimage.MEDIA_MANIFEST
    assert headers["Content-Length"] == str(len(body))

    for path in (
        f"/v2/k8s-operators-py/test/manifests/{digest}?ns=ghcr.io",
        f"/v2/ghcr.io/k8s-operators-py/test/manifests/{digest}",
    ):
        status, headers, body3 = _get(_url(registry, path))
        assert (status, body3) == (200, body)
        assert headers["Docker-Content-Digest"] == digest


def test_every_blob_downloads_with_its_digest(registry):
    manifest = json.loads(_manifest(registry)[0])
    descriptors = [manifest["config"], *manifest["layers"]]
    assert len(descriptors) == 2
    for desc in descriptors:
        status, headers, body = _get(
            _url(registry, f"/v2/k8s-operators-py/test/blobs/{desc['digest']}?ns=ghcr.io")
        )
        assert status == 200
        assert "sha256:" + hashlib.sha256(body).hexdigest() == desc["digest"]
        assert len(body) == desc["size"] == int(headers["Content-Length"])
        assert headers["Content-Type"] == "application/octet-stream"
        assert headers["Docker-Content-Digest"] == desc["digest"]


def test_head_has_length_but_no_body(registry):
    body, digest = _manifest(registry)
    status, headers, head_body = _get(
        _url(registry, "/v2/k8s-operators-py/test/manifests/1.0?ns=ghcr.io"), "HEAD"
    )
    assert (status, head_body) == (200, b"")
    assert headers["Content-Length"] == str(len(body))
    assert headers["Docker-Content-Digest"] == digest
    layer = json.loads(body)["layers"][0]
    status, headers, head_body = _get(
        _url(registry, f"/v2/k8s-operators-py/test/blobs/{layer['digest']}"), "HEAD"
    )
    assert (status, head_body) == (200, b"")
    assert headers["Content-Length"] == str(layer["size"])


def test_head_sends_no_body_on_a_kept_alive_connection(registry):
    # A body after HEAD's headers would be read as the next response's status line.
    conn = http.client.HTTPConnection(registry.address, timeout=10)
    try:
        for _ in range(2):
            conn.request("HEAD", "/v2/k8s-operators-py/test/manifests/1.0?ns=ghcr.io")
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, b"")
            assert int(resp.headers["Content-Length"]) > 0
            conn.request("GET", "/v2/")
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, b"{}")
    finally:
        conn.close()


def test_range_request_resumes_a_blob(registry):
    layer = json.loads(_manifest(registry)[0])["layers"][0]
    url = _url(registry, f"/v2/k8s-operators-py/test/blobs/{layer['digest']}")
    full = _get(url)[2]
    status, headers, tail = _get(url, headers={"Range": "bytes=100-"})
    assert status == 206
    assert tail == full[100:]
    assert headers["Content-Range"] == f"bytes 100-{len(full) - 1}/{len(full)}"
    status, _, part = _get(url, headers={"Range": "bytes=10-19"})
    assert (status, part) == (206, full[10:20])
    assert _get(url, headers={"Range": f"bytes={len(full)}-"})[0] == 416


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/v2/k8s-operators-py/test/manifests/2.0?ns=ghcr.io", "MANIFEST_UNKNOWN"),
        ("/v2/k8s-operators-py/test/manifests/sha256:" + "0" * 64, "MANIFEST_UNKNOWN"),
        ("/v2/k8s-operators-py/test/blobs/sha256:" + "0" * 64, "BLOB_UNKNOWN"),
        ("/v2/k8s-operators-py/other/manifests/1.0?ns=ghcr.io", "NAME_UNKNOWN"),
        ("/v2/k8s-operators-py/test/manifests/1.0?ns=quay.io", "NAME_UNKNOWN"),
        ("/v2/nothing/blobs/sha256:" + "0" * 64, "NAME_UNKNOWN"),
    ],
)
def test_unknown_is_404_with_oci_error(registry, path, code):
    status, headers, body = _get(_url(registry, path))
    assert status == 404
    assert headers["Content-Type"] == "application/json"
    assert _error_code(body) == code


@pytest.mark.parametrize("method", ["PUT", "POST", "DELETE", "PATCH"])
def test_writes_are_405(registry, method):
    status, _, body = _get(_url(registry, "/v2/k8s-operators-py/test/manifests/1.0"), method)
    assert status == 405
    assert _error_code(body) == "UNSUPPORTED"
    assert registry.refs() == [REF]


def test_pulls_record_manifests_and_blobs(registry):
    assert registry.pulls == []
    body, digest = _manifest(registry)
    config = json.loads(body)["config"]["digest"]
    _get(_url(registry, f"/v2/k8s-operators-py/test/blobs/{config}"), "HEAD")
    _get(_url(registry, f"/v2/k8s-operators-py/test/manifests/{digest}?ns=ghcr.io"))
    _get(_url(registry, "/v2/k8s-operators-py/test/manifests/nope?ns=ghcr.io"))  # not served: not recorded
    assert registry.pulls == [
        ("GET", REF),
        ("HEAD", config),
        ("GET", f"ghcr.io/k8s-operators-py/test@{digest}"),
    ]


def test_hosts_config_mirrors_to_the_registry(registry, tmp_path):
    out = registry.write_hosts_config(tmp_path / "certs.d")
    assert out == tmp_path / "certs.d"
    assert sorted(p.name for p in out.iterdir()) == ["docker.io", "ghcr.io", "quay.io"]
    servers = {}
    for host in ("ghcr.io", "quay.io", "docker.io"):
        config = tomllib.loads((out / host / "hosts.toml").read_text())
        servers[host] = config["server"]
        assert config["host"] == {f"http://{registry.address}": {"capabilities": ["pull", "resolve"]}}
    assert servers == {
        "ghcr.io": "https://ghcr.io",
        "quay.io": "https://quay.io",
        "docker.io": "https://registry-1.docker.io",
    }


def test_remove_makes_the_tag_unknown(registry):
    assert _get(_url(registry, "/v2/k8s-operators-py/test/manifests/1.0?ns=ghcr.io"))[0] == 200
    registry.remove(REF)
    assert registry.refs() == []
    status, _, body = _get(_url(registry, "/v2/k8s-operators-py/test/manifests/1.0?ns=ghcr.io"))
    assert status == 404
    assert _error_code(body) == "NAME_UNKNOWN"
    with pytest.raises(KeyError):
        registry.remove(REF)


def test_docker_hub_names_via_ns_and_without(registry, tmp_path):
    registry.add(_archive(tmp_path / "bb.tar", "busybox:1"))
    status, _, by_ns = _get(_url(registry, "/v2/library/busybox/manifests/1?ns=docker.io"))
    assert status == 200
    assert _get(_url(registry, "/v2/busybox/manifests/1"))[2] == by_ns
    assert _get(_url(registry, "/v2/library/busybox/manifests/1"))[2] == by_ns
    status, _, body = _get(_url(registry, "/v2/busybox/tags/list?ns=docker.io"))
    assert json.loads(body)["tags"] == ["1"]


def test_tag_only_archive_needs_ref(registry, tmp_path):
    def tag_only(index):
        for desc in index["manifests"]:
            del desc["annotations"]["io.containerd.image.name"]
        return index, []

    archive = _rewrite_index(_archive(tmp_path / "t.tar", "x.example/ignored:7"), tag_only)
    with pytest.raises(ValueError, match="pass ref="):
        registry.add(archive)
    # A ref without a tag takes the archive's own tag.
    assert registry.add(archive, "quay.io/k8s-operators-py/named") == ["quay.io/k8s-operators-py/named:7"]
    assert _get(_url(registry, "/v2/k8s-operators-py/named/manifests/7?ns=quay.io"))[0] == 200


def test_manifests_inside_an_image_index_are_served_by_digest(registry, tmp_path):
    nested: dict = {}

    def wrap_in_index(index):
        inner = {"schemaVersion": 2, "mediaType": ociimage.MEDIA_INDEX, "manifests": index["manifests"]}
        data = json.dumps(inner).encode()
        nested.update(
            manifest=index["manifests"][0]["digest"], index="sha256:" + hashlib.sha256(data).hexdigest()
        )
        top = {
            "mediaType": ociimage.MEDIA_INDEX,
            "digest": nested["index"],
            "size": len(data),
            "annotations": {"org.opencontainers.image.ref.name": "ghcr.io/k8s-operators-py/multi:2"},
        }
        return {"schemaVersion": 2, "manifests": [top]}, [data]

    archive = _rewrite_index(_archive(tmp_path / "m.tar", text=b"multi\n"), wrap_in_index)
    assert registry.add(archive) == ["ghcr.io/k8s-operators-py/multi:2"]
    status, headers, _ = _get(_url(registry, "/v2/k8s-operators-py/multi/manifests/2?ns=ghcr.io"))
    assert (status, headers["Content-Type"]) == (200, ociimage.MEDIA_INDEX)
    assert headers["Docker-Content-Digest"] == nested["index"]
    status, headers, body = _get(
        _url(registry, f"/v2/k8s-operators-py/multi/manifests/{nested['manifest']}?ns=ghcr.io")
    )
    assert (status, headers["Content-Type"]) == (200, ociimage.MEDIA_MANIFEST)
    assert "sha256:" + hashlib.sha256(body).hexdigest() == nested["manifest"]


def test_rewritten_archive_is_reread(registry, tmp_path):
    before = _manifest(registry)[1]
    _archive(tmp_path / "img.tar", text=b"rebuilt\n")  # same path, same ref, new content
    after = _manifest(registry)[1]
    assert after != before
    manifest = json.loads(_get(_url(registry, f"/v2/k8s-operators-py/test/manifests/{after}?ns=ghcr.io"))[2])
    layer = manifest["layers"][0]["digest"]
    body = _get(_url(registry, f"/v2/k8s-operators-py/test/blobs/{layer}?ns=ghcr.io"))[2]
    assert "sha256:" + hashlib.sha256(body).hexdigest() == layer


def test_stop_is_idempotent_and_start_serves_again(tmp_path):
    reg = ImageRegistry()
    with pytest.raises(RuntimeError):
        _ = reg.address
    reg.start()
    reg.add(_archive(tmp_path / "img.tar"))
    assert _get(_url(reg, "/v2/"))[0] == 200
    reg.stop()
    reg.stop()
    with pytest.raises(RuntimeError):
        _ = reg.address
    with reg:
        assert _get(_url(reg, "/v2/k8s-operators-py/test/manifests/1.0?ns=ghcr.io"))[0] == 200
