from localcluster import binaries

GOMOD = """module k8s.io/kubernetes

go 1.24.0

require (
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/cri-client => ./staging/src/k8s.io/cri-client
\tgithub.com/other/thing => github.com/fork/thing v1.0.0
)
"""


def test_wrapper_replaces_every_staging_module_with_published_tag():
    mod = binaries.wrapper_gomod("v1.34.4", GOMOD)
    assert "require k8s.io/kubernetes v1.34.4" in mod
    assert "\tk8s.io/api => k8s.io/api v0.34.4" in mod
    assert "\tk8s.io/cri-client => k8s.io/cri-client v0.34.4" in mod
    assert "github.com/other" not in mod


def test_versions_overridable(monkeypatch):
    monkeypatch.delenv("K8S_VERSION", raising=False)
    assert binaries.k8s_version() == binaries.DEFAULT_K8S_VERSION
    monkeypatch.setenv("K8S_VERSION", "v1.35.4")
    assert binaries.k8s_version() == "v1.35.4"
    monkeypatch.setenv("K8S_VERSION", "")
    assert binaries.k8s_version() == binaries.DEFAULT_K8S_VERSION


def test_ldflags_stamp_both_version_packages():
    flags = binaries._ldflags("v1.34.4")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.34.4" in flags
        assert f"-X {pkg}.gitMinor=34" in flags


def test_user_bin_dir_must_be_complete(monkeypatch, tmp_path):
    monkeypatch.setenv("LOCALCLUSTER_BIN_DIR", str(tmp_path))
    (tmp_path / "etcd").write_text("")
    try:
        binaries.ensure_binaries()
    except RuntimeError as exc:
        assert "kube-apiserver" in str(exc) and "kwok" in str(exc)
    else:
        raise AssertionError("an incomplete LOCALCLUSTER_BIN_DIR must be rejected")
