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


def test_wrapper_pins_node_commands_for_tidy():
    # go mod tidy keeps go.sum entries only for packages something imports.
    for cmd in ("kubelet", "kube-proxy", "kube-apiserver"):
        assert f'_ "k8s.io/kubernetes/cmd/{cmd}"' in binaries.TOOLS_GO


def _fake_entry(directory, names):
    directory.mkdir(parents=True)
    for name in names:
        (directory / name).write_text("#!/bin/sh\n")
        (directory / name).chmod(0o755)


def test_node_binaries_have_their_own_cache_entry(monkeypatch, tmp_path):
    monkeypatch.delenv("LOCALCLUSTER_BIN_DIR", raising=False)
    monkeypatch.setenv("LOCALCLUSTER_CACHE", str(tmp_path))
    monkeypatch.setenv("K8S_VERSION", "v1.34.4")
    monkeypatch.setenv("KWOK_VERSION", "v0.7.0")
    _fake_entry(tmp_path / "kubernetes-v1.34.4", (*binaries.KUBE_COMPONENTS, "etcd"))
    _fake_entry(tmp_path / "kwok-v0.7.0", ("kwok",))

    def must_not_rebuild(version, out):
        raise AssertionError(f"the control-plane entry was rebuilt for {version}")

    built = []

    def build_node(version, out):
        built.append(version)
        for name in binaries.NODE_COMPONENTS:
            (out / name).write_text("#!/bin/sh\n")
            (out / name).chmod(0o755)

    monkeypatch.setattr(binaries, "_build_kube", must_not_rebuild)
    monkeypatch.setattr(binaries, "_build_kwok", must_not_rebuild)
    monkeypatch.setattr(binaries, "_build_node", build_node)

    plain = binaries.ensure_binaries()
    assert not plain.has_node and built == []

    bins = binaries.ensure_binaries(node=True)
    assert built == ["v1.34.4"]
    assert bins.has_node and not bins.missing()
    assert bins.path("kubelet").resolve() == tmp_path / "kubernetes-node-v1.34.4" / "kubelet"
    assert bins.path("kube-apiserver").resolve() == tmp_path / "kubernetes-v1.34.4" / "kube-apiserver"
    binaries.ensure_binaries(node=True)  # cached: no second build
    assert built == ["v1.34.4"]


def test_user_bin_dir_needs_kubelet_for_a_node(monkeypatch, tmp_path):
    _fake_entry(tmp_path / "bin", binaries.ALL_COMPONENTS)
    monkeypatch.setenv("LOCALCLUSTER_BIN_DIR", str(tmp_path / "bin"))
    assert binaries.ensure_binaries().directory == tmp_path / "bin"
    try:
        binaries.ensure_binaries(node=True)
    except RuntimeError as exc:
        assert "kubelet" in str(exc) and "kube-proxy" in str(exc)
    else:
        raise AssertionError("a real node needs kubelet and kube-proxy in LOCALCLUSTER_BIN_DIR")


def test_builders_side_by_side_build_once_and_both_get_the_binaries(monkeypatch, tmp_path):
    """Two suites started together on a new machine: one builds, the other waits and reuses it
    (they shared, and deleted, each other's ``.partial`` directory)."""
    import threading
    import time

    monkeypatch.delenv("LOCALCLUSTER_BIN_DIR", raising=False)
    monkeypatch.setenv("LOCALCLUSTER_CACHE", str(tmp_path))
    monkeypatch.setenv("K8S_VERSION", "v1.34.4")
    monkeypatch.setenv("KWOK_VERSION", "v0.7.0")
    active, most, builds = [0], [0], []

    def builder(names):
        def build(version, out):
            active[0] += 1
            most[0] = max(most[0], active[0])
            builds.append(names)
            time.sleep(0.05)  # widens the window two unlocked builders would overlap in
            for name in names:
                (out / name).write_text("#!/bin/sh\n")
                (out / name).chmod(0o755)
            active[0] -= 1

        return build

    monkeypatch.setattr(binaries, "_build_kube", builder((*binaries.KUBE_COMPONENTS, "etcd")))
    monkeypatch.setattr(binaries, "_build_kwok", builder(("kwok",)))
    results, errors = [], []

    def ensure():
        try:
            results.append(binaries.ensure_binaries())
        except Exception as exc:  # reported below, with the thread's error
            errors.append(exc)

    threads = [threading.Thread(target=ensure) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert most[0] == 1 and len(builds) == 2  # the kube entry and kwok's, each once
    assert all(not bins.missing() for bins in results) and len(results) == 2
