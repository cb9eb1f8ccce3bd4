"""A real, local Kubernetes control plane for tests, ``make run`` and benchmarks.

The pieces are compiled from Go modules (:mod:`localcluster.binaries`) and run as plain
processes (:mod:`localcluster.process`) in order (:mod:`localcluster.cluster`): etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and kwok with a few fake nodes. As
root, this machine can also join as one real worker node (:mod:`localcluster.node`:
containerd, kubelet, kube-proxy) running pods from images made without a registry
(:mod:`localcluster.ociimage`). Nothing here is shipped in an operator image.
"""
