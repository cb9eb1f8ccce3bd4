"""A real, local Kubernetes control plane for tests, ``make run`` and benchmarks.

The pieces are compiled from Go modules (:mod:`localcluster.binaries`) and run as plain
processes (:mod:`localcluster.cluster`): etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok with a few fake nodes. Nothing here is shipped in an operator image.
"""
