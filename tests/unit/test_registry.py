"""What localcluster.registry writes for its clients: reference names, containerd's hosts.toml,
containers-registries.conf (the registry process itself: tests/integration/test_registry.py)."""

import tomllib
from pathlib import Path

import pytest

from localcluster.registry import Registry, normalize_reference

REF = "ghcr.io/k8s-operators-py/test:1.0"


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "registry", port=5443)  # names only: nothing is started


def test_reference_normalisation():
    assert normalize_reference("busybox:1") == "docker.io/library/busybox:1"
    assert normalize_reference("busybox") == "docker.io/library/busybox:latest"
    assert normalize_reference("index.docker.io/foo/bar:2") == "docker.io/foo/bar:2"
    assert normalize_reference("localhost:5000/x") == "localhost:5000/x:latest"
    assert normalize_reference(REF) == REF
    digest = "sha256:" + "a" * 64
    assert normalize_reference(f"quay.io/a/b@{digest}") == f"quay.io/a/b@{digest}"
    with pytest.raises(ValueError):
        normalize_reference("Bad/Name:1")


def test_local_names_keep_the_upstream_host_as_a_path_prefix(registry):
    assert registry.url == "https://127.0.0.1:5443"
    assert registry.local_ref(REF) == f"127.0.0.1:5443/{REF}"
    assert registry.local_ref("busybox:1") == "127.0.0.1:5443/docker.io/library/busybox:1"


def test_hosts_config_mirrors_each_host_under_its_prefix_over_tls(registry, tmp_path):
    out = registry.write_hosts_config(tmp_path / "certs.d")
    assert out == tmp_path / "certs.d"
    assert sorted(p.name for p in out.iterdir()) == ["docker.io", "ghcr.io", "quay.io"]
    servers = {}
    for host in ("ghcr.io", "quay.io", "docker.io"):
        config = tomllib.loads((out / host / "hosts.toml").read_text())
        servers[host] = config["server"]
        assert config["host"] == {
            f"https://127.0.0.1:5443/v2/{host}": {
                "capabilities": ["pull", "resolve"],
                "ca": str(registry.ca_file),
                "override_path": True,
            }
        }
    assert servers == {
        "ghcr.io": "https://ghcr.io",
        "quay.io": "https://quay.io",
        "docker.io": "https://registry-1.docker.io",
    }


def test_registries_conf_mirrors_each_host_under_its_prefix(registry):
    conf = tomllib.loads(registry.registries_conf(("ghcr.io", "index.docker.io")))
    assert conf["registry"] == [
        {"prefix": "ghcr.io", "location": "ghcr.io", "mirror": [{"location": "127.0.0.1:5443/ghcr.io"}]},
        {
            "prefix": "docker.io",
            "location": "docker.io",
            "mirror": [{"location": "127.0.0.1:5443/docker.io"}],
        },
    ]


def test_an_unstarted_registry_has_no_address(tmp_path):
    with pytest.raises(RuntimeError, match="not started"):
        _ = Registry(tmp_path).address
