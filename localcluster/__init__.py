"""A real, local Kubernetes control plane for tests, ``make run`` and benchmarks.

The pieces are compiled from Go modules (``localcluster.binaries``) and run as plain
processes (``localcluster.process``) in order (``localcluster.cluster``): etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and kwok with a few fake nodes. As
root, this machine can also join as one real worker node (``localcluster.node``:
containerd, kubelet, kube-proxy) running pods from images made without a registry
(``localcluster.ociimage``). Nothing here is shipped in an operator image.
"""
